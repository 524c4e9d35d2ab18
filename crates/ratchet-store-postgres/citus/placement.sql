-- Where the tables live on a Citus cluster. `ratchet migrate` runs this on a Citus
-- coordinator after the numbered migrations, every time: it places only what is not placed
-- yet. A table left out stays a plain table on the coordinator.
--
-- The event store goes to one shard of its own, its four tables colocated: `event_append`'s
-- condition and its append are one transaction on one node, so a conditional append keeps its
-- guarantee across the cluster as on one server (its throughput is that node's).
--
-- An instance's own tables are distributed by hash of its id, colocated: its row, its history,
-- its inbox and its signal dedup ids live on one shard, so what a turn reads and writes for
-- one instance is on one node. A statement that locks instances names those of one shard
-- (`lock_groups`, citus/functions.sql), which Citus requires.
--
-- Every other table stays on the coordinator, as on one server: the tasks (activity attempts
-- and standalone tasks share one table, keyed by an id alone, and a standalone task has no
-- instance to be placed by), their results, the queues, the workers, workflows, schedules and
-- tokens. Statements on instances take what they need of those as arrays, not as joins.
DO $$
DECLARE
    t text;
BEGIN
    FOREACH t IN ARRAY ARRAY['events', 'event_tags', 'event_head', 'event_appends'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                       WHERE logicalrelid = ('ratchet.' || t)::regclass) THEN
            IF t = 'events' THEN
                PERFORM create_distributed_table(('ratchet.' || t)::regclass, NULL);
            ELSE
                PERFORM create_distributed_table(('ratchet.' || t)::regclass, NULL,
                                                 colocate_with => 'ratchet.events');
            END IF;
        END IF;
    END LOOP;
    FOREACH t IN ARRAY ARRAY['instances', 'history', 'inbox', 'signal_dedup'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition
                       WHERE logicalrelid = ('ratchet.' || t)::regclass) THEN
            IF t = 'instances' THEN
                PERFORM create_distributed_table(('ratchet.' || t)::regclass, 'id');
            ELSE
                PERFORM create_distributed_table(('ratchet.' || t)::regclass, 'instance',
                                                 colocate_with => 'ratchet.instances');
            END IF;
        END IF;
    END LOOP;
END $$;
