-- Full text is indexed off the write path. The generated column computed
-- `to_tsvector` (and a GIN entry for it) inside every CreateMessages
-- transaction, and again at each later row update (the reconciler marking a
-- vector synced). Now a write leaves `search_vector` NULL; the reconciler
-- fills it in the same UPDATE that marks the vector synced, and the text
-- indexer fills rows nobody else will (no embedder, failed or late vector
-- sync). Until then search matches the newest unindexed rows on the fly
-- (roncho-store recall.rs). Existing rows keep their vectors.
ALTER TABLE messages ALTER COLUMN search_vector DROP EXPRESSION;
-- The rows the text indexer has left to do, oldest first.
CREATE INDEX messages_unindexed ON messages (id) WHERE search_vector IS NULL;
