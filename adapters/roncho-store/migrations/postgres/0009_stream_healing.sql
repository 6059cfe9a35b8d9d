-- The ledger heals the stream (docs/adr/0005-nats-work-queue.md).
-- `installation` names this database for good: stream message ids carry it,
-- so a new or recreated database never repeats ids a stream has seen.
CREATE TABLE installation (
    id TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
INSERT INTO installation (id, created_at)
VALUES (md5(random()::text || clock_timestamp()::text), (extract(epoch FROM clock_timestamp()) * 1000000)::BIGINT);
-- When a consumer last held a delivery of the task; the sweeper republishes
-- pending tasks nobody has held for a while, `republished` times so far.
ALTER TABLE work_tasks ADD COLUMN seen_at BIGINT;
ALTER TABLE work_tasks ADD COLUMN republished INTEGER NOT NULL DEFAULT 0;
