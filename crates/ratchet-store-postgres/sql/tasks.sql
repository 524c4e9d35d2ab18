-- Statements on tasks. `ratchet.` is replaced with the configured schema.

-- name: task_claim
SELECT id, fence, name, input, options, instance, execution, seq, attempt
FROM ratchet.task_take(p_now => $1, p_owner => $2, p_until => $3, p_limit => $4, p_names => $5)
ORDER BY id;

-- name: task_heartbeat
WITH beat AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS b(id, fence, n)
), held AS (
    -- In id order, like every other lock on tasks.
    SELECT t.id FROM ratchet.tasks t JOIN beat ON t.id = beat.id AND t.fence = beat.fence
    ORDER BY t.id
    FOR NO KEY UPDATE OF t
), extended AS (
    UPDATE ratchet.tasks t SET lease_until = $3, ready_at = $3
    FROM held WHERE t.id = held.id
    RETURNING t.id
)
SELECT extended.id IS NOT NULL AS kept FROM beat LEFT JOIN extended ON extended.id = beat.id
ORDER BY beat.n;

-- name: task_release
UPDATE ratchet.tasks t SET lease_owner = NULL, lease_until = NULL, ready_at = t.visible_at
FROM unnest($1::bigint[], $2::bigint[]) AS r(id, fence)
WHERE t.id = r.id AND t.fence = r.fence;

-- name: work_notify
SELECT pg_notify('ratchet.work', '');
