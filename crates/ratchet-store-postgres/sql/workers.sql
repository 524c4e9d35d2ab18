-- Processes and their liveness. `ratchet.` is replaced with the configured schema.

-- name: worker_alive
-- Also forgets processes silent for a day (killed, never said they were gone).
WITH forgotten AS (DELETE FROM ratchet.workers WHERE alive_until < $3 - 86400000)
INSERT INTO ratchet.workers (id, alive_until, stall_grace, started_at, seen_at, queues, about)
VALUES ($1, $2, $4, $3, $3, $5, $6)
ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until,
    stall_grace = excluded.stall_grace, seen_at = excluded.seen_at, queues = excluded.queues,
    about = excluded.about;

-- name: worker_list
SELECT id, started_at, seen_at, alive_until, queues, about FROM ratchet.workers
ORDER BY seen_at DESC, id;

-- name: worker_gone
DELETE FROM ratchet.workers WHERE id = $1;
