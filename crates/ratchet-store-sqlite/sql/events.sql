-- name: event_head
-- The last position in the store, 0 when empty.
SELECT coalesce(max(position), 0) FROM events;

-- name: event_insert
INSERT INTO events (position, type, tags, payload, metadata, recorded_at)
VALUES (?1, ?2, ?3, ?4, ?5, ?6);

-- name: event_tag_insert
INSERT INTO event_tags (tag, position) VALUES (?1, ?2);

-- name: event_append_find
SELECT first, last FROM event_appends WHERE key = ?1;

-- name: event_append_insert
INSERT INTO event_appends (key, first, last) VALUES (?1, ?2, ?3);

-- name: event_first_after
-- A condition matching every event: the first event after ?1.
SELECT position FROM events WHERE position > ?1 ORDER BY position LIMIT 1;

-- name: event_first_of_types
-- A condition item with types only: the first event after ?2 of any type in the JSON array ?1,
-- one index seek per type.
SELECT min(first) FROM (
    SELECT (SELECT e.position FROM events e
            WHERE e.type = j.value AND e.position > ?2
            ORDER BY e.position LIMIT 1) AS first
    FROM json_each(?1) j);

-- name: event_first_with_tags
-- A condition item with tags: the first event after ?2 carrying tag ?1, every tag of the JSON
-- array ?3, and (unless ?4 is NULL) a type in the JSON array ?4. Walks ?1's positions in order
-- and looks each candidate's other tags and type up by key.
SELECT t.position FROM event_tags t
WHERE t.tag = ?1 AND t.position > ?2
  AND NOT EXISTS (
      SELECT 1 FROM json_each(?3) o
      WHERE NOT EXISTS (SELECT 1 FROM event_tags x WHERE x.tag = o.value AND x.position = t.position))
  AND (?4 IS NULL OR EXISTS (
      SELECT 1 FROM events e
      WHERE e.position = t.position AND e.type IN (SELECT value FROM json_each(?4))))
ORDER BY t.position
LIMIT 1;

-- name: event_read_all_forward
SELECT position, type, tags, payload, metadata, recorded_at FROM events
WHERE position > ?1 AND position < ?2
ORDER BY position
LIMIT ?3;

-- name: event_read_all_backward
SELECT position, type, tags, payload, metadata, recorded_at FROM events
WHERE position > ?1 AND position < ?2
ORDER BY position DESC
LIMIT ?3;
