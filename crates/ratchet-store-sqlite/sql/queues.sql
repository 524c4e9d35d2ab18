-- name: queue_settings
SELECT paused, rate_per_second, burst, concurrency, tokens, refilled_at FROM queues WHERE name = ?1;

-- name: queue_refill
UPDATE queues SET tokens = ?2, refilled_at = ?3 WHERE name = ?1;

-- name: queue_ensure
INSERT INTO queues (name) VALUES (?1) ON CONFLICT (name) DO NOTHING;

-- name: queue_pause
UPDATE queues SET paused = ?2 WHERE name = ?1;

-- name: queue_limit
-- New limits start with a full bucket.
UPDATE queues SET rate_per_second = ?2, burst = ?3, concurrency = ?4, tokens = ?5, refilled_at = NULL
WHERE name = ?1;

-- name: queue_all
SELECT name, paused, rate_per_second, burst, concurrency FROM queues;

-- name: queue_counts
-- Tasks by queue and state at ?1, the states computed as in task_get.
SELECT queue, state, count(*), min(visible_at) FROM (
    SELECT queue,
           CASE WHEN lease_until > ?1 THEN 'Running'
                WHEN visible_at > ?1 THEN CASE WHEN attempt > 1 THEN 'Retrying' ELSE 'Scheduled' END
                ELSE 'Available' END AS state,
           visible_at
    FROM tasks
    UNION ALL
    SELECT queue, state, NULL FROM task_results)
GROUP BY queue, state;
