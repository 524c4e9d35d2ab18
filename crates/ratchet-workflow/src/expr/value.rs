//! The values expressions compute with: jaq's JSON values, each carrying a bound on how
//! deeply it nests, so that no operation can build a value deeper than
//! [`MAX_DEPTH`](super::meter::MAX_DEPTH) and every recursive walk over one (a comparison,
//! writing it out, dropping it) stays shallow. The operations (in `ops.rs`) charge the meter
//! for the work they do, so a value shared a billion times over by reference costs what
//! walking it costs.

use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;
use jaq_json::{Map, Num, Rc, Val};
use serde_json::Value;

use super::meter::{self, charge, charge_string, stop, Exhausted, MAX_DEPTH};

/// A jaq value and a bound on its nesting.
#[derive(Clone, Debug)]
pub(crate) struct V {
    pub(super) val: Val,
    /// At least as deep as `val` nests (a scalar 0, `[]` 1): exact for values built or
    /// measured, one less than its container's for a value taken out of one.
    pub(super) depth: u16,
}

impl V {
    /// A value that does not nest (a number, a string, a boolean, null).
    pub(super) fn scalar(val: Val) -> V {
        V { val, depth: 0 }
    }

    /// `val`, taken out of `self`.
    pub(super) fn inner(&self, val: Val) -> V {
        V {
            val,
            depth: self.depth.saturating_sub(1),
        }
    }

    /// A container whose deepest element nests `deepest` levels.
    pub(super) fn nested(val: Val, deepest: u16) -> V {
        let depth = deepest.saturating_add(1);
        if depth > MAX_DEPTH {
            stop(Exhausted::Size(format!(
                "it built a value nested deeper than {MAX_DEPTH} levels"
            )));
        }
        V { val, depth }
    }

    /// A value of unknown nesting, measured (a unit of fuel a node).
    pub(super) fn measured(val: Val) -> V {
        let mut deepest = 0_u16;
        // Each value with the level it sits at (the top one at 0); a container at level L
        // nests L + 1 levels, even when empty.
        let mut stack: Vec<(&Val, u16)> = vec![(&val, 0)];
        while let Some((v, level)) = stack.pop() {
            charge(1);
            let children: Box<dyn Iterator<Item = &Val>> = match v {
                Val::Arr(a) => Box::new(a.iter()),
                Val::Obj(o) => Box::new(o.values()),
                _ => continue,
            };
            let depth = level + 1;
            if depth > MAX_DEPTH {
                stop(Exhausted::Size(format!(
                    "it built a value nested deeper than {MAX_DEPTH} levels"
                )));
            }
            deepest = deepest.max(depth);
            stack.extend(children.map(|x| (x, depth)));
        }
        V {
            val,
            depth: deepest,
        }
    }

    /// A string.
    pub(super) fn string(s: impl Into<Bytes>) -> V {
        let b: Bytes = s.into();
        charge_string(b.len());
        V::scalar(Val::utf8_str(b))
    }

    pub(super) fn is_string(&self) -> bool {
        matches!(self.val, Val::TStr(_) | Val::BStr(_))
    }

    /// A JSON value as a jaq value: a unit of fuel a node, and the nesting limit checked.
    pub(crate) fn from_json(v: &Value) -> V {
        fn go(v: &Value, depth: u16) -> (Val, u16) {
            charge(1);
            if depth > MAX_DEPTH {
                stop(Exhausted::Size(format!(
                    "a value nests deeper than {MAX_DEPTH} levels"
                )));
            }
            match v {
                Value::Null => (Val::Null, 0),
                Value::Bool(b) => (Val::Bool(*b), 0),
                Value::Number(n) => (number(n), 0),
                Value::String(s) => {
                    charge_string(s.len());
                    (Val::utf8_str(Bytes::from(s.clone())), 0)
                }
                Value::Array(items) => {
                    let mut deepest = 0;
                    let items = items
                        .iter()
                        .map(|x| {
                            let (x, d) = go(x, depth + 1);
                            deepest = deepest.max(d);
                            x
                        })
                        .collect();
                    (Val::Arr(Rc::new(items)), deepest + 1)
                }
                Value::Object(fields) => {
                    let mut deepest = 0;
                    let mut map = Map::default();
                    for (k, x) in fields {
                        let (x, d) = go(x, depth + 1);
                        deepest = deepest.max(d);
                        map.insert(Val::utf8_str(Bytes::from(k.clone())), x);
                    }
                    (Val::obj(map), deepest + 1)
                }
            }
        }
        // JSON values come from parsed text (at most 128 levels) or from code; refuse a
        // deeper one before walking it recursively.
        if ratchet_core::limits::json_depth_exceeds(v, usize::from(MAX_DEPTH)) {
            stop(Exhausted::Size(format!(
                "a value nests deeper than {MAX_DEPTH} levels"
            )));
        }
        let (val, depth) = go(v, 0);
        V { val, depth }
    }

