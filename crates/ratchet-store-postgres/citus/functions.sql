-- The functions on a Citus coordinator, after they are created.
--
-- Citus cannot route a statement of a generic plan that writes through a CTE with parameters
-- ("could not create distributed plan"), so the functions on distributed tables plan each
-- call with its values. And the event store's functions are distributed functions colocated
-- with its shard: a call is sent whole to the node that holds the event store, one hop,
-- instead of each of its statements.
DO $$
DECLARE
    f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c
                                     WHERE c.oid = 'ratchet.events'::regclass)
               AND p.proname IN ('event_first_match', 'event_append') LOOP
        EXECUTE format('ALTER FUNCTION %s SET plan_cache_mode = force_custom_plan', f);
        PERFORM create_distributed_function(f, colocate_with => 'ratchet.events');
    END LOOP;
END $$;
