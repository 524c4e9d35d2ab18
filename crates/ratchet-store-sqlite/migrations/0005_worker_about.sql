-- What each process says of itself: the queues it works (JSON array) and its label, host,
-- capacity and the names it runs (JSON object), for the server's fleet view.
ALTER TABLE workers ADD COLUMN queues TEXT NOT NULL DEFAULT '[]';
ALTER TABLE workers ADD COLUMN about TEXT NOT NULL DEFAULT '{}';
