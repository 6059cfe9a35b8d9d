-- Vectors for semantic search (the exact embedded vector store), their
-- settings, per-row sync state, and tombstones of deleted rows whose vectors
-- must go (see docs/adr/0003-vectors-and-sync-state.md).

CREATE TABLE vectors (
    namespace    TEXT NOT NULL,
    id           TEXT NOT NULL,
    session_name TEXT,
    peer_name    TEXT,
    level        TEXT,
    -- little-endian f32s
    vector       BLOB NOT NULL,
    PRIMARY KEY (namespace, id)
);

CREATE TABLE vector_settings (
    name  TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- pending | synced | failed
ALTER TABLE messages ADD COLUMN sync_state TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE messages ADD COLUMN sync_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN last_sync_at BIGINT;
ALTER TABLE messages ADD COLUMN sync_error TEXT;
CREATE INDEX messages_unsynced ON messages (sync_state, id) WHERE sync_state <> 'synced';

ALTER TABLE documents ADD COLUMN sync_state TEXT NOT NULL DEFAULT 'pending';
ALTER TABLE documents ADD COLUMN sync_attempts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN last_sync_at BIGINT;
ALTER TABLE documents ADD COLUMN sync_error TEXT;
CREATE INDEX documents_unsynced ON documents (sync_state, id) WHERE sync_state <> 'synced';

CREATE TABLE vector_tombstones (
    namespace  TEXT NOT NULL,
    id         TEXT NOT NULL,
    deleted_at BIGINT NOT NULL,
    PRIMARY KEY (namespace, id)
);
