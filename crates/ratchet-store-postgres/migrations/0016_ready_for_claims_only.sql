-- The ready index serves the claims, and only them.
--
-- Its predicate is one that only a claim's scans state (they skip tasks asked to cancel,
-- which a claim finds through `tasks_cancelling`). On the predicate 0015 gave it, any
-- condition on `ready_at` alone matched it too: the claim's look for the next delayed task
-- (`lease_owner IS NULL AND ready_at > now`), which belongs on `tasks_delayed`, was planned
-- on statistics an autovacuum `ANALYZE` took while a snapshot was held (a few thousand live
-- rows among millions of dead ones) as a read of the whole ready index, `ready_at` being
-- its third column: 30,000-60,000 blocks on every claim, and the drain fell to 3-5 % of its
-- rate until the next `ANALYZE`.
DROP INDEX ratchet.tasks_ready;
CREATE INDEX tasks_ready ON ratchet.tasks (queue, priority, ready_at, id)
    WHERE NOT cancel_requested;
