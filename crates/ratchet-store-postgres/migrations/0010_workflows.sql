-- Declarative workflow definitions. A version, once stored, never changes: instances stay on
-- the revision (the engine's version number) they started on.
CREATE TABLE ratchet.workflows (
    namespace  text NOT NULL,
    name       text NOT NULL,
    version    text NOT NULL,
    revision   integer NOT NULL,
    hash       text NOT NULL,
    source     text NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (namespace, name, revision),
    UNIQUE (namespace, name, version)
);
