-- Claims that do not walk finished work (functions/tasks.sql, src/cursor.rs).

-- Every priority a queue's tasks have had. A claim takes one priority at a time and finds
-- them here: probing the tasks index for them would walk, entry by entry, the dead entries
-- that finished tasks leave at its front until vacuum removes them (and a long transaction
-- elsewhere can keep vacuum from doing so for as long as it runs).
CREATE TABLE ratchet.queue_priorities (
    queue    text NOT NULL,
    priority smallint NOT NULL,
    PRIMARY KEY (queue, priority)
);
INSERT INTO ratchet.queue_priorities (queue, priority)
SELECT DISTINCT queue, priority FROM ratchet.tasks;

-- The few a client asked to cancel while they ran, so a claim finds them without a scan
-- (with ready_at, so that no plan prefers reading a queue's whole ready range for them).
DROP INDEX ratchet.tasks_cancelling;
CREATE INDEX tasks_cancelling ON ratchet.tasks (queue, ready_at) WHERE cancel_requested;
