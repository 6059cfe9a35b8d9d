-- A small Honcho v3 database for `roncho import --from-honcho` tests: the
-- tables and columns of Honcho 3.0.12's models (src/models.py; JSON columns
-- are JSONB, the Python attribute `h_metadata` is the column `metadata`),
-- written from its schema description, with rows as Honcho writes them.
-- pgvector is not installed on the test machines, so vectors are real[]
-- here; the importer does not read them (roncho embeds with its own model).
-- Used by bin/roncho/tests/e2e/import.rs and clients/honcho-sdk/run-scenario.sh.

CREATE TABLE workspaces (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL UNIQUE,
    metadata          JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    configuration     JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE peers (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    workspace_name    TEXT NOT NULL REFERENCES workspaces (name),
    metadata          JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    configuration     JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (name, workspace_name)
);

CREATE TABLE sessions (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    workspace_name    TEXT NOT NULL REFERENCES workspaces (name),
    is_active         BOOLEAN NOT NULL DEFAULT true,
    metadata          JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    configuration     JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (name, workspace_name)
);

CREATE TABLE session_peers (
    workspace_name    TEXT NOT NULL,
    session_name      TEXT NOT NULL,
    peer_name         TEXT NOT NULL,
    configuration     JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    joined_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
    left_at           TIMESTAMPTZ,
    PRIMARY KEY (workspace_name, session_name, peer_name)
);

CREATE TABLE messages (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id         TEXT NOT NULL UNIQUE,
    session_name      TEXT NOT NULL,
    content           TEXT NOT NULL,
    metadata          JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    token_count       INTEGER NOT NULL DEFAULT 0,
    peer_name         TEXT NOT NULL,
    workspace_name    TEXT NOT NULL,
    seq_in_session    BIGINT NOT NULL,
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX idx_messages_fts ON messages USING gin (to_tsvector('english', content));

CREATE TABLE message_embeddings (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    content        TEXT NOT NULL,
    embedding      REAL[],
    message_id     TEXT NOT NULL REFERENCES messages (public_id),
    workspace_name TEXT NOT NULL,
    session_name   TEXT NOT NULL,
    peer_name      TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
    sync_state     TEXT NOT NULL DEFAULT 'pending',
    last_sync_at   TIMESTAMPTZ,
    sync_attempts  INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE collections (
    id                TEXT PRIMARY KEY,
    observer          TEXT NOT NULL,
    observed          TEXT NOT NULL,
    workspace_name    TEXT NOT NULL,
    metadata          JSONB NOT NULL DEFAULT '{}',
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    UNIQUE (observer, observed, workspace_name)
);

CREATE TABLE documents (
    id                TEXT PRIMARY KEY,
    internal_metadata JSONB NOT NULL DEFAULT '{}',
    content           TEXT NOT NULL,
    embedding         REAL[],
    created_at        TIMESTAMPTZ NOT NULL DEFAULT now(),
    workspace_name    TEXT NOT NULL,
    observer          TEXT NOT NULL,
    observed          TEXT NOT NULL,
    session_name      TEXT,
    level             TEXT NOT NULL DEFAULT 'explicit',
    times_derived     INTEGER NOT NULL DEFAULT 1,
    source_ids        JSONB,
    deleted_at        TIMESTAMPTZ,
    sync_state        TEXT NOT NULL DEFAULT 'pending',
    last_sync_at      TIMESTAMPTZ,
    sync_attempts     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE queue (
    id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    work_unit_key  TEXT NOT NULL,
    task_type      TEXT NOT NULL,
    payload        JSONB NOT NULL,
    processed      BOOLEAN NOT NULL DEFAULT false,
    error          TEXT,
    message_id     BIGINT,
    workspace_name TEXT,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE active_queue_sessions (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    work_unit_key TEXT NOT NULL UNIQUE,
    last_updated  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE webhook_endpoints (
    id             TEXT PRIMARY KEY,
    workspace_name TEXT NOT NULL REFERENCES workspaces (name),
    url            TEXT NOT NULL,
    created_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Rows.

INSERT INTO workspaces (id, name, metadata, configuration, created_at) VALUES
    ('Wk1aaaaaaaaaaaaaaaaaa', 'acme', '{"plan": "pro"}', '{"reasoning": {"enabled": true}}', '2026-03-01 09:00:00+00'),
    ('Wk2bbbbbbbbbbbbbbbbbb', 'sandbox', '{}', '{}', '2026-03-02 09:00:00+00');

INSERT INTO webhook_endpoints (id, workspace_name, url, created_at) VALUES
    ('Wh1aaaaaaaaaaaaaaaaaa', 'acme', 'https://hooks.example.com/honcho', '2026-03-01 09:01:00+00');

INSERT INTO peers (id, name, workspace_name, metadata, internal_metadata, configuration, created_at) VALUES
    ('Pr1aaaaaaaaaaaaaaaaaa', 'alice', 'acme', '{"role": "user"}',
     '{"peer_card": ["IDENTITY: Alice, a nurse in Lisbon", "ATTRIBUTE: adopted a grey kitten"], "bot_peer_card": ["IDENTITY: Alice''s assistant"]}',
     '{}', '2026-03-01 09:02:00+00'),
    ('Pr2bbbbbbbbbbbbbbbbbb', 'bot', 'acme', '{}', '{}', '{"observe_me": false}', '2026-03-01 09:02:01+00'),
    ('Pr3cccccccccccccccccc', 'carol', 'acme', '{}', '{}', '{}', '2026-03-01 09:02:02+00'),
    ('Pr4dddddddddddddddddd', 'scope.team', 'acme', '{}', '{"kind": "scope"}', '{"observe_me": false}', '2026-03-01 09:02:03+00'),
    ('Pr5eeeeeeeeeeeeeeeeee', 'dana', 'sandbox', '{}', '{}', '{}', '2026-03-02 09:02:00+00');

INSERT INTO sessions (id, name, workspace_name, is_active, metadata, internal_metadata, configuration, created_at) VALUES
    ('Se1aaaaaaaaaaaaaaaaaa', 'chat-1', 'acme', true, '{"topic": "pets"}',
     '{"summaries": {"honcho_chat_summary_short": {"content": "Alice adopted Mochi, a grey kitten who eats salmon.", "message_id": 3, "message_public_id": "Ms3cccccccccccccccccc", "summary_type": "honcho_chat_summary_short", "created_at": "2026-03-01T10:05:00Z", "token_count": 12}}}',
     '{"summary": {"enabled": true}}', '2026-03-01 10:00:00+00'),
    ('Se2bbbbbbbbbbbbbbbbbb', 'deleted-chat', 'acme', false, '{}', '{}', '{}', '2026-03-01 11:00:00+00'),
    ('Se3cccccccccccccccccc', 'notes', 'sandbox', true, '{}', '{}', '{}', '2026-03-02 10:00:00+00');

INSERT INTO session_peers (workspace_name, session_name, peer_name, configuration, joined_at, left_at) VALUES
    ('acme', 'chat-1', 'alice', '{}', '2026-03-01 10:00:00+00', NULL),
    ('acme', 'chat-1', 'bot', '{"observe_me": false, "observe_others": true}', '2026-03-01 10:00:01+00', NULL),
    ('acme', 'chat-1', 'carol', '{}', '2026-03-01 10:00:02+00', '2026-03-01 10:03:00+00'),
    ('acme', 'chat-1', 'scope.team', '{"observe_me": false, "observe_others": true}', '2026-03-01 10:00:03+00', NULL),
    ('acme', 'deleted-chat', 'alice', '{}', '2026-03-01 11:00:00+00', NULL),
    ('sandbox', 'notes', 'dana', '{}', '2026-03-02 10:00:00+00', NULL);

INSERT INTO messages (public_id, session_name, content, metadata, token_count, peer_name, workspace_name, seq_in_session, created_at) VALUES
    ('Ms1aaaaaaaaaaaaaaaaaa', 'chat-1', 'I adopted a grey kitten from the shelter last week', '{}', 11, 'alice', 'acme', 1, '2026-03-01 10:01:00.123456+00'),
    ('Ms2bbbbbbbbbbbbbbbbbb', 'chat-1', 'What did you name the kitten?', '{}', 7, 'bot', 'acme', 2, '2026-03-01 10:01:30+00'),
    ('Ms3cccccccccccccccccc', 'chat-1', 'Her name is Mochi and she only eats salmon', '{"mood": "happy"}', 10, 'alice', 'acme', 3, '2026-03-01 10:02:00+00'),
    ('Ms4dddddddddddddddddd', 'chat-1', 'Hi all, I have to run, bye!', '{}', 9, 'carol', 'acme', 4, '2026-03-01 10:02:30+00'),
    ('Ms5eeeeeeeeeeeeeeeeee', 'deleted-chat', 'This session was deleted', '{}', 5, 'alice', 'acme', 1, '2026-03-01 11:01:00+00'),
    ('Ms6ffffffffffffffffff', 'notes', 'Dana keeps her notes here', '{}', 6, 'dana', 'sandbox', 1, '2026-03-02 10:01:00+00');

INSERT INTO message_embeddings (content, embedding, message_id, workspace_name, session_name, peer_name) VALUES
    ('I adopted a grey kitten from the shelter last week', '{0.1, 0.2, 0.3}', 'Ms1aaaaaaaaaaaaaaaaaa', 'acme', 'chat-1', 'alice');

INSERT INTO collections (id, observer, observed, workspace_name) VALUES
    ('Co1aaaaaaaaaaaaaaaaaa', 'alice', 'alice', 'acme'),
    ('Co2bbbbbbbbbbbbbbbbbb', 'bot', 'alice', 'acme');

INSERT INTO documents (id, internal_metadata, content, embedding, created_at, workspace_name, observer, observed, session_name, level, times_derived, source_ids, deleted_at) VALUES
    ('Dc1aaaaaaaaaaaaaaaaaa', '{"message_ids": [1, 3]}', 'Alice adopted a grey kitten named Mochi', '{0.1, 0.2, 0.3}',
     '2026-03-01 10:03:00+00', 'acme', 'alice', 'alice', 'chat-1', 'explicit', 2, NULL, NULL),
    ('Dc2bbbbbbbbbbbbbbbbbb', '{"premises": ["Alice adopted a grey kitten named Mochi"]}', 'Alice is a cat owner', NULL,
     '2026-03-01 10:04:00+00', 'acme', 'alice', 'alice', NULL, 'deductive', 1, '["Dc1aaaaaaaaaaaaaaaaaa"]', NULL),
    ('Dc3cccccccccccccccccc', '{}', 'Alice dislikes salmon', NULL,
     '2026-03-01 10:04:30+00', 'acme', 'alice', 'alice', 'chat-1', 'explicit', 1, NULL, '2026-03-01 10:06:00+00'),
    ('Dc4dddddddddddddddddd', '{}', 'Alice talks about her kitten often', NULL,
     '2026-03-01 10:05:00+00', 'acme', 'bot', 'alice', 'chat-1', 'explicit', 1, NULL, NULL),
    ('Dc5eeeeeeeeeeeeeeeeee', '{}', 'From a deleted session', NULL,
     '2026-03-01 11:02:00+00', 'acme', 'alice', 'alice', 'deleted-chat', 'explicit', 1, NULL, NULL),
    ('Dc6ffffffffffffffffff', '{}', 'Alice adopted a grey kitten named Mochi', NULL,
     '2026-03-01 10:03:00+00', 'acme', 'scope.team', 'alice', 'chat-1', 'explicit', 1, NULL, NULL);
