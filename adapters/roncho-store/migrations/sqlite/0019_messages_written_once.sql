-- A message row is written once: its vector's sync state moves to
-- `message_sync`, a row per message whose vector is not synced (pending, or
-- failed after its attempts); a synced message has none, so marking synced
-- deletes a narrow row instead of rewriting the message's page through the
-- writer. `version` changes when a message is queued again (a model change,
-- an erased turn before it). Triggers keep it in step with `messages`.
-- The Postgres migration of the same number says more; ADR 0012.
CREATE TABLE message_sync (
    message_id   INTEGER PRIMARY KEY,
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

DROP INDEX messages_unsynced;
ALTER TABLE messages DROP COLUMN sync_state;
ALTER TABLE messages DROP COLUMN sync_attempts;
ALTER TABLE messages DROP COLUMN last_sync_at;
ALTER TABLE messages DROP COLUMN sync_error;
ALTER TABLE messages DROP COLUMN sync_version;

CREATE TRIGGER messages_queue_sync AFTER INSERT ON messages BEGIN
    INSERT INTO message_sync (message_id) VALUES (new.id);
END;
CREATE TRIGGER messages_leave_sync AFTER DELETE ON messages BEGIN
    DELETE FROM message_sync WHERE message_id = old.id;
END;
