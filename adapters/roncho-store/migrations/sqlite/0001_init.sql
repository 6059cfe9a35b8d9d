-- roncho relational schema, SQLite flavour.
-- Text compares bytewise (BINARY), as the Postgres schema does with COLLATE "C".
-- Timestamps are microseconds since the Unix epoch (UTC); JSON is text
-- written by roncho (see docs/adr/0002-one-sql-store-two-dialects.md).

CREATE TABLE workspaces (
    name          TEXT PRIMARY KEY,
    metadata      TEXT NOT NULL DEFAULT '{}',
    configuration TEXT NOT NULL DEFAULT '{}',
    created_at    BIGINT NOT NULL
);

CREATE TABLE peers (
    workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    metadata       TEXT NOT NULL DEFAULT '{}',
    configuration  TEXT NOT NULL DEFAULT '{}',
    created_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, name)
);

CREATE TABLE sessions (
    workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    is_active      BIGINT NOT NULL DEFAULT 1,
    metadata       TEXT NOT NULL DEFAULT '{}',
    configuration  TEXT NOT NULL DEFAULT '{}',
    -- highest seq_in_session ever handed out; never decreases, so deleted
    -- messages leave gaps instead of reused numbers
    last_seq       BIGINT NOT NULL DEFAULT 0,
    created_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, name)
);

CREATE TABLE session_peers (
    workspace_name TEXT NOT NULL,
    session_name   TEXT NOT NULL,
    peer_name      TEXT NOT NULL,
    observe_me     BIGINT,
    observe_others BIGINT,
    joined_at      BIGINT NOT NULL,
    left_at        BIGINT,
    PRIMARY KEY (workspace_name, session_name, peer_name),
    FOREIGN KEY (workspace_name, session_name) REFERENCES sessions (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, peer_name) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);
CREATE INDEX session_peers_by_peer ON session_peers (workspace_name, peer_name);

CREATE TABLE messages (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    public_id      TEXT NOT NULL UNIQUE,
    workspace_name TEXT NOT NULL,
    session_name   TEXT NOT NULL,
    peer_name      TEXT NOT NULL,
    seq_in_session BIGINT NOT NULL,
    content        TEXT NOT NULL,
    metadata       TEXT NOT NULL DEFAULT '{}',
    configuration  TEXT NOT NULL DEFAULT '{}',
    token_count    BIGINT NOT NULL,
    created_at     BIGINT NOT NULL,
    UNIQUE (workspace_name, session_name, seq_in_session),
    FOREIGN KEY (workspace_name, session_name) REFERENCES sessions (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, peer_name) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);
CREATE INDEX messages_by_peer ON messages (workspace_name, peer_name);

CREATE TABLE webhook_endpoints (
    id             TEXT PRIMARY KEY,
    workspace_name TEXT NOT NULL REFERENCES workspaces (name) ON DELETE CASCADE,
    url            TEXT NOT NULL,
    created_at     BIGINT NOT NULL,
    UNIQUE (workspace_name, url)
);
