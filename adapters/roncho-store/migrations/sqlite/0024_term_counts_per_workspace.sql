-- BM25's document frequencies per workspace, for a vector store that
-- counts none of its own per workspace (a Qdrant collection holds every
-- workspace): the reconciler counts each message's terms once, when the
-- store first holds its lexical vector, and search weighs a query's terms
-- by their IDF over the workspace (ADR 0007; issue 36). A neighbour's
-- messages then never move a workspace's ranking.
--
-- message_terms: a counted message's term dimensions (its lexical vector's
-- indices, and -1 for the message itself) as a JSON array, so its counts
-- leave with its row. workspace_terms: how many counted messages of a
-- workspace hold each term (term -1: how many are counted); a term no
-- message holds any more has no row.
CREATE TABLE message_terms (
    message_id INTEGER PRIMARY KEY,
    terms      TEXT NOT NULL
);
CREATE TABLE workspace_terms (
    workspace_name TEXT NOT NULL,
    term           INTEGER NOT NULL,
    documents      INTEGER NOT NULL,
    PRIMARY KEY (workspace_name, term)
);

CREATE TRIGGER messages_leave_term_counts AFTER DELETE ON messages BEGIN
    UPDATE workspace_terms SET documents = documents - 1
        WHERE workspace_name = old.workspace_name
          AND term IN (SELECT value FROM json_each((SELECT terms FROM message_terms WHERE message_id = old.id)));
    DELETE FROM workspace_terms
        WHERE workspace_name = old.workspace_name AND documents <= 0
          AND term IN (SELECT value FROM json_each((SELECT terms FROM message_terms WHERE message_id = old.id)));
    DELETE FROM message_terms WHERE message_id = old.id;
END;
