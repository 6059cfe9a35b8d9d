-- A message's session and peer were foreign keys checked row by row: every
-- INSERT of a batch of 100 ran 200 lookups with a KEY SHARE lock each, a
-- third of Postgres' time on the write path (docs/benchmarks.md). The writer
-- now locks the batch's session and authors once, in its INSERT (roncho-store
-- `insert_message_rows`), and deleting a session or a peer deletes its
-- messages as the cascade did, by the triggers below. ADR 0010.
ALTER TABLE messages DROP CONSTRAINT messages_workspace_name_session_name_fkey;
ALTER TABLE messages DROP CONSTRAINT messages_workspace_name_peer_name_fkey;

-- Deleting a session or a peer deletes its messages.
CREATE FUNCTION messages_follow_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'sessions' THEN
        DELETE FROM messages WHERE workspace_name = OLD.workspace_name AND session_name = OLD.name;
    ELSE
        DELETE FROM messages WHERE workspace_name = OLD.workspace_name AND peer_name = OLD.name;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_follow_session AFTER DELETE ON sessions
    FOR EACH ROW EXECUTE FUNCTION messages_follow_parent();
CREATE TRIGGER messages_follow_peer AFTER DELETE ON peers
    FOR EACH ROW EXECUTE FUNCTION messages_follow_parent();
