-- How many messages each session holds: last_seq less what erasure took.
-- A session whose count equals its last_seq holds every number from 1 to
-- last_seq, so a page of its messages is a range of sequence numbers read
-- along the (workspace, session, seq) index instead of an OFFSET walk, and
-- its total needs no COUNT (issue 37). Kept by the writes that hand out
-- numbers (and a clone's copy) and by erasure, in their transactions.
ALTER TABLE sessions ADD COLUMN message_count BIGINT NOT NULL DEFAULT 0;
UPDATE sessions SET message_count = (
    SELECT COUNT(*) FROM messages m
    WHERE m.workspace_name = sessions.workspace_name AND m.session_name = sessions.name
);
