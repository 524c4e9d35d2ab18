//! CloudEvents 1.0 in structured JSON form: what an event of the store is when it comes in
//! as one, and what it looks like going out as one.
//!
//! An event of the store has a type, tags, a payload and metadata. A CloudEvent maps onto it
//! one to one: `type` is its type, `data` its payload (JSON: `data_base64` is refused), every
//! other context attribute a field of its metadata; the extension attribute `tags` (a list
//! of `key:value` strings) is its consistency boundary. Read back, the metadata
//! of an event that came in as a CloudEvent gives its attributes again; an event appended
//! any other way is given `specversion`, `id` (from its position), `source` and `time`.

use serde_json::{Map, Value};

use crate::{NewEvent, StoredEvent};

/// The `source` of an event that did not come in as a CloudEvent.
pub const STORE_SOURCE: &str = "urn:ratchet:events";

/// Why a JSON value is not a CloudEvent Ratchet can append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloudEventError {
    /// Not a JSON object.
    #[error("a CloudEvent is a JSON object of its attributes, not {0}")]
    NotAnObject(&'static str),
    /// A required attribute is missing or empty.
    #[error("a CloudEvent needs `{0}`, a non-empty string")]
    Missing(&'static str),
    /// `specversion` is not `1.0`.
    #[error("`specversion` is {0}; Ratchet reads CloudEvents 1.0")]
    SpecVersion(String),
    /// An attribute's name or value breaks the CloudEvents rules.
    #[error("attribute `{name}`: {why}")]
    Attribute {
        /// The attribute.
        name: String,
        /// What is wrong with it.
        why: String,
    },
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn attribute(name: &str, why: impl Into<String>) -> CloudEventError {
    CloudEventError::Attribute {
        name: name.to_string(),
        why: why.into(),
    }
}

impl NewEvent {
    /// The event a CloudEvent (1.0, structured JSON) appends: `specversion` `1.0`, `id`,
    /// `source` and `type` are required; attribute names are lower-case letters and digits,
    /// their values strings, numbers, booleans or null (only `data` may be anything, and
    /// `tags` is a list); `data_base64` is refused (Ratchet's events carry JSON).
    ///
    /// # Errors
    ///
    /// [`CloudEventError`], naming the attribute.
    pub fn from_cloud_event(value: Value) -> Result<NewEvent, CloudEventError> {
        let Value::Object(mut attributes) = value else {
            return Err(CloudEventError::NotAnObject(kind_of(&value)));
        };
        match attributes.get("specversion") {
            Some(Value::String(v)) if v == "1.0" => {}
            Some(other) => return Err(CloudEventError::SpecVersion(other.to_string())),
            None => return Err(CloudEventError::Missing("specversion")),
        }
        for required in ["id", "source"] {
            if !matches!(attributes.get(required), Some(Value::String(s)) if !s.is_empty()) {
                return Err(CloudEventError::Missing(required));
            }
        }
        let kind = match attributes.remove("type") {
            Some(Value::String(t)) if !t.is_empty() => t,
            _ => return Err(CloudEventError::Missing("type")),
        };
        if attributes.contains_key("data_base64") {
            return Err(attribute(
                "data_base64",
                "Ratchet's events carry JSON: send the payload as `data`",
            ));
        }
        let payload = attributes.remove("data").unwrap_or(Value::Null);
        let tags = match attributes.remove("tags") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .into_iter()
                .map(|t| match t {
                    Value::String(s) => Ok(s),
                    other => Err(attribute(
                        "tags",
                        format!("a tag is a `key:value` string, not {}", kind_of(&other)),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(attribute(
                    "tags",
                    format!("a list of `key:value` strings, not {}", kind_of(&other)),
                ))
            }
        };
        for (name, value) in &attributes {
            let well_named = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
            if !well_named {
                return Err(attribute(
                    name,
                    "attribute names are lower-case letters and digits (CloudEvents 1.0)",
                ));
            }
            if matches!(value, Value::Array(_) | Value::Object(_)) {
                return Err(attribute(
                    name,
                    format!(
                        "a context attribute is a string, number or boolean, not {}",
                        kind_of(value)
                    ),
                ));
            }
        }
        Ok(NewEvent {
            kind,
            tags,
            payload,
            metadata: Value::Object(attributes),
        })
    }
}

impl StoredEvent {
    /// The event as a CloudEvent (1.0, structured JSON): the attributes it came in with,
    /// or for an event appended otherwise `specversion`, `id` (its position), `source`
    /// ([`STORE_SOURCE`]), `time` (when it was appended) and its `metadata` as is; then
    /// `type`, `data`, and the extensions `tags` and `position`.
    pub fn to_cloud_event(&self) -> Value {
        let mut out = Map::new();
        match &self.metadata {
            Value::Object(m) if m.get("specversion").is_some_and(Value::is_string) => {
                out.extend(m.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
            Value::Null => {}
            other => {
                out.insert("metadata".into(), other.clone());
            }
        }
        out.entry("specversion")
            .or_insert_with(|| Value::String("1.0".into()));
        out.entry("id")
            .or_insert_with(|| Value::String(self.position.0.to_string()));
        out.entry("source")
            .or_insert_with(|| Value::String(STORE_SOURCE.into()));
        out.entry("time")
            .or_insert_with(|| Value::String(self.recorded_at.to_rfc3339()));
        out.insert("type".into(), Value::String(self.kind.clone()));
        out.insert("data".into(), self.payload.clone());
        out.insert(
            "tags".into(),
            Value::Array(self.tags.iter().cloned().map(Value::String).collect()),
        );
        out.insert("position".into(), Value::from(self.position.0));
        Value::Object(out)
    }
}

#[cfg(test)]
mod tests {
    use ratchet_core::Timestamp;
    use serde_json::json;

    use super::*;
    use crate::Position;

    #[test]
    fn a_cloud_event_appends_and_reads_back_the_same() {
        let ce = json!({
            "specversion": "1.0", "id": "a1", "source": "https://shop.example/orders",
            "type": "order.placed", "subject": "o-7", "time": "2026-11-26T10:00:00Z",
            "tags": ["order:o-7", "customer:c1"], "data": {"total": 12}
        });
        let event = NewEvent::from_cloud_event(ce.clone()).unwrap();
        assert_eq!(event.kind, "order.placed");
        assert_eq!(event.tags, ["order:o-7", "customer:c1"]);
        assert_eq!(event.payload, json!({"total": 12}));
        assert_eq!(event.metadata["subject"], "o-7");
        let stored = StoredEvent {
            position: Position(9),
            kind: event.kind,
            tags: vec!["customer:c1".into(), "order:o-7".into()],
            payload: event.payload,
            metadata: event.metadata,
            recorded_at: Timestamp(0),
        };
        let back = stored.to_cloud_event();
        for key in [
            "specversion",
            "id",
            "source",
            "type",
            "subject",
            "time",
            "data",
        ] {
            assert_eq!(back[key], ce[key], "{key}");
        }
        assert_eq!(back["position"], 9);
    }

    #[test]
    fn an_event_appended_otherwise_gets_the_required_attributes() {
        let stored = StoredEvent {
            position: Position(3),
            kind: "Enrolled".into(),
            tags: vec![],
            payload: json!(1),
            metadata: json!({"by": {"user": "ada"}}),
            recorded_at: Timestamp(0),
        };
        let ce = stored.to_cloud_event();
        assert_eq!(ce["specversion"], "1.0");
        assert_eq!(ce["id"], "3");
        assert_eq!(ce["source"], STORE_SOURCE);
        assert_eq!(ce["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(ce["metadata"], json!({"by": {"user": "ada"}}));
    }

    #[test]
    fn a_bad_cloud_event_is_refused_naming_what() {
        let base = json!({"specversion": "1.0", "id": "1", "source": "s", "type": "t"});
        let with = |k: &str, v: Value| {
            let mut e = base.clone();
            e[k] = v;
            NewEvent::from_cloud_event(e).unwrap_err().to_string()
        };
        assert!(with("specversion", json!("0.3")).contains("1.0"));
        assert!(with("id", json!("")).contains("`id`"));
        assert!(with("type", json!(3)).contains("`type`"));
        assert!(with("Bad-Name", json!("x")).contains("lower-case"));
        assert!(with("subject", json!({"a": 1})).contains("not an object"));
        assert!(with("tags", json!([1])).contains("key:value"));
        assert!(with("data_base64", json!("AQ==")).contains("JSON"));
        assert!(with("tags", json!("a:1,b:2")).contains("list"));
        assert!(NewEvent::from_cloud_event(json!([1])).is_err());
    }
}
