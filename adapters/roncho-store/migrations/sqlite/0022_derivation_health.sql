-- Whether a workspace's model derivations keep producing nothing (a weak or
-- misconfigured model that answers without observations, or unreadably):
-- the queue status, `roncho status` and a metric say so while
-- `empty_streak` is at or past the deriver's threshold. `reason` holds
-- counts and the model's name, never message content; the row goes with its
-- workspace.
CREATE TABLE derivation_health (
    workspace_name TEXT PRIMARY KEY REFERENCES workspaces (name) ON DELETE CASCADE,
    model          TEXT NOT NULL,
    empty_streak   BIGINT NOT NULL,
    reason         TEXT NOT NULL,
    updated_at     BIGINT NOT NULL
);
