-- Keel's store, schema version 1. Documents (state, summaries, messages, envelopes,
-- checkpoint records) are `json`, not `jsonb`: jsonb refuses the escape \u0000, which
-- tool output and model text may contain, and keeps no exact text.

-- One row per session: its lease (owner, fencing epoch, end by the database's clock),
-- how many events its log holds, and its state without the history.
CREATE TABLE keel_sessions (
    session_id       text PRIMARY KEY,
    lease_owner      text,
    lease_epoch      bigint NOT NULL DEFAULT 0,
    lease_expires_at timestamptz,
    event_count      bigint NOT NULL DEFAULT 0,
    state            json,
    summary          json,
    history_len      integer NOT NULL DEFAULT 0,
    updated_at       bigint NOT NULL DEFAULT 0
);
CREATE INDEX keel_sessions_updated ON keel_sessions (updated_at DESC) WHERE summary IS NOT NULL;

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

-- The conversation: message `position` 0, 1, … (the state's history_len first ones
-- count).
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
