-- Ratchet's server-side operations: each store call that must read and write in one
-- transaction is one of these functions, so it costs one round trip whatever the batch size.
-- Arguments are parallel arrays (one element per item, children pointing at their item's
-- 1-based position), results are arrays too. Events arrive as JSON text built by the store's
-- Rust code; the functions never look inside them.
--
-- Locking: every function that waits for instance row locks takes them in id order, so two
-- calls never deadlock on instances; claims take only unlocked rows (SKIP LOCKED).
--
-- Notifications: with p_notify, a call that makes work ready for others sends
-- `ratchet.work`, and a finished instance sends its id on `ratchet.done`. PostgreSQL delivers
-- them when the transaction commits, and merges repeats within one transaction.

-- Removes every trace of an instance, so its id can start afresh.
CREATE FUNCTION ratchet.instance_erase(p_id text) RETURNS void
LANGUAGE sql AS $$
    DELETE FROM ratchet.instances WHERE id = p_id;
    DELETE FROM ratchet.inbox WHERE instance = p_id;
    DELETE FROM ratchet.history WHERE instance = p_id;
    DELETE FROM ratchet.tasks WHERE instance = p_id;
    DELETE FROM ratchet.signal_dedup WHERE instance = p_id;
$$;

-- Creates instances, each with its ExecutionStarted inbox row; with p_owner they come back
-- leased. Outcome per item: 'created', 'existing' (UseExisting) or 'exists' (refused).
CREATE FUNCTION ratchet.instance_create(
    p_now bigint, p_notify boolean, p_owner text, p_until bigint,
    n_id text[], n_name text[], n_input text[], n_parent text[], n_parent_instance text[],
    n_parent_execution integer[], n_parent_seq integer[], n_if_exists text[], n_started text[],
    OUT outcome text[], OUT status text[], OUT inbox_id bigint[], OUT fence bigint[])
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_fence bigint;
    v_new_fence bigint;
    v_inbox bigint;
    v_unleased boolean := false;
BEGIN
    outcome := '{}'; status := '{}'; inbox_id := '{}'; fence := '{}';
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
                fence := fence || NULL::bigint;
                CONTINUE;
            END IF;
        END IF;
        -- A restarted id keeps counting fences, so no lease of its old life is valid again.
        v_new_fence := coalesce(v_fence, 0) + CASE WHEN p_owner IS NULL THEN 0 ELSE 1 END;
        INSERT INTO ratchet.instances (id, name, status, execution, input, parent,
            parent_instance, parent_execution, parent_seq, lease_owner, lease_until, fence,
            created_at, updated_at)
        VALUES (n_id[i], n_name[i], 'Pending', 0, n_input[i], n_parent[i], n_parent_instance[i],
            n_parent_execution[i], n_parent_seq[i], p_owner, p_until, v_new_fence, p_now, p_now)
        ON CONFLICT (id) DO NOTHING;
        IF NOT FOUND THEN
            -- Another caller created it since we looked.
            SELECT s.status INTO v_status FROM ratchet.instances s WHERE s.id = n_id[i];
            outcome := outcome || CASE WHEN n_if_exists[i] = 'UseExisting'
                                       THEN 'existing' ELSE 'exists' END;
            status := status || v_status; inbox_id := inbox_id || NULL::bigint;
            fence := fence || NULL::bigint;
            CONTINUE;
        END IF;
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        VALUES (n_id[i], 'ExecutionStarted', n_started[i], p_now)
        RETURNING id INTO v_inbox;
        outcome := outcome || 'created'::text; status := status || 'Pending'::text;
        inbox_id := inbox_id || v_inbox; fence := fence || v_new_fence;
        v_unleased := v_unleased OR p_owner IS NULL;
    END LOOP;
    IF p_notify AND v_unleased THEN
        PERFORM pg_notify('ratchet.work', '');
    END IF;
END $$;

-- Leases up to p_limit visible tasks with one of p_names, oldest ready first; expired leases
-- are ready again at their expiry. Shared by the claim and the task claim.
CREATE FUNCTION ratchet.task_take(
    p_now bigint, p_owner text, p_until bigint, p_limit integer, p_names text[])
RETURNS SETOF ratchet.tasks
LANGUAGE sql AS $$
    WITH ready AS (
        SELECT id FROM ratchet.tasks
        WHERE ready_at <= p_now AND name = ANY (p_names)
        ORDER BY ready_at, id
        LIMIT p_limit
        FOR NO KEY UPDATE SKIP LOCKED)
    UPDATE ratchet.tasks t
    SET lease_owner = p_owner, lease_until = p_until, ready_at = p_until, fence = t.fence + 1
    FROM ready WHERE t.id = ready.id
    RETURNING t.*
