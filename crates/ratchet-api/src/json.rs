//! How a request body is read: as one JSON value (malformed JSON is a 400), then as the
//! request type, strictly where JSON is loose and leniently where other languages write
//! JSON their own way (a 422 names the field at fault):
//! - an object is an object: serde's derived structs also take a positional array
//!   (`[null, null]` for `{"rate_per_second": null, "burst": null}`), which no schema
//!   describes and which would set fields by their order in the code;
//! - a whole number written as a float (`1168.0`, as Python's `json` writes a float that
//!   holds one) is read where an integer is expected; `1168.5` is still refused.

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, DeserializeOwned, IntoDeserializer, Unexpected, Visitor};
use serde::forward_to_deserialize_any;
use serde_json::{Map, Number, Value};

use crate::problem::{ApiError, ProblemBody};

/// Reads `bytes` as one JSON value of type `T`: malformed JSON is a 400, a well-formed body
/// with a wrong or unknown field a 422 naming it.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|e| {
            if e.is_syntax() || e.is_eof() {
                ProblemBody::bad_request(format!("the body is not valid JSON: {e}"))
            } else {
                ProblemBody::bad_request(format!("the body is not one JSON value: {e}"))
            }
        })
        .map_err(ApiError::from)?;
    from_value(&value)
}

/// Reads `value` as type `T`, strictly (see the module's doc); a 422 names the field at
/// fault.
pub fn from_value<T: DeserializeOwned>(value: &Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Strict(value)).map_err(|e| {
        let path = e.path().to_string();
        let message = e.into_inner().to_string();
        // An unknown field's path may stop at its parent; its message names it.
        let field = match unknown_field(&message) {
            Some(name) if path == "." => name.to_string(),
            Some(name) if !path.ends_with(name) => format!("{path}.{name}"),
            _ => path,
        };
        ApiError::from(ProblemBody::invalid(message).field(field.trim_start_matches('.')))
    })
}

fn unknown_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("unknown field `")?;
    rest.split('`').next()
}

/// A JSON value read as a request type (see the module's doc).
struct Strict<'a>(&'a Value);

type Error = serde_json::Error;

impl<'de> IntoDeserializer<'de, Error> for Strict<'_> {
    type Deserializer = Self;

    fn into_deserializer(self) -> Self {
        self
    }
}

/// The largest whole number a float holds exactly (2^53): past it, `1e20` would be read as
/// some integer near it.
const EXACT: f64 = 9_007_199_254_740_992.0;

impl Strict<'_> {
    /// The value as an integer, when it is a float that holds a whole number exactly.
    fn whole(&self) -> Option<Number> {
        let f = self.0.as_f64().filter(|_| self.0.is_f64())?;
        if f.fract() != 0.0 || f.abs() > EXACT {
            return None;
        }
        // Exact: a whole float within 2^53 converts without loss.
        #[allow(clippy::cast_possible_truncation)]
        let n = f as i64;
        Some(if n >= 0 {
            Number::from(n.unsigned_abs())
        } else {
            Number::from(n)
        })
    }

    fn integer<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        // Integers are 64-bit signed as the document (`int64`) and the database read them.
        if let Some(u) = self.0.as_u64().filter(|u| i64::try_from(*u).is_err()) {
            return Err(de::Error::invalid_value(
                Unexpected::Unsigned(u),
                &"an integer of at most 2^63 - 1",
            ));
        }
        match self.whole() {
            Some(n) => Strict(&Value::Number(n)).deserialize_any_inner(visitor),
            None => self.deserialize_any_inner(visitor),
        }
    }

    fn deserialize_any_inner<'de, V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_unit(),
            Value::Bool(b) => visitor.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    visitor.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    visitor.visit_i64(i)
                } else {
                    visitor.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => visitor.visit_str(s),
            Value::Array(items) => {
                visitor.visit_seq(SeqDeserializer::new(items.iter().map(Strict)))
            }
            Value::Object(fields) => visitor.visit_map(map(fields)),
        }
    }
}

type Fields<'a> =
    std::iter::Map<serde_json::map::Iter<'a>, fn((&'a String, &'a Value)) -> (&'a str, Strict<'a>)>;

fn map<'de, 'a>(fields: &'a Map<String, Value>) -> MapDeserializer<'de, Fields<'a>, Error> {
    let pair: fn((&'a String, &'a Value)) -> (&'a str, Strict<'a>) =
        |(k, v)| (k.as_str(), Strict(v));
    MapDeserializer::new(fields.iter().map(pair))
}

