-- Ratchet's embedded schema. Times are milliseconds since the Unix epoch; payloads are JSON.

CREATE TABLE instances (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    version       INTEGER,
    status        TEXT NOT NULL,
    execution     INTEGER NOT NULL DEFAULT 0,
    input         TEXT NOT NULL,
    output        TEXT,
    error         TEXT,
    custom_status TEXT,
    parent        TEXT,
    history_len   INTEGER NOT NULL DEFAULT 0,
    lease_owner   TEXT,
    lease_until   INTEGER,
    fence         INTEGER NOT NULL DEFAULT 0,
    -- This life of the id: drawn anew when the id is created, restarted or reused.
    incarnation   INTEGER NOT NULL DEFAULT (random()),
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    finished_at   INTEGER
);
CREATE INDEX instances_by_status ON instances (status, created_at);
CREATE INDEX instances_by_name ON instances (name, created_at);
CREATE INDEX instances_finished ON instances (finished_at) WHERE finished_at IS NOT NULL;

-- Append-only: one row per event, numbered within its execution.
CREATE TABLE history (
    instance  TEXT NOT NULL,
    execution INTEGER NOT NULL,
    seq       INTEGER NOT NULL,
    event     TEXT NOT NULL,
    PRIMARY KEY (instance, execution, seq)
) WITHOUT ROWID;

-- Events waiting for an instance's next turn: start, completions, timers, signals, cancel.
CREATE TABLE inbox (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    instance   TEXT NOT NULL,
    kind       TEXT NOT NULL,
    event      TEXT NOT NULL,
    visible_at INTEGER NOT NULL
);
CREATE INDEX inbox_by_instance ON inbox (instance, id);
CREATE INDEX inbox_by_visible ON inbox (visible_at);

-- Signal dedup ids outlive the inbox rows they guarded.
CREATE TABLE signal_dedup (
    instance TEXT NOT NULL,
    dedup_id TEXT NOT NULL,
    PRIMARY KEY (instance, dedup_id)
) WITHOUT ROWID;

-- Ready and running activity attempts. Finished tasks leave this table.
CREATE TABLE tasks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    input       TEXT NOT NULL,
    options     TEXT NOT NULL,
    instance    TEXT NOT NULL,
    execution   INTEGER NOT NULL,
    seq         INTEGER NOT NULL,
    attempt     INTEGER NOT NULL DEFAULT 1,
    visible_at  INTEGER NOT NULL,
    lease_owner TEXT,
    lease_until INTEGER,
    fence       INTEGER NOT NULL DEFAULT 0,
    last_error  TEXT,
    created_at  INTEGER NOT NULL
);
CREATE INDEX tasks_by_visible ON tasks (visible_at, id);
CREATE INDEX tasks_by_instance ON tasks (instance);

-- Processes that say they are alive: while one is, its expired leases are not taken over
-- (a stall kept it from renewing them, not a crash).
CREATE TABLE workers (
    id          TEXT PRIMARY KEY,
    alive_until INTEGER NOT NULL,
    -- How long after expiring its leases stay its own while it is alive.
    stall_grace INTEGER NOT NULL,
    started_at  INTEGER NOT NULL,
    seen_at     INTEGER NOT NULL
);
