-- Keel's store, schema version 1. Documents (state, summaries, messages, envelopes,
-- checkpoint records) are `json`, not `jsonb`: jsonb refuses the escape \u0000, which
-- tool output and model text may contain, and keeps no exact text.

-- One row per session: its lease (owner, fencing epoch, end by the database's clock)
-- and how many events its log holds. Kept small: every append updates it.
CREATE TABLE keel_sessions (
    session_id       text PRIMARY KEY,
    lease_owner      text,
    lease_epoch      bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    event_count      bigint NOT NULL DEFAULT 0
);

-- A session's saved state without its history, and its summary (what session.list
-- shows); the first history_len rows of keel_history are its conversation.
CREATE TABLE keel_states (
    session_id  text    PRIMARY KEY REFERENCES keel_sessions ON DELETE CASCADE,
    state       json    NOT NULL,
    summary     json    NOT NULL,
    history_len integer NOT NULL,
    updated_at  bigint  NOT NULL
);
CREATE INDEX keel_states_updated ON keel_states (updated_at DESC);

-- The event log: append-only, one row per envelope, `position` 1, 2, 3, … per session.
CREATE TABLE keel_events (
    session_id text   NOT NULL REFERENCES keel_sessions ON DELETE CASCADE,
    position   bigint NOT NULL,
    request_id text   NOT NULL,
    sequence   bigint NOT NULL,
    event_type text   NOT NULL,
    envelope   json   NOT NULL,
    PRIMARY KEY (session_id, position),
    UNIQUE (session_id, request_id, sequence)
);

-- The conversation: message `position` 0, 1, … (the first history_len count).
CREATE TABLE keel_history (
    session_id text    NOT NULL REFERENCES keel_sessions ON DELETE CASCADE,
    position   integer NOT NULL,
    message    json    NOT NULL,
    PRIMARY KEY (session_id, position)
);

-- Checkpoint objects, each content once, by SHA-256; the sessions that refer to each.
CREATE TABLE keel_objects (
    hash  text   PRIMARY KEY CHECK (hash ~ '^[0-9a-f]{64}$'),
    size  bigint NOT NULL,
    bytes bytea  NOT NULL
);
CREATE TABLE keel_object_refs (
    session_id text NOT NULL REFERENCES keel_sessions ON DELETE CASCADE,
    hash       text NOT NULL REFERENCES keel_objects,
    PRIMARY KEY (session_id, hash)
);
CREATE INDEX keel_object_refs_hash ON keel_object_refs (hash);

-- Checkpoint records, by seq.
CREATE TABLE keel_checkpoints (
    session_id text   NOT NULL REFERENCES keel_sessions ON DELETE CASCADE,
    seq        bigint NOT NULL,
    manifest   json   NOT NULL,
    objects    text[] NOT NULL,
    PRIMARY KEY (session_id, seq)
);
