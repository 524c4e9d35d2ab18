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

-- The claim's questions about the whole inbox (the oldest visible events, the next wake-up
-- time, the walk over the instances that hold events) go to each shard in turn, each call on
-- the one node that holds that shard: a function distributed by instance id (force
-- delegation, as it runs inside the claim's transaction) called with an id of that shard
-- reads the shard's own table there. A shard's table is a plain table on its node, so the
-- walk is the skip scan again. Where the nodes hold no copy of Citus's metadata (a call
-- cannot be sent whole to a node then), each question is one statement over every shard.

-- Whether a call of a distributed function goes whole to the node of its shard: every node
-- that holds shards has the metadata (Citus syncs it to a node that `citus_add_node` adds).
CREATE OR REPLACE FUNCTION ratchet.shards_answer_alone() RETURNS boolean
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(bool_and(n.hasmetadata AND n.metadatasynced), false)
    FROM pg_dist_node n
    WHERE n.isactive AND n.noderole = 'primary' AND n.shouldhaveshards
      AND n.groupid <> 0;
$$;

-- One instance id of each shard of the instances, in shard order. Searched for on each call,
-- not kept: a split or a new shard count changes them, and a try costs about a microsecond
-- (hash ranges split the space evenly, so a few tries a shard find them all).
CREATE OR REPLACE FUNCTION ratchet.shard_keys() RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_shards bigint[] := ARRAY(SELECT s.shardid FROM pg_dist_shard s
                               WHERE s.logicalrelid = 'ratchet.instances'::regclass
                               ORDER BY s.shardid);
    v_keys text[] := '{}';
    v_left integer := cardinality(v_shards);
    v_at integer;
BEGIN
    IF v_left = 0 THEN
        RETURN '{}';
    END IF;
    v_keys := array_fill(NULL::text, ARRAY[v_left]);
    FOR n IN 1..1000000 LOOP
        EXIT WHEN v_left = 0;
        v_at := array_position(v_shards, get_shard_id_for_distribution_column(
                                             'ratchet.instances', n::text));
        IF v_keys[v_at] IS NULL THEN
            v_keys[v_at] := n::text;
            v_left := v_left - 1;
        END IF;
    END LOOP;
    IF v_left > 0 THEN
        RAISE EXCEPTION 'ratchet: no instance id among the first million falls in % of the % shards of ratchet.instances (split too finely)',
            v_left, cardinality(v_shards);
    END IF;
    RETURN v_keys;
END $$;

-- The table of this node that holds p_key's shard of p_table. A call distributed by p_key
-- runs where it is; finding it elsewhere means the call was not sent whole.
CREATE OR REPLACE FUNCTION ratchet.local_shard(p_table regclass, p_key text) RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_name text := shard_name(p_table, get_shard_id_for_distribution_column(p_table, p_key));
BEGIN
    IF to_regclass(v_name) IS NULL THEN
        RAISE EXCEPTION 'ratchet: shard % is not on this node (a call distributed by its key was not sent to the node that holds it)',
            v_name;
    END IF;
    RETURN v_name;
END $$;

