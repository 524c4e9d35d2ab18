-- The queues each live process serves, so that an enqueue's notification wakes one of them
-- first instead of all (see the store's share.rs).
ALTER TABLE ratchet.workers ADD COLUMN queues text[] NOT NULL DEFAULT '{}';
