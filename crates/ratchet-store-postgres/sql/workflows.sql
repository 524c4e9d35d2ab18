-- Declarative workflow definitions.

-- name: workflow_put
-- The next revision, unless the version is stored: then what is stored. No row back: another
-- apply took the revision first.
WITH existing AS (
    SELECT revision, hash FROM ratchet.workflows
    WHERE namespace = $1 AND name = $2 AND version = $3
), inserted AS (
    INSERT INTO ratchet.workflows (namespace, name, version, revision, hash, source, created_at)
    SELECT $1, $2, $3,
           coalesce((SELECT max(revision) FROM ratchet.workflows
                     WHERE namespace = $1 AND name = $2), 0) + 1,
           $4, $5, $6
    WHERE NOT EXISTS (SELECT 1 FROM existing)
    ON CONFLICT DO NOTHING
    RETURNING revision, hash
)
SELECT 'created' AS outcome, revision, hash FROM inserted
UNION ALL
SELECT CASE WHEN hash = $4 THEN 'unchanged' ELSE 'conflict' END, revision, hash FROM existing;

-- name: workflow_list
SELECT namespace, name, version, revision, hash, source, created_at FROM ratchet.workflows
WHERE ($1::text IS NULL OR namespace = $1) AND ($2::text IS NULL OR name = $2)
ORDER BY namespace, name, revision;
