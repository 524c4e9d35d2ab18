-- Processes and their liveness. `ratchet.` is replaced with the configured schema.

-- name: worker_alive
-- Also forgets processes silent for a day (killed, never said they were gone).
WITH forgotten AS (DELETE FROM ratchet.workers WHERE alive_until < $3 - 86400000)
INSERT INTO ratchet.workers (id, alive_until, stall_grace, started_at, seen_at, queues, about)
VALUES ($1, $2, $4, $3, $3, $5, $6)
ON CONFLICT (id) DO UPDATE SET alive_until = excluded.alive_until,
    stall_grace = excluded.stall_grace, seen_at = excluded.seen_at, queues = excluded.queues,
    about = excluded.about;

-- name: worker_list
SELECT id, started_at, seen_at, alive_until, queues, about FROM ratchet.workers
ORDER BY seen_at DESC, id;

-- name: worker_gone
DELETE FROM ratchet.workers WHERE id = $1;

-- name: worker_grants_missing
-- What the session's role lacks of a worker's grants (docs/operations.md, "Roles and
-- grants"): every right on every table, and the sequences. One line per right, naming a few
-- of the objects it is missing on.
SELECT format('%s on %s %s (%s%s)', right_, count(*), kind,
              array_to_string((array_agg(name ORDER BY name))[1:4], ', '),
              CASE WHEN count(*) > 4 THEN ', ...' ELSE '' END) AS what
FROM (
    SELECT 'USAGE' AS right_, 'schema' AS kind, n.nspname::text AS name
    FROM pg_namespace n
    WHERE n.nspname = $1 AND NOT has_schema_privilege(n.oid, 'USAGE')
    UNION ALL
    SELECT p.priv, 'table(s)', c.relname::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE']) AS p(priv)
    -- (CASE: the planner may test a condition before the relkind, on any relation.)
    WHERE n.nspname = $1
      AND CASE WHEN c.relkind IN ('r', 'p') THEN NOT has_table_privilege(c.oid, p.priv) END
    UNION ALL
    SELECT 'USAGE', 'sequence(s)', c.relname::text
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1
      AND CASE WHEN c.relkind = 'S' THEN NOT has_sequence_privilege(c.oid, 'USAGE') END
) missing
GROUP BY right_, kind
ORDER BY kind, right_;
