-- Standalone tasks beside activity attempts: queues, priorities, unique keys, results kept until
-- purged, and shared queue settings.
--
-- SQLite cannot relax a column's NOT NULL, so `tasks` is rebuilt: create the new table, copy the
-- rows (all activity attempts), drop the old one and take its name.

CREATE TABLE tasks_new (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT NOT NULL,
    name             TEXT NOT NULL,
    input            TEXT NOT NULL,
    options          TEXT NOT NULL,
    -- The orchestration step of an activity attempt; NULL for a standalone task.
    instance         TEXT,
    execution        INTEGER,
    seq              INTEGER,
    attempt          INTEGER NOT NULL DEFAULT 1,
    visible_at       INTEGER NOT NULL,
    -- When the row may next be claimed: visible_at while unleased, lease_until while leased, so
    -- one index finds ready work and expired leases in order.
    ready_at         INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_until      INTEGER,
    fence            INTEGER NOT NULL DEFAULT 0,
    priority         INTEGER NOT NULL DEFAULT 0,
    unique_key       TEXT,
    metadata         TEXT,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT,
    created_at       INTEGER NOT NULL
);

INSERT INTO tasks_new (id, queue, name, input, options, instance, execution, seq, attempt,
                       visible_at, ready_at, lease_owner, lease_until, fence, priority,
                       last_error, created_at)
SELECT id, '$activities', name, input, options, instance, execution, seq, attempt,
       visible_at, coalesce(lease_until, visible_at), lease_owner, lease_until, fence, 0,
       last_error, created_at
FROM tasks;

-- Task ids are never reused (a finished task keeps its id in task_results): carry the old
-- table's AUTOINCREMENT counter over. Renaming the table renames its counter row too.
DELETE FROM sqlite_sequence WHERE name = 'tasks_new';
INSERT INTO sqlite_sequence (name, seq) SELECT 'tasks_new', seq FROM sqlite_sequence WHERE name = 'tasks';

DROP TABLE tasks;
ALTER TABLE tasks_new RENAME TO tasks;

CREATE INDEX tasks_ready ON tasks (queue, priority, ready_at, id);
-- When the next delayed task (or retry) becomes ready; leased rows wait for the poll.
CREATE INDEX tasks_delayed ON tasks (ready_at) WHERE lease_owner IS NULL;
CREATE INDEX tasks_by_instance ON tasks (instance) WHERE instance IS NOT NULL;
-- Every claim looks for cancelled tasks whose worker is gone: this keeps that look from
-- walking the queue's whole backlog.
CREATE INDEX tasks_cancelling ON tasks (queue, ready_at) WHERE cancel_requested = 1;
-- A unique key is held only while its task is unfinished: finished tasks leave this table.
CREATE UNIQUE INDEX tasks_unique_key ON tasks (unique_key) WHERE unique_key IS NOT NULL;

-- Finished standalone tasks, under the id they ran with, until purged.
CREATE TABLE task_results (
    id          INTEGER PRIMARY KEY,
    queue       TEXT NOT NULL,
    name        TEXT NOT NULL,
    input       TEXT NOT NULL,
    options     TEXT NOT NULL,
    priority    INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    -- The last lease's fence: a task retried from here keeps it, so an old holder stays stale.
    fence       INTEGER NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('Completed', 'Dead', 'Cancelled')),
    output      TEXT,
    error       TEXT,
    unique_key  TEXT,
    metadata    TEXT,
    created_at  INTEGER NOT NULL,
    finished_at INTEGER NOT NULL
);
CREATE INDEX task_results_finished ON task_results (finished_at);

-- Settings shared by every process that takes from a queue. Queues without a row run freely.
CREATE TABLE queues (
    name            TEXT PRIMARY KEY,
    paused          INTEGER NOT NULL DEFAULT 0,
    rate_per_second REAL,
    burst           INTEGER,
    concurrency     INTEGER,
    -- The token bucket of the rate limit; a NULL refilled_at means a full bucket.
    tokens          REAL,
    refilled_at     INTEGER
) WITHOUT ROWID;
