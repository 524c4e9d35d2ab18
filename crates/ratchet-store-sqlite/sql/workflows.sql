-- Declarative workflow definitions.

-- name: workflow_stored
SELECT revision, hash FROM workflows WHERE namespace = ?1 AND name = ?2 AND version = ?3;

-- name: workflow_insert
-- The next revision of the namespace and name (the write transaction holds the database).
INSERT INTO workflows (namespace, name, version, revision, hash, source, created_at)
SELECT ?1, ?2, ?3, coalesce(max(revision), 0) + 1, ?4, ?5, ?6
FROM workflows WHERE namespace = ?1 AND name = ?2
RETURNING revision;

-- name: workflow_list
SELECT namespace, name, version, revision, hash, source, created_at FROM workflows
WHERE (?1 IS NULL OR namespace = ?1) AND (?2 IS NULL OR name = ?2)
ORDER BY namespace, name, revision;
