-- Ratchet's server-side operations on instances. Each store call that must read and write in
-- one transaction is one function, so it costs one round trip whatever the batch size.
-- Arguments are parallel arrays (one element per item), results are arrays too. Events arrive
-- as JSON text built by the store's Rust code; the functions never look inside them.
--
-- Locking: every function that waits for instance row locks takes them in id order, so two
-- calls never deadlock on instances; claims take only unlocked rows (SKIP LOCKED).
--
-- Notifications: with p_notify, a call that makes work ready for others sends
-- `ratchet.work`, and a finished instance sends its id on `ratchet.done`. PostgreSQL delivers
-- them when the transaction commits, and merges repeats within one transaction.

-- The instance ids of p_ids in the groups a statement that locks them takes one by one, in
-- the order to take them: on PostgreSQL one group, the ids as given (each such statement
-- orders its own rows). On Citus, citus/functions.sql makes it one group per shard, in shard
-- order: Citus runs a statement that locks rows only when they are all on one shard.
CREATE FUNCTION ratchet.lock_groups(p_ids text[]) RETURNS SETOF text[]
LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT p_ids WHERE cardinality(p_ids) > 0;
$$;

-- Locks the instances of p_ids, a group of lock_groups at a time, each in id order: shared
-- (p_share) or for a change of their non-key columns.
CREATE FUNCTION ratchet.instances_lock(p_ids text[], p_share boolean) RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_group text[];
BEGIN
    FOR v_group IN SELECT g FROM ratchet.lock_groups(p_ids) AS g LOOP
        IF p_share THEN
            PERFORM 1 FROM ratchet.instances WHERE id = ANY (v_group) ORDER BY id FOR SHARE;
        ELSE
            PERFORM 1 FROM ratchet.instances WHERE id = ANY (v_group) ORDER BY id
            FOR NO KEY UPDATE;
        END IF;
    END LOOP;
END $$;

-- Removes every trace of an instance, so its id can start afresh.
CREATE FUNCTION ratchet.instance_erase(p_id text) RETURNS void
LANGUAGE sql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
    DELETE FROM ratchet.instances WHERE id = p_id;
    DELETE FROM ratchet.inbox WHERE instance = p_id;
    DELETE FROM ratchet.history WHERE instance = p_id;
    DELETE FROM ratchet.tasks WHERE instance = p_id;
    DELETE FROM ratchet.signal_dedup WHERE instance = p_id;
$$;

