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
-- time, the walk over the instances that hold events) go to each node that holds shards, in
-- turn, each call answered on that node alone: a function distributed by instance id (force
-- delegation, as it runs inside the claim's transaction), called with an id of a shard of
-- that node, reads the node's own shards of the inbox there, each a plain table, so the
-- walk is the skip scan again. One call a node, not a shard: a cluster of 32 shards on three
-- workers took a claim 33-47 ms a question asking each shard in turn. Where a call was not
-- sent whole to its node (the nodes hold no copy of Citus's metadata, a shard has two
-- placements...), its answer says so, and each question is one statement over every shard.

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

-- One instance id for each node that holds shards of the instances: an id of one of its
-- shards. Searched for on each call, not kept: a rebalance, a split or a new shard count
-- changes them, and a try costs about a microsecond (hash ranges split the space evenly, so
-- a few tries a shard find them all).
CREATE OR REPLACE FUNCTION ratchet.node_keys() RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_shards bigint[];
    v_groups integer[];
    v_found integer[] := '{}';
    v_keys text[] := '{}';
    v_left integer;
    v_group integer;
BEGIN
    SELECT array_agg(s.shardid ORDER BY s.shardid), array_agg(p.groupid ORDER BY s.shardid)
    INTO v_shards, v_groups
    FROM pg_dist_shard s JOIN pg_dist_placement p ON p.shardid = s.shardid AND p.shardstate = 1
    WHERE s.logicalrelid = 'ratchet.instances'::regclass;
    v_left := (SELECT count(DISTINCT g) FROM unnest(v_groups) AS g);
    FOR n IN 1..1000000 LOOP
        EXIT WHEN v_left = 0;
        v_group := v_groups[array_position(v_shards, get_shard_id_for_distribution_column(
                                                        'ratchet.instances', n::text))];
        IF v_group IS NOT NULL AND v_group <> ALL (v_found) THEN
            v_found := v_found || v_group;
            v_keys := v_keys || n::text;
            v_left := v_left - 1;
        END IF;
    END LOOP;
    IF v_left > 0 THEN
        RAISE EXCEPTION 'ratchet: no instance id among the first million falls in a shard of % of the nodes that hold ratchet.instances (shards split too finely)',
            v_left;
    END IF;
    RETURN v_keys;
END $$;

-- This node's shards of p_table (their tables' names), as the metadata here says: those
-- whose placement is this node's group; NULL when p_key's shard is not among them (the call
-- did not run where its key's shard is). Called on each node, by the two below.
CREATE OR REPLACE FUNCTION ratchet.local_shards(p_table regclass, p_key text) RETURNS text[]
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT CASE WHEN get_shard_id_for_distribution_column(p_table, p_key) = ANY (l.ids)
                THEN l.names END
    FROM (SELECT coalesce(array_agg(s.shardid), '{}') AS ids,
                 coalesce(array_agg(shard_name(p_table, s.shardid) ORDER BY s.shardid), '{}')
                     AS names
          FROM pg_dist_shard s
          JOIN pg_dist_placement p ON p.shardid = s.shardid AND p.shardstate = 1
          WHERE s.logicalrelid = p_table
            AND p.groupid = (SELECT g.groupid FROM pg_dist_local_group g)
            AND to_regclass(shard_name(p_table, s.shardid)) IS NOT NULL) l;
$$;

-- ratchet.inbox_due's two questions, of the shards on p_key's node, there: the oldest
-- p_window visible events of each (oldest first, merged below) and the next wake-up time;
-- instances NULL when the call did not run on that node.
CREATE OR REPLACE FUNCTION ratchet.inbox_due_on_node(
    p_key text, p_now bigint, p_window integer,
    OUT instances text[], OUT visible_ats bigint[], OUT next_due bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_shard text;
    v_instances text[];
    v_visible_ats bigint[];
    v_next bigint;
    v_shards text[] := ratchet.local_shards('ratchet.inbox', p_key);
BEGIN
    IF v_shards IS NULL THEN
        RETURN;
    END IF;
    instances := '{}';
    visible_ats := '{}';
    FOREACH v_shard IN ARRAY v_shards LOOP
        EXECUTE format($q$
            SELECT coalesce(array_agg(w.instance ORDER BY w.visible_at), '{}'),
                   coalesce(array_agg(w.visible_at ORDER BY w.visible_at), '{}'),
                   (SELECT min(b.visible_at) FROM %1$s b WHERE b.visible_at > $1)
            FROM (SELECT b.instance, b.visible_at FROM %1$s b
                  WHERE b.visible_at <= $1 ORDER BY b.visible_at LIMIT $2) w$q$, v_shard)
        INTO v_instances, v_visible_ats, v_next USING p_now, greatest(p_window, 0);
        instances := instances || v_instances;
        visible_ats := visible_ats || v_visible_ats;
        next_due := least(next_due, v_next);
    END LOOP;
END $$;

-- ratchet.inbox_walk over the shards on p_key's node, there: the skip scan over each; NULL
-- when the call did not run on that node.
CREATE OR REPLACE FUNCTION ratchet.inbox_walk_on_node(p_key text, p_after text, p_count integer)
RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_shard text;
    v_shard_ids text[];
    v_ids text[] := '{}';
    v_shards text[] := ratchet.local_shards('ratchet.inbox', p_key);
BEGIN
    IF v_shards IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_count <= 0 THEN
        RETURN '{}';
    END IF;
    FOREACH v_shard IN ARRAY v_shards LOOP
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
            v_shard)
        INTO v_shard_ids USING p_after, p_count;
        v_ids := v_ids || v_shard_ids;
    END LOOP;
    RETURN v_ids;
END $$;

-- PostgreSQL's inbox_due, its two statements over every shard, kept for the claim to fall
-- back on.
ALTER FUNCTION ratchet.inbox_due(bigint, integer) RENAME TO inbox_due_every_shard;

-- The oldest p_window visible events of all shards are the oldest p_window of each shard's
-- oldest p_window, merged.
CREATE FUNCTION ratchet.inbox_due(
    p_now bigint, p_window integer, OUT ids text[], OUT walked bigint, OUT next_due bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text;
    v_instances text[] := '{}';
    v_visible_ats bigint[] := '{}';
    v_node_instances text[];
    v_node_visible_ats bigint[];
    v_node_next bigint;
BEGIN
    IF ratchet.shards_answer_alone() THEN
        FOREACH v_key IN ARRAY ratchet.node_keys() LOOP
            -- (In FROM: Citus sends no call of a plain PL/pgSQL expression to a node.)
            SELECT * INTO v_node_instances, v_node_visible_ats, v_node_next
            FROM ratchet.inbox_due_on_node(v_key, p_now, p_window);
            EXIT WHEN v_node_instances IS NULL;
            v_instances := v_instances || v_node_instances;
            v_visible_ats := v_visible_ats || v_node_visible_ats;
            next_due := least(next_due, v_node_next);
        END LOOP;
        IF v_node_instances IS NOT NULL OR v_key IS NULL THEN
            SELECT coalesce(array_agg(DISTINCT w.instance), '{}'), count(*)
            INTO ids, walked
            FROM (SELECT u.instance
                  FROM unnest(v_instances, v_visible_ats) AS u(instance, visible_at)
                  ORDER BY u.visible_at LIMIT greatest(p_window, 0)) w;
            RETURN;
        END IF;
    END IF;
    -- A node did not answer for its shards.
    SELECT * INTO ids, walked, next_due FROM ratchet.inbox_due_every_shard(p_now, p_window);
END $$;

-- The first p_count instances after p_after of all shards are the first p_count of each
-- shard's first p_count, merged. (An instance is on one shard: no id comes twice, unless a
-- shard moved between two nodes' answers, which the DISTINCT absorbs.)
CREATE OR REPLACE FUNCTION ratchet.inbox_walk(p_after text, p_count integer) RETURNS text[]
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_key text;
    v_ids text[] := '{}';
    v_node_ids text[];
BEGIN
    IF p_count <= 0 THEN
        RETURN '{}';
    END IF;
    IF ratchet.shards_answer_alone() THEN
        FOREACH v_key IN ARRAY ratchet.node_keys() LOOP
            SELECT w.ids INTO v_node_ids
            FROM ratchet.inbox_walk_on_node(v_key, p_after, p_count) AS w(ids);
            EXIT WHEN v_node_ids IS NULL;
            v_ids := v_ids || v_node_ids;
        END LOOP;
        IF v_node_ids IS NOT NULL OR v_key IS NULL THEN
            RETURN ARRAY(SELECT DISTINCT x.id FROM unnest(v_ids) AS x(id)
                         ORDER BY x.id LIMIT p_count);
        END IF;
    END IF;
    -- A node did not answer for its shards. Citus runs a recursive statement only on one
    -- shard: a DISTINCT over each shard's inbox, which reads every entry of the instances it
    -- returns.
    RETURN ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                 WHERE b.instance > p_after ORDER BY b.instance LIMIT p_count);
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
    -- The claim's calls to each node, where the nodes hold the metadata (Citus requires it
    -- of a function distributed by an argument; elsewhere the calls run here, say so, and
    -- the claim asks every shard).
    IF ratchet.shards_answer_alone() THEN
        -- (On every node: the two below call it there.)
        PERFORM create_distributed_function('ratchet.local_shards(regclass,text)'::regprocedure);
        -- (Force delegation: the claim calls these inside its transaction.)
        FOR f IN SELECT p.oid::regprocedure FROM pg_proc p
                 WHERE p.pronamespace = (SELECT c.relnamespace FROM pg_class c
                                         WHERE c.oid = 'ratchet.events'::regclass)
                   AND p.proname IN ('inbox_due_on_node', 'inbox_walk_on_node') LOOP
            PERFORM create_distributed_function(f, 'p_key',
                                                colocate_with => 'ratchet.instances',
                                                force_delegation => true);
        END LOOP;
    END IF;
END $$;
