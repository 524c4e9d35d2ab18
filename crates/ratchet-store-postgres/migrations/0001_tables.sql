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
    -- This life of the id: drawn anew when the id is created, restarted or reused.
    incarnation      bigint NOT NULL DEFAULT (random() * 9.0e18)::bigint,
    created_at       bigint NOT NULL,
    updated_at       bigint NOT NULL,
    finished_at      bigint
) WITH (fillfactor = 80);
CREATE INDEX instances_by_created ON ratchet.instances (created_at, id);
CREATE INDEX instances_by_status ON ratchet.instances (status, created_at);
CREATE INDEX instances_by_name ON ratchet.instances (name, created_at);
CREATE INDEX instances_finished ON ratchet.instances (finished_at) WHERE finished_at IS NOT NULL;

-- Append-only: one row per turn, holding the turn's events as a JSON array; `seq` is the
-- position of its first event within the execution. (A row per turn rather than per event
-- writes a few tuples and index entries per orchestration instead of dozens.)
CREATE TABLE ratchet.history (
    instance  text NOT NULL,
    execution integer NOT NULL,
    seq       integer NOT NULL,
    events    text NOT NULL,
    PRIMARY KEY (instance, execution, seq)
);

-- Hot: events waiting for an instance's next turn (start, completions, timers, signals,
-- cancellation). A turn deletes what it consumed.
-- No primary key: rows are found by (instance, id), which the first index covers.
CREATE TABLE ratchet.inbox (
    id         bigint GENERATED ALWAYS AS IDENTITY,
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

-- Hot: ready and running tasks, activity attempts (queue `$activities`, with their
-- orchestration step) and standalone tasks (any other queue, no step); finished ones leave.
-- `ready_at` is when the row may next be claimed: its visible time while unleased, its lease
-- expiry while leased. One index on (queue, priority, ready_at) finds both ready work and
-- expired leases in the order they run.
CREATE TABLE ratchet.tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue            text NOT NULL,
    name             text NOT NULL,
    input            text NOT NULL,
    options          text NOT NULL,
    instance         text,
    execution        integer,
    seq              integer,
    attempt          integer NOT NULL DEFAULT 1,
    priority         smallint NOT NULL DEFAULT 0,
    visible_at       bigint NOT NULL,
    ready_at         bigint NOT NULL,
    lease_owner      text,
    lease_until      bigint,
    fence            bigint NOT NULL DEFAULT 0,
    unique_key       text,
    metadata         text,
    cancel_requested boolean NOT NULL DEFAULT false,
    last_error       text,
    created_at       bigint NOT NULL
) WITH (fillfactor = 80);
CREATE INDEX tasks_ready ON ratchet.tasks (queue, priority, ready_at, id);
-- When the next delayed task (or retry) becomes ready. Only unleased rows: a leased row's
-- ready_at is its lease expiry, and a finished one leaves a dead entry there, ahead of now,
-- which a scan for "the next time after now" would walk through entry by entry (expiries
-- are found by the poll instead).
CREATE INDEX tasks_delayed ON ratchet.tasks (ready_at) WHERE lease_owner IS NULL;
CREATE INDEX tasks_by_instance ON ratchet.tasks (instance) WHERE instance IS NOT NULL;
CREATE INDEX tasks_leased ON ratchet.tasks (queue, lease_until) WHERE lease_until IS NOT NULL;
-- The few a client asked to cancel while they ran, so a claim finds them without a scan.
CREATE INDEX tasks_cancelling ON ratchet.tasks (queue) WHERE cancel_requested;
-- A unique key is held while its task is unfinished, that is, while it is in this table.
CREATE UNIQUE INDEX tasks_unique_key ON ratchet.tasks (unique_key) WHERE unique_key IS NOT NULL;

-- Finished standalone tasks, kept for their results and as dead letters until purged.
CREATE TABLE ratchet.task_results (
    id          bigint PRIMARY KEY,
    queue       text NOT NULL,
    name        text NOT NULL,
    input       text NOT NULL,
    options     text NOT NULL,
    priority    smallint NOT NULL,
    attempt     integer NOT NULL,
    fence       bigint NOT NULL,
    state       text NOT NULL,
    output      text,
    error       text,
    unique_key  text,
    metadata    text,
    created_at  bigint NOT NULL,
    finished_at bigint NOT NULL
);
CREATE INDEX task_results_finished ON ratchet.task_results (finished_at);
CREATE INDEX task_results_by_queue ON ratchet.task_results (queue, state);

-- Settings a queue shares across every process, and its rate limiter's bucket.
CREATE TABLE ratchet.queues (
    name            text PRIMARY KEY,
    paused          boolean NOT NULL DEFAULT false,
    rate_per_second double precision,
    burst           integer,
    concurrency     integer,
    tokens          double precision,
    refilled_at     bigint
);

-- Processes that say they are alive: while one is, its expired leases are not taken over
-- (a stall kept it from renewing them, not a crash).
CREATE TABLE ratchet.workers (
    id          text PRIMARY KEY,
    alive_until bigint NOT NULL,
    -- How long after expiring its leases stay its own while it is alive.
    stall_grace bigint NOT NULL,
    started_at  bigint NOT NULL,
    seen_at     bigint NOT NULL
);
