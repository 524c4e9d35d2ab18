-- Work started and finished over time.

-- name: throughput
-- Per bucket of ?3 ms from ?1 to ?2: instances created, completed and failed, and standalone
-- tasks completed and dead. Each count is a range of an index on the time it counts by,
-- covering what it reads (`+status` keeps the status index out: the range is narrower);
-- bucket by bucket, which costs less than grouping the rows through a sort. Buckets where
-- nothing happened are left out.
WITH RECURSIVE bucket(start) AS (
    SELECT ?1 WHERE ?1 < ?2
    UNION ALL
    SELECT start + ?3 FROM bucket WHERE start + ?3 < ?2
)
SELECT * FROM (
    SELECT start,
        (SELECT count(*) FROM instances
         WHERE created_at >= start AND created_at < min(start + ?3, ?2)) AS started,
        (SELECT count(*) FROM instances
         WHERE finished_at >= start AND finished_at < min(start + ?3, ?2)
           AND +status = 'Completed') AS completed,
        (SELECT count(*) FROM instances
         WHERE finished_at >= start AND finished_at < min(start + ?3, ?2)
           AND +status = 'Failed') AS failed,
        (SELECT count(*) FROM task_results
         WHERE finished_at >= start AND finished_at < min(start + ?3, ?2)
           AND +state = 'Completed') AS tasks_completed,
        (SELECT count(*) FROM task_results
         WHERE finished_at >= start AND finished_at < min(start + ?3, ?2)
           AND +state = 'Dead') AS tasks_failed
    FROM bucket
)
WHERE started + completed + failed + tasks_completed + tasks_failed > 0
ORDER BY start;
