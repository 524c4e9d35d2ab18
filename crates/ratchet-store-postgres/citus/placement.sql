-- Where the tables live on a Citus cluster. `ratchet migrate` runs this on a Citus
-- coordinator after the numbered migrations, every time: it places only what is not placed
-- yet. A table left out stays a plain table on the coordinator.
--
-- The event store goes to one shard of its own, its four tables colocated: `event_append`'s
-- condition and its append are one transaction on one node, so a conditional append keeps its
-- guarantee across the cluster as on one server (its throughput is that node's).
--
-- Every other table stays on the coordinator, as on one server. (Their statements join them
-- with each other in ways Citus cannot plan once any of them is distributed; distributing
-- them by instance takes claims and commits routed to one shard each.)
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
END $$;
