-- Statements on history. `ratchet.` is replaced with the configured schema.

-- name: history_read
SELECT execution, seq, event FROM ratchet.history
WHERE instance = $1 AND ($2::integer IS NULL OR execution = $2)
ORDER BY execution, seq;
