-- A session's messages filtered by who sent them (Honcho's `peer_id`
-- filter on a session's message list) are one index range, in the
-- session's order. The embedded store keeps no planner statistics, and
-- without them SQLite counted and paged those of one peer in one session
-- by the index on workspace and peer: every message the peer sent in the
-- workspace, 11 ms a page at 50,000 messages, against 0.8 ms by this
-- index (docs/benchmarks.md). Its first two columns are the old index's,
-- so whatever read a peer's messages by it reads them by this one.
DROP INDEX messages_by_peer;
CREATE INDEX messages_by_peer ON messages (workspace_name, peer_name, session_name, seq_in_session);
