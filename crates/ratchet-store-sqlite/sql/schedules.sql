-- Schedules and their fire records.

-- name: schedule_insert
INSERT INTO schedules (name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note,
                       start_at, end_at, remaining, last_tick, next_fire_at, running, buffered,
                       missed, version, created_at, updated_at)
SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, 1, ?18, ?19
WHERE ?20 IS NULL
ON CONFLICT (name) DO NOTHING;

-- name: schedule_update
-- A compare-and-set on the version; the creation time stays.
UPDATE schedules
SET spec = ?2, time_zone = ?3, action = ?4, overlap = ?5, catch_up = ?6, jitter_ms = ?7,
    paused = ?8, note = ?9, start_at = ?10, end_at = ?11, remaining = ?12, last_tick = ?13,
    next_fire_at = ?14, running = ?15, buffered = ?16, missed = ?17, version = version + 1,
    updated_at = ?19
WHERE name = ?1 AND version = ?20 AND ?18 IS NOT NULL;

-- name: schedule_get
SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
       end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
       created_at, updated_at, settled_through
FROM schedules WHERE name = ?1;

-- name: schedule_list
SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
       end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
       created_at, updated_at, settled_through
FROM schedules ORDER BY name;

-- name: schedule_due
SELECT name, spec, time_zone, action, overlap, catch_up, jitter_ms, paused, note, start_at,
       end_at, remaining, last_tick, next_fire_at, running, buffered, missed, version,
       created_at, updated_at, settled_through
FROM schedules WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at <= ?1
ORDER BY next_fire_at LIMIT ?2;

-- name: schedule_next
SELECT min(next_fire_at) FROM schedules
WHERE NOT paused AND next_fire_at IS NOT NULL AND next_fire_at > ?1;

-- name: schedule_set_running
UPDATE schedules SET running = ?2 WHERE name = ?1;

-- name: schedule_delete
DELETE FROM schedules WHERE name = ?1;

-- name: schedule_fires_delete
DELETE FROM schedule_fires WHERE schedule = ?1;

-- name: schedule_fire_insert
INSERT INTO schedule_fires (schedule, nominal, kind, actual, run, skipped)
VALUES (?1, ?2, ?3, ?4, ?5, ?6);

-- name: schedule_fires_settle
-- Before schedule_fires_prune: the newest tick whose record it drops settles the ticks up to
-- it (the mark only moves forward).
UPDATE schedules
SET settled_through = max(coalesce(settled_through, dropped.nominal), dropped.nominal)
FROM (SELECT max(nominal) AS nominal FROM schedule_fires
      WHERE schedule = ?1
        AND nominal < (SELECT nominal FROM schedule_fires WHERE schedule = ?1
                       ORDER BY nominal DESC LIMIT 1 OFFSET ?2 - 1)) AS dropped
WHERE name = ?1 AND dropped.nominal IS NOT NULL;

-- name: schedule_fires_prune
-- The newest ?2 records of the schedule stay.
DELETE FROM schedule_fires
WHERE schedule = ?1
  AND nominal < (SELECT nominal FROM schedule_fires WHERE schedule = ?1
                 ORDER BY nominal DESC LIMIT 1 OFFSET ?2 - 1);

-- name: schedule_fires
SELECT schedule, nominal, actual, kind, run, skipped FROM schedule_fires
WHERE schedule = ?1 AND nominal BETWEEN ?2 AND ?3
ORDER BY nominal DESC, kind LIMIT ?4;
