-- The distributed mode's outbox: tasks are written with their messages and
-- published to NATS JetStream afterwards; `published_at` stays NULL until
-- the stream has them, so a publisher that dies in between loses nothing.
ALTER TABLE work_tasks ADD COLUMN published_at BIGINT;
CREATE INDEX work_tasks_unpublished ON work_tasks (id) WHERE published_at IS NULL AND state = 'pending';
