-- Schedules, and a record of each tick they handled. Every write to a schedule (a fire
-- included) is a compare-and-set on `version`.
CREATE TABLE ratchet.schedules (
    name         text PRIMARY KEY,
    spec         text NOT NULL,
    time_zone    text NOT NULL,
    action       text NOT NULL,
    overlap      text NOT NULL,
    catch_up     text NOT NULL,
    jitter_ms    bigint NOT NULL,
    paused       boolean NOT NULL,
    note         text,
    start_at     bigint,
    end_at       bigint,
    remaining    bigint,
    last_tick    bigint,
    next_fire_at bigint,
    running      text,
    buffered     bigint,
    missed       bigint NOT NULL,
    version      bigint NOT NULL,
    created_at   bigint NOT NULL,
    updated_at   bigint NOT NULL
);
CREATE INDEX schedules_due ON ratchet.schedules (next_fire_at)
    WHERE NOT paused AND next_fire_at IS NOT NULL;

CREATE TABLE ratchet.schedule_fires (
    schedule text NOT NULL,
    nominal  bigint NOT NULL,
    kind     text NOT NULL,
    actual   bigint NOT NULL,
    run      text,
    skipped  text,
    PRIMARY KEY (schedule, nominal, kind)
);
