-- Declarative workflow definitions.

-- name: workflow_stored
SELECT revision, hash FROM workflows WHERE namespace = ?1 AND name = ?2 AND version = ?3;

-- name: workflow_insert
-- The next revision of the namespace and name, above every one stored or deleted (the write
-- transaction holds the database).
INSERT INTO workflows (namespace, name, version, revision, hash, source, created_at)
SELECT ?1, ?2, ?3,
       max(coalesce(max(revision), 0),
           coalesce((SELECT revision FROM workflow_tombstones
                     WHERE namespace = ?1 AND name = ?2), 0)) + 1,
       ?4, ?5, ?6
FROM workflows WHERE namespace = ?1 AND name = ?2
RETURNING revision;

-- name: workflow_list
SELECT namespace, name, version, revision, hash, source, created_at FROM workflows
WHERE (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2)
ORDER BY namespace, name, revision;

-- name: workflow_delete_target
-- What a delete of every version, or of version ?3, would take.
SELECT namespace, name, version, revision, hash, source, created_at FROM workflows
WHERE namespace = ?1 AND name = ?2 AND (?3 IS NULL OR version = ?3)
ORDER BY revision;

-- name: workflow_in_use
-- Unfinished instances of the orchestration `?1/?2` pinned to a revision the delete would
-- take, or waiting for their first turn with no revision left.
SELECT count(*) FROM instances
WHERE name = ?1 || '/' || ?2
  AND status IN ('Pending', 'Running', 'ContinuedAsNew')
  AND (version IN (SELECT revision FROM workflows
                   WHERE namespace = ?1 AND name = ?2 AND (?3 IS NULL OR version = ?3))
       OR (version IS NULL AND NOT EXISTS (
           SELECT 1 FROM workflows
           WHERE namespace = ?1 AND name = ?2 AND ?3 IS NOT NULL AND version <> ?3)));

-- name: workflow_delete
DELETE FROM workflows WHERE namespace = ?1 AND name = ?2 AND (?3 IS NULL OR version = ?3);

-- name: workflow_tombstone
-- Remembers the highest revision deleted, so that it is never given again.
INSERT INTO workflow_tombstones (namespace, name, revision) VALUES (?1, ?2, ?3)
ON CONFLICT (namespace, name) DO UPDATE SET revision = max(revision, excluded.revision);
