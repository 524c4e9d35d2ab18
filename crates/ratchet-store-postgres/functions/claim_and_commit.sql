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

-- One poll: leases up to p_limit instances that have visible inbox events and no live lease
-- (runnable by the caller: its names, and its versions once an instance pinned one), found
-- among the instances of the oldest such events, so an idle backlog costs it nothing; ready
-- tasks from each of p_task_queues up to its limit, and says when the next inbox event or
-- delayed task becomes ready, or the next token of a rate-limited queue that has work
-- waiting. (An expired lease is found by the next poll: looking for the next expiry would
-- walk the dead entries finished tasks leave ahead of now.)
CREATE FUNCTION ratchet.claim(
    p_now bigint, p_owner text, p_until bigint, p_limit integer,
    p_reg_name text[], p_reg_version integer[], p_task_queues text[], p_task_limits integer[],
    p_task_names text[], p_task_from_queue text[], p_task_from_priority smallint[],
    p_task_from_ready bigint[], p_task_from_id bigint[],
    OUT i_id text[], OUT i_name text[], OUT i_version integer[], OUT i_execution integer[],
    OUT i_history_len integer[], OUT i_fence bigint[], OUT i_incarnation bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[],
    OUT t_id bigint[], OUT t_fence bigint[], OUT t_name text[], OUT t_input text[],
    OUT t_options text[], OUT t_instance text[], OUT t_execution integer[], OUT t_seq integer[],
    OUT t_attempt integer[], OUT t_queue text[], OUT t_metadata text[],
    OUT c_queue text[], OUT c_priority smallint[], OUT c_ready bigint[], OUT c_id bigint[],
    OUT next_due bigint, OUT taken_over integer)
LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    -- How many of the oldest visible inbox events a poll reads first.
    v_window integer := greatest(p_limit, 0) * 4 + 256;
    v_walked bigint := 0;
    v_ids text[];
    v_tasks_taken_over integer;
