-- Schedules, and a record of each tick they handled. Every write to a schedule (a fire
-- included) is a compare-and-set on `version`.
CREATE TABLE schedules (
    name         TEXT PRIMARY KEY,
    spec         TEXT NOT NULL,
    time_zone    TEXT NOT NULL,
    action       TEXT NOT NULL,
    overlap      TEXT NOT NULL,
    catch_up     TEXT NOT NULL,
    jitter_ms    INTEGER NOT NULL,
    paused       INTEGER NOT NULL,
    note         TEXT,
    start_at     INTEGER,
    end_at       INTEGER,
    remaining    INTEGER,
    last_tick    INTEGER,
    next_fire_at INTEGER,
    running      TEXT,
    buffered     INTEGER,
    missed       INTEGER NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX schedules_due ON schedules (next_fire_at) WHERE NOT paused AND next_fire_at IS NOT NULL;

CREATE TABLE schedule_fires (
    schedule TEXT NOT NULL,
    nominal  INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    actual   INTEGER NOT NULL,
    run      TEXT,
    skipped  TEXT,
    PRIMARY KEY (schedule, nominal, kind)
);
