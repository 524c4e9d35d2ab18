-- The event store (Dynamic Consistency Boundaries).
--
-- How the conditional append holds: every append first locks the one row of `event_head`
-- and keeps the lock until it commits. Appends therefore run one after another: each one's
-- condition is checked by statements that start after the previous append committed (READ
-- COMMITTED takes a new snapshot per statement), so no concurrent append can slip a matching
-- event in between the check and the write, whatever else is open. Positions come from the
-- head under that same lock, so they are dense and commit in order: a reader never sees a
-- position appear below one it has already seen.

CREATE TABLE ratchet.events (
    position    bigint PRIMARY KEY,
    type        text NOT NULL,
    -- Sorted, without repeats.
    tags        text[] NOT NULL,
    -- JSON text, kept exactly as written.
    payload     text NOT NULL,
    metadata    text NOT NULL,
    recorded_at bigint NOT NULL
);
CREATE INDEX events_type ON ratchet.events (type, position);
-- No pending list: a condition or read by tag never scans unsorted recent entries.
CREATE INDEX events_tags ON ratchet.events USING gin (tags) WITH (fastupdate = off);

-- The last position given out; its row lock serializes appends.
CREATE TABLE ratchet.event_head (
    one      boolean PRIMARY KEY DEFAULT true CHECK (one),
    position bigint NOT NULL
);
INSERT INTO ratchet.event_head (one, position) VALUES (true, 0);

-- Idempotency keys of appends that asked for one.
CREATE TABLE ratchet.event_appends (
    key            text PRIMARY KEY,
    first_position bigint NOT NULL,
    last_position  bigint NOT NULL
);

-- The first event matching one query item with a position in (`p_after`, `p_head`], or
-- NULL. `p_types` and `p_tags` empty mean any type and no tag required. PL/pgSQL keeps one
-- generic plan per statement, made without the values, so each statement is shaped to have
-- only one good plan.
CREATE FUNCTION ratchet.event_first_match(p_after bigint, p_head bigint, p_types text[],
                                          p_tags text[])
RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_position bigint;
    v_found bigint;
    v_type text;
BEGIN
    IF p_after >= p_head THEN
        RETURN NULL;
    END IF;
    IF p_head - p_after <= 1000 THEN
        -- The usual case, a decision made on a fresh read: only the few events since
        -- `p_after` can match. Walk them by position (the fence keeps the tag test off the
        -- GIN index, which would fetch every event of a popular tag).
        SELECT min(e.position) INTO v_position
        FROM (SELECT position, type, tags FROM ratchet.events
              WHERE position BETWEEN p_after + 1 AND p_head OFFSET 0) e
        WHERE e.tags @> p_tags AND (cardinality(p_types) = 0 OR e.type = ANY (p_types));
    ELSIF cardinality(p_tags) > 0 THEN
        -- Far behind: the events carrying the tags, through the GIN index.
        SELECT min(e.position) INTO v_position
        FROM (SELECT position, type FROM ratchet.events WHERE tags @> p_tags OFFSET 0) e
        WHERE e.position > p_after AND (cardinality(p_types) = 0 OR e.type = ANY (p_types));
    ELSIF cardinality(p_types) > 0 THEN
        -- One seek on (type, position) per type.
        FOREACH v_type IN ARRAY p_types LOOP
            SELECT min(e.position) INTO v_found FROM ratchet.events e
            WHERE e.type = v_type AND e.position > p_after;
            v_position := least(v_position, v_found);
        END LOOP;
    ELSE
        SELECT min(e.position) INTO v_position FROM ratchet.events e
        WHERE e.position > p_after;
    END IF;
    RETURN v_position;
END;
$$;

-- Appends `p_after`'s length of appends in order, with an outcome row per append
-- ('appended' | 'duplicate' | 'conflict', first and last position, or the conflicting one).
-- Per event: its append (1-based), its index in that append (1-based), type, tags joined by
-- U+001F, payload, metadata. Per append: event count, whether it is conditional, its
-- `after` (0 for none), idempotency key. Per condition item: its append, types and tags
-- joined by U+001F. A conditional append with a match-all query has one item with neither.
CREATE FUNCTION ratchet.event_append(
    p_event_append int[], p_event_index int[], p_type text[], p_tags text[],
    p_payload text[], p_metadata text[],
    p_count int[], p_conditional boolean[], p_after bigint[], p_key text[],
    p_item_append int[], p_item_types text[], p_item_tags text[],
    p_now bigint)
