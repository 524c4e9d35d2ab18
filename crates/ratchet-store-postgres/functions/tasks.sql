-- Ratchet's server-side operations on tasks: activity attempts (queue `$activities`) and
-- standalone tasks share the table and the claim; finished standalone tasks move to
-- task_results.

-- Where an unfinished task stands at p_now.
CREATE FUNCTION ratchet.task_state(
    p_lease_until bigint, p_visible_at bigint, p_attempt integer, p_now bigint) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN p_lease_until > p_now THEN 'Running'
                WHEN p_visible_at > p_now THEN
                     CASE WHEN p_attempt > 1 THEN 'Retrying' ELSE 'Scheduled' END
                ELSE 'Available' END
$$;

-- Every task, unfinished and finished, as one record shape (inlined into the queries that
-- read it, so their filters reach the tables' indexes).
CREATE FUNCTION ratchet.task_records(p_now bigint)
RETURNS TABLE (id bigint, queue text, name text, state text, priority smallint,
               attempt integer, options text, input text, output text, error text,
               unique_key text, metadata text, instance text, execution integer, seq integer,
               created_at bigint, visible_at bigint, finished_at bigint)
LANGUAGE sql STABLE AS $$
    SELECT t.id, t.queue, t.name, ratchet.task_state(t.lease_until, t.visible_at, t.attempt, p_now),
           t.priority, t.attempt, t.options, t.input, NULL::text, t.last_error, t.unique_key,
           t.metadata, t.instance, t.execution, t.seq, t.created_at, t.visible_at, NULL::bigint
    FROM ratchet.tasks t
    UNION ALL
    SELECT r.id, r.queue, r.name, r.state, r.priority, r.attempt, r.options, r.input, r.output,
           r.error, r.unique_key, r.metadata, NULL, NULL, NULL, r.created_at, r.finished_at,
           r.finished_at
    FROM ratchet.task_results r
$$;

-- Moves finished standalone tasks from the hot table to their results: state 'Completed'
-- (with its output), 'Dead' or 'Cancelled' (with an error, else the last one).
--
-- Without nested loops: on statistics that say `tasks` holds a row or so, the planner
-- joined each deleted row to the whole list of finished ones, unnested again for each
-- (245,000 rows compared, 365 ms, to finish 495 tasks); a hash join is linear whatever the
-- estimates.
CREATE FUNCTION ratchet.task_finish(
    p_ids bigint[], p_states text[], p_outputs text[], p_errors text[], p_now bigint)
RETURNS void
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    WITH finished AS (
        SELECT * FROM unnest(p_ids, p_states, p_outputs, p_errors) AS f(id, state, output, error)
    ), gone AS (
        DELETE FROM ratchet.tasks t USING finished f WHERE t.id = f.id AND t.id = ANY (p_ids)
        RETURNING t.*, f.state AS final_state, f.output AS final_output, f.error AS final_error)
    INSERT INTO ratchet.task_results (id, queue, name, input, options, priority, attempt, fence,
        state, output, error, unique_key, metadata, created_at, finished_at)
    SELECT id, queue, name, input, options, priority, attempt, fence, final_state, final_output,
           coalesce(final_error, last_error), unique_key, metadata, created_at, p_now
    FROM gone;
END $$;

-- Leases ready tasks, from each queue up to its limit, in the order they run (priority, then
-- ready time, then id); a task whose lease expired is ready again at its expiry. A queue's
-- shared settings, when it has any, allow fewer: none while paused, no more running than
-- its concurrency, no more than its rate limiter's whole tokens. Claimers of a queue with
-- settings take turns on its row; other queues' claimers never wait for each other.
-- Shared by the poll and the task claim.
--
-- Each (queue, priority) scan starts at its bound in p_from_* when it has one: the caller's
-- claim cursor, behind which everything was taken when it last looked (see the store's
-- cursor.rs); without one it reads from the start. c_* says where each scan got to: the
-- last task it took, or (p_now, max) when it read everything ready. A scan of a queue in
-- p_rescan first finds the first task from its bound that is ready and not finished, taken
-- by another claim or not (a plain read, which sees past row locks), starts there, and says
-- where in c_floor_* ((p_now, max) when there was none; NULL for the other scans): the
-- next rescan starts there instead of walking again every task finished since.
CREATE FUNCTION ratchet.task_take(
    p_now bigint, p_owner text, p_until bigint, p_queues text[], p_limits integer[],
    p_names text[], p_from_queue text[] DEFAULT '{}', p_from_priority smallint[] DEFAULT '{}',
    p_from_ready bigint[] DEFAULT '{}', p_from_id bigint[] DEFAULT '{}',
    p_rescan text[] DEFAULT '{}',
    OUT t_id bigint[], OUT t_fence bigint[], OUT t_name text[], OUT t_input text[],
    OUT t_options text[], OUT t_instance text[], OUT t_execution integer[],
    OUT t_seq integer[], OUT t_attempt integer[], OUT t_queue text[], OUT t_metadata text[],
    OUT c_queue text[], OUT c_priority smallint[], OUT c_ready bigint[], OUT c_id bigint[],
    OUT c_floor_ready bigint[], OUT c_floor_id bigint[], OUT t_taken_over integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_queue text;
    v_limit integer;
    v_settings ratchet.queues;
    v_has_settings boolean;
    v_capacity double precision;
    v_tokens double precision;
    v_taken integer;
    v_priority smallint;
    v_from_ready bigint;
    v_from_id bigint;
    v_rows ratchet.tasks[] := '{}';
    v_batch ratchet.tasks[];
    v_ids bigint[];
    v_last_ready bigint;
    v_last_id bigint;
    v_taken_over integer;
    v_spent bigint[] := '{}';
    v_spent_batch bigint[];
BEGIN
    t_taken_over := 0;
    c_queue := '{}'; c_priority := '{}'; c_ready := '{}'; c_id := '{}';
    c_floor_ready := '{}'; c_floor_id := '{}';
    FOR v_queue, v_limit IN SELECT * FROM unnest(p_queues, p_limits) LOOP
        CONTINUE WHEN v_limit IS NULL OR v_limit <= 0;
        SELECT * INTO v_settings FROM ratchet.queues WHERE name = v_queue FOR UPDATE;
        v_has_settings := FOUND;
        IF v_has_settings THEN
            CONTINUE WHEN v_settings.paused;
            IF v_settings.concurrency IS NOT NULL THEN
                v_limit := least(v_limit, v_settings.concurrency - (
                    SELECT count(*) FROM ratchet.tasks
                    WHERE queue = v_queue AND lease_until > p_now)::integer);
            END IF;
            IF v_settings.rate_per_second IS NOT NULL THEN
                v_capacity := coalesce(v_settings.burst,
                                       greatest(1, ceil(v_settings.rate_per_second / 10)));
                v_tokens := CASE WHEN v_settings.refilled_at IS NULL THEN v_capacity
                                 ELSE least(v_capacity, coalesce(v_settings.tokens, v_capacity)
                                      + greatest(0, p_now - v_settings.refilled_at)
                                        * v_settings.rate_per_second / 1000) END;
                v_limit := least(v_limit, floor(v_tokens)::integer);
            END IF;
        END IF;
        v_taken := 0;
        -- One priority at a time, lowest first: within a priority the index is ordered by
        -- ready_at, so each scan stops at the first task not ready yet, instead of reading
        -- every delayed or leased task of a higher-ranked priority on the way to the next.
        FOR v_priority IN SELECT qp.priority FROM ratchet.queue_priorities qp
                          WHERE qp.queue = v_queue ORDER BY qp.priority LOOP
            EXIT WHEN v_taken >= v_limit;
            SELECT f.ready, f.id INTO v_from_ready, v_from_id
            FROM unnest(p_from_queue, p_from_priority, p_from_ready, p_from_id)
                 AS f(queue, priority, ready, id)
            WHERE f.queue = v_queue AND f.priority = v_priority;
            IF v_queue = ANY (p_rescan) THEN
                SELECT t.ready_at, t.id INTO v_from_ready, v_from_id
                FROM ratchet.tasks t
                WHERE t.queue = v_queue AND t.priority = v_priority AND t.ready_at <= p_now
                  AND (t.ready_at, t.id) >= (coalesce(v_from_ready, -9223372036854775808),
                                             coalesce(v_from_id, -9223372036854775808))
                  AND t.name = ANY (p_names)
                  AND NOT t.cancel_requested
                ORDER BY t.ready_at, t.id
                LIMIT 1;
                IF NOT FOUND THEN
                    v_from_ready := p_now;
                    v_from_id := 9223372036854775807;
                END IF;
                c_floor_ready := c_floor_ready || v_from_ready;
                c_floor_id := c_floor_id || v_from_id;
            ELSE
                c_floor_ready := c_floor_ready || NULL::bigint;
                c_floor_id := c_floor_id || NULL::bigint;
            END IF;
            -- The rows, locked here and updated by key in a statement of their own. (Joined
            -- in one statement, a plan made on statistics from a moment the table looked
            -- empty probed the whole list of ids for each row: 17,000 blocks a claim.)
            SELECT coalesce(array_agg(r.id), '{}'),
                   (array_agg(r.ready_at ORDER BY r.ready_at DESC, r.id DESC))[1],
                   (array_agg(r.id ORDER BY r.ready_at DESC, r.id DESC))[1],
                   count(*) FILTER (WHERE r.expired),
                   coalesce(array_agg(r.id) FILTER (WHERE r.spent), '{}')
            INTO v_ids, v_last_ready, v_last_id, v_taken_over, v_spent_batch
            FROM (
                -- A lease still set is one its holder lost: counted as taken over. When
                -- the lost attempt was the last of the budget (`spent`), the row keeps it
                -- and the claimer is told attempt max + 1, so that it fails the task
                -- without running it: the attempts recorded are the ones that ran.
                SELECT t.id, t.ready_at, t.lease_owner IS NOT NULL AS expired,
                       t.lease_owner IS NOT NULL
                       AND t.attempt >= greatest(1, coalesce(
                           (t.options::jsonb #>> '{retry,max_attempts}')::integer, 1))
                       AS spent
                FROM ratchet.tasks t
                WHERE t.queue = v_queue AND t.priority = v_priority AND t.ready_at <= p_now
                  AND (t.ready_at, t.id) >= (coalesce(v_from_ready, -9223372036854775808),
                                             coalesce(v_from_id, -9223372036854775808))
                  AND t.name = ANY (p_names)
                  AND NOT t.cancel_requested
                  -- An expired lease is taken over only once its process no longer says it
                  -- is alive (a stall, not a crash, kept it from renewing).
                  AND (t.lease_owner IS NULL OR NOT EXISTS (
                      SELECT 1 FROM ratchet.workers w
                      WHERE w.id = t.lease_owner AND w.alive_until >= p_now
                        AND t.lease_until >= p_now - w.stall_grace))
                ORDER BY t.ready_at, t.id
                LIMIT v_limit - v_taken
                FOR NO KEY UPDATE SKIP LOCKED) AS r;
            -- Taking over an expired lease starts a new attempt: the lost one counts.
            WITH taken AS (
                UPDATE ratchet.tasks t
                SET lease_owner = p_owner, lease_until = p_until, ready_at = p_until,
                    fence = t.fence + 1,
                    attempt = t.attempt
                              + CASE WHEN t.lease_owner IS NULL OR t.id = ANY (v_spent_batch)
                                     THEN 0 ELSE 1 END
                WHERE t.id = ANY (v_ids)
                RETURNING t AS task)
            SELECT coalesce(array_agg(task), '{}') INTO v_batch FROM taken;
            v_spent := v_spent || v_spent_batch;
            t_taken_over := t_taken_over + v_taken_over;
            v_rows := v_rows || v_batch;
            c_queue := c_queue || v_queue;
            c_priority := c_priority || v_priority;
            IF cardinality(v_batch) < v_limit - v_taken THEN
                c_ready := c_ready || p_now;
                c_id := c_id || 9223372036854775807;
            ELSE
                c_ready := c_ready || v_last_ready;
                c_id := c_id || v_last_id;
            END IF;
            v_taken := v_taken + cardinality(v_batch);
        END LOOP;
        IF v_has_settings AND v_settings.rate_per_second IS NOT NULL THEN
            UPDATE ratchet.queues SET tokens = v_tokens - v_taken, refilled_at = p_now
            WHERE name = v_queue;
        END IF;
    END LOOP;
    -- In the order they run; the arrays line up because one pass fills them all. (A sort
    -- for each aggregate's own ORDER BY, set up on every call, made an empty claim called
    -- from pgbench take 0.32-0.34 ms instead of 0.24 ms.)
    SELECT coalesce(array_agg(r.id), '{}'),
           coalesce(array_agg(r.fence), '{}'),
           coalesce(array_agg(r.name), '{}'),
           coalesce(array_agg(r.input), '{}'),
           coalesce(array_agg(r.options), '{}'),
           coalesce(array_agg(r.instance), '{}'),
           coalesce(array_agg(r.execution), '{}'),
           coalesce(array_agg(r.seq), '{}'),
           coalesce(array_agg(r.attempt + CASE WHEN r.id = ANY (v_spent) THEN 1 ELSE 0 END),
                    '{}'),
           coalesce(array_agg(r.queue), '{}'),
           coalesce(array_agg(r.metadata), '{}')
    INTO t_id, t_fence, t_name, t_input, t_options, t_instance, t_execution, t_seq, t_attempt,
         t_queue, t_metadata
    FROM (SELECT * FROM unnest(v_rows) AS u ORDER BY u.priority, u.visible_at, u.id) AS r;
    -- A task asked to cancel whose worker is gone (its lease ran out) is cancelled now.
    PERFORM ratchet.task_finish(array_agg(t.id), array_agg('Cancelled'::text),
                                array_agg(NULL::text), array_agg(NULL::text), p_now)
    FROM ratchet.tasks t
    WHERE t.queue = ANY (p_queues) AND t.cancel_requested AND t.ready_at <= p_now
    HAVING count(*) > 0;
END $$;

-- Enqueues standalone tasks. A task whose unique key an unfinished task holds (an earlier
-- one of the same call included) is not enqueued: its outcome is 'duplicate' with the
-- holder's id.
CREATE FUNCTION ratchet.task_enqueue(
    p_now bigint, p_notify boolean, e_queue text[], e_name text[], e_input text[],
    e_options text[], e_priority integer[], e_visible_at bigint[], e_unique_key text[],
    e_metadata text[], OUT outcome text[], OUT id bigint[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ids bigint[];
    v_inserted bigint[];
    v_ready boolean;
BEGIN
    -- Ids are drawn first, so that each outcome can name its own task. (The identity's
    -- sequence by name: pg_get_serial_sequence looked it up in the catalogs on every call.)
    SELECT coalesce(array_agg(nextval('ratchet.tasks_id_seq'::regclass)), '{}')
    INTO v_ids
    FROM generate_series(1, coalesce(array_length(e_queue, 1), 0));
    INSERT INTO ratchet.queue_priorities (queue, priority)
    SELECT DISTINCT q, p FROM unnest(e_queue, e_priority) AS e(q, p)
    ON CONFLICT DO NOTHING;
    WITH inserted AS (
        INSERT INTO ratchet.tasks AS t (id, queue, name, input, options, priority, visible_at,
                                        ready_at, unique_key, metadata, created_at)
        OVERRIDING SYSTEM VALUE
        -- Ready no earlier than now, even when asked to run at a time already past: claims
        -- look for fresh work a little behind the newest they took, not further.
        SELECT v_ids[e.n], e.queue, e.name, e.input, e.options, e.priority, e.visible_at,
               greatest(e.visible_at, p_now), e.unique_key, e.metadata, p_now
        FROM unnest(e_queue, e_name, e_input, e_options, e_priority, e_visible_at,
                    e_unique_key, e_metadata)
             WITH ORDINALITY AS e(queue, name, input, options, priority, visible_at,
                                  unique_key, metadata, n)
        ORDER BY e.n
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
        RETURNING t.id, t.visible_at)
    SELECT coalesce(array_agg(inserted.id), '{}'), coalesce(bool_or(visible_at <= p_now), false)
    INTO v_inserted, v_ready
    FROM inserted;
    -- Every task enqueued (no unique key was held): each outcome names the id drawn for it.
    IF cardinality(v_inserted) = cardinality(v_ids) THEN
        outcome := array_fill('enqueued'::text, ARRAY[cardinality(v_ids)]);
        id := v_ids;
    ELSE
        -- A statement of its own, so that it sees the rows just inserted.
        SELECT coalesce(array_agg(CASE WHEN i.id IS NULL THEN 'duplicate' ELSE 'enqueued' END
                                  ORDER BY e.n), '{}'),
               coalesce(array_agg(CASE WHEN i.id IS NOT NULL THEN i.id
                                       -- The holder, or if it finished meanwhile, its result.
                                       ELSE coalesce(
                                           (SELECT h.id FROM ratchet.tasks h
                                            WHERE h.unique_key = e.unique_key),
                                           (SELECT max(r.id) FROM ratchet.task_results r
                                            WHERE r.unique_key = e.unique_key), 0) END
                                  ORDER BY e.n), '{}')
        INTO outcome, id
        FROM unnest(v_ids, e_unique_key) WITH ORDINALITY AS e(task, unique_key, n)
        LEFT JOIN unnest(v_inserted) AS i(id) ON i.id = e.task;
    END IF;
    IF p_notify AND v_ready THEN
        PERFORM pg_notify('ratchet.work', p_now::text);
    END IF;
END $$;

-- Cancels, retries or discards standalone tasks. Outcome per task: 'done', 'requested' (a
-- running task stops when its worker next hears from the store), 'not_found', or 'refused'
-- with the task's state.
CREATE FUNCTION ratchet.task_act(
    p_ids bigint[], p_action text, p_now bigint, p_notify boolean,
    OUT outcome text[], OUT state text[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_task ratchet.tasks;
    v_result ratchet.task_results;
    v_state text;
    v_ready boolean := false;
BEGIN
    outcome := '{}'; state := '{}';
    FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
        SELECT * INTO v_task FROM ratchet.tasks WHERE id = p_ids[i] FOR NO KEY UPDATE;
        IF FOUND THEN
            v_state := ratchet.task_state(v_task.lease_until, v_task.visible_at,
                                          v_task.attempt, p_now);
            IF v_task.instance IS NOT NULL THEN
                outcome := outcome || 'not_found'::text; v_state := NULL;
            ELSIF p_action = 'Cancel' AND v_state = 'Running' THEN
                UPDATE ratchet.tasks SET cancel_requested = true WHERE id = p_ids[i];
                outcome := outcome || 'requested'::text;
            ELSIF p_action = 'Cancel' THEN
                PERFORM ratchet.task_finish(ARRAY[p_ids[i]], ARRAY['Cancelled'],
                                            ARRAY[NULL::text], ARRAY[NULL::text], p_now);
                outcome := outcome || 'done'::text; v_state := 'Cancelled';
            ELSE
                outcome := outcome || 'refused'::text;
            END IF;
            state := state || v_state;
            CONTINUE;
        END IF;
        SELECT * INTO v_result FROM ratchet.task_results WHERE id = p_ids[i] FOR UPDATE;
        IF NOT FOUND THEN
            outcome := outcome || 'not_found'::text; state := state || NULL::text;
        ELSIF p_action = 'Discard' THEN
            DELETE FROM ratchet.task_results WHERE id = p_ids[i];
            outcome := outcome || 'done'::text; state := state || v_result.state;
        ELSIF p_action = 'Retry' AND v_result.state IN ('Dead', 'Cancelled')
              AND NOT EXISTS (SELECT 1 FROM ratchet.tasks
                              WHERE unique_key = v_result.unique_key) THEN
            DELETE FROM ratchet.task_results WHERE id = p_ids[i];
            -- The same id and the next fence: no lease from its earlier life can write.
            INSERT INTO ratchet.tasks (id, queue, name, input, options, priority, attempt,
                                       visible_at, ready_at, fence, unique_key, metadata,
                                       created_at)
            OVERRIDING SYSTEM VALUE
            VALUES (v_result.id, v_result.queue, v_result.name, v_result.input,
                    v_result.options, v_result.priority, 1, p_now, p_now, v_result.fence + 1,
                    v_result.unique_key, v_result.metadata, v_result.created_at);
            outcome := outcome || 'done'::text; state := state || 'Available'::text;
            v_ready := true;
        ELSE
            outcome := outcome || 'refused'::text; state := state || v_result.state;
        END IF;
    END LOOP;
    IF p_notify AND v_ready THEN
        PERFORM pg_notify('ratchet.work', p_now::text);
    END IF;
END $$;
