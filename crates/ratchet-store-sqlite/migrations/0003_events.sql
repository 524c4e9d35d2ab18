-- The event store: an append-only log of typed, tagged events at increasing positions.
--
-- Positions are given by the appender (the highest plus one) under the file's write lock, so
-- they commit in order and never leave a gap a reader could see filled later.

CREATE TABLE events (
    position    INTEGER PRIMARY KEY,
    type        TEXT NOT NULL,
    -- JSON array of the normalized tags (sorted, without repeats), returned as stored.
    tags        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    metadata    TEXT NOT NULL,
    recorded_at INTEGER NOT NULL
);

-- Reads and conditions by type alone, in position order.
CREATE INDEX events_type ON events (type, position);

-- One row per tag of each event: reads and conditions by tag walk one tag's positions in order
-- and look the other tags up by key.
CREATE TABLE event_tags (
    tag      TEXT NOT NULL,
    position INTEGER NOT NULL,
    PRIMARY KEY (tag, position)
) WITHOUT ROWID;

-- Idempotency keys of appends, with the positions the first append got.
CREATE TABLE event_appends (
    key   TEXT PRIMARY KEY,
    first INTEGER NOT NULL,
    last  INTEGER NOT NULL
) WITHOUT ROWID;
