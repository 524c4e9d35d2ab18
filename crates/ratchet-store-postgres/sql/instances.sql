-- Statements on instances. `ratchet.` is replaced with the configured schema.

-- name: instance_create
SELECT outcome, status, inbox_id, fence, incarnation FROM ratchet.instance_create(
    p_now => $1, p_notify => $2, p_owner => $3, p_until => $4, n_id => $5, n_name => $6,
    n_input => $7, n_parent => $8, n_parent_instance => $9, n_parent_execution => $10,
    n_parent_seq => $11, n_if_exists => $12, n_started => $13);

-- name: instance_claim
SELECT * FROM ratchet.claim(
    p_now => $1, p_owner => $2, p_until => $3, p_limit => $4, p_reg_name => $5,
    p_reg_version => $6, p_task_queues => $7, p_task_limits => $8, p_task_names => $9,
    p_task_from_queue => $10, p_task_from_priority => $11, p_task_from_ready => $12,
    p_task_from_id => $13, p_task_rescan => $14, p_walk_from => $15);

-- name: instance_cancel
SELECT outcome, status FROM ratchet.instance_cancel(
    p_id => $1, p_event => $2, p_notify => $3);

-- name: instance_terminate
SELECT outcome, status FROM ratchet.instance_terminate(
    p_id => $1, p_error => $2, p_now => $3, p_notify => $4);

-- name: instance_get
SELECT id, name, version, status, execution, input, output, error, custom_status, parent,
       history_len, created_at, updated_at, finished_at
FROM ratchet.instances WHERE id = $1;

-- name: instance_list
-- Planned for its values at each call (not a prepared statement's generic plan): the filters
-- left NULL fold away, and the planner sees the rest, so each list takes the index that
-- serves it. The id prefix is a LIKE pattern ($9: the prefix with `\`, `%` and `_` escaped,
-- then `%`), which is a range of the primary key on a database whose collation is "C", and
-- a filter (still exact) on others.
SELECT id, name, version, status, execution, input, output, error, custom_status, parent,
       history_len, created_at, updated_at, finished_at
FROM ratchet.instances
WHERE ($1::text[] IS NULL OR status = ANY ($1))
  AND ($2::text IS NULL OR name = $2)
  AND ($3::bigint IS NULL OR created_at >= $3)
  AND ($4::bigint IS NULL OR created_at < $4)
  AND ($6::bigint IS NULL OR (created_at, id) < ($6, $7::text))
  AND ($8::text IS NULL OR custom_status = $8)
  AND ($9::text IS NULL OR id LIKE $9)
ORDER BY created_at DESC, id DESC
LIMIT $5;

-- name: instance_release
-- The fence moves on: the released lease can write nothing more.
UPDATE ratchet.instances i SET lease_owner = NULL, lease_until = NULL, fence = i.fence + 1
FROM unnest($1::text[], $2::bigint[]) AS r(id, fence)
WHERE i.id = r.id AND i.fence = r.fence AND i.id = ANY ($1::text[]);

-- name: instance_purge
WITH gone AS (
    DELETE FROM ratchet.instances WHERE finished_at < $1 RETURNING id
), history AS (
    DELETE FROM ratchet.history WHERE instance IN (SELECT id FROM gone)
), dedup AS (
    DELETE FROM ratchet.signal_dedup WHERE instance IN (SELECT id FROM gone)
)
SELECT count(*) AS purged FROM gone;

-- name: signal_raise
SELECT outcome, status FROM ratchet.signal_raise(
    p_notify => $1, s_instance => $2, s_dedup => $3, s_event => $4);