$$;

-- The visible inbox events of some instances, oldest first, as parallel arrays.
CREATE FUNCTION ratchet.visible_events(
    p_ids text[], p_now bigint, OUT e_instance text[], OUT e_id bigint[], OUT e_event text[])
LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(b.instance ORDER BY b.id), '{}'),
           coalesce(array_agg(b.id ORDER BY b.id), '{}'),
           coalesce(array_agg(b.event ORDER BY b.id), '{}')
    FROM ratchet.inbox b WHERE b.instance = ANY (p_ids) AND b.visible_at <= p_now
$$;

-- One poll: leases up to p_limit instances that have visible inbox events and no live lease
-- (runnable by the caller: its names, and its versions once an instance pinned one), up to
-- p_task_limit ready tasks, and says when the next inbox event or task becomes ready.
CREATE FUNCTION ratchet.claim(
    p_now bigint, p_owner text, p_until bigint, p_limit integer,
    p_reg_name text[], p_reg_version integer[], p_task_limit integer, p_task_names text[],
    OUT i_id text[], OUT i_name text[], OUT i_version integer[], OUT i_execution integer[],
    OUT i_history_len integer[], OUT i_fence bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[],
    OUT t_id bigint[], OUT t_fence bigint[], OUT t_name text[], OUT t_input text[],
    OUT t_options text[], OUT t_instance text[], OUT t_execution integer[], OUT t_seq integer[],
    OUT t_attempt integer[], OUT next_due bigint)
LANGUAGE plpgsql AS $$
BEGIN
    i_id := '{}'; i_name := '{}'; i_version := '{}'; i_execution := '{}';
    i_history_len := '{}'; i_fence := '{}'; e_instance := '{}'; e_id := '{}'; e_event := '{}';
    IF p_limit > 0 THEN
        WITH candidate AS (
            SELECT i.id FROM ratchet.instances i
            WHERE i.id IN (SELECT b.instance FROM ratchet.inbox b WHERE b.visible_at <= p_now)
              AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
              AND (i.lease_until IS NULL OR i.lease_until < p_now)
              AND EXISTS (
                  SELECT 1 FROM unnest(p_reg_name, p_reg_version) AS r(name, version)
                  WHERE r.name = i.name AND (i.version IS NULL OR i.version = r.version))
            ORDER BY i.updated_at
            LIMIT p_limit
            FOR NO KEY UPDATE OF i SKIP LOCKED
        ), leased AS (
            UPDATE ratchet.instances i
            SET lease_owner = p_owner, lease_until = p_until, fence = i.fence + 1
            FROM candidate WHERE i.id = candidate.id
            RETURNING i.id, i.name, i.version, i.execution, i.history_len, i.fence)
        SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(name), '{}'),
               coalesce(array_agg(version), '{}'), coalesce(array_agg(execution), '{}'),
               coalesce(array_agg(history_len), '{}'), coalesce(array_agg(fence), '{}')
        INTO i_id, i_name, i_version, i_execution, i_history_len, i_fence
        FROM leased;

        SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(i_id, p_now);

        -- A turn that committed between our look and our lock may have consumed everything:
        -- such an instance has nothing to do, so its lease goes back at once (the store drops
        -- it from the result).
        UPDATE ratchet.instances i SET lease_owner = NULL, lease_until = NULL
        WHERE i.id = ANY (i_id) AND i.id <> ALL (e_instance) AND i.lease_owner = p_owner;
    END IF;

    SELECT coalesce(array_agg(t.id ORDER BY t.id), '{}'),
           coalesce(array_agg(t.fence ORDER BY t.id), '{}'),
           coalesce(array_agg(t.name ORDER BY t.id), '{}'),
           coalesce(array_agg(t.input ORDER BY t.id), '{}'),
           coalesce(array_agg(t.options ORDER BY t.id), '{}'),
           coalesce(array_agg(t.instance ORDER BY t.id), '{}'),
           coalesce(array_agg(t.execution ORDER BY t.id), '{}'),
           coalesce(array_agg(t.seq ORDER BY t.id), '{}'),
           coalesce(array_agg(t.attempt ORDER BY t.id), '{}')
    INTO t_id, t_fence, t_name, t_input, t_options, t_instance, t_execution, t_seq, t_attempt
    FROM ratchet.task_take(p_now, p_owner, p_until, coalesce(p_task_limit, 0),
                           coalesce(p_task_names, '{}')) AS t;

    SELECT least((SELECT min(visible_at) FROM ratchet.inbox WHERE visible_at > p_now),
                 (SELECT min(ready_at) FROM ratchet.tasks WHERE ready_at > p_now))
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
    -- history each turn appends
    h_turn integer[], h_seq integer[], h_event text[],
    -- activities each turn schedules
    k_turn integer[], k_name text[], k_input text[], k_options text[], k_seq integer[],
    k_visible_at bigint[],
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
    -- task completions
    p_task bigint[], p_fence bigint[], p_instance text[], p_execution integer[],
    p_seq integer[], p_attempt integer[], p_kind text[], p_event text[], p_retry_at bigint[],
    p_error text[],
    -- eager dispatch
    p_task_owner text, p_task_until bigint, p_task_capacity integer,
    p_lock text[], p_lock_owner text, p_lock_until bigint,
    OUT turn_ok boolean[], OUT completion_ok boolean[],
    OUT task_instance text[], OUT task_seq integer[], OUT task_id bigint[],
    OUT task_fence bigint[],
    OUT l_id text[], OUT l_name text[], OUT l_version integer[], OUT l_execution integer[],
    OUT l_history_len integer[], OUT l_fence bigint[],
    OUT e_instance text[], OUT e_id bigint[], OUT e_event text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_finished text[];
    v_continued text[];
    v_woken text[] := '{}';
    v_unleased_tasks boolean := false;
    v_new_children boolean := false;
