-- An inbox row's key, (instance, id), made unique and the table's replica identity: a Citus
-- rebalance moves a shard by logical replication while the cluster serves, and replication
-- applies a delete only to a table that says which columns identify its rows. The index
-- stays the one every statement uses to find an instance's events.
DROP INDEX ratchet.inbox_by_instance;
CREATE UNIQUE INDEX inbox_by_instance ON ratchet.inbox (instance, id);
ALTER TABLE ratchet.inbox REPLICA IDENTITY USING INDEX inbox_by_instance;
