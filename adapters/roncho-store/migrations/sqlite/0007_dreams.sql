-- Dream state per collection (one observer's view of one peer): when it was
-- last dreamt and how many explicit observations it held then, for the
-- scheduler's thresholds. `generation` counts finished dreams; a scheduled
-- dream's dedup id carries it, so at most one dream per collection and type
-- is pending.
CREATE TABLE collection_dreams (
    workspace_name            TEXT NOT NULL,
    observer                  TEXT NOT NULL,
    observed                  TEXT NOT NULL,
    generation                BIGINT NOT NULL DEFAULT 0,
    last_dream_at             BIGINT,
    last_dream_document_count BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_name, observer, observed),
    FOREIGN KEY (workspace_name, observer) REFERENCES peers (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, observed) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);

-- At most one pending dream per work unit (Honcho's partial unique index):
-- scheduling another while one waits is a no-op.
CREATE UNIQUE INDEX work_tasks_one_pending_dream ON work_tasks (work_unit_key)
    WHERE state = 'pending' AND task_type = 'dream';
