-- Postgres gave a message's indexed words its workspace and session in this
-- version, so a session's search reads them as one index range. SQLite's
-- FTS5 index, or the embedded vector store's, ranks words; nothing changes
-- here.
SELECT 1;
