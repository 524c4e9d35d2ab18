-- Declarative workflow definitions. A version, once stored, never changes: instances stay on
-- the revision (the engine's version number) they started on.
CREATE TABLE workflows (
    namespace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    version    TEXT NOT NULL,
    revision   INTEGER NOT NULL,
    hash       TEXT NOT NULL,
    source     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, name, revision),
    UNIQUE (namespace, name, version)
);
