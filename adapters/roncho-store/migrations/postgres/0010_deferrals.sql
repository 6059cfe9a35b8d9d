-- Outages postpone work instead of killing it: a task whose model or
-- dependency was unavailable is made ready later without spending an
-- attempt; `deferrals` counts those postponements (its backoff grows with
-- them) and `deferred_reason` says why, for queue status.
ALTER TABLE work_tasks ADD COLUMN deferrals INTEGER NOT NULL DEFAULT 0;
ALTER TABLE work_tasks ADD COLUMN deferred_reason TEXT;
