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
    message_id BIGINT PRIMARY KEY,
    terms      TEXT NOT NULL
);
-- Every sync batch adds to hundreds of its rows: room on each page, and no
-- index on `documents`, keep those updates in place (HOT).
CREATE TABLE workspace_terms (
    workspace_name TEXT COLLATE "C" NOT NULL,
    term           BIGINT NOT NULL,
    documents      BIGINT NOT NULL,
    PRIMARY KEY (workspace_name, term)
) WITH (fillfactor = 70);

CREATE OR REPLACE FUNCTION messages_leave_side_tables() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM message_sync WHERE message_id IN (SELECT id FROM gone);
    DELETE FROM message_unindexed WHERE message_id IN (SELECT id FROM gone);
    DELETE FROM message_text WHERE message_id IN (SELECT id FROM gone);
    -- Serialised with the reconciler's counting per workspace, in one order.
    PERFORM pg_advisory_xact_lock(hashtextextended('workspace_terms/' || name, 0))
        FROM (SELECT DISTINCT workspace_name AS name FROM gone ORDER BY 1) AS workspaces;
    UPDATE workspace_terms w SET documents = w.documents - dropped.n
        FROM (SELECT g.workspace_name, t.term::bigint AS term, COUNT(*) AS n
              FROM gone g
              JOIN message_terms c ON c.message_id = g.id
              CROSS JOIN LATERAL jsonb_array_elements_text(c.terms::jsonb) AS t(term)
              GROUP BY 1, 2) AS dropped
        WHERE w.workspace_name = dropped.workspace_name AND w.term = dropped.term;
    -- A term no message holds any more leaves (looked up by the same terms:
    -- an index on `documents` would stop the counts' updates being in place).
    DELETE FROM workspace_terms w
        USING (SELECT DISTINCT g.workspace_name, t.term::bigint AS term
               FROM gone g
               JOIN message_terms c ON c.message_id = g.id
               CROSS JOIN LATERAL jsonb_array_elements_text(c.terms::jsonb) AS t(term)) AS dropped
        WHERE w.workspace_name = dropped.workspace_name AND w.term = dropped.term AND w.documents <= 0;
    DELETE FROM message_terms WHERE message_id IN (SELECT id FROM gone);
    RETURN NULL;
END
$$;
