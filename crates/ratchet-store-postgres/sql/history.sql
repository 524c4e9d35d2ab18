-- Statements on history. `ratchet.` is replaced with the configured schema.

-- name: history_read
-- One row per turn: its events as a JSON array, from position `seq`.
SELECT execution, seq, events FROM ratchet.history
WHERE instance = $1 AND ($2::integer IS NULL OR execution = $2)
ORDER BY execution, seq;

-- name: history_page
-- The turns holding events after position ($2, $3), or from the start when $2 is NULL: the
-- turn holding that position (some of its events may come after it), then up to $4 more
-- (each holds at least one event). Both read the primary key from where the page begins.
SELECT execution, seq, events FROM (
    (SELECT execution, seq, events FROM ratchet.history
     WHERE instance = $1 AND ($2::integer IS NULL OR (execution, seq) > ($2, $3::integer))
     ORDER BY execution, seq LIMIT $4)
    UNION ALL
    (SELECT execution, seq, events FROM ratchet.history
     WHERE instance = $1 AND $2::integer IS NOT NULL AND (execution, seq) <= ($2, $3::integer)
     ORDER BY execution DESC, seq DESC LIMIT 1)
) h
ORDER BY execution, seq;
