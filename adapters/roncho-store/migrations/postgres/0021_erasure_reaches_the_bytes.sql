-- When an erasure's bytes were overwritten in the store's files. Postgres
-- keeps a deleted row's bytes until VACUUM reclaims the space and later
-- writes reuse it, so roncho leaves it unset here (docs/security.md, "What
-- stays on disk"); the column keeps both dialects' receipts alike.
ALTER TABLE erasure_receipts ADD COLUMN overwritten_at BIGINT;
