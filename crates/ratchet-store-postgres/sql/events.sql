-- Statements on the event store. `ratchet.` is replaced with the configured schema.
-- Reads are built per query shape in `src/event.rs`.

-- name: event_append
SELECT outcome, first_position, last_position
FROM ratchet.event_append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14);

-- name: events_notify
SELECT pg_notify('ratchet.events', '');
