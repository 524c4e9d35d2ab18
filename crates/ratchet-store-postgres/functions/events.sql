-- The event store's operations; how the conditional append holds is told in
-- migrations/0005_events.sql, beside its tables.

-- The first event matching one query item with a position above `p_after`, or NULL, for
-- a condition far behind the head (near it, `event_append` walks the few events since).
-- `p_types` and `p_tags` empty mean any type and no tag required. PL/pgSQL keeps one generic
-- plan per statement, made without the values, so each statement is shaped to have only
-- one good plan.
CREATE FUNCTION ratchet.event_first_match(p_after bigint, p_types text[], p_tags text[])
RETURNS bigint LANGUAGE plpgsql
-- Its statements are written to have one good plan; planning them again for each call's
-- values (what PostgreSQL does when it guesses a custom plan may be cheaper) costs more
-- than running them.
SET plan_cache_mode = force_generic_plan
-- A plan made while the table was small would keep a sequential scan as the log grows;
-- every statement here has an index made for it.
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_position bigint;
    v_found bigint;
    v_type text;
BEGIN
    IF cardinality(p_tags) > 0 THEN
        -- The first tag's events after `p_after`, in order, until one matches in full.
        SELECT t.position INTO v_position
        FROM ratchet.event_tags t JOIN ratchet.events e ON e.position = t.position
        WHERE t.tag = p_tags[1] AND t.position > p_after AND e.tags @> p_tags
          AND (cardinality(p_types) = 0 OR e.type = ANY (p_types))
        ORDER BY t.position LIMIT 1;
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
LANGUAGE plpgsql
-- As event_first_match: each call would otherwise plan its statements again, which
-- tripled the cost of a conditional append (a plain one, 56 µs in the database).
SET plan_cache_mode = force_generic_plan
SET enable_seqscan = off
SET jit = off
SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    v_n int := coalesce(array_length(p_count, 1), 0);
    v_size int[] := ARRAY[greatest(v_n, 1)];
    v_head bigint;
    -- The head when the lock was taken: events up to it are in the table.
    v_start bigint;
    v_base bigint[] := array_fill(NULL::bigint, v_size);
    v_outcome text[] := array_fill(NULL::text, v_size);
    v_first bigint[] := array_fill(NULL::bigint, v_size);
    v_last bigint[] := array_fill(NULL::bigint, v_size);
    -- Per append: the first event in the table matching its condition.
    v_table bigint[] := array_fill(NULL::bigint, v_size);
    -- Pairs (conditional append, earlier append of this call, first matching event index),
    -- sorted by the conditional append; the next one to look at.
    v_pair_app int[];
    v_pair_earlier int[];
    v_pair_idx int[];
    v_pair int := 1;
    v_pairs int;
    -- Appends up to this one are written; later accepted ones wait to be written together.
    v_written int := 0;
    v_keys boolean := EXISTS (SELECT 1 FROM unnest(p_key) AS k WHERE k IS NOT NULL);
    v_lo bigint;
    v_conflict bigint;
    v_found record;
    r record;
    i int;
