-- How an answer was reached (Honcho 3.2's reasoning_trace_id): its model
-- calls and tool calls by name and size, what it read by id, never text.
-- Kept a week (older ones go as new ones are written), and gone with the
-- peer, session or workspace they belong to (the cascades below).
CREATE TABLE reasoning_traces (
    public_id      TEXT PRIMARY KEY,
    workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE,
    -- NULL for a workspace chat.
    observer       TEXT,
    observed       TEXT,
    session_name   TEXT,
    created_at     BIGINT NOT NULL,
    -- JSON object
    detail         TEXT NOT NULL,
    FOREIGN KEY (workspace_name, observer) REFERENCES peers (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, observed) REFERENCES peers (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, session_name) REFERENCES sessions (workspace_name, name) ON DELETE CASCADE
);
CREATE INDEX reasoning_traces_by_age ON reasoning_traces (workspace_name, created_at);
