-- Ratchet's tables. Every name is written with the prefix `ratchet.`, which the store replaces
-- with the configured schema. Times are milliseconds since the Unix epoch; payloads and events
-- are JSON text that the database stores and returns without interpreting.

-- One row per instance, finished ones included (until retention removes them).
CREATE TABLE ratchet.instances (
    id               text PRIMARY KEY,
    name             text NOT NULL,
    version          integer,
    status           text NOT NULL,
    execution        integer NOT NULL DEFAULT 0,
    input            text NOT NULL,
    output           text,
    error            text,
    custom_status    text,
    -- The parent as the JSON the runtime reads back, and its parts for the server's checks.
    parent           text,
    parent_instance  text,
    parent_execution integer,
    parent_seq       integer,
    history_len      integer NOT NULL DEFAULT 0,
    lease_owner      text,
    lease_until      bigint,
    fence            bigint NOT NULL DEFAULT 0,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    finished_at      bigint
) WITH (fillfactor = 80);
CREATE INDEX instances_by_created ON ratchet.instances (created_at, id);
CREATE INDEX instances_by_status ON ratchet.instances (status, created_at);
CREATE INDEX instances_by_name ON ratchet.instances (name, created_at);
CREATE INDEX instances_finished ON ratchet.instances (finished_at) WHERE finished_at IS NOT NULL;

-- Append-only: one row per event, numbered within its execution.
CREATE TABLE ratchet.history (
    instance  text NOT NULL,
    execution integer NOT NULL,
    seq       integer NOT NULL,
    event     text NOT NULL,
    PRIMARY KEY (instance, execution, seq)
);

-- Hot: events waiting for an instance's next turn (start, completions, timers, signals,
-- cancellation). A turn deletes what it consumed.
CREATE TABLE ratchet.inbox (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    instance   text NOT NULL,
    kind       text NOT NULL,
    event      text NOT NULL,
    visible_at bigint NOT NULL
);
CREATE INDEX inbox_by_instance ON ratchet.inbox (instance, id);
CREATE INDEX inbox_by_visible ON ratchet.inbox (visible_at);

-- Signal dedup ids outlive the inbox rows they guarded.
CREATE TABLE ratchet.signal_dedup (
    instance text NOT NULL,
    dedup_id text NOT NULL,
    PRIMARY KEY (instance, dedup_id)
);

-- Hot: ready and running activity attempts; finished ones leave the table.
-- `ready_at` is when the row may next be claimed: its visible time while unleased, its lease
-- expiry while leased. One index on it finds both ready work and expired leases in order.
CREATE TABLE ratchet.tasks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL,
    input       text NOT NULL,
    options     text NOT NULL,
    instance    text NOT NULL,
    execution   integer NOT NULL,
    seq         integer NOT NULL,
    attempt     integer NOT NULL DEFAULT 1,
    visible_at  bigint NOT NULL,
    ready_at    bigint NOT NULL,
    lease_owner text,
    lease_until bigint,
    fence       bigint NOT NULL DEFAULT 0,
    last_error  text,
    created_at  bigint NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX tasks_by_ready ON ratchet.tasks (ready_at, id);
CREATE INDEX tasks_by_instance ON ratchet.tasks (instance);
