-- Processes and their liveness.

-- name: worker_alive
INSERT INTO workers (id, alive_until, stall_grace, started_at, seen_at, queues, about)
VALUES (?1, ?2, ?4, ?3, ?3, ?5, ?6)
ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until,
    stall_grace = excluded.stall_grace, seen_at = excluded.seen_at, queues = excluded.queues,
    about = excluded.about;

-- name: worker_list
SELECT id, started_at, seen_at, alive_until, queues, about FROM workers
ORDER BY seen_at DESC, id;

-- name: worker_forget_silent
-- Processes silent for a day (killed, never said they were gone).
DELETE FROM workers WHERE alive_until < ?1 - 86400000;

-- name: worker_gone
DELETE FROM workers WHERE id = ?1;
