-- Statements on history. `ratchet.` is replaced with the configured schema.

-- name: history_read
-- One row per turn: its events as a JSON array, from position `seq`.
SELECT execution, seq, events FROM ratchet.history
WHERE instance = $1 AND ($2::integer IS NULL OR execution = $2)
ORDER BY execution, seq;
