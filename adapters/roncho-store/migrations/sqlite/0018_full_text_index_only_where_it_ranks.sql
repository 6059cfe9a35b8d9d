-- FTS5 ranks messages by their words only when no embedder is configured:
-- with one, the embedded vector store ranks them with an index of its own,
-- built from the rows (ADR 0008), and FTS5's triggers cost a fifth to a
-- quarter of every write for nothing (docs/benchmarks.md). They now run
-- only while `full_text_state.maintained` is 1; the server sets it at
-- start-up, emptying FTS5 when it turns off and rebuilding it from the rows
-- when it turns on (roncho-store `maintain_full_text_index`).
CREATE TABLE full_text_state (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    maintained INTEGER NOT NULL
);
INSERT INTO full_text_state (id, maintained) VALUES (1, 1);

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update;
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages
WHEN (SELECT maintained FROM full_text_state) = 1 BEGIN
    INSERT INTO messages_fts (rowid, peer_name, content) VALUES (new.id, new.peer_name, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages
WHEN (SELECT maintained FROM full_text_state) = 1 BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, peer_name, content) VALUES ('delete', old.id, old.peer_name, old.content);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF peer_name, content ON messages
WHEN (SELECT maintained FROM full_text_state) = 1 BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, peer_name, content) VALUES ('delete', old.id, old.peer_name, old.content);
    INSERT INTO messages_fts (rowid, peer_name, content) VALUES (new.id, new.peer_name, new.content);
END;
