-- Session summaries (short and long), written by the summariser and read by
-- GetSessionSummaries and GetSessionContext. `message_seq` is the position of
-- the last message a summary covers; context repeats messages from there on.
CREATE TABLE session_summaries (
    workspace_name    TEXT COLLATE "C" NOT NULL,
    session_name      TEXT COLLATE "C" NOT NULL,
    summary_type      TEXT COLLATE "C" NOT NULL,
    content           TEXT NOT NULL,
    message_public_id TEXT COLLATE "C" NOT NULL,
    message_seq       BIGINT NOT NULL,
    token_count       BIGINT NOT NULL,
    created_at        BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, session_name, summary_type),
    FOREIGN KEY (workspace_name, session_name) REFERENCES sessions (workspace_name, name) ON DELETE CASCADE
);
