//! The filters an expression may call: jaq's standard library less what a workflow must
//! not reach (the process, the clock, the time zone, the environment, the error stream),
//! with jaq-json's filters written for [`V`] so they are metered, and guards in front of
//! what could run long in one step (`range`, regular expressions).

use bstr::ByteSlice as _;
use jaq_core::box_iter::{box_once, BoxIter};
use jaq_core::native::{bome, run, v, Filter, Fun};
use jaq_core::{load, Error, Exn, RunPtr, ValR, ValX};
use jaq_json::{Num, Val};

use super::meter::{charge, charge_string};
use super::ops::order;
use super::value::{equal, Short, V};
use super::Metered;

/// Filters a workflow's expression may not call, with why: each is refused when the
/// expression is compiled, naming it.
pub(crate) const REFUSED: &[(&str, &str)] = &[
    ("halt", "it would stop the process that runs the workflow"),
    (
        "halt_error",
        "it would stop the process that runs the workflow",
    ),
    ("debug", "it writes to the process's error stream"),
    ("stderr", "it writes to the process's error stream"),
    (
        "input",
        "a workflow has no input stream: use `$input` or `$workflow.input`",
    ),
    (
        "inputs",
        "a workflow has no input stream: use `$input` or `$workflow.input`",
    ),
    ("input_filename", "a workflow has no input file"),
    (
        "now",
        "replay could not repeat it: use `$workflow.startedAt`",
    ),
    (
        "localtime",
        "its result depends on the worker's time zone: use `gmtime`",
    ),
    (
        "strflocaltime",
        "its result depends on the worker's time zone: use `strftime`",
    ),
    ("env", "a workflow does not read the worker's environment"),
    ("$ENV", "a workflow does not read the worker's environment"),
    ("get_search_list", "a workflow loads no modules"),
    ("tobytes", "byte strings cannot be stored"),
];

/// The prefix of the names of Ratchet's own filters, which expressions may not call.
pub(crate) const RESERVED_PREFIX: &str = "_ratchet_";

/// Natives left out: those behind [`REFUSED`], and those replaced here.
const LEFT_OUT: &[&str] = &[
    "halt",
    "debug_empty",
    "stderr_empty",
    "env",
    "now",
    "localtime",
    "strflocaltime",
    "range",
];

/// Natives kept under a reserved name behind a guard (see [`DEFS`]): regular expressions,
/// and the time filters, whose arithmetic overflows on times far outside the calendar.
const GUARDED: &[(&str, &str)] = &[
    ("matches", "_ratchet_matches"),
    ("split_matches", "_ratchet_split_matches"),
    ("split_", "_ratchet_split_"),
    ("gmtime", "_ratchet_gmtime"),
    ("mktime", "_ratchet_mktime"),
    ("strftime", "_ratchet_strftime"),
];

/// The seconds from 1970 to late on the last day of year 9999 (the latest time jaq's
/// calendar holds), and back to year 1: the times the time filters take.
const MAX_EPOCH_SECONDS: f64 = 253_402_207_200.0;
const MIN_EPOCH_SECONDS: f64 = -62_135_596_800.0;

/// The longest regular expression a filter may use.
pub(crate) const MAX_REGEX_BYTES: usize = 1000;

/// Definitions in front of jaq's standard library: the guarded regular expressions.
const DEFS: &str = r#"
def matches($re; $flags): _ratchet_regex_cost($re) as $_ | _ratchet_matches($re; $flags);
def split_matches($re; $flags): _ratchet_regex_cost($re) as $_ | _ratchet_split_matches($re; $flags);
def split_($re; $flags): _ratchet_regex_cost($re) as $_ | _ratchet_split_($re; $flags);
def gmtime: _ratchet_time_check | _ratchet_gmtime;
def mktime: _ratchet_time_check | _ratchet_mktime;
def strftime($fmt): _ratchet_time_check | _ratchet_strftime($fmt);
"#;

/// The definitions every expression is compiled with, in order.
pub(crate) fn defs() -> impl Iterator<Item = load::parse::Def<&'static str>> {
    let ours = load::parse(DEFS, |p| p.defs()).unwrap_or_default();
    // The standard definitions of refused filters (`halt`, `debug`, ...) call natives left
    // out: they go too.
    jaq_core::defs()
        .chain(ours)
        .chain(jaq_std::defs())
        .chain(jaq_json::defs())
        .filter(|def| !REFUSED.iter().any(|(name, _)| *name == def.name))
}

