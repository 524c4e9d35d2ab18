-- API tokens of `ratchet server`: the hash of each token, never the token.
CREATE TABLE ratchet.api_tokens (
    id         text PRIMARY KEY,
    name       text NOT NULL,
    hash       text NOT NULL UNIQUE,
    -- read, write, admin
    scopes     text[] NOT NULL,
    created_at bigint NOT NULL,
    revoked_at bigint
);
