-- name: history_insert
INSERT INTO history (instance, execution, seq, event) VALUES (?1, ?2, ?3, ?4);

-- name: history_read
SELECT execution, seq, event FROM history
WHERE instance = ?1 AND (?2 IS NULL OR execution = ?2)
ORDER BY execution, seq;

-- name: history_page
-- Up to ?4 events after position (?2, ?3), or from the start when ?2 is NULL.
SELECT execution, seq, event FROM history
WHERE instance = ?1 AND (?2 IS NULL OR (execution, seq) > (?2, ?3))
ORDER BY execution, seq
LIMIT ?4;

-- name: history_clear
DELETE FROM history WHERE instance = ?1;
