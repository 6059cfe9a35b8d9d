-- Recall: conclusions (Honcho's documents), peer cards, full-text search.

CREATE TABLE documents (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    public_id      TEXT NOT NULL UNIQUE,
    workspace_name TEXT NOT NULL,
    observer       TEXT NOT NULL,
    observed       TEXT NOT NULL,
    session_name   TEXT,
    -- explicit | deductive | inductive | contradiction
    level          TEXT NOT NULL,
    content        TEXT NOT NULL,
    -- JSON arrays: premises (deductive) and the messages or documents a conclusion came from
    premises       TEXT NOT NULL DEFAULT '[]',
    source_ids     TEXT NOT NULL DEFAULT '[]',
    times_derived  BIGINT NOT NULL DEFAULT 1,
    -- Honcho's internal_metadata: pattern type, confidence, ...
    metadata       TEXT NOT NULL DEFAULT '{}',
    created_at     BIGINT NOT NULL,
    deleted_at     BIGINT,
    FOREIGN KEY (workspace_name, observer) REFERENCES peers (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, observed) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);
CREATE INDEX documents_by_collection ON documents (workspace_name, observer, observed, created_at);

CREATE TABLE peer_cards (
    workspace_name TEXT NOT NULL,
    observer       TEXT NOT NULL,
    observed       TEXT NOT NULL,
    -- JSON array of strings
    card           TEXT NOT NULL,
    updated_at     BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, observer, observed),
    FOREIGN KEY (workspace_name, observer) REFERENCES peers (workspace_name, name) ON DELETE CASCADE,
    FOREIGN KEY (workspace_name, observed) REFERENCES peers (workspace_name, name) ON DELETE CASCADE
);

-- Full-text search over speaker and content, Porter stemming; an external-content
-- FTS5 table kept in step with messages by triggers.
CREATE VIRTUAL TABLE messages_fts USING fts5(
    peer_name, content, content='messages', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, peer_name, content) VALUES (new.id, new.peer_name, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, peer_name, content) VALUES ('delete', old.id, old.peer_name, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF peer_name, content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, peer_name, content) VALUES ('delete', old.id, old.peer_name, old.content);
    INSERT INTO messages_fts (rowid, peer_name, content) VALUES (new.id, new.peer_name, new.content);
END;
CREATE INDEX messages_by_workspace ON messages (workspace_name, id);
