-- Work started and finished over time.

-- name: throughput
-- Per bucket of $3 ms from $1 to $2: instances created, completed and failed, and standalone
-- tasks completed and dead, one row per kind and bucket where something happened. Each kind
-- is a range of an index on the time it counts by that also holds the status, so the counts
-- read the index alone and cost what the range holds, not what the tables hold.
SELECT 'started' AS kind, $1 + (created_at - $1) / $3 * $3 AS start, count(*) AS n
FROM ratchet.instances
WHERE created_at >= $1 AND created_at < $2
GROUP BY 2
UNION ALL
SELECT status, $1 + (finished_at - $1) / $3 * $3, count(*)
FROM ratchet.instances
WHERE finished_at >= $1 AND finished_at < $2 AND status IN ('Completed', 'Failed')
GROUP BY 1, 2
UNION ALL
SELECT 'task_' || state, $1 + (finished_at - $1) / $3 * $3, count(*)
FROM ratchet.task_results
WHERE finished_at >= $1 AND finished_at < $2 AND state IN ('Completed', 'Dead')
  AND queue <> '$activities'
GROUP BY 1, 2;