-- Creates instances, each with its ExecutionStarted inbox row; with p_owner they come back
-- leased. Outcome per item: 'created', 'existing' (UseExisting) or 'exists' (refused).
-- n_incarnation: the life of each id when the caller drew it (a first turn ran on the start
-- before it was written), drawn here otherwise. Without p_open the inbox rows are left to the
-- caller, and n_started is not read (commit_batch writes only the opening events its first
-- turns did not consume).
CREATE FUNCTION ratchet.instance_create(
    p_now bigint, p_notify boolean, p_owner text, p_until bigint,
    n_id text[], n_name text[], n_input text[], n_parent text[], n_parent_instance text[],
    n_parent_execution integer[], n_parent_seq integer[], n_if_exists text[], n_started text[],
    n_incarnation bigint[] DEFAULT '{}', p_open boolean DEFAULT true,
    OUT outcome text[], OUT status text[], OUT inbox_id bigint[], OUT fence bigint[],
    OUT incarnation bigint[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_status text;
    v_fence bigint;
    v_new_fence bigint;
    v_incarnation bigint;
    v_inbox bigint;
    v_unleased boolean := false;
BEGIN
    outcome := '{}'; status := '{}'; inbox_id := '{}'; fence := '{}'; incarnation := '{}';
    FOR i IN 1 .. coalesce(array_length(n_id, 1), 0) LOOP
        v_fence := NULL;
        SELECT s.status, s.fence INTO v_status, v_fence
        FROM ratchet.instances s WHERE s.id = n_id[i] FOR NO KEY UPDATE;
        IF FOUND THEN
            IF n_if_exists[i] = 'RestartIfFinished'
               AND v_status IN ('Completed', 'Failed', 'Cancelled', 'Terminated') THEN
                PERFORM ratchet.instance_erase(n_id[i]);
            ELSE
                outcome := outcome || CASE WHEN n_if_exists[i] = 'UseExisting'
                                           THEN 'existing' ELSE 'exists' END;
                status := status || v_status; inbox_id := inbox_id || NULL::bigint;
                fence := fence || NULL::bigint; incarnation := incarnation || NULL::bigint;
                CONTINUE;
            END IF;
        END IF;
        -- A restarted id keeps counting fences, so no lease of its old life is valid again.
        v_new_fence := coalesce(v_fence + 1, CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END);
        INSERT INTO ratchet.instances (id, name, status, execution, input, parent,
            parent_instance, parent_execution, parent_seq, lease_owner, lease_until, fence,
            created_at, updated_at, incarnation)
        VALUES (n_id[i], n_name[i], 'Pending', 0, n_input[i], n_parent[i], n_parent_instance[i],
            n_parent_execution[i], n_parent_seq[i], p_owner, p_until, v_new_fence, p_now, p_now,
            coalesce(n_incarnation[i], (random() * 9.0e18)::bigint))
        ON CONFLICT (id) DO NOTHING
        RETURNING instances.incarnation INTO v_incarnation;
        IF NOT FOUND THEN
            -- Another caller created it since we looked.
            SELECT s.status INTO v_status FROM ratchet.instances s WHERE s.id = n_id[i];
            outcome := outcome || CASE WHEN n_if_exists[i] = 'UseExisting'
                                       THEN 'existing' ELSE 'exists' END;
            status := status || v_status; inbox_id := inbox_id || NULL::bigint;
            fence := fence || NULL::bigint; incarnation := incarnation || NULL::bigint;
            CONTINUE;
        END IF;
        v_inbox := NULL;
        IF p_open THEN
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            VALUES (n_id[i], 'ExecutionStarted', n_started[i], p_now)
            RETURNING id INTO v_inbox;
        END IF;
        outcome := outcome || 'created'::text; status := status || 'Pending'::text;
        inbox_id := inbox_id || v_inbox; fence := fence || v_new_fence;
        incarnation := incarnation || v_incarnation;
        v_unleased := v_unleased OR p_owner IS NULL;
    END LOOP;
    IF p_notify AND v_unleased THEN
        PERFORM pg_notify('ratchet.work', '');
    END IF;
END $$;

-- The visible inbox events of some instances, each one's oldest first, as parallel arrays. PL/pgSQL,
-- not SQL: PostgreSQL plans a SQL function's body again on every call (it returns one row,
-- so it is not inlined), which cost 5-8 % of the server's CPU in a fan-out run.
CREATE FUNCTION ratchet.visible_events(
    p_ids text[], p_now bigint, OUT e_instance text[], OUT e_id bigint[], OUT e_event text[])
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_group text[];
BEGIN
    e_instance := '{}'; e_id := '{}'; e_event := '{}';
    -- A group of lock_groups at a time (on Citus, one shard's node each; on PostgreSQL one).
    -- An instance is in one group, so its events stay oldest first, which is all the caller
    -- reads (it groups them by instance).
    FOR v_group IN SELECT g FROM ratchet.lock_groups(p_ids) AS g LOOP
        SELECT e_instance || coalesce(array_agg(b.instance ORDER BY b.id), '{}'),
               e_id || coalesce(array_agg(b.id ORDER BY b.id), '{}'),
               e_event || coalesce(array_agg(b.event ORDER BY b.id), '{}')
        INTO e_instance, e_id, e_event
        -- `visible_at + 0` keeps the time test off the index: a plan made while the inbox was
        -- nearly empty may otherwise walk every visible event of every instance by time to
        -- find these few instances' events.
        FROM ratchet.inbox b WHERE b.instance = ANY (v_group) AND b.visible_at + 0 <= p_now;
    END LOOP;
END $$;

-- Raises signals into their instances' inboxes. Outcome per item: 'raised', 'duplicate',
-- 'not_found' or 'finished' (with the status).
CREATE FUNCTION ratchet.signal_raise(
    p_notify boolean, s_instance text[], s_dedup text[], s_event text[],
    OUT outcome text[], OUT status text[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_status text;
    v_raised boolean := false;
BEGIN
    outcome := '{}'; status := '{}';
    -- A share lock keeps a concurrent finish from clearing the inbox under the new row.
    PERFORM ratchet.instances_lock(s_instance, true);
    FOR i IN 1 .. coalesce(array_length(s_instance, 1), 0) LOOP
        SELECT s.status INTO v_status FROM ratchet.instances s WHERE s.id = s_instance[i];
        IF NOT FOUND THEN
            outcome := outcome || 'not_found'::text; status := status || NULL::text;
        ELSIF v_status IN ('Completed', 'Failed', 'Cancelled', 'Terminated') THEN
            outcome := outcome || 'finished'::text; status := status || v_status;
        ELSE
            IF s_dedup[i] IS NOT NULL THEN
                INSERT INTO ratchet.signal_dedup (instance, dedup_id)
                VALUES (s_instance[i], s_dedup[i]) ON CONFLICT DO NOTHING;
                IF NOT FOUND THEN
                    outcome := outcome || 'duplicate'::text; status := status || v_status;
                    CONTINUE;
                END IF;
            END IF;
            -- Visible once committed (see instance_cancel).
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            VALUES (s_instance[i], 'SignalReceived', s_event[i], 0);
            outcome := outcome || 'raised'::text; status := status || v_status;
            v_raised := true;
        END IF;
    END LOOP;
    IF p_notify AND v_raised THEN
        PERFORM pg_notify('ratchet.work', '');
    END IF;
END $$;

-- Asks an instance to cancel: a CancelRequested event its next turn sees.
CREATE FUNCTION ratchet.instance_cancel(
    p_id text, p_event text, p_notify boolean, OUT outcome text, OUT status text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT s.status INTO status FROM ratchet.instances s WHERE s.id = p_id FOR SHARE;
    IF NOT FOUND THEN
        outcome := 'not_found';
    ELSIF status IN ('Completed', 'Failed', 'Cancelled', 'Terminated') THEN
        outcome := 'finished';
    ELSE
        -- Visible once committed, at no time of the caller's: that would be its estimate of
        -- the database's clock, and a runtime whose estimate lagged by a few milliseconds
        -- would see the events written before it (the start) but not this one.
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        VALUES (p_id, 'CancelRequested', p_event, 0);
        outcome := 'done';
        IF p_notify THEN
            PERFORM pg_notify('ratchet.work', '');
        END IF;
    END IF;
END $$;

-- Stops an instance at once: Terminated, pending work dropped, its lease fenced off, and its
-- parent told, if the parent still runs the execution that started it.
CREATE FUNCTION ratchet.instance_terminate(
    p_id text, p_error text, p_now bigint, p_notify boolean, OUT outcome text, OUT status text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_parent text;
    v_parent_execution integer;
    v_parent_seq integer;
BEGIN
    PERFORM ratchet.instances_lock(ARRAY[p_id] || ARRAY(
        SELECT parent_instance FROM ratchet.instances
        WHERE id = p_id AND parent_instance IS NOT NULL), false);
    SELECT s.status, s.parent_instance, s.parent_execution, s.parent_seq
    INTO status, v_parent, v_parent_execution, v_parent_seq
    FROM ratchet.instances s WHERE s.id = p_id;
    IF NOT FOUND THEN
        outcome := 'not_found';
        RETURN;
    END IF;
    IF status IN ('Completed', 'Failed', 'Cancelled', 'Terminated') THEN
        outcome := 'finished';
        RETURN;
    END IF;
    UPDATE ratchet.instances
    SET status = 'Terminated', error = p_error, updated_at = p_now, finished_at = p_now,
        lease_owner = NULL, lease_until = NULL, fence = fence + 1
    WHERE id = p_id;
    DELETE FROM ratchet.inbox WHERE instance = p_id;
    DELETE FROM ratchet.tasks WHERE instance = p_id;
    -- The only event this file builds itself: it must match HistoryEvent's JSON form
    -- (`SubOrchestrationFailed`), which the conformance suite checks.
    INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
    SELECT v_parent, 'SubOrchestrationFailed',
           json_build_object('type', 'SubOrchestrationFailed', 'seq', v_parent_seq,
                             'error', p_error::json)::text,
           0
    FROM ratchet.instances p
    WHERE p.id = v_parent AND p.execution = v_parent_execution
      AND p.status IN ('Pending', 'Running', 'ContinuedAsNew');
    outcome := 'done';
    status := 'Terminated';
    IF p_notify THEN
        PERFORM pg_notify('ratchet.done', p_id);
        IF v_parent IS NOT NULL THEN
            PERFORM pg_notify('ratchet.work', '');
        END IF;
    END IF;
END $$;
