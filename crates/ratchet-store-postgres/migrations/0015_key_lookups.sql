-- A lookup by id may use the primary key and nothing else.
--
-- A queue table is empty and full many times a minute, so its statistics are always wrong
-- somewhere: analysed while empty, `tasks` looks like one row on one page to the planner,
-- whatever dead entries its indexes still hold. `tasks_ready` ends in `id`, so an
-- `id = x` can be an index condition on it too (on its last column, read from the first
-- entry to the last), and on such statistics that looked as cheap as the primary key:
-- every claim's update and every finish read the whole bloated index per task.
--
-- As a partial index on a predicate every row meets (`ready_at` is NOT NULL), it serves
-- only statements that imply the predicate: the claim's `ready_at <= now` does (a strict
-- comparison implies its operand is not null), a lookup by id does not.
DROP INDEX ratchet.tasks_ready;
CREATE INDEX tasks_ready ON ratchet.tasks (queue, priority, ready_at, id)
    WHERE ready_at IS NOT NULL;