RETURNS TABLE (outcome text, first_position bigint, last_position bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_n int := coalesce(array_length(p_count, 1), 0);
    v_head bigint;
    v_base bigint[] := array_fill(NULL::bigint, ARRAY[greatest(v_n, 1)]);
    v_outcome text[] := array_fill(NULL::text, ARRAY[greatest(v_n, 1)]);
    v_first bigint[] := array_fill(NULL::bigint, ARRAY[greatest(v_n, 1)]);
    v_last bigint[] := array_fill(NULL::bigint, ARRAY[greatest(v_n, 1)]);
    -- Appends up to this one are written; later accepted ones wait to be written together,
    -- in one INSERT, and conditions check them in memory meanwhile.
    v_written int := 0;
    -- The highest position written to the table (the rest, up to v_head, wait).
    v_stored bigint;
    v_start bigint;
    v_keys boolean := EXISTS (SELECT 1 FROM unnest(p_key) AS k WHERE k IS NOT NULL);
    v_types text[];
    v_tags text[];
    v_conflict bigint;
    v_match bigint;
    v_found record;
    -- Condition items come sorted by append: the next one to look at.
    v_item int := 1;
    v_items int := coalesce(array_length(p_item_append, 1), 0);
    i int;
BEGIN
    -- A snapshot older than the lock would check the condition against stale data.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'appending events needs READ COMMITTED isolation, not %',
            current_setting('transaction_isolation') USING ERRCODE = '25001';
    END IF;
    SELECT h.position INTO v_head FROM ratchet.event_head h WHERE h.one FOR UPDATE;
    v_stored := v_head;
    v_start := v_head;

    FOR i IN 1 .. v_n + 1 LOOP
        -- Write the accepted appends before a key lookup that must see them, and at the end.
        IF i > v_n OR p_key[i] IS NOT NULL THEN
            IF v_written < i - 1 THEN
                INSERT INTO ratchet.events (position, type, tags, payload, metadata, recorded_at)
                SELECT v_base[u.app] + u.idx, u.type, string_to_array(u.tags, E'\x1f'),
                       u.payload, u.metadata, p_now
                FROM unnest(p_event_append, p_event_index, p_type, p_tags, p_payload, p_metadata)
                     AS u(app, idx, type, tags, payload, metadata)
                WHERE u.app > v_written AND u.app < i AND v_base[u.app] IS NOT NULL;
                IF v_keys THEN
                    INSERT INTO ratchet.event_appends (key, first_position, last_position)
                    SELECT p_key[a], v_first[a], v_last[a]
                    FROM generate_series(v_written + 1, i - 1) AS a
                    WHERE p_key[a] IS NOT NULL AND v_base[a] IS NOT NULL;
                END IF;
            END IF;
            v_written := i - 1;
            v_stored := v_head;
        END IF;
        EXIT WHEN i > v_n;

        IF p_key[i] IS NOT NULL THEN
            SELECT a.first_position, a.last_position INTO v_found
            FROM ratchet.event_appends a WHERE a.key = p_key[i];
            IF FOUND THEN
                v_outcome[i] := 'duplicate';
                v_first[i] := v_found.first_position;
                v_last[i] := v_found.last_position;
                CONTINUE;
            END IF;
        END IF;

        IF p_conditional[i] THEN
            v_conflict := NULL;
            WHILE v_item <= v_items AND p_item_append[v_item] < i LOOP
                v_item := v_item + 1;
            END LOOP;
            WHILE v_item <= v_items AND p_item_append[v_item] = i LOOP
                v_types := string_to_array(p_item_types[v_item], E'\x1f');
                v_tags := string_to_array(p_item_tags[v_item], E'\x1f');
                v_match := ratchet.event_first_match(p_after[i], v_stored, v_types, v_tags);
                v_conflict := least(v_conflict, v_match);
                IF v_conflict IS NULL AND v_stored < v_head THEN
                    -- Appends accepted earlier in this call, not written yet.
                    SELECT min(v_base[u.app] + u.idx) INTO v_match
                    FROM unnest(p_event_append, p_event_index, p_type, p_tags)
                         AS u(app, idx, type, tags)
                    WHERE u.app > v_written AND u.app < i AND v_base[u.app] IS NOT NULL
                      AND v_base[u.app] + u.idx > p_after[i]
                      AND string_to_array(u.tags, E'\x1f') @> v_tags
                      AND (cardinality(v_types) = 0 OR u.type = ANY (v_types));
                    v_conflict := v_match;
                END IF;
                v_item := v_item + 1;
            END LOOP;
            IF v_conflict IS NOT NULL THEN
                v_outcome[i] := 'conflict';
                v_first[i] := v_conflict;
                v_last[i] := v_conflict;
                CONTINUE;
            END IF;
        END IF;

        v_base[i] := v_head;
        v_outcome[i] := 'appended';
        v_first[i] := v_head + 1;
        v_head := v_head + p_count[i];
        v_last[i] := v_head;
    END LOOP;

    IF v_head > v_start THEN
        UPDATE ratchet.event_head SET position = v_head WHERE one;
    END IF;
    RETURN QUERY SELECT o.outcome, o.first_position, o.last_position
        FROM unnest(v_outcome[1:v_n], v_first[1:v_n], v_last[1:v_n])
             AS o(outcome, first_position, last_position);
END;
$$;
