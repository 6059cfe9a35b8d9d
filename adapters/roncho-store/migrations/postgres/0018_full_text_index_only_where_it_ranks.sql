-- SQLite's FTS5 index is kept only while it ranks (no embedder) from this
-- version. Postgres' full-text index is indexed off the write path already
-- (0016) and serves every mode; nothing changes here.
SELECT 1;
