-- Declarative workflow definitions.

-- name: workflow_put
-- The next revision (above every one stored or deleted), unless the version is stored: then
-- what is stored. No row back: another apply took the revision first.
WITH existing AS (
    SELECT revision, hash FROM ratchet.workflows
    WHERE namespace = $1 AND name = $2 AND version = $3
), inserted AS (
    INSERT INTO ratchet.workflows (namespace, name, version, revision, hash, source, created_at)
    SELECT $1, $2, $3,
           coalesce(greatest((SELECT max(revision) FROM ratchet.workflows
                              WHERE namespace = $1 AND name = $2),
                             (SELECT revision FROM ratchet.workflow_tombstones
                              WHERE namespace = $1 AND name = $2)), 0) + 1,
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

-- name: workflow_delete
-- Every version, or version $3, of $1/$2, unless unfinished instances of the orchestration
-- `$1/$2` are pinned to a revision it names, or wait for their first turn with none left
-- (then only with $4, force). One row per revision deleted, each with how many revisions
-- matched and how many instances are in the way; one row of those counts alone when nothing
-- was deleted. The highest revision deleted is remembered, so that it is never given again.
WITH target AS (
    SELECT namespace, name, version, revision, hash, source, created_at FROM ratchet.workflows
    WHERE namespace = $1 AND name = $2 AND ($3::text IS NULL OR version = $3)
    FOR UPDATE
), kept AS (
    SELECT count(*) AS n FROM ratchet.workflows
    WHERE namespace = $1 AND name = $2 AND $3::text IS NOT NULL AND version <> $3
), in_use AS (
    SELECT count(*) AS n FROM ratchet.instances
    WHERE name = $1 || '/' || $2
      AND status IN ('Pending', 'Running', 'ContinuedAsNew')
      AND (version IN (SELECT revision FROM target)
           OR (version IS NULL AND (SELECT n FROM kept) = 0))
), deleted AS (
    DELETE FROM ratchet.workflows w USING target t
    WHERE w.namespace = t.namespace AND w.name = t.name AND w.revision = t.revision
      AND ($4::boolean OR (SELECT n FROM in_use) = 0)
    RETURNING w.namespace, w.name, w.version, w.revision, w.hash, w.source, w.created_at
), tombstone AS (
    INSERT INTO ratchet.workflow_tombstones AS tomb (namespace, name, revision)
    SELECT $1, $2, max(revision) FROM deleted HAVING count(*) > 0
    ON CONFLICT (namespace, name) DO UPDATE
        SET revision = greatest(tomb.revision, excluded.revision)
)
SELECT (SELECT count(*) FROM target) AS found, (SELECT n FROM in_use) AS in_use,
       d.namespace, d.name, d.version, d.revision, d.hash, d.source, d.created_at
FROM (SELECT 1) AS one LEFT JOIN deleted d ON true
ORDER BY d.revision;
