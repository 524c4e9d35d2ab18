-- The two calls of the hot path: the poll that claims instances and tasks, and the group
-- commit of turns and task completions. Both are one round trip whatever their size.
--
-- Every function of the hot path (here, tasks.sql, instances.sql, events.sql) carries the
-- same three settings. `force_generic_plan`: PostgreSQL plans a statement again for each
-- call's values while it guesses that may be cheaper, and that planning cost more than the
-- statements themselves (a quarter of the server's CPU at 1,000 tasks/s). `enable_seqscan
-- = off`: a generic plan is made once, often while the tables are nearly empty; every
-- statement has an index made for it, and a sequential scan chosen then would read the
-- whole backlog on every call later. `jit = off`: a generic plan's cost assumes many rows,
-- enough to compile it on every call (30 ms of a 48 ms claim at a 1,000,000 backlog).
--
-- The claims (here, and `task_take` in tasks.sql) also carry `enable_bitmapscan = off`: they
-- read an index in its order and stop at their limit, and on statistics that say the table
-- is empty a bitmap scan looks as cheap, but it fetches every row in the range before the
-- sort and the limit: the whole backlog, or under a held snapshot every dead entry since
-- the cursor (80,000 rows and 5,000 blocks to lock 444 tasks; the drain fell to a third).

-- Up to p_count instances that hold inbox events, in id order after p_after: one entry of
-- inbox_by_instance each, however many events each holds (a skip scan). Ids are never empty,
-- so '' starts at the first.
CREATE FUNCTION ratchet.inbox_walk(p_after text, p_count integer) RETURNS text[]
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF p_count <= 0 THEN
        RETURN '{}';
    END IF;
    RETURN ARRAY(
        WITH RECURSIVE walk(instance, n) AS (
            (SELECT b.instance, 1 FROM ratchet.inbox b WHERE b.instance > p_after
             ORDER BY b.instance LIMIT 1)
            UNION ALL
            SELECT (SELECT b.instance FROM ratchet.inbox b WHERE b.instance > w.instance
                    ORDER BY b.instance LIMIT 1), w.n + 1
            FROM walk w WHERE w.instance IS NOT NULL AND w.n < p_count)
        SELECT w.instance FROM walk w WHERE w.instance IS NOT NULL ORDER BY w.n);
END $$;

-- The instances of the oldest p_window visible inbox events (p_window 0: none), how many
-- events that read, and when the next event not yet visible becomes visible. Questions about
-- the whole inbox: on Citus each node answers for its shards (citus/functions.sql).
CREATE FUNCTION ratchet.inbox_due(
    p_now bigint, p_window integer, OUT ids text[], OUT walked bigint, OUT next_due bigint)
LANGUAGE plpgsql STABLE
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
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
END $$;

-- The processes alive at p_now, and how long each one's expired leases stay its own. A
-- statement on instances takes them as arrays, not by joining the table: on Citus the
-- instances are distributed and the workers a table of the coordinator, which one statement
-- cannot join.
CREATE FUNCTION ratchet.live_workers(p_now bigint, OUT ids text[], OUT stall_graces bigint[])
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(w.id), '{}'), coalesce(array_agg(w.stall_grace), '{}')
    FROM ratchet.workers w WHERE w.alive_until >= p_now;
$$;

-- One poll: leases up to p_limit instances that have visible inbox events and no live lease
-- (runnable by the caller: its names, and its versions once an instance pinned one), found
-- among the instances of the oldest such events, so an idle backlog costs it nothing; ready
-- tasks from each of p_task_queues up to its limit, and says when the next inbox event or
-- delayed task becomes ready, or the next token of a rate-limited queue that has work
-- waiting. (An expired lease is found by the next poll: looking for the next expiry would
-- walk the dead entries finished tasks leave ahead of now.)
--
-- Whatever the backlog, a poll reads a bounded number of inbox entries: the oldest v_window
-- visible events, then, when those gave too few, v_window more instances from p_walk_from,
-- where the caller's last walk stopped (walk_next, NULL when no walk ran).
CREATE FUNCTION ratchet.claim(
    p_now bigint, p_owner text, p_until bigint, p_limit integer,
    p_reg_name text[], p_reg_version integer[], p_task_queues text[], p_task_limits integer[],
    p_task_names text[], p_task_from_queue text[], p_task_from_priority smallint[],
    p_task_from_ready bigint[], p_task_from_id bigint[], p_task_rescan text[] DEFAULT NULL,
    p_walk_from text DEFAULT '',
    OUT i_id text[], OUT i_name text[], OUT i_version integer[], OUT i_execution integer[],
    OUT i_history_len integer[], OUT i_fence bigint[], OUT i_incarnation bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[],
    OUT t_id bigint[], OUT t_fence bigint[], OUT t_name text[], OUT t_input text[],
    OUT t_options text[], OUT t_instance text[], OUT t_execution integer[], OUT t_seq integer[],
    OUT t_attempt integer[], OUT t_queue text[], OUT t_metadata text[],
    OUT c_queue text[], OUT c_priority smallint[], OUT c_ready bigint[], OUT c_id bigint[],
    OUT c_floor_ready bigint[], OUT c_floor_id bigint[],
    OUT next_due bigint, OUT taken_over integer, OUT walk_next text)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET enable_bitmapscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- How many of the oldest visible inbox events a poll reads first, and how many instances
    -- its walk reads after. Bounded whatever the caller's limit: a process with room for
    -- millions of turns reads no more per poll (and its limit times four would overflow).
    v_window integer := least(greatest(p_limit, 0), 10000) * 4 + 256;
    v_walked bigint := 0;
    v_ids text[];
    v_walked_ids text[];
    v_group text[];
    v_live text[];
    v_live_grace bigint[];
    v_tasks_taken_over integer;
    v_inbox_due bigint;
BEGIN
    taken_over := 0;
    i_id := '{}'; i_name := '{}'; i_version := '{}'; i_execution := '{}';
    i_history_len := '{}'; i_fence := '{}'; i_incarnation := '{}'; e_instance := '{}'; e_id := '{}'; e_event := '{}';
    IF p_limit > 0 THEN
        -- Two passes over the instances with visible events. The first reads only the
        -- instances of the oldest v_window events, so a poll costs the same whatever the
        -- backlog of pending instances. The second runs only when that window was full and
        -- still gave fewer than p_limit: its events belonged to instances leased here or
        -- elsewhere (their turn runs, or their holder eagerly takes what arrives), of names
        -- this process does not run, pinned to versions it lacks, or holding many events
        -- each. It walks on over v_window more instances that hold events, in id order from
        -- where this process's last walk stopped, wrapping round to the first: each poll
        -- reads a bounded number of entries, and successive polls reach every instance.
        SELECT * INTO v_live, v_live_grace FROM ratchet.live_workers(p_now);
        FOR v_pass IN 1..2 LOOP
            IF v_pass = 1 THEN
                -- (Their instances are checked below, by key. The next wake-up time comes
                -- along: one look at the inbox for both.)
                SELECT * INTO v_ids, v_walked, v_inbox_due FROM ratchet.inbox_due(p_now, v_window);
            ELSE
                EXIT WHEN v_walked < v_window OR cardinality(i_id) >= p_limit;
                v_ids := ratchet.inbox_walk(coalesce(p_walk_from, ''), v_window);
                IF cardinality(v_ids) < v_window AND coalesce(p_walk_from, '') <> '' THEN
                    v_ids := v_ids || ARRAY(
                        SELECT x.id
                        FROM unnest(ratchet.inbox_walk('', v_window - cardinality(v_ids)))
                             WITH ORDINALITY AS x(id, n)
                        WHERE x.id <= p_walk_from ORDER BY x.n);
                END IF;
                walk_next := v_ids[cardinality(v_ids)];
                -- (`visible_at + 0`: see visible_events. Through the instances, each beside
                -- its events, a group of lock_groups at a time: on Citus each statement goes
                -- to the shard of its group.)
                v_walked_ids := v_ids;
                v_ids := '{}';
                FOR v_group IN SELECT g FROM ratchet.lock_groups(v_walked_ids) AS g LOOP
                    v_ids := v_ids || ARRAY(
                        SELECT i.id FROM ratchet.instances i
                        WHERE i.id = ANY (v_group)
                          AND EXISTS (SELECT 1 FROM ratchet.inbox b
                                      WHERE b.instance = i.id AND b.instance = ANY (v_group)
                                        AND b.visible_at + 0 <= p_now));
                END LOOP;
            END IF;
            -- (An instance the first pass leased fails the lease test in the second.)
            FOR v_group IN SELECT g FROM ratchet.lock_groups(v_ids) AS g LOOP
                EXIT WHEN cardinality(i_id) >= p_limit;
                WITH candidate AS (
                    -- A lease still set is one its holder lost (a turn's commit or a graceful
                    -- stop releases it): counted as taken over.
                    SELECT i.id, i.lease_until IS NOT NULL AS expired
                    FROM ratchet.instances i
                    WHERE i.id = ANY (v_group)
                      AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
                      AND (i.lease_until IS NULL
                           OR (i.lease_until < p_now AND NOT EXISTS (
                               SELECT 1 FROM unnest(v_live, v_live_grace) AS w(id, stall_grace)
                               WHERE w.id = i.lease_owner
                                 AND i.lease_until >= p_now - w.stall_grace)))
                      AND EXISTS (
                          SELECT 1 FROM unnest(p_reg_name, p_reg_version) AS r(name, version)
                          WHERE r.name = i.name AND (i.version IS NULL OR i.version = r.version))
                    ORDER BY i.updated_at
                    LIMIT p_limit - cardinality(i_id)
                    FOR NO KEY UPDATE OF i SKIP LOCKED
                ), leased AS (
                    UPDATE ratchet.instances i
                    SET lease_owner = p_owner, lease_until = p_until, fence = i.fence + 1
                    -- (The group again: on Citus it keeps the statement on one shard.)
                    FROM candidate WHERE i.id = candidate.id AND i.id = ANY (v_group)
                    RETURNING i.id, i.name, i.version, i.execution, i.history_len, i.fence,
                              i.incarnation, candidate.expired)
                -- Each pass adds to what the one before leased.
                SELECT i_id || coalesce(array_agg(id), '{}'), i_name || coalesce(array_agg(name), '{}'),
                       i_version || coalesce(array_agg(version), '{}'),
                       i_execution || coalesce(array_agg(execution), '{}'),
                       i_history_len || coalesce(array_agg(history_len), '{}'),
                       i_fence || coalesce(array_agg(fence), '{}'),
                       i_incarnation || coalesce(array_agg(incarnation), '{}'),
                       taken_over + count(*) FILTER (WHERE expired)
                INTO i_id, i_name, i_version, i_execution, i_history_len, i_fence, i_incarnation,
                     taken_over
                FROM leased;
            END LOOP;
        END LOOP;

        SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(i_id, p_now);

        -- A turn that committed between our look and our lock may have consumed everything:
        -- such an instance has nothing to do, so its lease goes back at once (the store drops
        -- it from the result).
        FOR v_group IN SELECT g FROM ratchet.lock_groups(
                           ARRAY(SELECT x FROM unnest(i_id) AS x WHERE x <> ALL (e_instance))) AS g LOOP
            UPDATE ratchet.instances i SET lease_owner = NULL, lease_until = NULL
            WHERE i.id = ANY (v_group) AND i.lease_owner = p_owner;
        END LOOP;
    END IF;

    SELECT * INTO t_id, t_fence, t_name, t_input, t_options, t_instance, t_execution, t_seq,
                  t_attempt, t_queue, t_metadata, c_queue, c_priority, c_ready, c_id,
                  c_floor_ready, c_floor_id, v_tasks_taken_over
    FROM ratchet.task_take(p_now, p_owner, p_until, coalesce(p_task_queues, '{}'),
                           coalesce(p_task_limits, '{}'), coalesce(p_task_names, '{}'),
                           coalesce(p_task_from_queue, '{}'), coalesce(p_task_from_priority, '{}'),
                           coalesce(p_task_from_ready, '{}'), coalesce(p_task_from_id, '{}'),
                           coalesce(p_task_rescan, '{}'));
    taken_over := taken_over + v_tasks_taken_over;
    -- A claim of tasks alone commits without waiting for its flush to disk (the rest of the
    -- transaction only): losing it in a crash loses a lease, and the task runs again, as
    -- it would after its worker crashed; a completion's commit, flushed after it, makes it
    -- durable. A claim that leased an instance waits as usual: a turn's fence must never
    -- be handed out twice.
    IF cardinality(i_id) = 0 THEN
        PERFORM set_config('synchronous_commit', 'off', true);
    END IF;

    -- (The inbox only for a process that runs orchestrations, and once: the first pass read
    -- it when there was room for turns.)
    IF coalesce(cardinality(p_reg_name), 0) = 0 THEN
        v_inbox_due := NULL;
    ELSIF NOT coalesce(p_limit > 0, false) THEN
        SELECT d.next_due INTO v_inbox_due FROM ratchet.inbox_due(p_now, 0) d;
    END IF;
    SELECT least(v_inbox_due,
                 (SELECT min(ready_at) FROM ratchet.tasks
                  WHERE lease_owner IS NULL AND ready_at > p_now),
                 (SELECT min(p_now + ceil((1 - q.tokens) * 1000 / q.rate_per_second))::bigint
                  FROM ratchet.queues q
                  WHERE q.name = ANY (p_task_queues) AND q.rate_per_second > 0
                    AND q.refilled_at = p_now AND q.tokens < 1 AND NOT q.paused
                    -- A scalar subquery, not EXISTS: the planner may turn EXISTS into a join
                    -- that reads every ready task first (the whole backlog, on every poll)
                    -- instead of looking for one in the few rate-limited queues.
                    AND (SELECT true FROM ratchet.tasks t
                         WHERE t.queue = q.name AND t.ready_at <= p_now
                           AND t.name = ANY (p_task_names) AND NOT t.cancel_requested
                         LIMIT 1)))
    INTO next_due;
END $$;

-- The group commit: the turns and task completions of many instances in one round trip, each
-- item checked against its fence and applied or refused alone. A batch arrives as one array
-- per kind of row, each of a composite type declared here once; `commit_batch` locks what the
-- batch touches and calls the parts below in order, each only when the batch has rows for it.
-- The parts carry no planner settings of their own: they run under commit_batch's.
--
-- A connection plans these statements once, often while the tables are nearly empty, and
-- keeps the plan: a join of a batch's arrays to a table can then become a nested loop
-- comparing every row with every item. So statements find their rows by key with
-- `= ANY (array)` (the array computed first where it is filtered), and test status only
-- negatively so that no status index looks cheaper than the key.

-- A turn: what it checks (its lease, the life of the id, the execution and history length it
-- was claimed at), the instance it leaves, the inbox rows it consumed and the history it
-- appends (one JSON array of events, from position history_start). next_input is the next
-- execution's input when the turn continues as new. started: the position of the start of
-- this batch a first turn ran on; it consumes the start's opening event, and is checked
-- against the fence the create gave. fed: the 1-based positions of the batch's completions
-- whose results the turn ran on before they reached the inbox; it commits only if each of
-- them is applied, and then their results never reach the inbox.
CREATE TYPE ratchet.commit_turn AS (
    instance text, fence bigint, incarnation bigint, execution integer, version integer,
    history_start integer, history_count integer, status text, output text, error text,
    custom_status text, next_input text, consumed bigint[], history text, fed integer[],
    started integer);

-- A top-level instance the batch creates first, for a turn of the batch that ran on its start
-- (`started` in commit_turn: its 1-based position), with the life the caller drew for it.
CREATE TYPE ratchet.commit_start AS (
    id text, name text, input text, if_exists text, started text, incarnation bigint);

-- A task a turn creates (`turn`: its 1-based position in the batch): an activity, with its
-- step, or a standalone task the turn enqueues.
CREATE TYPE ratchet.commit_task AS (
    turn integer, queue text, name text, input text, options text, seq integer,
    visible_at bigint, priority integer, unique_key text, metadata text, standalone boolean);

-- An inbox event a turn writes: a timer for its own instance, the result for its parent, or
-- an opening event of its next execution.
CREATE TYPE ratchet.commit_event AS (turn integer, kind text, event text, visible_at bigint);

-- A sub-orchestration a turn starts, with its start event and the event the parent gets
-- instead when the id is taken.
CREATE TYPE ratchet.commit_child AS (
    turn integer, id text, name text, input text, parent text, parent_seq integer,
    started text, exists_event text);

-- A task completion. outcome: 'Completed', 'Failed', 'Retry', 'Snooze' or 'Cancelled'; an
-- activity's event (kind, event) for its orchestration, a standalone task's output, the
-- error, and the time of a retry or snooze.
CREATE TYPE ratchet.commit_completion AS (
    task bigint, fence bigint, instance text, execution integer, seq integer, attempt integer,
    outcome text, kind text, event text, output text, error text, at bigint);

CREATE FUNCTION ratchet.commit_batch(
    p_now bigint, p_notify boolean,
    p_turns ratchet.commit_turn[], p_tasks ratchet.commit_task[],
    p_timers ratchet.commit_event[], p_parent_events ratchet.commit_event[],
    p_children ratchet.commit_child[], p_next_events ratchet.commit_event[],
    p_completions ratchet.commit_completion[],
    -- eager dispatch: activities leased to the committer up to its capacity, and those of
    -- its cached instances (p_lock) that now have events locked for it
    p_task_owner text, p_task_until bigint, p_task_capacity integer,
    p_lock text[], p_lock_owner text, p_lock_until bigint,
    p_starts ratchet.commit_start[],
    OUT start_outcome text[], OUT start_status text[],
    OUT turn_ok boolean[], OUT completion_ok boolean[],
    OUT task_instance text[], OUT task_seq integer[], OUT task_id bigint[],
    OUT task_fence bigint[],
    OUT l_id text[], OUT l_name text[], OUT l_version integer[], OUT l_execution integer[],
    OUT l_history_len integer[], OUT l_fence bigint[], OUT l_incarnation bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[])
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- Each turn's instance and execution, by position: what the other rows point at.
    v_instances text[] := '{}';
    v_executions integer[] := '{}';
    v_touched text[];
    v_finished text[] := '{}';
    v_continued text[] := '{}';
    v_woken text[] := '{}';
    v_more_woken text[];
    v_fed integer[] := '{}';
    v_results boolean := false;
    v_start_fence bigint[] := '{}';
    v_opened integer[] := '{}';
    v_unleased_tasks boolean := false;
    v_new_children boolean := false;
    v_group text[];
BEGIN
    -- A large batch plans its statements for its own arrays and the tables as they are now:
    -- a plan cached for small batches (or while the tables were small) can cost more than a
    -- fresh one for hundreds of items. Smaller batches keep the cached plans: planning a
    -- batch costs about as much as running it (0.8 ms at 20 fan-outs in flight), and a
    -- fan-out's results count five items each, so a bound of 32 planned up to a fifth of a
    -- loaded runtime's commits of results.
    IF cardinality(p_turns) + cardinality(p_completions) > 256 THEN
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    END IF;
    start_outcome := '{}'; start_status := '{}'; turn_ok := '{}'; completion_ok := '{}';
    task_instance := '{}'; task_seq := '{}'; task_id := '{}'; task_fence := '{}';
    l_id := '{}'; l_name := '{}'; l_version := '{}'; l_execution := '{}';
    l_history_len := '{}'; l_fence := '{}'; l_incarnation := '{}';
    e_instance := '{}'; e_id := '{}'; e_event := '{}';

    -- Starts first, unleased, without their opening events: the turns that ran on them
    -- commit in their place, and only the others get one (after the turns).
    IF cardinality(p_starts) > 0 THEN
        SELECT c.outcome, c.status, c.fence
        INTO start_outcome, start_status, v_start_fence
        FROM ratchet.instance_create(
            p_now, false, NULL, NULL,
            ARRAY(SELECT s.id FROM unnest(p_starts) AS s),
            ARRAY(SELECT s.name FROM unnest(p_starts) AS s),
            ARRAY(SELECT s.input FROM unnest(p_starts) AS s),
            '{}', '{}', '{}', '{}',
            ARRAY(SELECT s.if_exists FROM unnest(p_starts) AS s),
            '{}', ARRAY(SELECT s.incarnation FROM unnest(p_starts) AS s), false) AS c;
    END IF;

    -- Listing the turns' instances takes a statement each; a batch of task completions
    -- alone (most of a task queue's commits) has none to list.
    IF cardinality(p_turns) > 0 THEN
        v_instances := ARRAY(SELECT t.instance FROM unnest(p_turns) AS t);
        v_executions := ARRAY(SELECT t.execution FROM unnest(p_turns) AS t);
    END IF;

    -- Lock every instance the batch touches, in id order: its turns' instances, the
    -- instances its completions reach, those it may lock, and the parents its turns report to.
    v_touched := v_instances || p_lock
                 || ARRAY(SELECT c.instance FROM unnest(p_completions) AS c
                          WHERE c.instance IS NOT NULL);
    IF cardinality(p_parent_events) > 0 THEN
        FOR v_group IN SELECT g FROM ratchet.lock_groups(v_instances) AS g LOOP
            v_touched := v_touched || ARRAY(SELECT parent_instance FROM ratchet.instances
                                            WHERE id = ANY (v_group)
                                              AND parent_instance IS NOT NULL);
        END LOOP;
    END IF;
    PERFORM ratchet.instances_lock(v_touched, false);

    -- Completions first: a turn they fed commits only if each of them was applied. Their
    -- results reach the inbox after the turns, except those a committed turn ran on: those
    -- are in its history already, and a row written to be deleted in the same transaction
    -- would only leave a dead entry at the head of the inbox's index for claims to walk.
    IF cardinality(p_completions) > 0 THEN
        SELECT * INTO completion_ok, v_results
        FROM ratchet.commit_completions(p_now, p_completions);
    END IF;
    IF cardinality(p_turns) > 0 THEN
        SELECT * INTO turn_ok, v_finished, v_continued, v_fed, v_opened
        FROM ratchet.commit_turns(p_now, p_turns, v_instances, p_completions, completion_ok,
                                  p_starts, start_outcome, v_start_fence);
    END IF;
    IF cardinality(p_starts) > cardinality(v_opened) THEN
        -- The instances created for turns that were refused wait for a claim.
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT s.id, 'ExecutionStarted', s.started, p_now
            FROM unnest(p_starts) WITH ORDINALITY AS s
            WHERE start_outcome[s.ordinality] = 'created' AND s.ordinality <> ALL (v_opened)
            ORDER BY s.ordinality
            RETURNING instance)
        SELECT v_woken || coalesce(array_agg(instance), '{}') INTO v_woken FROM inserted;
    END IF;
    IF v_results THEN
        v_woken := ratchet.commit_results(p_completions, completion_ok, v_fed);
    END IF;
    IF cardinality(p_tasks) > 0 THEN
        SELECT * INTO task_instance, task_seq, task_id, task_fence, v_unleased_tasks
        FROM ratchet.commit_scheduled(p_now, v_instances, v_executions, turn_ok,
                                      v_finished || v_continued, p_tasks, p_task_owner,
                                      p_task_until, p_task_capacity);
    END IF;
    IF cardinality(p_timers) + cardinality(p_parent_events) + cardinality(p_children)
       + cardinality(v_continued) > 0 THEN
        SELECT * INTO v_more_woken, v_new_children
        FROM ratchet.commit_events(p_now, p_turns, v_instances, v_executions, turn_ok,
                                   v_finished, v_continued, p_timers, p_parent_events,
                                   p_children, p_next_events);
        v_woken := v_woken || v_more_woken;
    END IF;
    -- Eager dispatch: the committer's cached instances that now have events come back leased.
    IF p_lock_owner IS NOT NULL AND cardinality(p_lock) > 0 THEN
        SELECT * INTO l_id, l_name, l_version, l_execution, l_history_len, l_fence,
                      l_incarnation, e_instance, e_id, e_event
        FROM ratchet.commit_lock_cached(p_now, p_lock, p_lock_owner, p_lock_until);
    END IF;

    -- The notifications leave after the commit, sent by the statement that follows this one
    -- on the connection (`commit_notify`), which reads them from the session: a NOTIFY in
    -- this transaction would hold PostgreSQL's notification lock through the commit's flush
    -- to disk, one notifying commit at a time. `d<id>`: the instance finished; `w<time>`:
    -- work others should look at (not what this batch leased to the committer). Rolled
    -- back with the batch.
    IF p_notify THEN
        PERFORM set_config('ratchet.pending_notify', (
            ARRAY(SELECT 'd' || f FROM unnest(v_finished) AS f)
            || CASE WHEN v_unleased_tasks OR v_new_children
                         OR EXISTS (SELECT 1 FROM unnest(v_woken) AS w WHERE w <> ALL (l_id))
                    THEN ARRAY['w' || p_now] ELSE '{}'::text[] END)::text, false);
    END IF;
END $$;

-- The turns: each commits when its lease is still the live one (fence) of the same life of
-- the id (incarnation), no other turn was written since it was claimed (execution, history
-- length), the instance still runs, it is the first turn of its instance in the batch, and
-- each completion that fed it was applied (p_completion_ok, by position) and carries a result
-- for this execution of its instance. A first turn that ran on a start of the batch commits
-- only if the start created its instance (p_start_outcome and p_start_fence: what the
-- create said and the fence it gave, by position), under that fence. Says which committed,
-- which of those finished their instance or continue as new, and the positions of the
-- completions and the starts the committed turns ran on.
CREATE FUNCTION ratchet.commit_turns(
    p_now bigint, p_turns ratchet.commit_turn[], p_instances text[],
    p_completions ratchet.commit_completion[], p_completion_ok boolean[],
    p_starts ratchet.commit_start[], p_start_outcome text[], p_start_fence bigint[],
    OUT turn_ok boolean[], OUT finished text[], OUT continued text[], OUT fed integer[],
    OUT opened integer[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_consumed bigint[];
    v_committed text[];
    v_group text[];
    -- The turns' instances as they are now, read a group of lock_groups at a time: on Citus
    -- each read, and each write below, names the instances of one shard and goes to its node
    -- alone. On PostgreSQL there is one group.
    v_id text[] := '{}';
    v_fence bigint[] := '{}';
    v_incarnation bigint[] := '{}';
    v_execution integer[] := '{}';
    v_history_len integer[] := '{}';
    v_status text[] := '{}';
BEGIN
    FOR v_group IN SELECT g FROM ratchet.lock_groups(p_instances) AS g LOOP
        SELECT v_id || coalesce(array_agg(i.id), '{}'),
               v_fence || coalesce(array_agg(i.fence), '{}'),
               v_incarnation || coalesce(array_agg(i.incarnation), '{}'),
               v_execution || coalesce(array_agg(i.execution), '{}'),
               v_history_len || coalesce(array_agg(i.history_len), '{}'),
               v_status || coalesce(array_agg(i.status), '{}')
        INTO v_id, v_fence, v_incarnation, v_execution, v_history_len, v_status
        FROM ratchet.instances i WHERE i.id = ANY (v_group);
    END LOOP;
    SELECT coalesce(array_agg(s.ok ORDER BY s.n), '{}'),
           coalesce(array_agg(s.instance) FILTER (
               WHERE s.ok AND s.status IN ('Completed', 'Failed', 'Cancelled', 'Terminated')), '{}'),
           coalesce(array_agg(s.instance) FILTER (WHERE s.ok AND s.next_input IS NOT NULL), '{}')
    INTO turn_ok, finished, continued
    FROM (SELECT t.ordinality AS n, t.instance, t.status, t.next_input,
                 coalesce(i.fence = CASE WHEN t.started IS NULL THEN t.fence
                                         ELSE p_start_fence[t.started] END
                          AND i.incarnation = t.incarnation
                          AND i.execution = t.execution
                          AND i.history_len = t.history_start
                          AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
                          AND t.ordinality = min(t.ordinality) OVER (PARTITION BY t.instance)
                          AND (t.started IS NULL OR (p_start_outcome[t.started] = 'created'
                                                     AND p_starts[t.started].id = t.instance))
                          AND (cardinality(t.fed) = 0 OR (
                              SELECT bool_and(coalesce(p_completion_ok[f], false)
                                              AND p_completions[f].instance = t.instance
                                              AND p_completions[f].execution = t.execution
                                              AND p_completions[f].event IS NOT NULL)
                              FROM unnest(t.fed) AS f)),
                          false) AS ok
          FROM unnest(p_turns) WITH ORDINALITY AS t
          LEFT JOIN unnest(v_id, v_fence, v_incarnation, v_execution, v_history_len, v_status)
                    AS i(id, fence, incarnation, execution, history_len, status)
                    ON i.id = t.instance) s;
    SELECT ARRAY(SELECT f FROM unnest(p_turns) WITH ORDINALITY AS t, unnest(t.fed) AS f
                 WHERE turn_ok[t.ordinality]),
           ARRAY(SELECT t.started FROM unnest(p_turns) WITH ORDINALITY AS t
                 WHERE turn_ok[t.ordinality] AND t.started IS NOT NULL),
           ARRAY(SELECT c.id FROM unnest(p_turns) WITH ORDINALITY AS t, unnest(t.consumed) AS c(id)
                 WHERE turn_ok[t.ordinality])
    INTO fed, opened, v_consumed;

    -- What each committed turn consumed leaves the inbox (a turn that ran only on results
    -- and starts of this batch consumed no row), its history is appended, and its instance
    -- takes the state the turn left, unleased.
    v_committed := ARRAY(SELECT t.instance FROM unnest(p_turns) WITH ORDINALITY AS t
                         WHERE turn_ok[t.ordinality]);
    FOR v_group IN SELECT g FROM ratchet.lock_groups(v_committed) AS g LOOP
        IF cardinality(v_consumed) > 0 THEN
            DELETE FROM ratchet.inbox b
            WHERE b.instance = ANY (v_group) AND b.id = ANY (v_consumed);
        END IF;

        INSERT INTO ratchet.history (instance, execution, seq, events)
        SELECT t.instance, t.execution, t.history_start, t.history
        FROM unnest(p_turns) WITH ORDINALITY AS t
        WHERE turn_ok[t.ordinality] AND t.history IS NOT NULL AND t.instance = ANY (v_group);

        UPDATE ratchet.instances i SET
            status = t.status,
            version = coalesce(i.version, t.version),
            output = t.output,
            error = t.error,
            custom_status = coalesce(t.custom_status, i.custom_status),
            history_len = i.history_len + t.history_count,
            updated_at = p_now,
            finished_at = CASE WHEN t.status IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
                               THEN p_now END,
            lease_owner = NULL,
            lease_until = NULL
        FROM unnest(p_turns) WITH ORDINALITY AS t
        WHERE turn_ok[t.ordinality] AND i.id = t.instance AND i.id = ANY (v_group);
    END LOOP;

    -- Finished instances wait for nothing more.
    IF cardinality(finished) > 0 THEN
        FOR v_group IN SELECT g FROM ratchet.lock_groups(finished) AS g LOOP
            DELETE FROM ratchet.inbox WHERE instance = ANY (v_group);
        END LOOP;
        DELETE FROM ratchet.tasks WHERE instance = ANY (finished);
    END IF;
END $$;

-- The tasks committed turns create: activities (the first p_task_capacity leased to the
-- committer) and standalone tasks for their queues (one whose unique key is held is not
-- enqueued). Ready no earlier than now: claims look for fresh work only a little behind the
-- newest they took. Says which activities were leased, and whether any task is ready for
-- others. p_instances and p_executions are the turns', by position.
CREATE FUNCTION ratchet.commit_scheduled(
    p_now bigint, p_instances text[], p_executions integer[], p_turn_ok boolean[],
    p_ended text[], p_tasks ratchet.commit_task[], p_task_owner text, p_task_until bigint,
    p_task_capacity integer,
    OUT task_instance text[], OUT task_seq integer[], OUT task_id bigint[],
    OUT task_fence bigint[], OUT unleased boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    INSERT INTO ratchet.queue_priorities (queue, priority)
    SELECT DISTINCT k.queue, k.priority FROM unnest(p_tasks) AS k
    ON CONFLICT DO NOTHING;
    WITH scheduled AS (
        SELECT k.*, row_number() OVER (PARTITION BY k.standalone ORDER BY k.ordinality) AS rank
        FROM unnest(p_tasks) WITH ORDINALITY AS k
        -- A standalone task is an effect the turn recorded: it commits whatever the turn's
        -- outcome. Activities of an execution that ended (finished or continued as new) wait
        -- for nothing.
        WHERE p_turn_ok[k.turn] AND (k.standalone OR p_instances[k.turn] <> ALL (p_ended))
    ), inserted AS (
        INSERT INTO ratchet.tasks (queue, name, input, options, instance, execution, seq,
                                   priority, visible_at, ready_at, lease_owner, lease_until,
                                   fence, unique_key, metadata, created_at)
        SELECT s.queue, s.name, s.input, s.options,
               CASE WHEN s.standalone THEN NULL ELSE p_instances[s.turn] END,
               CASE WHEN s.standalone THEN NULL ELSE p_executions[s.turn] END,
               CASE WHEN s.standalone THEN NULL ELSE s.seq END,
               s.priority, s.visible_at,
               CASE WHEN s.leased THEN p_task_until ELSE greatest(s.visible_at, p_now) END,
               CASE WHEN s.leased THEN p_task_owner END,
               CASE WHEN s.leased THEN p_task_until END,
               CASE WHEN s.leased THEN 1 ELSE 0 END,
               s.unique_key, s.metadata, p_now
        FROM (SELECT scheduled.*,
                     (NOT standalone AND p_task_owner IS NOT NULL
                      AND rank <= p_task_capacity) AS leased
              FROM scheduled) s
        ORDER BY s.ordinality
        ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
        RETURNING id, fence, instance, seq, lease_owner, visible_at)
    -- The arrays line up because one pass fills them all (a sort for each aggregate's own
    -- ORDER BY cost more to set up, on every call, than the rest of the statement).
    SELECT coalesce(array_agg(instance) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(seq) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(fence) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(bool_or(lease_owner IS NULL AND visible_at <= p_now), false)
    INTO task_instance, task_seq, task_id, task_fence, unleased
    FROM (SELECT * FROM inserted ORDER BY id) AS i;
END $$;

-- The inbox events committed turns write: timers, results for parents, sub-orchestrations,
-- and the opening events of executions that continue as new. Says which instances have new
-- work, and whether children were started.
CREATE FUNCTION ratchet.commit_events(
    p_now bigint, p_turns ratchet.commit_turn[], p_instances text[], p_executions integer[],
    p_turn_ok boolean[], p_finished text[], p_continued text[],
    p_timers ratchet.commit_event[], p_parent_events ratchet.commit_event[],
    p_children ratchet.commit_child[], p_next_events ratchet.commit_event[],
    OUT woken text[], OUT new_children boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_more text[];
    v_group text[];
    v_children text[];
    v_child text[] := '{}';
    v_child_parent text[] := '{}';
    v_child_parent_execution integer[] := '{}';
    v_parents text[];
    v_parent_executions integer[];
    v_parent_items bigint[];
    v_running text[];
    v_running_executions integer[];
BEGIN
    woken := '{}'; new_children := false;
    IF cardinality(p_timers) > 0 THEN
        -- Timers of running turns, visible at their time.
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT p_instances[b.turn], b.kind, b.event, b.visible_at
            FROM unnest(p_timers) WITH ORDINALITY AS b
            WHERE p_turn_ok[b.turn] AND p_instances[b.turn] <> ALL (p_finished)
              AND p_instances[b.turn] <> ALL (p_continued)
            ORDER BY b.ordinality
            RETURNING instance, visible_at)
        SELECT coalesce(array_agg(instance) FILTER (WHERE visible_at <= p_now), '{}')
        INTO v_more FROM inserted;
        woken := woken || v_more;
    END IF;

    IF cardinality(p_parent_events) > 0 THEN
        -- Results for parents, only while the parent runs the execution that started the
        -- child. The children's rows are read apart from their parents': on Citus a child and
        -- its parent may live on different shards, which one statement cannot join.
        -- Each read and write names the instances of one shard (lock_groups).
        v_children := ARRAY(SELECT p_instances[d.turn] FROM unnest(p_parent_events) AS d
                            WHERE p_turn_ok[d.turn]);
        FOR v_group IN SELECT g FROM ratchet.lock_groups(v_children) AS g LOOP
            SELECT v_child || coalesce(array_agg(c.id), '{}'),
                   v_child_parent || coalesce(array_agg(c.parent_instance), '{}'),
                   v_child_parent_execution || coalesce(array_agg(c.parent_execution), '{}')
            INTO v_child, v_child_parent, v_child_parent_execution
            FROM ratchet.instances c
            WHERE c.id = ANY (v_group) AND c.parent_instance IS NOT NULL;
        END LOOP;
        SELECT coalesce(array_agg(c.parent ORDER BY d.ordinality), '{}'),
               coalesce(array_agg(c.execution ORDER BY d.ordinality), '{}'),
               coalesce(array_agg(d.ordinality ORDER BY d.ordinality), '{}')
        INTO v_parents, v_parent_executions, v_parent_items
        FROM unnest(p_parent_events) WITH ORDINALITY AS d
        JOIN unnest(v_child, v_child_parent, v_child_parent_execution) AS c(id, parent, execution)
             ON c.id = p_instances[d.turn]
        WHERE p_turn_ok[d.turn];
        SELECT * INTO v_running, v_running_executions
        FROM ratchet.running_executions(v_parents);
        FOR v_group IN SELECT g FROM ratchet.lock_groups(v_running) AS g LOOP
            WITH inserted AS (
                INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
                SELECT x.parent, p_parent_events[x.item].kind, p_parent_events[x.item].event,
                       p_parent_events[x.item].visible_at
                FROM unnest(v_parents, v_parent_executions, v_parent_items)
                     WITH ORDINALITY AS x(parent, execution, item, n)
                JOIN unnest(v_running, v_running_executions) AS p(id, execution)
                     ON p.id = x.parent AND p.execution = x.execution
                WHERE x.parent = ANY (v_group)
                ORDER BY x.n
                RETURNING instance)
            SELECT woken || coalesce(array_agg(instance), '{}') INTO woken FROM inserted;
        END LOOP;
    END IF;

    IF cardinality(p_children) > 0 THEN
        -- Sub-orchestrations. A child id that is taken fails the parent's step instead of the
        -- whole turn.
        WITH child AS (
            SELECT n.*, p_instances[n.turn] AS parent_instance,
                   p_executions[n.turn] AS parent_execution,
                   row_number() OVER (PARTITION BY n.id ORDER BY n.ordinality) AS nth
            FROM unnest(p_children) WITH ORDINALITY AS n
            WHERE p_turn_ok[n.turn]
        ), created AS (
            INSERT INTO ratchet.instances (id, name, status, execution, input, parent,
                parent_instance, parent_execution, parent_seq, created_at, updated_at)
            SELECT id, name, 'Pending', 0, input, parent, parent_instance, parent_execution,
                   parent_seq, p_now, p_now
            FROM child WHERE nth = 1
            ON CONFLICT (id) DO NOTHING
            RETURNING id
        ), inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT CASE WHEN c.id IS NULL THEN k.parent_instance ELSE k.id END,
                   CASE WHEN c.id IS NULL THEN 'SubOrchestrationFailed' ELSE 'ExecutionStarted' END,
                   CASE WHEN c.id IS NULL THEN k.exists_event ELSE k.started END,
                   p_now
            FROM child k LEFT JOIN created c ON c.id = k.id AND k.nth = 1
            ORDER BY k.ordinality
            RETURNING instance, kind)
        SELECT coalesce(array_agg(instance) FILTER (WHERE kind <> 'ExecutionStarted'), '{}'),
               coalesce(bool_or(kind = 'ExecutionStarted'), false)
        INTO v_more, new_children FROM inserted;
        woken := woken || v_more;
    END IF;

    -- Continue as new: what the old execution waited for goes (signals and cancellation stay),
    -- and the next execution opens with its start and the carried-over signals.
    IF cardinality(p_continued) > 0 THEN
        FOR v_group IN SELECT g FROM ratchet.lock_groups(p_continued) AS g LOOP
            DELETE FROM ratchet.inbox
            WHERE instance = ANY (v_group)
              AND kind NOT IN ('SignalReceived', 'CancelRequested');
            UPDATE ratchet.instances i
            SET execution = i.execution + 1, history_len = 0, input = t.next_input,
                status = 'ContinuedAsNew', updated_at = p_now
            FROM unnest(p_turns) WITH ORDINALITY AS t
            WHERE p_turn_ok[t.ordinality] AND t.next_input IS NOT NULL AND i.id = t.instance
              AND i.id = ANY (v_group);
        END LOOP;
        DELETE FROM ratchet.tasks WHERE instance = ANY (p_continued);
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        SELECT p_instances[s.turn], s.kind, s.event, p_now
        FROM unnest(p_next_events) WITH ORDINALITY AS s
        WHERE p_turn_ok[s.turn]
        ORDER BY s.ordinality;
        woken := woken || p_continued;
    END IF;
END $$;

-- Task completions: the rows are locked, then each is applied only under its live fence, for
-- the step (or no step) and attempt it claims, once per batch. A retry makes the next attempt
-- claimable at its backoff time; a snooze, the same attempt at its time; either moves the
-- fence on. A standalone task's final outcome moves it to its results; an activity's leaves
-- the table (its result reaches its orchestration in commit_results). Says which were
-- applied, and whether any of those carries a result.
CREATE FUNCTION ratchet.commit_completions(
    p_now bigint, p_completions ratchet.commit_completion[],
    OUT completion_ok boolean[], OUT results boolean)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_tasks bigint[] := ARRAY(SELECT c.task FROM unnest(p_completions) AS c);
    v_locked_ids bigint[];
    v_locked_rows tid[];
    v_rescheduled boolean;
    v_standalone boolean;
BEGIN
    -- The rows are locked in id order, and where each is kept: the delete below goes straight
    -- to them (a TID scan). Found by id there, it could be planned, with statistics taken
    -- while the table was nearly empty, as a walk of the whole tasks_ready index, whose
    -- last column is the id (64 ms a batch at 1,000 orchestrations in flight).
    SELECT array_agg(l.id), array_agg(l.ctid) INTO v_locked_ids, v_locked_rows
    FROM (SELECT id, ctid FROM ratchet.tasks WHERE id = ANY (v_tasks) ORDER BY id
          FOR NO KEY UPDATE) l;
    WITH verdict AS (
        SELECT c.ordinality AS n, c.instance, c.outcome, c.event IS NOT NULL AS has_result,
               t.id IS NOT NULL
               AND c.ordinality = min(c.ordinality) OVER (PARTITION BY c.task) AS ok
        FROM unnest(p_completions) WITH ORDINALITY AS c
        -- A probe by key for each completion (LATERAL with a LIMIT is never flattened into
        -- a join): as a plain join it was planned, on statistics of an empty table, as a
        -- merge join over the whole primary key.
        LEFT JOIN LATERAL (
            SELECT t.id FROM ratchet.tasks t
            WHERE t.id = c.task AND t.fence = c.fence
              AND t.instance IS NOT DISTINCT FROM c.instance
              AND t.execution IS NOT DISTINCT FROM c.execution
              AND t.seq IS NOT DISTINCT FROM c.seq AND t.attempt = c.attempt
            LIMIT 1) t ON true)
    SELECT coalesce(array_agg(v.ok ORDER BY v.n), '{}'),
           coalesce(bool_or(v.ok AND v.outcome IN ('Retry', 'Snooze')), false),
           coalesce(bool_or(v.ok AND v.instance IS NULL
                            AND v.outcome IN ('Completed', 'Failed', 'Cancelled')), false),
           coalesce(bool_or(v.ok AND v.instance IS NOT NULL AND v.has_result), false)
    INTO completion_ok, v_rescheduled, v_standalone, results
    FROM verdict v;

    IF v_rescheduled THEN
        UPDATE ratchet.tasks t
        SET attempt = t.attempt + CASE WHEN c.outcome = 'Retry' THEN 1 ELSE 0 END,
            visible_at = c.at, ready_at = c.at, last_error = coalesce(c.error, t.last_error),
            lease_owner = NULL, lease_until = NULL, fence = t.fence + 1
        FROM unnest(p_completions) WITH ORDINALITY AS c
        WHERE completion_ok[c.ordinality] AND c.outcome IN ('Retry', 'Snooze')
          AND t.id = c.task AND t.id = ANY (v_tasks);
    END IF;

    IF v_standalone THEN
        PERFORM ratchet.task_finish(
            array_agg(c.task),
            array_agg(CASE c.outcome WHEN 'Failed' THEN 'Dead' ELSE c.outcome END),
            array_agg(c.output), array_agg(c.error), p_now)
        FROM unnest(p_completions) WITH ORDINALITY AS c
        WHERE completion_ok[c.ordinality] AND c.instance IS NULL
          AND c.outcome IN ('Completed', 'Failed', 'Cancelled');
    END IF;

    IF results THEN
        DELETE FROM ratchet.tasks t
        WHERE t.ctid = ANY (ARRAY(
            SELECT l.place FROM unnest(v_locked_ids, v_locked_rows) AS l(id, place)
            WHERE l.id = ANY (ARRAY(SELECT c.task
                                    FROM unnest(p_completions) WITH ORDINALITY AS c
                                    WHERE completion_ok[c.ordinality] AND c.instance IS NOT NULL
                                      AND c.event IS NOT NULL))));
    END IF;
END $$;

-- Those of p_ids that still run, with the execution each runs, read a group of lock_groups
-- at a time (on Citus each read goes to one shard's node): where results for instances and
-- for parents go.
CREATE FUNCTION ratchet.running_executions(p_ids text[], OUT ids text[], OUT executions integer[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_group text[];
BEGIN
    ids := '{}'; executions := '{}';
    FOR v_group IN SELECT g FROM ratchet.lock_groups(p_ids) AS g LOOP
        SELECT ids || coalesce(array_agg(i.id), '{}'),
               executions || coalesce(array_agg(i.execution), '{}')
        INTO ids, executions
        FROM ratchet.instances i
        WHERE i.id = ANY (v_group)
          AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated');
    END LOOP;
END $$;

-- The results of applied activity completions, for the instances that still run the
-- execution they belong to, except those a committed turn ran on (p_fed, by position): in
-- the inbox, visible at once. Says which instances have new events.
--
-- The running executions are read by key first, a group of lock_groups at a time, and the rows
-- inserted from the batch alone: on Citus a statement that joined the batch to the instances
-- went to every shard, where one that names the instances of one shard goes to its node only.
CREATE FUNCTION ratchet.commit_results(
    p_completions ratchet.commit_completion[], p_completion_ok boolean[], p_fed integer[],
    OUT woken text[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_wanted text[] := ARRAY(
        SELECT c.instance FROM unnest(p_completions) WITH ORDINALITY AS c
        WHERE p_completion_ok[c.ordinality] AND c.event IS NOT NULL
          AND c.ordinality <> ALL (p_fed));
    v_running text[];
    v_executions integer[];
    v_group text[];
BEGIN
    woken := '{}';
    IF cardinality(v_wanted) = 0 THEN
        RETURN;
    END IF;
    SELECT * INTO v_running, v_executions FROM ratchet.running_executions(v_wanted);
    FOR v_group IN SELECT g FROM ratchet.lock_groups(v_running) AS g LOOP
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT c.instance, c.kind, c.event, 0
            FROM unnest(p_completions) WITH ORDINALITY AS c
            -- (One row each: an instance is read once.)
            JOIN unnest(v_running, v_executions) AS r(id, execution)
                 ON r.id = c.instance AND r.execution = c.execution
            WHERE p_completion_ok[c.ordinality] AND c.event IS NOT NULL
              AND c.ordinality <> ALL (p_fed) AND c.instance = ANY (v_group)
            ORDER BY c.ordinality
            RETURNING instance)
        SELECT woken || coalesce(array_agg(instance), '{}') INTO woken FROM inserted;
    END LOOP;
END $$;

-- Eager dispatch: those of the committer's cached instances that now have visible events,
-- leased to it with their events.
CREATE FUNCTION ratchet.commit_lock_cached(
    p_now bigint, p_lock text[], p_owner text, p_until bigint,
    OUT l_id text[], OUT l_name text[], OUT l_version integer[], OUT l_execution integer[],
    OUT l_history_len integer[], OUT l_fence bigint[], OUT l_incarnation bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[])
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_ready text[] := '{}';
    v_group text[];
    v_live text[];
    v_live_grace bigint[];
BEGIN
    l_id := '{}'; l_name := '{}'; l_version := '{}'; l_execution := '{}';
    l_history_len := '{}'; l_fence := '{}'; l_incarnation := '{}';
    e_instance := '{}'; e_id := '{}'; e_event := '{}';
    -- (`visible_at + 0`: see visible_events. A group of lock_groups at a time: on Citus each
    -- statement goes to one shard's node.)
    FOR v_group IN SELECT g FROM ratchet.lock_groups(p_lock) AS g LOOP
        v_ready := v_ready || ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                                    WHERE b.instance = ANY (v_group)
                                      AND b.visible_at + 0 <= p_now);
    END LOOP;
    IF cardinality(v_ready) = 0 THEN
        RETURN;
    END IF;
    SELECT * INTO v_live, v_live_grace FROM ratchet.live_workers(p_now);
    FOR v_group IN SELECT g FROM ratchet.lock_groups(v_ready) AS g LOOP
        WITH leased AS (
            UPDATE ratchet.instances i
            SET lease_owner = p_owner, lease_until = p_until, fence = i.fence + 1
            WHERE i.id = ANY (v_group)
              AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
              AND (i.lease_until IS NULL
                   OR (i.lease_until < p_now AND NOT EXISTS (
                       SELECT 1 FROM unnest(v_live, v_live_grace) AS w(id, stall_grace)
                       WHERE w.id = i.lease_owner AND i.lease_until >= p_now - w.stall_grace)))
            RETURNING i.id, i.name, i.version, i.execution, i.history_len, i.fence,
                      i.incarnation)
        SELECT l_id || coalesce(array_agg(id), '{}'), l_name || coalesce(array_agg(name), '{}'),
               l_version || coalesce(array_agg(version), '{}'),
               l_execution || coalesce(array_agg(execution), '{}'),
               l_history_len || coalesce(array_agg(history_len), '{}'),
               l_fence || coalesce(array_agg(fence), '{}'),
               l_incarnation || coalesce(array_agg(incarnation), '{}')
        INTO l_id, l_name, l_version, l_execution, l_history_len, l_fence, l_incarnation
        FROM leased;
    END LOOP;
    SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(l_id, p_now);
END $$;
