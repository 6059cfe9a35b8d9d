-- SQLite's 0032 widens `messages_by_peer` so that a session's messages
-- from one peer are one index range. Postgres keeps its index: with the
-- statistics autovacuum gathers it reads them along the session's own
-- index (1.6 ms a page at 50,000 messages, 1.5 ms with the wider index),
-- and the wider index cost its batch writes 3 % (docs/benchmarks.md).
-- Kept so both stores number their migrations alike.
SELECT 1;
