-- Erasure reaches the bytes (docs/security.md, "What stays on disk"):
-- connections run with `secure_delete` (deleted content is overwritten
-- with zeros), FTS5 removes a deleted row's terms from its segments rather
-- than adding a delete marker beside them, and once an erasure completes a
-- truncating checkpoint empties the WAL. `overwritten_at` is when that
-- checkpoint ran after every row and vector of the erasure was gone.
INSERT INTO messages_fts (messages_fts, rank) VALUES ('secure-delete', 1);
ALTER TABLE erasure_receipts ADD COLUMN overwritten_at BIGINT;
