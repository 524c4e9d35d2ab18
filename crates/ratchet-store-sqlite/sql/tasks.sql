-- name: task_insert
INSERT INTO tasks (queue, name, input, options, instance, execution, seq, visible_at, ready_at,
                   lease_owner, lease_until, fence, priority, unique_key, metadata, created_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, coalesce(?10, ?8),
        ?9, ?10, CASE WHEN ?9 IS NULL THEN 0 ELSE 1 END, ?11, ?12, ?13, ?14)
RETURNING id, fence, attempt;

-- name: task_unique_holder
SELECT id FROM tasks WHERE unique_key = ?1;

-- name: task_ready
-- The tasks a claim takes from one queue, in the order they should run. An expired lease
-- is taken over only once its process no longer says it is alive (the second column says
-- which leases are taken over: a lease still set is one its holder lost).
SELECT id, lease_owner IS NOT NULL, attempt FROM tasks
WHERE queue = ?1
  AND ready_at <= ?2
  AND cancel_requested = 0
  AND name IN (SELECT value FROM json_each(?3))
  AND (lease_owner IS NULL OR NOT EXISTS (
      SELECT 1 FROM workers w WHERE w.id = tasks.lease_owner AND w.alive_until >= ?2
        AND tasks.lease_until >= ?2 - w.stall_grace))
ORDER BY priority, ready_at, id
LIMIT ?4;

-- name: task_claim
-- Leases the tasks task_ready picked (a JSON array of ids); RETURNING comes in no set order.
-- Taking over an expired lease starts a new attempt: the lost one counts. When it was the
-- last of the budget the row keeps it (the claimer reports attempt max + 1 and fails it).
UPDATE tasks SET lease_owner = ?2, lease_until = ?3, ready_at = ?3, fence = fence + 1,
    attempt = attempt + (lease_owner IS NOT NULL
        AND attempt < max(1, coalesce(json_extract(options, '$.retry.max_attempts'), 1)))
WHERE id IN (SELECT value FROM json_each(?1))
RETURNING id, fence, queue, name, input, options, instance, execution, seq, attempt, metadata;

-- name: task_claimable
SELECT EXISTS (
    SELECT 1 FROM tasks
    WHERE queue = ?1
      AND ready_at <= ?2
      AND cancel_requested = 0
      AND name IN (SELECT value FROM json_each(?3))
      AND (lease_owner IS NULL OR NOT EXISTS (
          SELECT 1 FROM workers w WHERE w.id = tasks.lease_owner AND w.alive_until >= ?2
            AND tasks.lease_until >= ?2 - w.stall_grace)));

-- name: task_running_count
SELECT count(*) FROM tasks WHERE queue = ?1 AND lease_until > ?2;

-- name: task_for_completion
SELECT instance, execution, seq, attempt FROM tasks WHERE id = ?1 AND fence = ?2;

-- name: task_delete
DELETE FROM tasks WHERE id = ?1;

-- name: task_retry
-- Like every statement that makes a task claimable again, it moves the fence on, so nothing
-- more from the attempt's lease is accepted.
UPDATE tasks SET attempt = attempt + 1, visible_at = ?2, ready_at = ?2, last_error = ?3,
    lease_owner = NULL, lease_until = NULL, fence = fence + 1
WHERE id = ?1;

-- name: task_snooze
UPDATE tasks SET visible_at = ?2, ready_at = ?2, lease_owner = NULL, lease_until = NULL,
    fence = fence + 1
WHERE id = ?1;

-- name: task_heartbeat
UPDATE tasks SET lease_until = ?3, ready_at = ?3
WHERE id = ?1 AND fence = ?2 AND lease_until IS NOT NULL
RETURNING cancel_requested;

-- name: task_release
UPDATE tasks SET lease_owner = NULL, lease_until = NULL, ready_at = visible_at,
    fence = fence + 1
WHERE id = ?1 AND fence = ?2;

-- name: task_clear_instance
DELETE FROM tasks WHERE instance = ?1;

-- name: task_request_cancel
UPDATE tasks SET cancel_requested = 1 WHERE id = ?1;

-- name: task_finish
-- A standalone task's end: its row moves to task_results (then task_delete). ?4 NULL keeps
-- the last attempt's error.
INSERT INTO task_results (id, queue, name, input, options, priority, attempt, fence, state,
                          output, error, unique_key, metadata, created_at, finished_at)
