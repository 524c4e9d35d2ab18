//! API tokens: what a server checks a bearer token against. The store keeps each token's
//! hash, never the token.

use ratchet_core::Timestamp;

/// A token to record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewToken {
    /// Its public id (part of the token, shown in lists).
    pub id: String,
    /// What it is for, for people.
    pub name: String,
    /// The hash of the whole token (hex SHA-256).
    pub hash: String,
    /// What it may do: `read`, `write`, `admin`.
    pub scopes: Vec<String>,
    /// When it was made.
    pub created_at: Timestamp,
}

/// A recorded token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    /// Its public id.
    pub id: String,
    /// What it is for.
    pub name: String,
    /// What it may do.
    pub scopes: Vec<String>,
    /// When it was made.
    pub created_at: Timestamp,
    /// When it was revoked: it is refused from then on.
    pub revoked_at: Option<Timestamp>,
}
