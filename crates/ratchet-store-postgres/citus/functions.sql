-- The functions on a Citus coordinator, after they are created.
--
-- Citus routes a statement to shards from the values it names, and cannot route one of a
-- generic plan that writes through a CTE with parameters ("could not create distributed
-- plan"), so every function plans each call with its values. And the event store's functions
-- are distributed functions colocated with its shard: a call is sent whole to the node that
-- holds the event store, one hop, instead of each of its statements.

-- A statement that locks instances locks those of one shard: one group per shard, in shard
-- order, each in id order, so that two calls never wait for each other in a cycle.
CREATE OR REPLACE FUNCTION ratchet.lock_groups(p_ids text[]) RETURNS SETOF text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT array_agg(x.id ORDER BY x.id)
    FROM (SELECT DISTINCT u.id FROM unnest(p_ids) AS u(id) WHERE u.id IS NOT NULL) x
    GROUP BY get_shard_id_for_distribution_column('ratchet.instances', x.id)
    ORDER BY get_shard_id_for_distribution_column('ratchet.instances', x.id);
$$;

-- The walk over the instances that hold inbox events, without the skip scan: Citus runs a
-- recursive statement only on one shard. Each shard reads the entries of the instances it
-- returns, so an instance holding many events costs its events here.
CREATE OR REPLACE FUNCTION ratchet.inbox_walk(p_after text, p_count integer) RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    RETURN ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                 WHERE b.instance > p_after ORDER BY b.instance LIMIT greatest(p_count, 0));
END $$;

DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c
                                     WHERE c.oid = 'ratchet.events'::regclass)
               AND p.prokind = 'f' LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
        -- Citus makes a statement that updates or deletes on several shards lock each
        -- shard exclusively, in its own order: two group commits deadlocked on the shards
        -- of their inbox deletes. The functions lock the instances they change first, in
        -- lock_groups' order, so their statements on those rows commute and need only the
        -- row locks.
        EXECUTE format('ALTER FUNCTION %s SET citus.all_modifications_commutative = on', f);
    END LOOP;
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c
                                     WHERE c.oid = 'ratchet.events'::regclass)
               AND p.proname IN ('event_first_match', 'event_append') LOOP
        PERFORM create_distributed_function(f, colocate_with => 'ratchet.events');
    END LOOP;
END $$;
