-- The highest revision deleted of each declarative workflow: a revision number is never given
-- twice, so a worker that still holds a deleted revision in memory never takes a new
-- definition for it.
CREATE TABLE workflow_tombstones (
    namespace TEXT NOT NULL,
    name      TEXT NOT NULL,
    revision  INTEGER NOT NULL,
    PRIMARY KEY (namespace, name)
);
