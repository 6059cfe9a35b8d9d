-- Idempotency keys of CreateMessages, UploadFile and CreateConclusions: a
-- client repeating a write with the same key gets the first call's result
-- (the ids it created) instead of a second write. Claimed in the write's own
-- transaction; expired rows are deleted by the next write of the workspace.
CREATE TABLE idempotency_keys (
    workspace_name  TEXT COLLATE "C" NOT NULL,
    operation       TEXT COLLATE "C" NOT NULL,
    idempotency_key TEXT COLLATE "C" NOT NULL,
    -- SHA-256 of the request: a repeat with another body is refused.
    fingerprint     TEXT NOT NULL,
    -- JSON array of the public ids the write created.
    result_ids      TEXT NOT NULL,
    created_at      BIGINT NOT NULL,
    expires_at      BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, operation, idempotency_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (workspace_name, expires_at);
