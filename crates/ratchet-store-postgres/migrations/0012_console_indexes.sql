-- Indexes for what an operator's console reads.
--
-- Instances and standalone tasks finished per minute, by status: counted from the index
-- alone. (Retention's `finished_at < $1` reads the same indexes.)
DROP INDEX ratchet.instances_finished;
CREATE INDEX instances_finished ON ratchet.instances (finished_at, status) WHERE finished_at IS NOT NULL;
DROP INDEX ratchet.task_results_finished;
CREATE INDEX task_results_finished ON ratchet.task_results (finished_at, state, queue);
