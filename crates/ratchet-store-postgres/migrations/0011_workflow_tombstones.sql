-- The highest revision deleted of each declarative workflow: a revision number is never given
-- twice, so a worker that still holds a deleted revision in memory never takes a new
-- definition for it.
CREATE TABLE ratchet.workflow_tombstones (
    namespace text NOT NULL,
    name      text NOT NULL,
    revision  integer NOT NULL,
    PRIMARY KEY (namespace, name)
);