/// The native filters every expression is compiled with.
pub(crate) fn funs() -> impl Iterator<Item = Fun<Metered>> {
    let std = jaq_core::funs::<Metered>()
        .chain(jaq_std::funs::<Metered>())
        .filter(|(name, _, _)| !LEFT_OUT.contains(name))
        .map(|(name, args, native)| {
            let renamed = GUARDED
                .iter()
                .find(|(from, _)| *from == name)
                .map_or(name, |(_, to)| *to);
            (renamed, args, native)
        });
    std.chain(ours().into_vec().into_iter().map(run::<Metered>))
}

fn unary<'a>(
    mut cv: jaq_core::Cv<'a, Metered>,
    f: impl Fn(V, V) -> ValR<V> + 'a,
) -> jaq_core::ValXs<'a, V> {
    let arg = cv.0.pop_var();
    bome(f(cv.1, arg))
}

fn ours() -> Box<[Filter<RunPtr<Metered>>]> {
    Box::new([
        ("range", v(3), |mut cv| {
            let by = cv.0.pop_var();
            let to = cv.0.pop_var();
            let from = cv.0.pop_var();
            range(from, to, by)
        }),
        ("_ratchet_regex_cost", v(1), |cv| {
            unary(cv, |text, re| {
                let pattern = re.as_str_bytes().map_or(0, <[u8]>::len);
                if pattern > MAX_REGEX_BYTES {
                    return Err(Error::str(format_args!(
                        "a regular expression may be at most {MAX_REGEX_BYTES} bytes, this one is {pattern}"
                    )));
                }
                // Matching costs up to the text's length times the expression's.
                let text = text.as_str_bytes().map_or(0, <[u8]>::len);
                charge((text as u64).saturating_mul(pattern as u64 + 1) / 256 + 1);
                Ok(V::scalar(Val::Null))
            })
        }),
        ("_ratchet_time_check", v(0), |cv| bome(time_check(cv.1))),
        ("tojson", v(0), |cv| bome(Ok(V::string(cv.1.json_text())))),
        ("fromjson", v(0), |cv| fromjson(cv.1)),
        ("length", v(0), |cv| bome(length(cv.1))),
        ("contains", v(1), |cv| {
            unary(cv, |x, y| Ok(V::from(contains(&x.val, &y.val))))
        }),
        ("has", v(1), |cv| unary(cv, has)),
        ("indices", v(1), |cv| unary(cv, indices)),
        ("bsearch", v(1), |cv| {
            unary(cv, |a, x| match &a.val {
                Val::Arr(items) => {
                    let items: Vec<V> = items.iter().map(|i| a.inner(i.clone())).collect();
                    let found = items.binary_search_by(|y| order(y, &x));
                    Ok(V::from(
                        found.map_or_else(|i| -1 - i as isize, |i| i as isize),
                    ))
                }
                _ => Err(Error::typ(a, "array")),
            })
        }),
    ])
}

/// A time the time filters take: seconds since 1970 within years 1 to 9999, or a broken-down
/// time whose fields fit the calendar's (jaq's arithmetic on them overflows otherwise).
fn time_check(v: V) -> ValR<V> {
    let number = |x: &Val| match x {
        Val::Num(_) => jaq_std::ValT::as_f64(x),
        _ => None,
    };
    let fits = match &v.val {
        Val::Num(_) => {
            number(&v.val).is_some_and(|s| (MIN_EPOCH_SECONDS..=MAX_EPOCH_SECONDS).contains(&s))
        }
        Val::Arr(items) => items.iter().take(6).enumerate().all(|(i, x)| {
            let range = if i == 0 { 1.0..=9999.0 } else { -128.0..=126.0 };
            number(x).is_none_or(|n| range.contains(&n))
        }),
        _ => true,
    };
    if fits {
        Ok(v)
    } else {
        Err(Error::str(format_args!(
            "{} is not a time between years 1 and 9999",
            v.json_text()
        )))
    }
}

/// jq's `range($from; $upto; $by)`, a unit of fuel an output.
fn range<'a>(from: V, to: V, by: V) -> BoxIter<'a, ValX<'a, V>> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let step = by.partial_cmp(&V::from(0_isize)).unwrap_or(Equal);
    let mut next: ValX<'a, V> = Ok(from);
    Box::new(std::iter::from_fn(move || {
        charge(1);
        match next.clone() {
            Ok(x) => {
                let more = match step {
                    Greater => x < to,
                    Less => x > to,
                    Equal => x != to,
                };
                more.then(|| std::mem::replace(&mut next, (x + by.clone()).map_err(Exn::from)))
            }
            Err(e) => {
                next = Ok(to.clone());
                Some(Err(e))
            }
        }
    }))
}