    /// The value as JSON: a unit of fuel a node and for every 32 bytes of string.
    ///
    /// # Errors
    ///
    /// An object key that is not a string (jq's objects may have other keys).
    pub(crate) fn to_json(&self) -> Result<Value, String> {
        fn go(v: &Val) -> Result<Value, String> {
            charge(1);
            Ok(match v {
                Val::Null => Value::Null,
                Val::Bool(b) => Value::Bool(*b),
                Val::Num(n) => num_to_json(n),
                Val::TStr(b) | Val::BStr(b) => {
                    charge_string(b.len());
                    Value::String(String::from_utf8_lossy(b).into_owned())
                }
                Val::Arr(a) => Value::Array(a.iter().map(go).collect::<Result<_, _>>()?),
                Val::Obj(o) => {
                    let mut fields = serde_json::Map::new();
                    for (k, x) in o.iter() {
                        let key = match k {
                            Val::TStr(b) | Val::BStr(b) => String::from_utf8_lossy(b).into_owned(),
                            other => {
                                return Err(format!(
                                    "an object key must be a string, not {}",
                                    Short(other)
                                ))
                            }
                        };
                        fields.insert(key, go(x)?);
                    }
                    Value::Object(fields)
                }
            })
        }
        go(&self.val)
    }

    /// The value written as JSON text, as `tojson` and string interpolation write it;
    /// stopped past [`MAX_STRING_BYTES`](super::meter::MAX_STRING_BYTES).
    pub(super) fn json_text(&self) -> String {
        let mut out = Capped::new(meter::MAX_STRING_BYTES);
        // Written node by node, so a value shared by reference a billion times over is
        // charged for what it is when written out.
        fn go(v: &Val, out: &mut Capped) -> fmt::Result {
            use fmt::Write as _;
            charge(1);
            match v {
                Val::Arr(a) => {
                    out.write_char('[')?;
                    for (i, x) in a.iter().enumerate() {
                        if i > 0 {
                            out.write_char(',')?;
                        }
                        go(x, out)?;
                    }
                    out.write_char(']')
                }
                Val::Obj(o) => {
                    out.write_char('{')?;
                    for (i, (k, x)) in o.iter().enumerate() {
                        if i > 0 {
                            out.write_char(',')?;
                        }
                        write!(out, "{k}")?;
                        out.write_char(':')?;
                        go(x, out)?;
                    }
                    out.write_char('}')
                }
                leaf => write!(out, "{leaf}"),
            }
        }
        if go(&self.val, &mut out).is_err() || out.cut {
            stop(Exhausted::Size(format!(
                "it wrote a value of more than {} bytes as text",
                meter::MAX_STRING_BYTES
            )));
        }
        charge_string(out.text.len());
        out.text
    }
}

/// A JSON number as jaq's: integers exactly, the rest as floats.
fn number(n: &serde_json::Number) -> Val {
    if let Some(i) = n.as_i64().and_then(|i| isize::try_from(i).ok()) {
        Val::Num(Num::Int(i))
    } else if let Some(u) = n.as_u64() {
        Val::Num(Num::from_integral(u))
    } else {
        Val::Num(Num::Float(n.as_f64().unwrap_or(f64::NAN)))
    }
}

/// jaq's number as JSON: as jq writes them, `NaN` as null and infinities as the largest
/// finite floats.
fn num_to_json(n: &Num) -> Value {
    match n {
        Num::Int(i) => Value::from(*i as i64),
        Num::BigInt(_) | Num::Dec(_) | Num::Float(_) => {
            let text = n.to_string();
            if let Ok(i) = text.parse::<i64>() {
                return Value::from(i);
            }
            if let Ok(u) = text.parse::<u64>() {
                return Value::from(u);
            }
            let f = match n {
                Num::Float(f) => *f,
                _ => text.parse::<f64>().unwrap_or(f64::NAN),
            };
            if f.is_nan() {
                Value::Null
            } else if f.is_infinite() {
                Value::from(f64::MAX.copysign(f))
            } else {
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        }
    }
}

/// A writer that keeps at most `limit` bytes and remembers that it cut.
pub(crate) struct Capped {
    pub(crate) text: String,
    limit: usize,
    pub(crate) cut: bool,
}

impl Capped {
    pub(crate) fn new(limit: usize) -> Capped {
        Capped {
            text: String::new(),
            limit,
            cut: false,
        }
    }
}

impl fmt::Write for Capped {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self.limit.saturating_sub(self.text.len());
        if s.len() <= room {
            self.text.push_str(s);
            Ok(())
        } else {
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.cut = true;
            Err(fmt::Error)
        }
    }
}

/// A value as error messages show it: its first 200 bytes of JSON.
pub(super) struct Short<'a>(pub(super) &'a Val);

impl fmt::Display for Short<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use fmt::Write as _;
        let mut out = Capped::new(200);
        let _ = write!(out, "{}", self.0);
        f.write_str(&out.text)?;
        if out.cut {
            f.write_str("...")?;
        }
        Ok(())
    }
}

impl fmt::Display for V {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        Short(&self.val).fmt(f)
    }
}

