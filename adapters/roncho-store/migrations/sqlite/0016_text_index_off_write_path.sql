-- Postgres moved full-text indexing off the write path in this version.
-- SQLite's FTS5 table is written with the rows and stays so: one writer,
-- one transaction, no second row version to index. Nothing changes here.
SELECT 1;
