-- API tokens.

-- name: token_create
-- No row back: the id or the hash is taken.
INSERT INTO ratchet.api_tokens (id, name, hash, scopes, created_at)
VALUES ($1, $2, $3, $4::text[], $5)
ON CONFLICT DO NOTHING
RETURNING id;

-- name: token_list
SELECT id, name, scopes, created_at, revoked_at FROM ratchet.api_tokens ORDER BY created_at, id;

-- name: token_revoke
UPDATE ratchet.api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL
RETURNING id;

-- name: token_find
SELECT id, name, scopes, created_at, revoked_at FROM ratchet.api_tokens WHERE hash = $1;
