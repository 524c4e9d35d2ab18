-- name: inbox_insert
INSERT INTO inbox (instance, kind, event, visible_at) VALUES (?1, ?2, ?3, ?4);

-- name: inbox_visible
SELECT id, event FROM inbox WHERE instance = ?1 AND visible_at <= ?2 ORDER BY id;

-- name: inbox_consume
DELETE FROM inbox WHERE instance = ?1 AND id IN (SELECT value FROM json_each(?2));

-- name: inbox_clear
DELETE FROM inbox WHERE instance = ?1;

-- name: inbox_clear_for_new_execution
DELETE FROM inbox WHERE instance = ?1 AND kind NOT IN ('SignalReceived', 'CancelRequested');

-- name: inbox_next_due
-- The next time an inbox event becomes visible or a delayed task ready (an expired lease is
-- found by the next poll, as on PostgreSQL).
SELECT min(t) FROM (
    SELECT min(visible_at) AS t FROM inbox WHERE visible_at > ?1
    UNION ALL
    SELECT min(ready_at) AS t FROM tasks WHERE lease_owner IS NULL AND ready_at > ?1
);

-- name: signal_dedup_insert
INSERT OR IGNORE INTO signal_dedup (instance, dedup_id) VALUES (?1, ?2);

-- name: signal_dedup_clear
DELETE FROM signal_dedup WHERE instance = ?1;