SELECT id, queue, name, input, options, priority, attempt, fence, ?2,
       ?3, coalesce(?4, last_error), unique_key, metadata, created_at, ?5
FROM tasks WHERE id = ?1;

-- name: task_finish_cancelled
-- Tasks a client cancelled while they ran, whose worker is gone (the lease expired): they are
-- cancelled for good (then task_delete_cancelled).
INSERT INTO task_results (id, queue, name, input, options, priority, attempt, fence, state,
                          output, error, unique_key, metadata, created_at, finished_at)
SELECT id, queue, name, input, options, priority, attempt, fence, 'Cancelled',
       NULL, last_error, unique_key, metadata, created_at, ?2
FROM tasks WHERE queue = ?1 AND cancel_requested = 1 AND ready_at <= ?2;

-- name: task_delete_cancelled
DELETE FROM tasks WHERE queue = ?1 AND cancel_requested = 1 AND ready_at <= ?2;

-- name: task_revive
-- A dead or cancelled task runs again under its id with a fresh budget of attempts and the
-- next fence, so no lease from its earlier life can write to it (then task_result_delete).
INSERT INTO tasks (id, queue, name, input, options, attempt, visible_at, ready_at, fence,
                   priority, unique_key, metadata, created_at)
SELECT id, queue, name, input, options, 1, ?2, ?2, fence + 1,
       priority, unique_key, metadata, created_at
FROM task_results WHERE id = ?1;

-- name: task_result_delete
DELETE FROM task_results WHERE id = ?1;

-- name: task_purge
DELETE FROM task_results WHERE finished_at < ?1;

-- name: task_get
-- An unfinished task's state at ?2: a live lease is Running; a future visible_at is Retrying
-- after a failed attempt, else Scheduled. task_list and queue_counts say the same.
SELECT id, queue, name,
       CASE WHEN lease_until > ?2 THEN 'Running'
            WHEN visible_at > ?2 THEN CASE WHEN attempt > 1 THEN 'Retrying' ELSE 'Scheduled' END
            ELSE 'Available' END,
       priority, attempt, options, input, NULL, last_error, unique_key, metadata,
       instance, execution, seq, created_at, visible_at, NULL
FROM tasks WHERE id = ?1
UNION ALL
SELECT id, queue, name, state, priority, attempt, options, input, output, error, unique_key,
       metadata, NULL, NULL, NULL, created_at, finished_at, finished_at
FROM task_results WHERE id = ?1;

-- name: task_list
-- Standalone tasks only (activities belong to their orchestrations), newest first, below the
-- task id ?6 when given: each table is read backward along its primary key and the two are
-- merged, so a page costs its own rows however deep it is. ?7 and ?8 say whether the state
-- filter asks for any unfinished and any finished state: a table it asks nothing of is
-- skipped at once (a term without a column is checked once, before the scan).
SELECT id, queue, name,
       CASE WHEN lease_until > ?1 THEN 'Running'
            WHEN visible_at > ?1 THEN CASE WHEN attempt > 1 THEN 'Retrying' ELSE 'Scheduled' END
            ELSE 'Available' END AS state,
       priority, attempt, options, input, NULL AS output, last_error AS error, unique_key,
       metadata, instance, execution, seq, created_at, visible_at, NULL AS finished_at
FROM tasks
WHERE queue <> '$activities' AND (?2 IS NULL OR queue = ?2) AND (?4 IS NULL OR name = ?4)
  AND id < coalesce(?6, 9223372036854775807)
  AND ?7
  AND (?3 IS NULL OR CASE WHEN lease_until > ?1 THEN 'Running'
                          WHEN visible_at > ?1 THEN CASE WHEN attempt > 1 THEN 'Retrying' ELSE 'Scheduled' END
                          ELSE 'Available' END IN (SELECT value FROM json_each(?3)))
UNION ALL
SELECT id, queue, name, state, priority, attempt, options, input, output, error, unique_key,
       metadata, NULL, NULL, NULL, created_at, finished_at, finished_at
FROM task_results
WHERE queue <> '$activities' AND (?2 IS NULL OR queue = ?2) AND (?4 IS NULL OR name = ?4)
  AND id < coalesce(?6, 9223372036854775807)
  AND ?8
  AND (?3 IS NULL OR state IN (SELECT value FROM json_each(?3)))
ORDER BY id DESC
LIMIT ?5;
