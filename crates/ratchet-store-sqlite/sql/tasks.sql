-- name: task_insert
INSERT INTO tasks (name, input, options, instance, execution, seq, visible_at, lease_owner, lease_until, fence, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, CASE WHEN ?8 IS NULL THEN 0 ELSE 1 END, ?10)
RETURNING id, fence, attempt;

-- name: task_claim
UPDATE tasks SET lease_owner = ?2, lease_until = ?3, fence = fence + 1
WHERE id IN (
    SELECT id FROM tasks
    WHERE visible_at <= ?1
      AND (lease_until IS NULL OR lease_until < ?1)
      AND name IN (SELECT value FROM json_each(?4))
    ORDER BY visible_at, id
    LIMIT ?5)
RETURNING id, fence, name, input, options, instance, execution, seq, attempt;

-- name: task_for_completion
SELECT instance, execution, seq, attempt FROM tasks WHERE id = ?1 AND fence = ?2;

-- name: task_delete
DELETE FROM tasks WHERE id = ?1;

-- name: task_retry
UPDATE tasks SET attempt = attempt + 1, visible_at = ?2, last_error = ?3, lease_owner = NULL, lease_until = NULL
WHERE id = ?1;

-- name: task_heartbeat
UPDATE tasks SET lease_until = ?3 WHERE id = ?1 AND fence = ?2;

-- name: task_release
UPDATE tasks SET lease_owner = NULL, lease_until = NULL WHERE id = ?1 AND fence = ?2;

-- name: task_clear_instance
DELETE FROM tasks WHERE instance = ?1;
