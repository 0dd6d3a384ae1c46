-- +goose Up
-- The first schema of the PostgreSQL store. Times of turns and sessions
-- are unix nanoseconds (bigint), as the store's callers give them; lease
-- times are the database's own (timestamptz, now()). Ids compare as bytes
-- (COLLATE "C"), as List's paging positions do.

-- Replicas' leases, one row per Join: the epoch (from the sequence) is the
-- fencing token of everything the lease owns. A row stays after its lease
-- ends (left_at by Leave, reaped_at by Reap) for a day, so that a late
-- write of its epoch still finds it not live.
CREATE SEQUENCE replica_epochs;
CREATE TABLE replicas (
    epoch         bigint PRIMARY KEY,
    id            text COLLATE "C" NOT NULL,
    address       text NOT NULL,
    sessions      integer NOT NULL,
    running_turns integer NOT NULL,
    max_sessions  integer NOT NULL,
    joined_at     timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    left_at       timestamptz,
    reaped_at     timestamptz
);
CREATE INDEX replicas_open ON replicas (expires_at) WHERE left_at IS NULL AND reaped_at IS NULL;
CREATE INDEX replicas_by_id ON replicas (id);

-- lease_is_live is the one definition of a live lease, on its row:
-- statements that lock or update the row itself test it there, so that
-- PostgreSQL tests it again on the row as it is after waiting for another
-- transaction's lock (a reaper's, say). lease_live finds the row of an
-- epoch, for the writes it fences.
-- +goose StatementBegin
CREATE FUNCTION lease_is_live(r replicas) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT r.expires_at > now() AND r.left_at IS NULL AND r.reaped_at IS NULL
$$;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE FUNCTION lease_live(e bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM replicas r WHERE r.epoch = e AND lease_is_live(r))
$$;
-- +goose StatementEnd

CREATE TABLE turns (
    id          text COLLATE "C" PRIMARY KEY,
    request_id  text COLLATE "C" NOT NULL,
    attempt     bigint NOT NULL,
    agent       text COLLATE "C" NOT NULL,
    session_id  text COLLATE "C" NOT NULL,
    target      text NOT NULL,
    prompt_hash bytea NOT NULL,
    owner       text COLLATE "C" NOT NULL,
    started_at  bigint NOT NULL,
    ended_at    bigint,               -- NULL while the turn runs
    last_seq    bigint NOT NULL DEFAULT 0,
    replica     text NOT NULL DEFAULT '',
    epoch       bigint                -- the lease that owns it; NULL outside a cluster
);
-- The idempotency key: one turn per (request id, attempt), whichever
-- replica begins it.
CREATE UNIQUE INDEX turns_request ON turns (request_id, attempt) WHERE request_id <> '';
-- List's order, unfiltered and by each filter.
CREATE INDEX turns_order ON turns (started_at DESC, id DESC);
CREATE INDEX turns_session ON turns (session_id, started_at DESC, id DESC);
CREATE INDEX turns_agent ON turns (agent, started_at DESC, id DESC);
CREATE INDEX turns_owner ON turns (owner, started_at DESC, id DESC);
-- DeleteEnded's cutoff; Running, and Reap's turns of one epoch.
CREATE INDEX turns_ended ON turns (ended_at) WHERE ended_at IS NOT NULL;
CREATE INDEX turns_running ON turns (epoch) WHERE ended_at IS NULL;

-- The journals: every event of a turn, its terminal included (kept here
-- only: Get reads it as the event at the turn's last_seq). No foreign key
-- to turns: its check, a lookup of the turn per inserted event, cost more
-- than half of a journal write's time, and the one statement that inserts
-- events does so only for the turn row it has just updated.
CREATE TABLE events (
    turn_id text COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    data    bytea NOT NULL,
    PRIMARY KEY (turn_id, seq)
);

-- The journals of deleted turns, still to be purged: DeleteEnded deletes
-- a turn's record at once (readers see it gone) and its events in bounded
-- statements after, so that no statement runs into statement_timeout on a
-- long journal; what a crash interrupts, the next DeleteEnded finishes.
CREATE TABLE deleted_journals (
    turn_id text COLLATE "C" PRIMARY KEY
);

CREATE TABLE sessions (
    id             text COLLATE "C" PRIMARY KEY,
    agent          text NOT NULL,
    acp_session_id text NOT NULL,
    cwd            text NOT NULL,
    owner          text NOT NULL,
    created_at     bigint NOT NULL,
    mode           text NOT NULL,
    config_options jsonb NOT NULL,    -- option id to value
    replica        text NOT NULL DEFAULT '',
    epoch          bigint             -- the lease that owns it; NULL when released
);
CREATE INDEX sessions_order ON sessions (created_at, id);
CREATE INDEX sessions_epoch ON sessions (epoch) WHERE epoch IS NOT NULL;
