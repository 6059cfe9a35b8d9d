-- Erasure that reaches everything derived (docs/api.md#erasure).

-- Which rows each conclusion came from, indexed by source: an erased message
-- or conclusion finds what cites it without scanning `source_ids`.
CREATE TABLE conclusion_sources (
    workspace_name TEXT NOT NULL,
    source_id      TEXT NOT NULL,
    document_id    INTEGER NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    PRIMARY KEY (workspace_name, source_id, document_id)
);
CREATE INDEX conclusion_sources_by_document ON conclusion_sources (document_id);
INSERT INTO conclusion_sources (workspace_name, source_id, document_id)
    SELECT d.workspace_name, s.value, d.id FROM documents d, json_each(d.source_ids) AS s
    WHERE true ON CONFLICT DO NOTHING;

-- The record of each erasure, kept after the data is gone.
CREATE TABLE erasure_receipts (
    id             TEXT PRIMARY KEY,
    workspace_name TEXT NOT NULL,
    -- message | session | peer | workspace
    scope          TEXT NOT NULL,
    target         TEXT NOT NULL,
    session_name   TEXT,
    -- running | complete
    state          TEXT NOT NULL,
    -- JSON object of counts by kind
    counts         TEXT NOT NULL DEFAULT '{}',
    created_at     BIGINT NOT NULL,
    finished_at    BIGINT
);
CREATE INDEX erasure_receipts_by_target ON erasure_receipts (workspace_name, scope, target);

-- The erasure whose tombstone this is (its receipt counts vectors pending).
ALTER TABLE vector_tombstones ADD COLUMN receipt_id TEXT;
CREATE INDEX vector_tombstones_by_receipt ON vector_tombstones (receipt_id) WHERE receipt_id IS NOT NULL;

-- Bumped whenever a message must be embedded again (its context turn was
-- erased): an embedding computed from the old text is not marked synced.
ALTER TABLE messages ADD COLUMN sync_version BIGINT NOT NULL DEFAULT 0;

-- The session of a CreateMessages/UploadFile key: erasing a message
-- forgets the keys that named it.
ALTER TABLE idempotency_keys ADD COLUMN session_name TEXT;
CREATE INDEX idempotency_keys_by_session ON idempotency_keys (workspace_name, session_name);
