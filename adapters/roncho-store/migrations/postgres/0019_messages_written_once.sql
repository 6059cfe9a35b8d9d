-- A message row is written once. Its vector's sync state and its full-text
-- vector were columns of `messages`, so the reconciler marking a vector
-- synced, and the text indexer storing the words, each wrote a new version
-- of the whole row through every index of the table (the GIN index among
-- them): under a write burst a message was written three times, and those
-- rewrites were most of Postgres' work beside the writes (docs/benchmarks.md,
-- "Messages written once"). Now:
--   * `message_sync` holds a row per message whose vector is not synced
--     (pending, or failed after its attempts); a synced message has none, so
--     marking synced deletes a narrow row. `version` changes when a message
--     is queued again (a model change, an erased turn before it), so a
--     reconciler holding the old text does not mark the new request done.
--   * `message_text` holds the full-text vector of each indexed message, with
--     the GIN index; `message_unindexed` the messages whose words are not
--     indexed yet (the text indexer's and the on-the-fly tail's work).
-- The writer inserts the two queue rows in the statement that inserts the
-- messages (roncho-store `insert_message_rows`); deleting a message deletes
-- its rows in all three (the trigger below). ADR 0012.
CREATE TABLE message_sync (
    message_id   BIGINT PRIMARY KEY,
    -- pending | failed
    state        TEXT NOT NULL DEFAULT 'pending',
    attempts     BIGINT NOT NULL DEFAULT 0,
    last_sync_at BIGINT,
    error        TEXT,
    version      BIGINT NOT NULL DEFAULT 0
);
INSERT INTO message_sync (message_id, state, attempts, last_sync_at, error, version)
    SELECT id, sync_state, sync_attempts, last_sync_at, sync_error, sync_version
    FROM messages WHERE sync_state <> 'synced';

CREATE TABLE message_text (
    message_id    BIGINT PRIMARY KEY,
    search_vector tsvector NOT NULL
);
INSERT INTO message_text (message_id, search_vector)
    SELECT id, search_vector FROM messages WHERE search_vector IS NOT NULL;
CREATE INDEX message_text_search ON message_text USING GIN (search_vector);

CREATE TABLE message_unindexed (
    message_id BIGINT PRIMARY KEY
);
INSERT INTO message_unindexed (message_id) SELECT id FROM messages WHERE search_vector IS NULL;

DROP INDEX messages_unsynced;
DROP INDEX messages_unindexed;
DROP INDEX messages_search;
ALTER TABLE messages
    DROP COLUMN sync_state,
    DROP COLUMN sync_attempts,
    DROP COLUMN last_sync_at,
    DROP COLUMN sync_error,
    DROP COLUMN sync_version,
    DROP COLUMN search_vector;

CREATE FUNCTION messages_leave_side_tables() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_sync WHERE message_id IN (SELECT id FROM gone);
    DELETE FROM message_unindexed WHERE message_id IN (SELECT id FROM gone);
    DELETE FROM message_text WHERE message_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_leave_side_tables AFTER DELETE ON messages
    REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION messages_leave_side_tables();