fn unexpected(value: &Value) -> Unexpected<'_> {
    match value {
        Value::Null => Unexpected::Unit,
        Value::Bool(b) => Unexpected::Bool(*b),
        Value::Number(n) => match (n.as_u64(), n.as_i64()) {
            (Some(u), _) => Unexpected::Unsigned(u),
            (None, Some(i)) => Unexpected::Signed(i),
            _ => Unexpected::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Unexpected::Str(s),
        Value::Array(_) => Unexpected::Seq,
        Value::Object(_) => Unexpected::Map,
    }
}

impl<'de> de::Deserializer<'de> for Strict<'_> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.deserialize_any_inner(visitor)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_u16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_u32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_u64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_i8<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_i16<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_i32<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_i64<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        self.integer(visitor)
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => visitor.visit_none(),
            _ => visitor.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, Error> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        self.deserialize_map(visitor)
    }

    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Object(fields) => visitor.visit_map(map(fields)),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            // A unit variant by its name.
            Value::String(s) => visitor.visit_enum(s.as_str().into_deserializer()),
            other => Err(de::Error::invalid_type(unexpected(other), &visitor)),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, Error> {
        visitor.visit_unit()
    }

    forward_to_deserialize_any! {
        bool f32 f64 char str string bytes byte_buf unit unit_struct seq tuple tuple_struct
        identifier i128 u128
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Outer {
        items: Vec<Inner>,
        #[serde(default)]
        limit: Option<u32>,
        #[serde(default)]
        position: Option<u64>,
        #[serde(default)]
        input: Value,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Inner {
        priority: i16,
        #[serde(default)]
        mode: Mode,
    }

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        #[default]
        Fast,
        Slow,
    }

    #[test]
    fn bad_bodies_name_the_field_at_fault() {
        let p = parse_json::<Outer>(br#"{"items":[{"priority":1},{"priority":"high"}]}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(
            (p.status, p.field.as_deref()),
            (422, Some("items[1].priority"))
        );
        let p = parse_json::<Outer>(br#"{"items":[{"priority":1,"colour":2}]}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(p.field.as_deref(), Some("items[0].colour"));
        let p = parse_json::<Outer>(br#"{"itemz":[]}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(p.field.as_deref(), Some("itemz"));
        let p = parse_json::<Outer>(br#"{"items":["#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(p.status, 400);
        let p = parse_json::<Outer>(br#"{"items":[]} {}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(p.status, 400);
        assert!(parse_json::<Outer>(br#"{"items":[{"priority":-3}]}"#).is_ok());
        let p = parse_json::<Outer>(br#"{"items":[{"priority":1,"mode":"odd"}]}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!((p.status, p.field.as_deref()), (422, Some("items[0].mode")));
    }

    #[test]
    fn objects_are_objects_not_positional_arrays() {
        for body in [&br#"[[]]"#[..], br#"{"items":[[1]]}"#, br#"[null, null]"#] {
            let p = parse_json::<Outer>(body)
                .unwrap_err()
                .into_problem()
                .unwrap();
            assert_eq!(p.status, 422, "{}", String::from_utf8_lossy(body));
        }
        let p = parse_json::<Outer>(br#"{"items":[[1]]}"#)
            .unwrap_err()
            .into_problem()
            .unwrap();
        assert_eq!(p.field.as_deref(), Some("items[0]"));
        // Values of any shape stay values.
        let ok = parse_json::<Outer>(br#"{"items":[],"input":[1,{"a":[null]}]}"#).unwrap();
        assert_eq!(ok.input, serde_json::json!([1, {"a": [null]}]));
    }

    #[test]
    fn whole_floats_are_integers_and_fractions_are_not() {
        let ok =
            parse_json::<Outer>(br#"{"items":[{"priority":-3.0,"mode":"slow"}],"limit":1168.0}"#)
                .unwrap();
        assert_eq!(
            (ok.items[0].priority, &ok.items[0].mode, ok.limit),
            (-3, &Mode::Slow, Some(1168))
        );
        for bad in [
            &br#"{"items":[],"limit":1168.5}"#[..],
            br#"{"items":[],"limit":-1.0}"#,
            br#"{"items":[],"limit":1e20}"#,
            br#"{"items":[{"priority":40000.0}]}"#,
            // Integers are 64-bit signed, as the document says (`int64`).
            br#"{"items":[],"position":9223372036854775808}"#,
        ] {
            let p = parse_json::<Outer>(bad)
                .unwrap_err()
                .into_problem()
                .unwrap();
            assert_eq!(p.status, 422, "{}", String::from_utf8_lossy(bad));
        }
        let ok = parse_json::<Outer>(br#"{"items":[],"position":9223372036854775807}"#).unwrap();
        assert_eq!(ok.position, Some(i64::MAX as u64));
        // A float stays a float inside a value.
        let ok = parse_json::<Outer>(br#"{"items":[],"input":2.0}"#).unwrap();
        assert_eq!(ok.input, serde_json::json!(2.0));
    }
}