BEGIN
    taken_over := 0;
    i_id := '{}'; i_name := '{}'; i_version := '{}'; i_execution := '{}';
    i_history_len := '{}'; i_fence := '{}'; i_incarnation := '{}'; e_instance := '{}'; e_id := '{}'; e_event := '{}';
    IF p_limit > 0 THEN
        -- Two passes over the instances with visible events. The first reads only the
        -- instances of the oldest v_window events it may claim, so a poll costs the same
        -- whatever the backlog of pending instances. The second reads every visible event,
        -- and runs only when that window was full and still gave fewer than p_limit (other
        -- processes locked them first, or their versions are not registered here).
        FOR v_pass IN 1..2 LOOP
            IF v_pass = 1 THEN
                -- Events of instances leased here or elsewhere (their turn runs, or their
                -- holder eagerly takes what arrives) and of names this process does not run
                -- are passed over: however many there are, the window holds only instances
                -- it may claim.
                SELECT coalesce(array_agg(DISTINCT w.instance), '{}'), count(*)
                INTO v_ids, v_walked
                FROM (SELECT b.instance
                      FROM ratchet.inbox b JOIN ratchet.instances i ON i.id = b.instance
                      WHERE b.visible_at <= p_now
                        AND (i.lease_until IS NULL OR i.lease_until < p_now)
                        AND i.name = ANY (p_reg_name)
                      ORDER BY b.visible_at LIMIT v_window) w;
            ELSE
                EXIT WHEN v_walked < v_window OR cardinality(i_id) >= p_limit;
                v_ids := ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                               WHERE b.visible_at <= p_now);
            END IF;
            -- (An instance the first pass leased fails the lease test in the second.)
            WITH candidate AS (
                -- A lease still set is one its holder lost (a turn's commit or a graceful
                -- stop releases it): counted as taken over.
                SELECT i.id, i.lease_until IS NOT NULL AS expired
                FROM ratchet.instances i
                WHERE i.id = ANY (v_ids)
                  AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
                  AND (i.lease_until IS NULL
                       OR (i.lease_until < p_now AND NOT EXISTS (
                           SELECT 1 FROM ratchet.workers w
                           WHERE w.id = i.lease_owner AND w.alive_until >= p_now
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
                FROM candidate WHERE i.id = candidate.id
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

        SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(i_id, p_now);

        -- A turn that committed between our look and our lock may have consumed everything:
        -- such an instance has nothing to do, so its lease goes back at once (the store drops
        -- it from the result).
        UPDATE ratchet.instances i SET lease_owner = NULL, lease_until = NULL
        WHERE i.id = ANY (i_id) AND i.id <> ALL (e_instance) AND i.lease_owner = p_owner;
    END IF;

    SELECT * INTO t_id, t_fence, t_name, t_input, t_options, t_instance, t_execution, t_seq,
                  t_attempt, t_queue, t_metadata, c_queue, c_priority, c_ready, c_id,
                  v_tasks_taken_over
    FROM ratchet.task_take(p_now, p_owner, p_until, coalesce(p_task_queues, '{}'),
                           coalesce(p_task_limits, '{}'), coalesce(p_task_names, '{}'),
                           coalesce(p_task_from_queue, '{}'), coalesce(p_task_from_priority, '{}'),
                           coalesce(p_task_from_ready, '{}'), coalesce(p_task_from_id, '{}'));
    taken_over := taken_over + v_tasks_taken_over;

    SELECT least((SELECT min(visible_at) FROM ratchet.inbox WHERE visible_at > p_now),
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

-- The group commit: turn commits and task completions of many instances, each item checked
-- against its fence and applied or refused alone; scheduled activities leased to the
-- committer up to its capacity; cached instances with new events locked for it.
CREATE FUNCTION ratchet.commit_batch(
    p_now bigint, p_notify boolean,
    -- turns
    t_instance text[], t_fence bigint[], t_execution integer[], t_version integer[],
    t_history_start integer[], t_history_count integer[], t_status text[], t_output text[],
    t_error text[], t_custom_status text[], t_next_input text[],
    -- inbox rows each turn consumed
    c_turn integer[], c_id bigint[],
    -- history each turn appends: one JSON array of events per turn, from position h_seq
    h_turn integer[], h_seq integer[], h_events text[],
    -- tasks each turn creates: activities (with their step) and standalone tasks it enqueues
    k_turn integer[], k_queue text[], k_name text[], k_input text[], k_options text[],
    k_seq integer[], k_visible_at bigint[], k_priority integer[], k_unique_key text[],
    k_metadata text[], k_standalone boolean[],
    -- events for the turn's own instance (timers)
    b_turn integer[], b_kind text[], b_event text[], b_visible_at bigint[],
    -- events for the turn's parent (a finished sub-orchestration's result)
    d_turn integer[], d_kind text[], d_event text[], d_visible_at bigint[],
    -- sub-orchestrations each turn starts, with their start event and the event the parent
    -- gets instead when the id is taken
    n_turn integer[], n_id text[], n_name text[], n_input text[], n_parent text[],
    n_parent_seq integer[], n_started text[], n_exists text[],
    -- the next execution's opening events, for turns that continue as new
    s_turn integer[], s_kind text[], s_event text[],
    -- task completions: outcome 'Completed', 'Failed', 'Retry', 'Snooze' or 'Cancelled';
    -- an activity's event for its orchestration, a standalone task's output, the error, and
    -- the time of a retry or snooze
    p_task bigint[], p_fence bigint[], p_instance text[], p_execution integer[],
    p_seq integer[], p_attempt integer[], p_outcome text[], p_kind text[], p_event text[],
    p_output text[], p_error text[], p_at bigint[],
    -- eager dispatch
    p_task_owner text, p_task_until bigint, p_task_capacity integer,
    p_lock text[], p_lock_owner text, p_lock_until bigint,
    -- the life of each turn's instance id (after the others: parameters are named)
    t_incarnation bigint[],
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
    v_touched text[];
    v_finished text[];
    v_continued text[];
    v_woken text[] := '{}';
    v_unleased_tasks boolean := false;
    v_new_children boolean := false;
BEGIN
    -- A large batch plans its statements for its own arrays and the tables as they are now:
    -- a plan cached for small batches (or while the tables were small) can cost more than a
    -- fresh one for hundreds of items. Small batches keep the cached plans, saving planning.
    IF cardinality(t_instance) + cardinality(p_task) > 32 THEN
        PERFORM set_config('plan_cache_mode', 'force_custom_plan', true);
    END IF;
    -- Each part runs only when the batch has items for it: a batch of completions alone
    -- skips every statement about turns, and the other way round.
    turn_ok := '{}'; completion_ok := '{}'; v_finished := '{}'; v_continued := '{}';
    task_instance := '{}'; task_seq := '{}'; task_id := '{}'; task_fence := '{}';
    l_id := '{}'; l_name := '{}'; l_version := '{}'; l_execution := '{}';
    l_history_len := '{}'; l_fence := '{}'; l_incarnation := '{}';
    e_instance := '{}'; e_id := '{}'; e_event := '{}';

    -- A connection plans these statements once, often while the tables are nearly empty,
    -- and keeps the plan: a join of a batch's arrays to a table can then become a nested
    -- loop comparing every row with every item. So statements find their rows by key with
    -- `= ANY (array)` (the array computed first where it is filtered), and test status only
    -- negatively so that no status index looks cheaper than the key.
    -- Lock every instance the batch touches, in id order: its turns' instances, the
    -- instances its completions reach, those it may lock, and the parents its turns report to.
    v_touched := t_instance || p_instance || p_lock;
    IF cardinality(d_turn) > 0 THEN
        v_touched := v_touched || ARRAY(SELECT parent_instance FROM ratchet.instances
                                        WHERE id = ANY (t_instance)
                                          AND parent_instance IS NOT NULL);
    END IF;
    IF cardinality(v_touched) > 0 THEN
        PERFORM 1 FROM ratchet.instances WHERE id = ANY (v_touched) ORDER BY id
        FOR NO KEY UPDATE;
    END IF;

    IF cardinality(t_instance) > 0 THEN
        -- A turn commits when its lease is still the live one (fence) of the same life of the
        -- id (incarnation), no other turn was written since it was claimed (execution, history
        -- length), the instance still runs, and it is the first turn of its instance in this batch.
        SELECT coalesce(array_agg(s.ok ORDER BY s.n), '{}') INTO turn_ok FROM (
            SELECT t.n,
                   coalesce(i.fence = t.fence AND i.incarnation = t.incarnation
                            AND i.execution = t.execution
                            AND i.history_len = t.start
                            AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
                            AND t.n = min(t.n) OVER (PARTITION BY t.instance), false) AS ok
            FROM unnest(t_instance, t_fence, t_incarnation, t_execution, t_history_start)
                 WITH ORDINALITY AS t(instance, fence, incarnation, execution, start, n)
            LEFT JOIN ratchet.instances i ON i.id = t.instance AND i.id = ANY (t_instance)) s;

        SELECT coalesce(array_agg(t.instance) FILTER (
                   WHERE t.status IN ('Completed', 'Failed', 'Cancelled', 'Terminated')), '{}'),
               coalesce(array_agg(t.instance) FILTER (WHERE t.next_input IS NOT NULL), '{}')
        INTO v_finished, v_continued
        FROM unnest(t_instance, t_status, t_next_input) WITH ORDINALITY AS t(instance, status, next_input, n)
        WHERE turn_ok[t.n];

        DELETE FROM ratchet.inbox b
        WHERE b.instance = ANY (ARRAY(SELECT t_instance[c.turn] FROM unnest(c_turn) AS c(turn)
                                      WHERE turn_ok[c.turn]))
          AND b.id = ANY (ARRAY(SELECT c.id FROM unnest(c_turn, c_id) AS c(turn, id)
                                WHERE turn_ok[c.turn]));

        INSERT INTO ratchet.history (instance, execution, seq, events)
        SELECT t_instance[h.turn], t_execution[h.turn], h.seq, h.events
        FROM unnest(h_turn, h_seq, h_events) AS h(turn, seq, events)
        WHERE turn_ok[h.turn];

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
        FROM unnest(t_instance, t_version, t_history_count, t_status, t_output, t_error,
                    t_custom_status)
             WITH ORDINALITY AS t(instance, version, history_count, status, output, error,
                                  custom_status, n)
        WHERE turn_ok[t.n] AND i.id = t.instance AND i.id = ANY (t_instance);

        -- Finished instances wait for nothing more.
        IF cardinality(v_finished) > 0 THEN
            DELETE FROM ratchet.inbox WHERE instance = ANY (v_finished);
            DELETE FROM ratchet.tasks WHERE instance = ANY (v_finished);
            IF p_notify THEN
                PERFORM pg_notify('ratchet.done', f) FROM unnest(v_finished) AS f;
            END IF;
        END IF;

    END IF;

    IF cardinality(k_turn) > 0 THEN
        INSERT INTO ratchet.queue_priorities (queue, priority)
        SELECT DISTINCT q, p FROM unnest(k_queue, k_priority) AS k(q, p)
        ON CONFLICT DO NOTHING;
        -- Tasks: activities, the first p_task_capacity of them leased to the committer, and
        -- standalone tasks for their queues (one whose unique key is held is not enqueued).
        -- Ready no earlier than now: claims look for fresh work only a little behind the
        -- newest they took.
        WITH scheduled AS (
            SELECT k.*, row_number() OVER (PARTITION BY k.standalone ORDER BY k.n) AS rank
            FROM unnest(k_turn, k_queue, k_name, k_input, k_options, k_seq, k_visible_at,
                        k_priority, k_unique_key, k_metadata, k_standalone)
                 WITH ORDINALITY AS k(turn, queue, name, input, options, seq, visible_at,
                                      priority, unique_key, metadata, standalone, n)
            -- A standalone task is an effect the turn recorded: it commits whatever the turn's
            -- outcome. Activities of an execution that ended wait for nothing.
            WHERE turn_ok[k.turn]
              AND (k.standalone OR (t_instance[k.turn] <> ALL (v_finished)
                                    AND t_instance[k.turn] <> ALL (v_continued)))
        ), inserted AS (
            INSERT INTO ratchet.tasks (queue, name, input, options, instance, execution, seq,
                                       priority, visible_at, ready_at, lease_owner, lease_until,
                                       fence, unique_key, metadata, created_at)
            SELECT s.queue, s.name, s.input, s.options,
                   CASE WHEN s.standalone THEN NULL ELSE t_instance[s.turn] END,
                   CASE WHEN s.standalone THEN NULL ELSE t_execution[s.turn] END,
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
            ORDER BY s.n
            ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO NOTHING
            RETURNING id, fence, instance, seq, lease_owner, visible_at)
        SELECT coalesce(array_agg(instance ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
               coalesce(array_agg(seq ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
               coalesce(array_agg(id ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
               coalesce(array_agg(fence ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
               coalesce(bool_or(lease_owner IS NULL AND visible_at <= p_now), false)
        INTO task_instance, task_seq, task_id, task_fence, v_unleased_tasks
        FROM inserted;

    END IF;

    IF cardinality(b_turn) > 0 THEN
        -- Timers of running turns, visible at their time.
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT t_instance[b.turn], b.kind, b.event, b.visible_at
            FROM unnest(b_turn, b_kind, b_event, b_visible_at)
                 WITH ORDINALITY AS b(turn, kind, event, visible_at, n)
            WHERE turn_ok[b.turn] AND t_instance[b.turn] <> ALL (v_finished)
              AND t_instance[b.turn] <> ALL (v_continued)
            ORDER BY b.n
            RETURNING instance, visible_at)
        SELECT v_woken || coalesce(array_agg(instance) FILTER (WHERE visible_at <= p_now), '{}')
        INTO v_woken FROM inserted;

    END IF;

    IF cardinality(d_turn) > 0 THEN
        -- Results for parents, only while the parent runs the execution that started the child.
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT c.parent_instance, d.kind, d.event, d.visible_at
            FROM unnest(d_turn, d_kind, d_event, d_visible_at)
                 WITH ORDINALITY AS d(turn, kind, event, visible_at, n)
            JOIN ratchet.instances c ON c.id = t_instance[d.turn]
            JOIN ratchet.instances p ON p.id = c.parent_instance
                 AND p.execution = c.parent_execution
                 AND p.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
            WHERE turn_ok[d.turn]
            ORDER BY d.n
            RETURNING instance)
        SELECT v_woken || coalesce(array_agg(instance), '{}') INTO v_woken FROM inserted;

    END IF;

    IF cardinality(n_turn) > 0 THEN
        -- Sub-orchestrations. A child id that is taken fails the parent's step instead of the
        -- whole turn.
        WITH child AS (
            SELECT n.*, t_instance[n.turn] AS parent_instance, t_execution[n.turn] AS parent_execution,
                   row_number() OVER (PARTITION BY n.id ORDER BY n.ord) AS nth
            FROM unnest(n_turn, n_id, n_name, n_input, n_parent, n_parent_seq, n_started, n_exists)
                 WITH ORDINALITY AS n(turn, id, name, input, parent, parent_seq, started,
                                      exists_event, ord)
            WHERE turn_ok[n.turn]
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
            ORDER BY k.ord
            RETURNING instance, kind)
        SELECT v_woken || coalesce(array_agg(instance) FILTER (WHERE kind <> 'ExecutionStarted'), '{}'),
               coalesce(bool_or(kind = 'ExecutionStarted'), false)
        INTO v_woken, v_new_children FROM inserted;

    END IF;

    -- Continue as new: what the old execution waited for goes (signals and cancellation stay),
    -- and the next execution opens with its start and the carried-over signals.
    IF cardinality(v_continued) > 0 THEN
        DELETE FROM ratchet.inbox
        WHERE instance = ANY (v_continued) AND kind NOT IN ('SignalReceived', 'CancelRequested');
        DELETE FROM ratchet.tasks WHERE instance = ANY (v_continued);
        UPDATE ratchet.instances i
        SET execution = i.execution + 1, history_len = 0, input = t.next_input,
            status = 'ContinuedAsNew', updated_at = p_now
        FROM unnest(t_instance, t_next_input) WITH ORDINALITY AS t(instance, next_input, n)
        WHERE turn_ok[t.n] AND t.next_input IS NOT NULL AND i.id = t.instance
          AND i.id = ANY (v_continued);
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        SELECT t_instance[s.turn], s.kind, s.event, p_now
        FROM unnest(s_turn, s_kind, s_event) WITH ORDINALITY AS s(turn, kind, event, n)
        WHERE turn_ok[s.turn]
        ORDER BY s.n;
        v_woken := v_woken || v_continued;
    END IF;

    IF cardinality(p_task) > 0 THEN
        -- Task completions: lock the rows, then each is applied only under its live fence, for
        -- the step (or no step) and attempt it claims, once per batch.
        PERFORM 1 FROM ratchet.tasks WHERE id = ANY (p_task) ORDER BY id FOR NO KEY UPDATE;
        SELECT coalesce(array_agg(t.id IS NOT NULL AND c.nth = 1 ORDER BY c.n), '{}')
        INTO completion_ok
        FROM (SELECT c.*, row_number() OVER (PARTITION BY c.task ORDER BY c.n) AS nth
              FROM unnest(p_task, p_fence, p_instance, p_execution, p_seq, p_attempt)
                   WITH ORDINALITY AS c(task, fence, instance, execution, seq, attempt, n)) c
        LEFT JOIN ratchet.tasks t ON t.id = c.task AND t.fence = c.fence
             AND t.instance IS NOT DISTINCT FROM c.instance
             AND t.execution IS NOT DISTINCT FROM c.execution
             AND t.seq IS NOT DISTINCT FROM c.seq AND t.attempt = c.attempt;

        -- A retry makes the next attempt claimable at its backoff time; a snooze, the same
        -- attempt at its time. Either moves the fence on: the attempt's lease is done.
        IF 'Retry' = ANY (p_outcome) OR 'Snooze' = ANY (p_outcome) THEN
            UPDATE ratchet.tasks t
            SET attempt = t.attempt + CASE WHEN c.outcome = 'Retry' THEN 1 ELSE 0 END,
                visible_at = c.at, ready_at = c.at, last_error = coalesce(c.error, t.last_error),
                lease_owner = NULL, lease_until = NULL, fence = t.fence + 1
            FROM unnest(p_task, p_outcome, p_at, p_error)
                 WITH ORDINALITY AS c(task, outcome, at, error, n)
            WHERE completion_ok[c.n] AND c.outcome IN ('Retry', 'Snooze') AND t.id = c.task
              AND t.id = ANY (p_task);
        END IF;

        -- A standalone task's final outcome moves it to its results.
        PERFORM ratchet.task_finish(
            array_agg(c.task),
            array_agg(CASE c.outcome WHEN 'Failed' THEN 'Dead' ELSE c.outcome END),
            array_agg(c.output), array_agg(c.error), p_now)
        FROM unnest(p_task, p_instance, p_outcome, p_output, p_error)
             WITH ORDINALITY AS c(task, instance, outcome, output, error, n)
        WHERE completion_ok[c.n] AND c.instance IS NULL
          AND c.outcome IN ('Completed', 'Failed', 'Cancelled')
        HAVING count(*) > 0;

        -- An activity's final outcome leaves the table and reaches the orchestration, if it still
        -- runs that execution.
        DELETE FROM ratchet.tasks t
        WHERE t.id = ANY (ARRAY(
            SELECT c.task
            FROM unnest(p_task, p_instance, p_event) WITH ORDINALITY AS c(task, instance, event, n)
            WHERE completion_ok[c.n] AND c.instance IS NOT NULL AND c.event IS NOT NULL));
        WITH inserted AS (
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            SELECT c.instance, c.kind, c.event, 0
            FROM unnest(p_instance, p_execution, p_kind, p_event)
                 WITH ORDINALITY AS c(instance, execution, kind, event, n)
            JOIN ratchet.instances i ON i.id = c.instance AND i.execution = c.execution
                 AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
            WHERE completion_ok[c.n] AND c.event IS NOT NULL
            ORDER BY c.n
            RETURNING instance)
        SELECT v_woken || coalesce(array_agg(instance), '{}') INTO v_woken FROM inserted;

    END IF;

    -- Eager dispatch: the committer's cached instances that now have events come back leased.
    IF p_lock_owner IS NOT NULL AND cardinality(p_lock) > 0 THEN
        WITH leased AS (
            UPDATE ratchet.instances i
            SET lease_owner = p_lock_owner, lease_until = p_lock_until, fence = i.fence + 1
            -- (`visible_at + 0`: see visible_events.)
            WHERE i.id = ANY (ARRAY(SELECT DISTINCT b.instance FROM ratchet.inbox b
                                    WHERE b.instance = ANY (p_lock) AND b.visible_at + 0 <= p_now))
              AND i.status NOT IN ('Completed', 'Failed', 'Cancelled', 'Terminated')
              AND (i.lease_until IS NULL
                   OR (i.lease_until < p_now AND NOT EXISTS (
                       SELECT 1 FROM ratchet.workers w
                       WHERE w.id = i.lease_owner AND w.alive_until >= p_now
                         AND i.lease_until >= p_now - w.stall_grace)))
            RETURNING i.id, i.name, i.version, i.execution, i.history_len, i.fence,
                      i.incarnation)
        SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(name), '{}'),
               coalesce(array_agg(version), '{}'), coalesce(array_agg(execution), '{}'),
               coalesce(array_agg(history_len), '{}'), coalesce(array_agg(fence), '{}'),
               coalesce(array_agg(incarnation), '{}')
        INTO l_id, l_name, l_version, l_execution, l_history_len, l_fence, l_incarnation
        FROM leased;
        SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(l_id, p_now);
    END IF;

    -- Others need to hear only of work this batch did not lease to the committer.
    IF p_notify AND (v_unleased_tasks OR v_new_children
                     OR EXISTS (SELECT 1 FROM unnest(v_woken) AS w WHERE w <> ALL (l_id))) THEN
        PERFORM pg_notify('ratchet.work', p_now::text);
    END IF;
END $$;

