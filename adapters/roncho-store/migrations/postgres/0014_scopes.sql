-- Scopes (honcho-v3 §2.2): a scope is the peer `scope.<id>` (peer ids
-- cannot hold a `.`, so no participant is one), a member of its sessions
-- observing the others. Each session added to a scope gets a backfill that
-- copies what was observed there before the scope joined.
CREATE TABLE scope_backfills (
    workspace_name TEXT COLLATE "C" NOT NULL,
    -- the scope's peer name, `scope.<id>`
    scope_peer     TEXT COLLATE "C" NOT NULL,
    session_name   TEXT COLLATE "C" NOT NULL,
    -- pending | completed | failed
    state          TEXT NOT NULL,
    docs_copied    BIGINT NOT NULL DEFAULT 0,
    -- the last source document (row id) looked at: a resumed backfill goes on after it
    last_document  BIGINT NOT NULL DEFAULT 0,
    error          TEXT,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, scope_peer, session_name),
    FOREIGN KEY (workspace_name, session_name) REFERENCES sessions (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, scope_peer) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);

-- A session's observations, in order: what a backfill copies and what a
-- session's or a scope's erasure removes.
CREATE INDEX documents_by_session ON documents (workspace_name, session_name, id);
