//! How both backends store payloads, events and statuses: as JSON text and status names that
//! the database keeps without interpreting, so what goes in comes back exactly.

use ratchet_core::HistoryEvent;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{InstanceStatus, StoreError};

/// A value as stored.
pub fn to_json<T: Serialize>(v: &T) -> String {
    // Serializing Ratchet's own plain data types cannot fail.
    serde_json::to_string(v).unwrap_or_else(|_| "null".to_string())
}

/// A stored value read back; `what` names it in the error.
///
/// # Errors
///
/// [`StoreError::Corrupt`] when the text is not a `T`.
pub fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// An optional stored value read back.
///
/// # Errors
///
/// As [`from_json`].
pub fn opt_json<T: DeserializeOwned>(
    text: Option<String>,
    what: &str,
) -> Result<Option<T>, StoreError> {
    text.map(|t| from_json(&t, what)).transpose()
}

/// A stored history or inbox event read back.
///
/// # Errors
///
/// As [`from_json`].
pub fn event(text: &str) -> Result<HistoryEvent, StoreError> {
    from_json(text, "history event")
}

/// A stored status name read back.
///
/// # Errors
///
/// [`StoreError::Corrupt`] for an unknown name.
pub fn status(text: &str) -> Result<InstanceStatus, StoreError> {
    text.parse().map_err(StoreError::Corrupt)
}
