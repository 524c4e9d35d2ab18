-- Statements on tasks. `ratchet.` is replaced with the configured schema.

-- name: task_claim
-- Commits without waiting for its flush to disk, as claim does for tasks (see there).
SELECT t.* FROM set_config('synchronous_commit', 'off', true) AS unflushed,
    ratchet.task_take(
        p_now => $1, p_owner => $2, p_until => $3, p_queues => $4, p_limits => $5,
        p_names => $6, p_from_queue => $7, p_from_priority => $8, p_from_ready => $9,
        p_from_id => $10, p_rescan => $11) AS t;

-- name: task_heartbeat
-- Each task is found by a probe of its key (a LATERAL subquery with a LIMIT is never
-- flattened into a join), and updated where it was found, by ctid: joined by id instead,
-- plans made on a bloated table's statistics read it whole, 2,000,000 blocks a heartbeat,
-- holding the locks taken so far for seconds while commits of those tasks waited.
WITH beat AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[]) WITH ORDINALITY AS b(id, fence, n)
), held AS (
    -- In id order, like every other lock on tasks.
    -- Only a leased row: a late heartbeat must not hide a task released or set to retry.
    SELECT t.id, t.ctid AS place
    FROM (SELECT DISTINCT id, fence FROM beat ORDER BY id) b
    CROSS JOIN LATERAL (
        SELECT t.id, t.ctid FROM ratchet.tasks t
        WHERE t.id = b.id AND t.fence = b.fence AND t.lease_owner IS NOT NULL
        LIMIT 1
        FOR NO KEY UPDATE) t
), extended AS (
    UPDATE ratchet.tasks t SET lease_until = $3, ready_at = $3
    WHERE t.ctid = ANY (ARRAY(SELECT place FROM held))
    RETURNING t.id, t.cancel_requested
)
SELECT extended.id IS NOT NULL AS kept, coalesce(extended.cancel_requested, false) AS cancel
FROM beat LEFT JOIN extended ON extended.id = beat.id
ORDER BY beat.n;

-- name: task_enqueue
SELECT outcome, id FROM ratchet.task_enqueue(
    p_now => $1, p_notify => $2, e_queue => $3, e_name => $4, e_input => $5, e_options => $6,
    e_priority => $7, e_visible_at => $8, e_unique_key => $9, e_metadata => $10);

-- name: task_get
SELECT * FROM ratchet.task_records($2) WHERE id = $1;

-- name: task_list
-- Standalone tasks only (activities belong to their orchestrations), newest first, below the
-- id $6 when given. Each table gives its own newest $5 matches, read backward along its
-- primary key (a page costs its own rows however deep it is, whatever the planner thinks of
-- a merge), and the two are merged. $7 and $8 say whether the state filter asks for any
-- unfinished and any finished state: a table it asks nothing of is skipped at once. Planned
-- for its values at each call, so the NULL filters fold away.
SELECT * FROM (
    (SELECT t.id, t.queue, t.name,
            ratchet.task_state(t.lease_until, t.visible_at, t.attempt, $1) AS state,
            t.priority, t.attempt, t.options, t.input, NULL::text AS output,
            t.last_error AS error, t.unique_key, t.metadata, t.instance, t.execution, t.seq,
            t.created_at, t.visible_at, NULL::bigint AS finished_at
     FROM ratchet.tasks t
     WHERE $7 AND t.queue <> '$activities' AND t.id < coalesce($6::bigint, 9223372036854775807)
       AND ($2::text IS NULL OR t.queue = $2) AND ($4::text IS NULL OR t.name = $4)
       AND ($3::text[] IS NULL
            OR ratchet.task_state(t.lease_until, t.visible_at, t.attempt, $1) = ANY ($3))
     ORDER BY t.id DESC
     LIMIT $5)
    UNION ALL
    (SELECT r.id, r.queue, r.name, r.state, r.priority, r.attempt, r.options, r.input,
            r.output, r.error, r.unique_key, r.metadata, NULL, NULL, NULL, r.created_at,
            r.finished_at, r.finished_at
     FROM ratchet.task_results r
     WHERE $8 AND r.queue <> '$activities' AND r.id < coalesce($6::bigint, 9223372036854775807)
       AND ($2::text IS NULL OR r.queue = $2) AND ($4::text IS NULL OR r.name = $4)
       AND ($3::text[] IS NULL OR r.state = ANY ($3))
     ORDER BY r.id DESC
     LIMIT $5)
) t
ORDER BY id DESC
LIMIT $5;

-- name: task_act
SELECT outcome, state FROM ratchet.task_act(
    p_ids => $1, p_action => $2, p_now => $3, p_notify => $4);

-- name: task_purge
WITH gone AS (DELETE FROM ratchet.task_results WHERE finished_at < $1 RETURNING 1)
SELECT count(*) AS purged FROM gone;

-- name: task_release
-- The fence moves on: the released lease can write nothing more. Ready from the release (or
-- its visible time), where claims looking for fresh work find it.
UPDATE ratchet.tasks t SET lease_owner = NULL, lease_until = NULL,
    ready_at = greatest(t.visible_at, $3), fence = t.fence + 1
FROM unnest($1::bigint[], $2::bigint[]) AS r(id, fence)
WHERE t.id = r.id AND t.fence = r.fence AND t.id = ANY ($1::bigint[]);

-- name: work_notify
-- The payload, when not empty, is the earliest ready time of the tasks it announces.
SELECT pg_notify('ratchet.work', $1::text);