/// Orders two values as jq does (null, false, true, numbers, strings, arrays, objects),
/// a unit of fuel a node compared.
pub(super) fn compare(a: &Val, b: &Val) -> Ordering {
    use Ordering::{Equal, Greater, Less};
    charge(1);
    let rank = |v: &Val| match v {
        Val::Null => 0,
        Val::Bool(_) => 1,
        Val::Num(_) => 2,
        Val::BStr(_) | Val::TStr(_) => 3,
        Val::Arr(_) => 4,
        Val::Obj(_) => 5,
    };
    match (a, b) {
        (Val::Bool(x), Val::Bool(y)) => x.cmp(y),
        (Val::Num(x), Val::Num(y)) => x.cmp(y),
        (Val::BStr(x) | Val::TStr(x), Val::BStr(y) | Val::TStr(y)) => {
            charge((x.len().min(y.len()) / 64) as u64);
            x.cmp(y)
        }
        (Val::Arr(x), Val::Arr(y)) => {
            if std::ptr::eq(x.as_ref(), y.as_ref()) {
                return Equal;
            }
            for (l, r) in x.iter().zip(y.iter()) {
                match compare(l, r) {
                    Equal => {}
                    other => return other,
                }
            }
            x.len().cmp(&y.len())
        }
        (Val::Obj(x), Val::Obj(y)) => {
            if std::ptr::eq(x.as_ref(), y.as_ref()) {
                return Equal;
            }
            match (x.len(), y.len()) {
                (0, 0) => return Equal,
                (0, _) => return Less,
                (_, 0) => return Greater,
                _ => {}
            }
            charge((x.len() + y.len()) as u64);
            let mut l: Vec<_> = x.iter().collect();
            let mut r: Vec<_> = y.iter().collect();
            l.sort_by(|a, b| compare(a.0, b.0));
            r.sort_by(|a, b| compare(a.0, b.0));
            for ((kl, _), (kr, _)) in l.iter().zip(r.iter()) {
                match compare(kl, kr) {
                    Equal => {}
                    other => return other,
                }
            }
            match l.len().cmp(&r.len()) {
                Equal => {}
                other => return other,
            }
            for ((_, vl), (_, vr)) in l.iter().zip(r.iter()) {
                match compare(vl, vr) {
                    Equal => {}
                    other => return other,
                }
            }
            Equal
        }
        (Val::Null, Val::Null) => Equal,
        _ => rank(a).cmp(&rank(b)),
    }
}

/// Whether two values are equal, as jq says, a unit of fuel a node compared.
pub(super) fn equal(a: &Val, b: &Val) -> bool {
    charge(1);
    match (a, b) {
        (Val::Null, Val::Null) => true,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Num(x), Val::Num(y)) => x == y,
        (Val::BStr(x) | Val::TStr(x), Val::BStr(y) | Val::TStr(y)) => {
            charge((x.len().min(y.len()) / 64) as u64);
            x == y
        }
        (Val::Arr(x), Val::Arr(y)) => {
            std::ptr::eq(x.as_ref(), y.as_ref())
                || (x.len() == y.len() && x.iter().zip(y.iter()).all(|(l, r)| equal(l, r)))
        }
        (Val::Obj(x), Val::Obj(y)) => {
            std::ptr::eq(x.as_ref(), y.as_ref())
                || (x.len() == y.len()
                    && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| equal(v, w))))
        }
        _ => false,
    }
}

impl PartialEq for V {
    fn eq(&self, other: &Self) -> bool {
        equal(&self.val, &other.val)
    }
}

impl Eq for V {}

impl PartialOrd for V {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for V {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.val, &other.val)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metered<R>(f: impl FnOnce() -> R) -> Result<R, Exhausted> {
        meter::run(10_000_000, f).0
    }

    #[test]
    fn json_goes_in_and_out_unchanged() {
        let v = json!({"a": [1, 2.5, "x", null, true, {"b": []}], "big": 18446744073709551615_u64, "neg": -3});
        let out = metered(|| V::from_json(&v).to_json()).unwrap().unwrap();
        assert_eq!(out, v);
        let depth = metered(|| V::from_json(&v).depth).unwrap();
        assert_eq!(depth, 4);
    }

    #[test]
    fn measured_depth_is_exact() {
        let v = metered(|| V::measured(V::from_json(&json!([[], [[1]], {"a": {}}])).val).depth)
            .unwrap();
        assert_eq!(v, 3);
        assert_eq!(metered(|| V::measured(Val::Null).depth).unwrap(), 0);
        assert_eq!(
            metered(|| V::measured(V::from_json(&json!([])).val).depth).unwrap(),
            1
        );
    }

    #[test]
    fn ordering_follows_jq() {
        let vals = json!([null, false, true, -1, 2, "a", "b", [], [1], {}, {"a": 1}]);
        let items = metered(|| {
            let Value::Array(items) = &vals else {
                unreachable!()
            };
            items.iter().map(V::from_json).collect::<Vec<_>>()
        })
        .unwrap();
        let sorted = metered(|| {
            let mut s = items.clone();
            s.reverse();
            s.sort();
            s.iter().map(|v| v.to_json().unwrap()).collect::<Vec<_>>()
        })
        .unwrap();
        assert_eq!(Value::Array(sorted), vals);
    }
}
