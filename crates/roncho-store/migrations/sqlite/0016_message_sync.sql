-- A message's vector sync state moves out of the message row into a table
-- of its own, which holds only the messages still to embed (pending) or
-- given up on (failed); a synced message has no row, and marking it synced
-- deletes a narrow row instead of rewriting the message (see the Postgres
-- migration and docs/adr/0003).
CREATE TABLE message_sync (
    message_id   INTEGER PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
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
ALTER TABLE messages DROP COLUMN sync_state;
ALTER TABLE messages DROP COLUMN sync_attempts;
ALTER TABLE messages DROP COLUMN last_sync_at;
ALTER TABLE messages DROP COLUMN sync_error;
ALTER TABLE messages DROP COLUMN sync_version;

-- Every new message starts pending.
CREATE TRIGGER messages_pending_sync AFTER INSERT ON messages BEGIN
    INSERT INTO message_sync (message_id) VALUES (new.id);
END;