BEGIN
    task_instance := '{}'; task_seq := '{}'; task_id := '{}'; task_fence := '{}';
    l_id := '{}'; l_name := '{}'; l_version := '{}'; l_execution := '{}';
    l_history_len := '{}'; l_fence := '{}'; e_instance := '{}'; e_id := '{}'; e_event := '{}';

    -- Lock every instance the batch touches, in id order.
    PERFORM 1 FROM ratchet.instances
    WHERE id IN (SELECT unnest(t_instance) UNION SELECT unnest(p_instance)
                 UNION SELECT unnest(p_lock)
                 UNION SELECT parent_instance FROM ratchet.instances
                       WHERE id = ANY (t_instance) AND parent_instance IS NOT NULL)
    ORDER BY id
    FOR NO KEY UPDATE;

    -- A turn commits when its lease is still the live one (fence), no other turn was written
    -- since it was claimed (execution, history length), the instance still runs, and it is the
    -- first turn of its instance in this batch.
    SELECT coalesce(array_agg(s.ok ORDER BY s.n), '{}') INTO turn_ok FROM (
        SELECT t.n,
               coalesce(i.fence = t.fence AND i.execution = t.execution
                        AND i.history_len = t.start
                        AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
                        AND t.n = min(t.n) OVER (PARTITION BY t.instance), false) AS ok
        FROM unnest(t_instance, t_fence, t_execution, t_history_start)
             WITH ORDINALITY AS t(instance, fence, execution, start, n)
        LEFT JOIN ratchet.instances i ON i.id = t.instance) s;

    SELECT coalesce(array_agg(t.instance) FILTER (
               WHERE t.status IN ('Completed', 'Failed', 'Cancelled', 'Terminated')), '{}'),
           coalesce(array_agg(t.instance) FILTER (WHERE t.next_input IS NOT NULL), '{}')
    INTO v_finished, v_continued
    FROM unnest(t_instance, t_status, t_next_input) WITH ORDINALITY AS t(instance, status, next_input, n)
    WHERE turn_ok[t.n];

    DELETE FROM ratchet.inbox b
    USING unnest(c_turn, c_id) AS c(turn, id)
    WHERE turn_ok[c.turn] AND b.id = c.id AND b.instance = t_instance[c.turn];

    INSERT INTO ratchet.history (instance, execution, seq, event)
    SELECT t_instance[h.turn], t_execution[h.turn], h.seq, h.event
    FROM unnest(h_turn, h_seq, h_event) AS h(turn, seq, event)
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
    WHERE turn_ok[t.n] AND i.id = t.instance;

    -- Finished instances wait for nothing more.
    IF cardinality(v_finished) > 0 THEN
        DELETE FROM ratchet.inbox WHERE instance = ANY (v_finished);
        DELETE FROM ratchet.tasks WHERE instance = ANY (v_finished);
        IF p_notify THEN
            PERFORM pg_notify('ratchet.done', f) FROM unnest(v_finished) AS f;
        END IF;
    END IF;

    -- Activities, the first p_task_capacity of them leased to the committer.
    WITH scheduled AS (
        SELECT k.*, row_number() OVER (ORDER BY k.n) AS rank
        FROM unnest(k_turn, k_name, k_input, k_options, k_seq, k_visible_at)
             WITH ORDINALITY AS k(turn, name, input, options, seq, visible_at, n)
        WHERE turn_ok[k.turn] AND t_instance[k.turn] <> ALL (v_finished)
          AND t_instance[k.turn] <> ALL (v_continued)
    ), inserted AS (
        INSERT INTO ratchet.tasks (name, input, options, instance, execution, seq, visible_at,
                                   ready_at, lease_owner, lease_until, fence, created_at)
        SELECT s.name, s.input, s.options, t_instance[s.turn], t_execution[s.turn], s.seq,
               s.visible_at,
               CASE WHEN s.leased THEN p_task_until ELSE s.visible_at END,
               CASE WHEN s.leased THEN p_task_owner END,
               CASE WHEN s.leased THEN p_task_until END,
               CASE WHEN s.leased THEN 1 ELSE 0 END,
               p_now
        FROM (SELECT scheduled.*,
                     (p_task_owner IS NOT NULL AND rank <= p_task_capacity) AS leased
              FROM scheduled) s
        ORDER BY s.n
        RETURNING id, fence, instance, seq, lease_owner)
    SELECT coalesce(array_agg(instance ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(seq ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(id ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(array_agg(fence ORDER BY id) FILTER (WHERE lease_owner IS NOT NULL), '{}'),
           coalesce(bool_or(lease_owner IS NULL), false)
    INTO task_instance, task_seq, task_id, task_fence, v_unleased_tasks
    FROM inserted;

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

    -- Results for parents, only while the parent runs the execution that started the child.
    WITH inserted AS (
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        SELECT c.parent_instance, d.kind, d.event, d.visible_at
        FROM unnest(d_turn, d_kind, d_event, d_visible_at)
             WITH ORDINALITY AS d(turn, kind, event, visible_at, n)
        JOIN ratchet.instances c ON c.id = t_instance[d.turn]
        JOIN ratchet.instances p ON p.id = c.parent_instance
             AND p.execution = c.parent_execution
             AND p.status IN ('Pending', 'Running', 'ContinuedAsNew')
        WHERE turn_ok[d.turn]
        ORDER BY d.n
        RETURNING instance)
    SELECT v_woken || coalesce(array_agg(instance), '{}') INTO v_woken FROM inserted;

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
        WHERE turn_ok[t.n] AND t.next_input IS NOT NULL AND i.id = t.instance;
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        SELECT t_instance[s.turn], s.kind, s.event, p_now
        FROM unnest(s_turn, s_kind, s_event) WITH ORDINALITY AS s(turn, kind, event, n)
        WHERE turn_ok[s.turn]
        ORDER BY s.n;
        v_woken := v_woken || v_continued;
    END IF;

    -- Task completions: lock the rows, then each is applied only under its live fence, for
    -- the step and attempt it claims, once per batch.
    PERFORM 1 FROM ratchet.tasks WHERE id = ANY (p_task) ORDER BY id FOR NO KEY UPDATE;
    SELECT coalesce(array_agg(t.id IS NOT NULL AND c.nth = 1 ORDER BY c.n), '{}')
    INTO completion_ok
    FROM (SELECT c.*, row_number() OVER (PARTITION BY c.task ORDER BY c.n) AS nth
          FROM unnest(p_task, p_fence, p_instance, p_execution, p_seq, p_attempt)
               WITH ORDINALITY AS c(task, fence, instance, execution, seq, attempt, n)) c
    LEFT JOIN ratchet.tasks t ON t.id = c.task AND t.fence = c.fence
         AND t.instance = c.instance AND t.execution = c.execution AND t.seq = c.seq
         AND t.attempt = c.attempt;

    -- A retry makes the next attempt claimable at its backoff time.
    UPDATE ratchet.tasks t
    SET attempt = t.attempt + 1, visible_at = c.retry_at, ready_at = c.retry_at,
        last_error = c.error, lease_owner = NULL, lease_until = NULL
    FROM unnest(p_task, p_retry_at, p_error) WITH ORDINALITY AS c(task, retry_at, error, n)
    WHERE completion_ok[c.n] AND c.retry_at IS NOT NULL AND t.id = c.task;

    -- A final outcome leaves the table and reaches the orchestration, if it still runs that
    -- execution.
    DELETE FROM ratchet.tasks t
    USING unnest(p_task, p_retry_at) WITH ORDINALITY AS c(task, retry_at, n)
    WHERE completion_ok[c.n] AND c.retry_at IS NULL AND t.id = c.task;
    WITH inserted AS (
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        SELECT c.instance, c.kind, c.event, 0
        FROM unnest(p_instance, p_execution, p_kind, p_event, p_retry_at)
             WITH ORDINALITY AS c(instance, execution, kind, event, retry_at, n)
        JOIN ratchet.instances i ON i.id = c.instance AND i.execution = c.execution
             AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
        WHERE completion_ok[c.n] AND c.retry_at IS NULL
        ORDER BY c.n
        RETURNING instance)
    SELECT v_woken || coalesce(array_agg(instance), '{}') INTO v_woken FROM inserted;

    -- Eager dispatch: the committer's cached instances that now have events come back leased.
    IF p_lock_owner IS NOT NULL AND cardinality(p_lock) > 0 THEN
        WITH leased AS (
            UPDATE ratchet.instances i
            SET lease_owner = p_lock_owner, lease_until = p_lock_until, fence = i.fence + 1
            WHERE i.id = ANY (p_lock)
              AND i.status IN ('Pending', 'Running', 'ContinuedAsNew')
              AND (i.lease_until IS NULL OR i.lease_until < p_now)
              AND EXISTS (SELECT 1 FROM ratchet.inbox b
                          WHERE b.instance = i.id AND b.visible_at <= p_now)
            RETURNING i.id, i.name, i.version, i.execution, i.history_len, i.fence)
        SELECT coalesce(array_agg(id), '{}'), coalesce(array_agg(name), '{}'),
               coalesce(array_agg(version), '{}'), coalesce(array_agg(execution), '{}'),
               coalesce(array_agg(history_len), '{}'), coalesce(array_agg(fence), '{}')
        INTO l_id, l_name, l_version, l_execution, l_history_len, l_fence
        FROM leased;
        SELECT * INTO e_instance, e_id, e_event FROM ratchet.visible_events(l_id, p_now);
    END IF;

    -- Others need to hear only of work this batch did not lease to the committer.
    IF p_notify AND (v_unleased_tasks OR v_new_children
                     OR EXISTS (SELECT 1 FROM unnest(v_woken) AS w WHERE w <> ALL (l_id))) THEN
        PERFORM pg_notify('ratchet.work', '');
    END IF;
END $$;

-- Raises signals into their instances' inboxes. Outcome per item: 'raised', 'duplicate',
-- 'not_found' or 'finished' (with the status).
CREATE FUNCTION ratchet.signal_raise(
    p_now bigint, p_notify boolean, s_instance text[], s_dedup text[], s_event text[],
    OUT outcome text[], OUT status text[])
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_raised boolean := false;
BEGIN
    outcome := '{}'; status := '{}';
    -- A share lock keeps a concurrent finish from clearing the inbox under the new row.
    PERFORM 1 FROM ratchet.instances WHERE id = ANY (s_instance) ORDER BY id FOR SHARE;
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
            INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
            VALUES (s_instance[i], 'SignalReceived', s_event[i], p_now);
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
    p_id text, p_event text, p_now bigint, p_notify boolean, OUT outcome text, OUT status text)
LANGUAGE plpgsql AS $$
BEGIN
    SELECT s.status INTO status FROM ratchet.instances s WHERE s.id = p_id FOR SHARE;
    IF NOT FOUND THEN
        outcome := 'not_found';
    ELSIF status IN ('Completed', 'Failed', 'Cancelled', 'Terminated') THEN
        outcome := 'finished';
    ELSE
        INSERT INTO ratchet.inbox (instance, kind, event, visible_at)
        VALUES (p_id, 'CancelRequested', p_event, p_now);
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
LANGUAGE plpgsql AS $$
DECLARE
    v_parent text;
    v_parent_execution integer;
    v_parent_seq integer;
BEGIN
    PERFORM 1 FROM ratchet.instances
    WHERE id = p_id OR id = (SELECT parent_instance FROM ratchet.instances WHERE id = p_id)
    ORDER BY id
    FOR NO KEY UPDATE;
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
           p_now
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