-- ratchet.inbox_due's two questions, of p_key's shard, on its node: the oldest p_window
-- visible events there (oldest first) and its next wake-up time.
CREATE OR REPLACE FUNCTION ratchet.inbox_due_on_shard(
    p_key text, p_now bigint, p_window integer,
    OUT instances text[], OUT visible_ats bigint[], OUT next_due bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_shard text := ratchet.local_shard('ratchet.inbox', p_key);
BEGIN
    EXECUTE format($q$
        SELECT coalesce(array_agg(w.instance ORDER BY w.visible_at), '{}'),
               coalesce(array_agg(w.visible_at ORDER BY w.visible_at), '{}')
        FROM (SELECT b.instance, b.visible_at FROM %s b
              WHERE b.visible_at <= $1 ORDER BY b.visible_at LIMIT $2) w$q$, v_shard)
    INTO instances, visible_ats USING p_now, greatest(p_window, 0);
    EXECUTE format('SELECT min(b.visible_at) FROM %s b WHERE b.visible_at > $1', v_shard)
    INTO next_due USING p_now;
END $$;

-- ratchet.inbox_walk on p_key's shard, on its node: the skip scan over the shard's table.
CREATE OR REPLACE FUNCTION ratchet.inbox_walk_on_shard(p_key text, p_after text, p_count integer)
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids text[];
BEGIN
    IF p_count <= 0 THEN
        RETURN '{}';
    END IF;
    EXECUTE format($q$
        SELECT ARRAY(
            WITH RECURSIVE walk(instance, n) AS (
                (SELECT b.instance, 1 FROM %1$s b WHERE b.instance > $1
                 ORDER BY b.instance LIMIT 1)
                UNION ALL
                SELECT (SELECT b.instance FROM %1$s b WHERE b.instance > w.instance
                        ORDER BY b.instance LIMIT 1), w.n + 1
                FROM walk w WHERE w.instance IS NOT NULL AND w.n < $2)
            SELECT w.instance FROM walk w WHERE w.instance IS NOT NULL ORDER BY w.n)$q$,
        ratchet.local_shard('ratchet.inbox', p_key))
    INTO v_ids USING p_after, p_count;
    RETURN v_ids;
END $$;

-- The oldest p_window visible events of all shards are the oldest p_window of each shard's
-- oldest p_window, merged.
CREATE OR REPLACE FUNCTION ratchet.inbox_due(
    p_now bigint, p_window integer, OUT ids text[], OUT walked bigint, OUT next_due bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text;
    v_instances text[] := '{}';
    v_visible_ats bigint[] := '{}';
    v_shard_instances text[];
    v_shard_visible_ats bigint[];
    v_shard_next bigint;
BEGIN
    IF NOT ratchet.shards_answer_alone() THEN
        ids := '{}';
        walked := 0;
        IF p_window > 0 THEN
            SELECT coalesce(array_agg(DISTINCT w.instance), '{}'), count(*)
            INTO ids, walked
            FROM (SELECT b.instance FROM ratchet.inbox b
                  WHERE b.visible_at <= p_now
                  ORDER BY b.visible_at LIMIT p_window) w;
        END IF;
        SELECT min(b.visible_at) INTO next_due FROM ratchet.inbox b WHERE b.visible_at > p_now;
        RETURN;
    END IF;
    FOREACH v_key IN ARRAY ratchet.shard_keys() LOOP
        SELECT * INTO v_shard_instances, v_shard_visible_ats, v_shard_next
        FROM ratchet.inbox_due_on_shard(v_key, p_now, p_window);
        v_instances := v_instances || v_shard_instances;
        v_visible_ats := v_visible_ats || v_shard_visible_ats;
        next_due := least(next_due, v_shard_next);
    END LOOP;
    SELECT coalesce(array_agg(DISTINCT w.instance), '{}'), count(*)
    INTO ids, walked
    FROM (SELECT u.instance FROM unnest(v_instances, v_visible_ats) AS u(instance, visible_at)
          ORDER BY u.visible_at LIMIT greatest(p_window, 0)) w;
END $$;

-- The first p_count instances after p_after of all shards are the first p_count of each
-- shard's first p_count, merged.
CREATE OR REPLACE FUNCTION ratchet.inbox_walk(p_after text, p_count integer) RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text;
    v_ids text[] := '{}';
BEGIN
    IF p_count <= 0 THEN
        RETURN '{}';
    END IF;
    IF NOT ratchet.shards_answer_alone() THEN
        -- Citus runs a recursive statement only on one shard: a DISTINCT over each shard's
        -- inbox, which reads every entry of the instances it returns.
        RETURN ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                     WHERE b.instance > p_after ORDER BY b.instance LIMIT p_count);
    END IF;
    FOREACH v_key IN ARRAY ratchet.shard_keys() LOOP
        -- (In FROM: Citus sends no call of a plain PL/pgSQL expression to a node.)
        SELECT v_ids || w.ids INTO v_ids
        FROM ratchet.inbox_walk_on_shard(v_key, p_after, p_count) AS w(ids);
    END LOOP;
    RETURN ARRAY(SELECT x.id FROM unnest(v_ids) AS x(id) ORDER BY x.id LIMIT p_count);
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
    -- (On every node: the two below call it there.)
    PERFORM create_distributed_function('ratchet.local_shard(regclass,text)'::regprocedure);
    -- (Force delegation: the claim calls these inside its transaction.)
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
             WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c
                                     WHERE c.oid = 'ratchet.events'::regclass)
               AND p.proname IN ('inbox_due_on_shard', 'inbox_walk_on_shard') LOOP
        PERFORM create_distributed_function(f, 'p_key', colocate_with => 'ratchet.instances',
                                            force_delegation => true);
    END LOOP;
END $$;