impl V {
    fn as_str_bytes(&self) -> Option<&[u8]> {
        match &self.val {
            Val::TStr(b) | Val::BStr(b) => Some(b),
            _ => None,
        }
    }
}

/// `fromjson`: every JSON value in the string, each as deep as a value may be.
fn fromjson<'a>(v: V) -> BoxIter<'a, ValX<'a, V>> {
    let Some(text) = v.as_str_bytes() else {
        return box_once(Err(Exn::from(Error::typ(v, "string"))));
    };
    charge_string(text.len());
    let values: Vec<ValX<'a, V>> = serde_json::Deserializer::from_slice(text)
        .into_iter::<serde_json::Value>()
        .map(|r| match r {
            Ok(value) => Ok(V::from_json(&value)),
            Err(e) => Err(Exn::from(Error::str(format_args!(
                "cannot parse {} as JSON: {e}",
                Short(&v.val)
            )))),
        })
        .collect();
    Box::new(values.into_iter())
}

fn length(v: V) -> ValR<V> {
    Ok(match &v.val {
        Val::Null => V::from(0_usize),
        Val::Num(Num::Int(i)) => V::scalar(Val::Num(Num::from_integral(i.unsigned_abs()))),
        Val::Num(_) => V::from(jaq_std::ValT::as_f64(&v.val).unwrap_or(f64::NAN).abs()),
        Val::TStr(s) => {
            charge_string(s.len());
            V::from(s.chars().count())
        }
        Val::BStr(b) => V::from(b.len()),
        Val::Arr(a) => V::from(a.len()),
        Val::Obj(o) => V::from(o.len()),
        Val::Bool(_) => return Err(Error::str(format_args!("{v} has no length"))),
    })
}

/// jq's `contains`: substrings, every element of an array in some element, every field
/// of an object in the same field; a unit of fuel a comparison.
fn contains(l: &Val, r: &Val) -> bool {
    charge(1);
    match (l, r) {
        (Val::BStr(l), Val::BStr(r)) | (Val::TStr(l), Val::TStr(r)) => {
            charge_string(l.len());
            l.contains_str(&**r)
        }
        (Val::Arr(l), Val::Arr(r)) => r.iter().all(|r| l.iter().any(|l| contains(l, r))),
        (Val::Obj(l), Val::Obj(r)) => r
            .iter()
            .all(|(k, r)| l.get(k).is_some_and(|l| contains(l, r))),
        _ => equal(l, r),
    }
}

fn has(v: V, k: V) -> ValR<V> {
    v.index_opt(&k).map(|found| V::from(found.is_some()))
}

fn indices(x: V, y: V) -> ValR<V> {
    let found: Vec<usize> = match (&x.val, &y.val) {
        (Val::BStr(_), Val::BStr(n)) | (Val::TStr(_), Val::TStr(n)) if n.is_empty() => Vec::new(),
        (Val::TStr(h), Val::TStr(n)) => {
            charge((h.len() as u64).saturating_mul(n.len() as u64 / 64 + 1) / 32 + 1);
            let window = |(i, _, _)| h.get(i..i + n.len());
            h.char_indices()
                .map_while(window)
                .enumerate()
                .filter_map(|(i, w)| (w == &n[..]).then_some(i))
                .collect()
        }
        (Val::BStr(h), Val::BStr(n)) => {
            charge((h.len() as u64).saturating_mul(n.len() as u64 / 64 + 1) / 32 + 1);
            h.windows(n.len())
                .enumerate()
                .filter_map(|(i, w)| (w == &n[..]).then_some(i))
                .collect()
        }
        (Val::Arr(_), Val::Arr(n)) if n.is_empty() => Vec::new(),
        (Val::Arr(h), Val::Arr(n)) => h
            .windows(n.len())
            .enumerate()
            .filter(|(_, w)| w.iter().zip(n.iter()).all(|(a, b)| equal(a, b)))
            .map(|(i, _)| i)
            .collect(),
        (Val::Arr(h), _) => h
            .iter()
            .enumerate()
            .filter(|(_, e)| equal(e, &y.val))
            .map(|(i, _)| i)
            .collect(),
        _ => return Err(Error::index(x, y)),
    };
    Ok(found.into_iter().map(V::from).collect())
}
