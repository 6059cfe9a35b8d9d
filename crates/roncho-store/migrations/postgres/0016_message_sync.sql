-- A message's vector sync state moves out of the message row into a table
-- of its own, which holds only the messages still to embed (pending) or
-- given up on (failed); a synced message has no row. Marking a message
-- synced used to UPDATE the message: a new version of the whole row, its
-- full-text vector computed again and every index entry written again —
-- as much as writing the message in the first place. Now it deletes a
-- narrow row. `version` is moved by every re-queue, so an embedding
-- computed before is never marked synced (see docs/adr/0003).
CREATE TABLE message_sync (
    message_id   BIGINT PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
    state        TEXT NOT NULL DEFAULT 'pending',
    attempts     BIGINT NOT NULL DEFAULT 0,
    last_sync_at BIGINT,
    error        TEXT,
    version      BIGINT NOT NULL DEFAULT 0
);

INSERT INTO message_sync (message_id, state, attempts, last_sync_at, error, version)
    SELECT id, sync_state, sync_attempts, last_sync_at, sync_error, sync_version
    FROM messages WHERE sync_state <> 'synced';

DROP INDEX messages_unsynced;
ALTER TABLE messages
    DROP COLUMN sync_state,
    DROP COLUMN sync_attempts,
    DROP COLUMN last_sync_at,
    DROP COLUMN sync_error,
    DROP COLUMN sync_version;

-- Every new message starts pending: one INSERT per statement that wrote
-- messages (its transition table), not a trigger call per row.
CREATE FUNCTION messages_pending_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO message_sync (message_id) SELECT id FROM inserted_messages;
    RETURN NULL;
END
$$;

CREATE TRIGGER messages_pending_sync AFTER INSERT ON messages
    REFERENCING NEW TABLE AS inserted_messages
    FOR EACH STATEMENT EXECUTE FUNCTION messages_pending_sync();
