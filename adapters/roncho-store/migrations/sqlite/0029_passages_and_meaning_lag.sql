-- A message longer than the embedder reads at once is embedded as passages
-- (issue 58): the vectors of the passages after the first, little-endian
-- f32s one after another, beside the first passage's in `vector`. One row
-- still holds a message's every vector, so deleting the row deletes them all.
ALTER TABLE vectors ADD COLUMN passages BLOB;

-- When each message began to wait for its vector (microseconds since the
-- epoch): how far meaning is behind the writes, in time. A message's own
-- `created_at` may be a date the client gave (an imported history).
ALTER TABLE message_sync ADD COLUMN queued_at BIGINT;
UPDATE message_sync SET queued_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER);
DROP TRIGGER messages_queue_sync;
CREATE TRIGGER messages_queue_sync AFTER INSERT ON messages BEGIN
    INSERT INTO message_sync (message_id, queued_at)
    VALUES (new.id, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
END;

-- Messages the model may not read whole (over 200 characters: a token
-- covers a character at least) are embedded again, now with passages.
UPDATE message_sync SET state = 'pending', attempts = 0, error = NULL, version = version + 1
    WHERE message_id IN (SELECT id FROM messages WHERE length(content) > 200);
INSERT INTO message_sync (message_id, version, queued_at)
    SELECT m.id, 1, CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER) FROM messages m
    WHERE length(m.content) > 200 AND NOT EXISTS (SELECT 1 FROM message_sync q WHERE q.message_id = m.id);
