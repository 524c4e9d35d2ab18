-- Indexes for what an operator's console reads.
--
-- The newest instances first, a page at a time by keyset (creation time, then id): without
-- this index every page sorted the whole table.
CREATE INDEX instances_by_created ON instances (created_at, id);

-- Instances and standalone tasks finished per minute, by status: counted from the index alone.
-- (Retention's `finished_at < ?` reads the same index.)
DROP INDEX instances_finished;
CREATE INDEX instances_finished ON instances (finished_at, status) WHERE finished_at IS NOT NULL;
DROP INDEX task_results_finished;
CREATE INDEX task_results_finished ON task_results (finished_at, state);
