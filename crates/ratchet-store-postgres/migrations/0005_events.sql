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

-- One row per (tag, event): a boundary's events in position order, so a read or a
-- condition by tag seeks straight to the range it needs (`after` a position, the newest
-- one) instead of fetching every event of the tag.
CREATE TABLE ratchet.event_tags (
    tag      text NOT NULL,
    position bigint NOT NULL,
    PRIMARY KEY (tag, position)
);

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
