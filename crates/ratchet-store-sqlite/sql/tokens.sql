-- API tokens.

-- name: token_create
INSERT INTO api_tokens (id, name, hash, scopes, created_at) VALUES (?1, ?2, ?3, ?4, ?5);

-- name: token_list
SELECT id, name, scopes, created_at, revoked_at FROM api_tokens ORDER BY created_at, id;

-- name: token_revoke
UPDATE api_tokens SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL;

-- name: token_find
SELECT id, name, scopes, created_at, revoked_at FROM api_tokens WHERE hash = ?1;
