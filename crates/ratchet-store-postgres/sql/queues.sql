-- Statements on queues. `ratchet.` is replaced with the configured schema.

-- name: clock
-- The server's clock (not the transaction's start) in milliseconds since the Unix epoch.
SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS now;

-- name: queue_update
-- $3 says whether the limits ($4 to $6) replace the old ones; they also refill the bucket.
INSERT INTO ratchet.queues AS q (name, paused, rate_per_second, burst, concurrency)
VALUES ($1, coalesce($2, false), $4, $5, $6)
ON CONFLICT (name) DO UPDATE SET
    paused = coalesce($2, q.paused),
    rate_per_second = CASE WHEN $3 THEN $4 ELSE q.rate_per_second END,
    burst = CASE WHEN $3 THEN $5 ELSE q.burst END,
    concurrency = CASE WHEN $3 THEN $6 ELSE q.concurrency END,
    tokens = CASE WHEN $3 THEN NULL ELSE q.tokens END,
    refilled_at = CASE WHEN $3 THEN NULL ELSE q.refilled_at END;

-- name: queue_stats
WITH counts AS (
    SELECT queue, state, count(*) AS n, min(visible_at) AS oldest
    FROM ratchet.task_records($1) GROUP BY queue, state
), names AS (
    SELECT name AS queue FROM ratchet.queues UNION SELECT queue FROM counts
)
SELECT n.queue, coalesce(q.paused, false) AS paused, q.rate_per_second, q.burst, q.concurrency,
       coalesce(array_agg(c.state) FILTER (WHERE c.state IS NOT NULL), '{}') AS states,
       coalesce(array_agg(c.n) FILTER (WHERE c.state IS NOT NULL), '{}') AS counts,
       min(c.oldest) FILTER (WHERE c.state = 'Available') AS oldest_available
FROM names n
LEFT JOIN ratchet.queues q ON q.name = n.queue
LEFT JOIN counts c ON c.queue = n.queue
GROUP BY n.queue, q.paused, q.rate_per_second, q.burst, q.concurrency
ORDER BY n.queue;
