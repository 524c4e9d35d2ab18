-- The group commit. `ratchet.` is replaced with the configured schema.

-- name: commit
SELECT * FROM ratchet.commit_batch(
    p_now => $1, p_notify => $2,
    p_turns => $3, p_tasks => $4, p_timers => $5, p_parent_events => $6, p_children => $7,
    p_next_events => $8, p_completions => $9,
    p_task_owner => $10, p_task_until => $11, p_task_capacity => $12,
    p_lock => $13, p_lock_owner => $14, p_lock_until => $15, p_starts => $16);

-- name: commit_notify
-- Sent right after `commit` on the same connection, in a transaction of its own: the
-- notifications the commit left in the session (see commit_batch), sent now that it is done.
-- It clears them once read (unnest reads them before the aggregate's result is projected),
-- so a batch that fails and rolls its own back leaves nothing to send twice.
SELECT count(pg_notify(CASE left(n, 1) WHEN 'd' THEN 'ratchet.done' ELSE 'ratchet.work' END,
                       substr(n, 2))),
       set_config('ratchet.pending_notify', '', false) AS cleared
FROM unnest(coalesce(nullif(current_setting('ratchet.pending_notify', true), ''),
                     '{}')::text[]) AS n;
