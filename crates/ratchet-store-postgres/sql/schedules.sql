-- Schedules and their fire records.

-- name: schedule_insert
INSERT INTO ratchet.schedules (name, spec, time_zone, action, overlap, catch_up, jitter_ms,
                               paused, note, start_at, end_at, remaining, last_tick,
                               next_fire_at, running, buffered, missed, version, created_at,
                               updated_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1, $18, $19)
ON CONFLICT (name) DO NOTHING
RETURNING 1;

-- name: schedule_update
-- A compare-and-set on the version; the creation time stays ($18 is not used).
UPDATE ratchet.schedules
SET spec = $2, time_zone = $3, action = $4, overlap = $5, catch_up = $6, jitter_ms = $7,
    paused = $8, note = $9, start_at = $10, end_at = $11, remaining = $12, last_tick = $13,
    next_fire_at = $14, running = $15, buffered = $16, missed = $17, version = version + 1,
    updated_at = $19
WHERE name = $1 AND version = $20 AND $18::bigint IS NOT NULL
RETURNING 1;

-- name: schedule_get
SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
       end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
       created_at, updated_at, settled_through
FROM ratchet.schedules WHERE name = $1;

-- name: schedule_list
SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
       end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
       created_at, updated_at, settled_through
FROM ratchet.schedules ORDER BY name;

-- name: schedule_due
-- The due ones, and in a last row with no name, the next time one is due.
(SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
        end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
        created_at, updated_at, settled_through
 FROM ratchet.schedules
 WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= $1
 ORDER BY next_fire_at LIMIT $2)
UNION ALL
SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       min(next_fire_at), NULL, NULL, NULL, NULL, NULL, NULL, NULL
FROM ratchet.schedules WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at > $1;

-- name: schedule_set_running
UPDATE ratchet.schedules SET running = $2 WHERE name = $1;

-- name: schedule_delete
WITH fires AS (DELETE FROM ratchet.schedule_fires WHERE schedule = $1)
DELETE FROM ratchet.schedules WHERE name = $1
RETURNING 1;

-- name: schedule_fire_insert
INSERT INTO ratchet.schedule_fires (schedule, nominal, kind, actual, run, skipped)
SELECT $1, f.nominal, f.kind, $2, f.run, f.skipped
FROM unnest($3::bigint[], $4::text[], $5::text[], $6::text[]) AS f (nominal, kind, run, skipped);

-- name: schedule_fires_prune
-- The newest $2 records of the schedule stay; the newest tick of those dropped settles the
-- ticks up to it (the mark only moves forward).
WITH dropped AS (
    DELETE FROM ratchet.schedule_fires
    WHERE schedule = $1
      AND nominal < (SELECT nominal FROM ratchet.schedule_fires WHERE schedule = $1
                     ORDER BY nominal DESC OFFSET $2 - 1 LIMIT 1)
    RETURNING nominal)
UPDATE ratchet.schedules
SET settled_through = greatest(settled_through, (SELECT max(nominal) FROM dropped))
WHERE name = $1 AND EXISTS (SELECT 1 FROM dropped);

-- name: schedule_fires
SELECT schedule, nominal, actual, kind, run, skipped FROM ratchet.schedule_fires
WHERE schedule = $1 AND nominal BETWEEN $2 AND $3
ORDER BY nominal DESC, kind LIMIT $4;

-- name: schedules_notify
SELECT pg_notify('ratchet.schedules', '');
