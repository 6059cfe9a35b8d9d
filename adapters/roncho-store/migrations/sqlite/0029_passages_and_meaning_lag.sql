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
