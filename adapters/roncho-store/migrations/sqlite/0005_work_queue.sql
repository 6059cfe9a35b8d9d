-- The embedded work queue (SqlWorkQueue): tasks by Honcho work_unit_key, and
-- leases that give one worker a work unit at a time. Done and dead tasks stay
-- for queue status.
CREATE TABLE work_tasks (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    dedup_id       TEXT NOT NULL UNIQUE,
    work_unit_key  TEXT NOT NULL,
    task_type      TEXT NOT NULL,
    workspace_name TEXT NOT NULL,
    session_name   TEXT,
    observer       TEXT,
    sender         TEXT,
    payload        TEXT NOT NULL,
    -- pending | done | dead
    state          TEXT NOT NULL DEFAULT 'pending',
    attempts       BIGINT NOT NULL DEFAULT 0,
    available_at   BIGINT NOT NULL,
    last_error     TEXT,
    created_at     BIGINT NOT NULL,
    finished_at    BIGINT
);
CREATE INDEX work_tasks_ready ON work_tasks (task_type, id) WHERE state = 'pending';
CREATE INDEX work_tasks_by_unit ON work_tasks (work_unit_key, id) WHERE state = 'pending';
CREATE INDEX work_tasks_by_workspace ON work_tasks (workspace_name, session_name);

CREATE TABLE work_leases (
    work_unit_key TEXT PRIMARY KEY,
    owner         TEXT NOT NULL,
    token         TEXT NOT NULL,
    expires_at    BIGINT NOT NULL
);