BEGIN
    -- A snapshot older than the lock would check the condition against stale data.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'appending events needs READ COMMITTED isolation, not %',
            current_setting('transaction_isolation') USING ERRCODE = '25001';
    END IF;
    SELECT h.position INTO v_head FROM ratchet.event_head h WHERE h.one FOR UPDATE;
    v_start := v_head;

    IF array_length(p_item_append, 1) > 0 THEN
        -- Conditions against the table, all at once. Near the head (the usual case, a
        -- decision made on a fresh read) only the few events since can match: one walk by
        -- position over them for every such condition item.
        SELECT min(p_after[a]) INTO v_lo FROM unnest(p_item_append) AS a
        WHERE v_start - p_after[a] <= 1000;
        IF v_lo < v_start THEN
            FOR r IN
                SELECT c.app, min(e.position) AS first
                FROM (SELECT position, type, tags FROM ratchet.events
                      WHERE position BETWEEN v_lo + 1 AND v_start OFFSET 0) e
                JOIN (SELECT i.app, string_to_array(i.types, E'\x1f') AS types,
                             string_to_array(i.tags, E'\x1f') AS tags
                      FROM unnest(p_item_append, p_item_types, p_item_tags) AS i(app, types, tags)
                      WHERE v_start - p_after[i.app] <= 1000) c
                  ON e.position > p_after[c.app] AND e.tags @> c.tags
                 AND (cardinality(c.types) = 0 OR e.type = ANY (c.types))
                GROUP BY c.app
            LOOP
                v_table[r.app] := r.first;
            END LOOP;
        END IF;
        -- Far behind: item by item, through the indexes.
        FOR r IN
            SELECT i.app, ratchet.event_first_match(p_after[i.app],
                       string_to_array(i.types, E'\x1f'), string_to_array(i.tags, E'\x1f')) AS first
            FROM unnest(p_item_append, p_item_types, p_item_tags) AS i(app, types, tags)
            WHERE v_start - p_after[i.app] > 1000
        LOOP
            v_table[r.app] := least(v_table[r.app], r.first);
        END LOOP;
        -- Conditions against earlier appends of this call: which would match, decided below
        -- once it is known which of them are accepted.
        SELECT coalesce(array_agg(m.app ORDER BY m.app, m.earlier), '{}'),
               coalesce(array_agg(m.earlier ORDER BY m.app, m.earlier), '{}'),
               coalesce(array_agg(m.idx ORDER BY m.app, m.earlier), '{}')
        INTO v_pair_app, v_pair_earlier, v_pair_idx
        FROM (SELECT c.app, u.app AS earlier, min(u.idx) AS idx
              FROM unnest(p_item_append, p_item_types, p_item_tags) AS c(app, types, tags)
              JOIN unnest(p_event_append, p_event_index, p_type, p_tags) AS u(app, idx, type, tags)
                ON u.app < c.app
               AND string_to_array(u.tags, E'\x1f') @> string_to_array(c.tags, E'\x1f')
               AND (c.types = '' OR u.type = ANY (string_to_array(c.types, E'\x1f')))
              GROUP BY c.app, u.app) m;
    END IF;
    v_pairs := coalesce(array_length(v_pair_app, 1), 0);

    FOR i IN 1 .. v_n + 1 LOOP
        -- Write the accepted appends before a key lookup that must see them, and at the end.
        IF i > v_n OR p_key[i] IS NOT NULL THEN
            IF v_written < i - 1 THEN
                WITH written AS (
                    INSERT INTO ratchet.events
                        (position, type, tags, payload, metadata, recorded_at)
                    SELECT v_base[u.app] + u.idx, u.type, string_to_array(u.tags, E'\x1f'),
                           u.payload, u.metadata, p_now
                    FROM unnest(p_event_append, p_event_index, p_type, p_tags, p_payload,
                                p_metadata) AS u(app, idx, type, tags, payload, metadata)
                    WHERE u.app > v_written AND u.app < i AND v_base[u.app] IS NOT NULL
                    RETURNING position, tags)
                INSERT INTO ratchet.event_tags (tag, position)
                SELECT t.tag, w.position FROM written w, unnest(w.tags) AS t(tag);
                IF v_keys THEN
                    INSERT INTO ratchet.event_appends (key, first_position, last_position)
                    SELECT p_key[a], v_first[a], v_last[a]
                    FROM generate_series(v_written + 1, i - 1) AS a
                    WHERE p_key[a] IS NOT NULL AND v_base[a] IS NOT NULL;
                END IF;
            END IF;
            v_written := i - 1;
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
            v_conflict := v_table[i];
            WHILE v_pair <= v_pairs AND v_pair_app[v_pair] < i LOOP
                v_pair := v_pair + 1;
            END LOOP;
            WHILE v_pair <= v_pairs AND v_pair_app[v_pair] = i LOOP
                IF v_base[v_pair_earlier[v_pair]] IS NOT NULL
                   AND v_base[v_pair_earlier[v_pair]] + v_pair_idx[v_pair] > p_after[i] THEN
                    v_conflict := least(v_conflict,
                        v_base[v_pair_earlier[v_pair]] + v_pair_idx[v_pair]);
                END IF;
                v_pair := v_pair + 1;
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
