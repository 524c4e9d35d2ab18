-- name: instance_status
SELECT status, fence FROM instances WHERE id = ?1;

-- name: instance_erase
DELETE FROM instances WHERE id = ?1;

-- name: instance_insert
-- A restarted id (?8: its last fence) keeps counting fences, so no lease of its old life is
-- valid again; its incarnation is drawn anew, unless the caller drew it (?9: a first turn ran
-- before the start was written).
INSERT INTO instances (id, name, status, execution, input, parent, created_at, updated_at, lease_owner, lease_until, fence, incarnation)
VALUES (?1, ?2, 'Pending', 0, ?3, ?4, ?5, ?5, ?6, ?7,
        CASE WHEN ?8 IS NOT NULL THEN ?8 + 1 WHEN ?6 IS NULL THEN 0 ELSE 1 END,
        coalesce(?9, random()))
RETURNING fence, incarnation;

-- name: instance_claimable
-- With whether the instance's lease is still set: one its holder lost, taken over.
SELECT i.id, i.lease_until IS NOT NULL FROM instances i
WHERE i.id IN (SELECT b.instance FROM inbox b WHERE b.visible_at <= ?1)
  AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
  AND (i.lease_until IS NULL
       OR (i.lease_until < ?1 AND NOT EXISTS (
           SELECT 1 FROM workers w WHERE w.id = i.lease_owner AND w.alive_until >= ?1
             AND i.lease_until >= ?1 - w.stall_grace)))
  AND EXISTS (
      SELECT 1 FROM json_each(?2) r
      WHERE json_extract(r.value, '$.name') = i.name
        AND (i.version IS NULL
             OR i.version IN (SELECT v.value FROM json_each(json_extract(r.value, '$.versions')) v)))
ORDER BY i.updated_at
LIMIT ?3;

-- name: instance_lease
UPDATE instances SET lease_owner = ?2, lease_until = ?3, fence = fence + 1
WHERE id = ?1
  AND status IN ('Pending', 'Running', 'ContinuedAsNew')
  AND (lease_until IS NULL
       OR (lease_until < ?4 AND NOT EXISTS (
           SELECT 1 FROM workers w WHERE w.id = instances.lease_owner AND w.alive_until >= ?4
             AND instances.lease_until >= ?4 - w.stall_grace)))
  AND EXISTS (SELECT 1 FROM inbox b WHERE b.instance = ?1 AND b.visible_at <= ?4)
RETURNING name, version, execution, history_len, fence, incarnation;

-- name: instance_for_commit
SELECT fence, status, execution, history_len, parent, incarnation FROM instances WHERE id = ?1;

-- name: instance_turn_update
UPDATE instances SET
    status = ?2,
    version = coalesce(version, ?3),
    output = ?4,
    error = ?5,
    custom_status = coalesce(?6, custom_status),
    history_len = history_len + ?7,
    updated_at = ?8,
    finished_at = ?9,
    lease_owner = NULL,
    lease_until = NULL
WHERE id = ?1;

-- name: instance_continue
UPDATE instances SET execution = execution + 1, history_len = 0, input = ?2, status = 'ContinuedAsNew', updated_at = ?3
WHERE id = ?1;

-- name: instance_active_execution
SELECT execution FROM instances WHERE id = ?1 AND status IN ('Pending', 'Running', 'ContinuedAsNew');

-- name: instance_terminate
UPDATE instances SET status = 'Terminated', error = ?2, updated_at = ?3, finished_at = ?3,
    lease_owner = NULL, lease_until = NULL, fence = fence + 1
WHERE id = ?1
RETURNING parent;

-- name: instance_get
SELECT id, name, version, status, execution, input, output, error, custom_status, parent, history_len,
       created_at, updated_at, finished_at
FROM instances WHERE id = ?1;

-- name: instance_list
-- The columns of a listed instance, from which list.rs builds each list: it adds only the
-- conditions the filter has, the keyset, the order and the limit. (SQLite plans a statement
-- before it sees its values: one statement for every filter, each condition written to hold
-- when its value is NULL, would use no index whatever the filter.)
SELECT id, name, version, status, execution, input, output, error, custom_status, parent, history_len,
       created_at, updated_at, finished_at
FROM instances

-- name: instance_list_prefix_count
-- How many ids start with a prefix, counting no further than ?3: a range of the primary key.
SELECT count(*) FROM (SELECT 1 FROM instances WHERE id >= ?1 AND id < ?2 LIMIT ?3);

-- name: instance_list_prefix_count_open
-- The same for a prefix with no upper bound (it ends with U+10FFFF characters only).
SELECT count(*) FROM (SELECT 1 FROM instances WHERE id >= ?1 LIMIT ?2);

-- name: instance_release
-- The fence moves on: the released lease can write nothing more.
UPDATE instances SET lease_owner = NULL, lease_until = NULL, fence = fence + 1
WHERE id = ?1 AND fence = ?2;

-- name: instance_purge_history
DELETE FROM history WHERE instance IN (SELECT id FROM instances WHERE finished_at < ?1);

-- name: instance_purge_dedup
DELETE FROM signal_dedup WHERE instance IN (SELECT id FROM instances WHERE finished_at < ?1);

-- name: instance_purge
DELETE FROM instances WHERE finished_at < ?1;
