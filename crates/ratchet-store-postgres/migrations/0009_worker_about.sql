-- What each process says of itself (label, host, capacity, the names it runs), as JSON: the
-- server's fleet view, and its check that a started name is served somewhere.
ALTER TABLE ratchet.workers ADD COLUMN about text NOT NULL DEFAULT '{}';
