//! What jaq needs of a value ([`jaq_core::ValT`], [`jaq_std::ValT`]), for [`V`]: jq's
//! semantics as jaq-json gives them, with each operation charging the meter for its work
//! and checked against the size limits before it allocates. Scalars' arithmetic is
//! jaq-json's own; containers are handled here, where their nesting is known.

use std::cmp::Ordering;

use bstr::ByteSlice as _;
use bytes::{BufMut as _, Bytes, BytesMut};
use jaq_core::box_iter::{box_once, BoxIter};
use jaq_core::{ops, path, val, Error, Exn, ValR, ValX};
use jaq_json::{Map, Num, Rc, Val};

use super::meter::{charge, charge_items, charge_string, stop, Exhausted, MAX_STRING_BYTES};
use super::value::{compare, equal, V};

/// Integers past this many bits are computed as floats: a product of big integers doubles
/// its size, and forty squarings would fill any memory (jq itself computes in floats).
const MAX_INT_BITS: u64 = 512;

type E = Error<V>;

fn rc_unwrap_or_clone<T: Clone>(a: Rc<T>) -> T {
    Rc::try_unwrap(a).unwrap_or_else(|a| (*a).clone())
}

/// A number, with big integers past [`MAX_INT_BITS`] made floats.
fn small(n: Num) -> Num {
    match &n {
        Num::BigInt(i) if i.bits() > MAX_INT_BITS => {
            Num::Float(n.to_string().parse().unwrap_or(f64::NAN))
        }
        _ => n,
    }
}

impl V {
    fn num(n: Num) -> V {
        V::scalar(Val::Num(small(n)))
    }
}

impl From<bool> for V {
    fn from(b: bool) -> V {
        V::scalar(Val::Bool(b))
    }
}

impl From<isize> for V {
    fn from(i: isize) -> V {
        V::scalar(Val::from(i))
    }
}

impl From<usize> for V {
    fn from(i: usize) -> V {
        V::scalar(Val::from(i))
    }
}

impl From<f64> for V {
    fn from(f: f64) -> V {
        V::scalar(Val::from(f))
    }
}

impl From<String> for V {
    fn from(s: String) -> V {
        V::string(s)
    }
}

impl From<val::Range<V>> for V {
    fn from(r: val::Range<V>) -> V {
        let mut map = Map::default();
        let mut deepest = 0;
        for (k, v) in [("start", r.start), ("end", r.end)] {
            if let Some(v) = v {
                deepest = deepest.max(v.depth);
                map.insert(Val::utf8_str(k), v.val);
            }
        }
        V::nested(Val::obj(map), deepest)
    }
}

impl FromIterator<V> for V {
    fn from_iter<T: IntoIterator<Item = V>>(iter: T) -> V {
        let mut deepest = 0;
        let mut items = Vec::new();
        for v in iter {
            charge(1);
            if items.len() == super::meter::MAX_ITEMS {
                charge_items(items.len() + 1);
            }
            deepest = deepest.max(v.depth);
            items.push(v.val);
        }
        V::nested(Val::Arr(Rc::new(items)), deepest)
    }
}

/// The range `from..upto` of a sequence of `len` elements, as jq reads it: negative bounds
/// count from the end, bounds past either end are clipped, `null` is open.
fn clip(range: val::Range<&V>, len: usize) -> Result<(usize, usize), E> {
    let bound = |b: Option<&V>, default: usize| -> Result<usize, E> {
        let Some(v) = b else { return Ok(default) };
        match &v.val {
            Val::Null => Ok(default),
            Val::Num(n @ (Num::Int(_) | Num::BigInt(_))) => {
                let negative = n.to_string().starts_with('-');
                let i = n
                    .as_isize()
                    .unwrap_or(if negative { isize::MIN } else { isize::MAX });
                Ok(if i < 0 {
                    len.saturating_sub(i.unsigned_abs())
                } else {
                    i.unsigned_abs().min(len)
                })
            }
            _ => Err(Error::typ(v.clone(), "integer")),
        }
    };
    let from = bound(range.start, 0)?;
    let upto = bound(range.end, len)?;
    Ok((from, upto.max(from)))
}

/// The byte offsets of characters `from..upto` of UTF-8 text `b`.
fn char_span(b: &[u8], from: usize, upto: usize) -> (usize, usize) {
    charge_string(b.len());
    let mut starts = b.char_indices().map(|(start, _, _)| start);
    let start = starts.by_ref().nth(from).unwrap_or(b.len());
    let end = if upto > from {
        starts.nth(upto - from - 1).unwrap_or(b.len())
    } else {
        start
    };
    (start, end)
}

/// The number of characters of UTF-8 text `b`.
fn char_count(b: &[u8]) -> usize {
    charge_string(b.len());
    b.chars().count()
}

/// Where array `needle` occurs in array `hay` (jq's `indices` of an array).
fn subarray_indices(hay: &[Val], needle: &[Val]) -> V {
    if needle.is_empty() {
        return V::nested(Val::Arr(Rc::new(Vec::new())), 0);
    }
    let found = hay
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| w.iter().zip(needle).all(|(a, b)| equal(a, b)))
        .map(|(i, _)| V::from(i));
    found.collect()
}

impl V {
    /// `.[index]`, as jaq-json reads it, or `None` where it yields nothing.
    pub(super) fn index_opt(self, index: &V) -> Result<Option<V>, E> {
        Ok(match (&self.val, &index.val) {
            (Val::Null, _) => None,
            (Val::BStr(a), Val::Num(i @ (Num::Int(_) | Num::BigInt(_)))) => i
                .as_isize()
                .and_then(|i| absolute(i, a.len()))
                .map(|i| V::from(usize::from(a[i]))),
            (Val::Arr(a), Val::Num(i @ (Num::Int(_) | Num::BigInt(_)))) => i
                .as_isize()
                .and_then(|i| absolute(i, a.len()))
                .map(|i| self.inner(a[i].clone())),
            (Val::Arr(x), Val::Arr(y)) => Some(subarray_indices(x, y)),
            (Val::Obj(o), Val::TStr(_) | Val::BStr(_)) => {
                o.get(&index.val).map(|v| self.inner(v.clone()))
            }
            // Objects here only ever have string keys: another key finds nothing (and is
            // not hashed, which would walk it).
            (Val::Obj(_), _) => None,
            (Val::BStr(_) | Val::TStr(_) | Val::Arr(_), Val::Obj(o)) => {
                let start = o
                    .get(&Val::utf8_str("start"))
                    .map(|v| index.inner(v.clone()));
                let end = o.get(&Val::utf8_str("end")).map(|v| index.inner(v.clone()));
                return jaq_core::ValT::range(self, start.as_ref()..end.as_ref()).map(Some);
            }
            _ => return Err(Error::index(self, index.clone())),
        })
    }
}

/// Index `i` of a sequence of `len`, negative from the end, if inside it.
fn absolute(i: isize, len: usize) -> Option<usize> {
    let i = if i < 0 {
        len.checked_sub(i.unsigned_abs())?
    } else {
        i.unsigned_abs()
    };
    (i < len).then_some(i)
}

impl jaq_core::ValT for V {
    fn from_num(n: &str) -> ValR<V> {
        match <Val as jaq_core::ValT>::from_num(n) {
            Ok(Val::Num(n)) => Ok(V::num(n)),
            Ok(other) => Ok(V::scalar(other)),
            Err(_) => Err(Error::str(format_args!("cannot read {n:?} as a number"))),
        }
    }

    fn from_map<I: IntoIterator<Item = (V, V)>>(iter: I) -> ValR<V> {
        let mut map = Map::default();
        let mut deepest = 0;
        for (k, v) in iter {
            charge(1);
            if !k.is_string() {
                return Err(Error::typ(k, "object key (a string)"));
            }
            deepest = deepest.max(v.depth);
            map.insert(k.val, v.val);
            if map.len() > super::meter::MAX_ITEMS {
                charge_items(map.len());
            }
        }
        Ok(V::nested(Val::obj(map), deepest))
    }

    fn key_values(self) -> BoxIter<'static, ValR<(V, V), V>> {
        let depth = self.depth.saturating_sub(1);
        match self.val {
            // Taken lazily, one element at a time: `first(.[])` costs one step.
            Val::Arr(a) => Box::new((0..a.len()).map(move |i| {
                charge(1);
                Ok((
                    V::from(i),
                    V {
                        val: a[i].clone(),
                        depth,
                    },
                ))
            })),
            Val::Obj(o) => Box::new((0..o.len()).filter_map(move |i| {
                charge(1);
                let (k, v) = o.get_index(i)?;
                Some(Ok((
                    V::scalar(k.clone()),
                    V {
                        val: v.clone(),
                        depth,
                    },
                )))
            })),
            _ => box_once(Err(Error::typ(self, "iterable (array or object)"))),
        }
    }

    fn values(self) -> Box<dyn Iterator<Item = ValR<V>>> {
        let depth = self.depth.saturating_sub(1);
        match self.val {
            Val::Arr(a) => Box::new((0..a.len()).map(move |i| {
                charge(1);
                Ok(V {
                    val: a[i].clone(),
                    depth,
                })
            })),
            Val::Obj(o) => Box::new((0..o.len()).filter_map(move |i| {
                charge(1);
                let (_, v) = o.get_index(i)?;
                Some(Ok(V {
                    val: v.clone(),
                    depth,
                }))
            })),
            _ => box_once(Err(Error::typ(self, "iterable (array or object)"))),
        }
    }

    fn index(self, index: &V) -> ValR<V> {
        self.index_opt(index)
            .map(|o| o.unwrap_or_else(|| V::scalar(Val::Null)))
    }

    fn range(self, range: val::Range<&V>) -> ValR<V> {
        match &self.val {
            Val::Arr(a) => {
                let (from, upto) = clip(range, a.len())?;
                charge_items(upto - from);
                let depth = self.depth;
                let items: Vec<Val> = a[from..upto].to_vec();
                Ok(V {
                    val: Val::Arr(Rc::new(items)),
                    depth,
                })
            }
            Val::TStr(b) => {
                let (from, upto) = clip(range, char_count(b))?;
                let (start, end) = char_span(b, from, upto);
                Ok(V::scalar(Val::utf8_str(b.slice(start..end))))
            }
            Val::BStr(b) => {
                let (from, upto) = clip(range, b.len())?;
                Ok(V::scalar(Val::byte_str(b.slice(from..upto))))
            }
            _ => Err(Error::typ(self, "rangeable (array or string)")),
        }
    }

    fn map_values<'a, I: Iterator<Item = ValX<'a, V>>>(
        self,
        opt: path::Opt,
        f: impl Fn(V) -> I,
    ) -> ValX<'a, V> {
        let depth = self.depth.saturating_sub(1);
        match self.val {
            Val::Arr(a) => {
                charge(a.len() as u64);
                let mut out = Vec::with_capacity(a.len());
                for x in rc_unwrap_or_clone(a) {
                    for y in f(V { val: x, depth }) {
                        out.push(y?);
                    }
                }
                Ok(out.into_iter().collect())
            }
            Val::Obj(o) => {
                charge(o.len() as u64);
                let mut out = Map::default();
                let mut deepest = 0;
                for (k, v) in rc_unwrap_or_clone(o) {
                    if let Some(y) = f(V { val: v, depth }).next() {
                        let y = y?;
                        deepest = deepest.max(y.depth);
                        out.insert(k, y.val);
                    }
                }
                Ok(V::nested(Val::obj(out), deepest))
            }
            val => opt.fail(
                V {
                    val,
                    depth: depth + 1,
                },
                |v| Exn::from(Error::typ(v, "iterable (array or object)")),
            ),
        }
    }

    fn map_index<'a, I: Iterator<Item = ValX<'a, V>>>(
        self,
        index: &V,
        opt: path::Opt,
        f: impl Fn(V) -> I,
    ) -> ValX<'a, V> {
        if let (Val::BStr(_) | Val::TStr(_) | Val::Arr(_), Val::Obj(o)) = (&self.val, &index.val) {
            let start = o
                .get(&Val::utf8_str("start"))
                .map(|v| index.inner(v.clone()));
            let end = o.get(&Val::utf8_str("end")).map(|v| index.inner(v.clone()));
            return self.map_range(start.as_ref()..end.as_ref(), opt, f);
        }
        let inner_depth = self.depth.saturating_sub(1);
        let V { val, depth } = self;
        match val {
            Val::Obj(mut o) => {
                if !index.is_string() {
                    // No such key is ever present: deleting it changes nothing, setting it
                    // would make a key that is not a string.
                    return match f(V::scalar(Val::Null)).next().transpose()? {
                        None => Ok(V {
                            val: Val::Obj(o),
                            depth,
                        }),
                        Some(_) => Err(Exn::from(Error::typ(
                            index.clone(),
                            "object key (a string)",
                        ))),
                    };
                }
                charge(1);
                use indexmap::map::Entry::{Occupied, Vacant};
                let mut deepest = inner_depth;
                match Rc::make_mut(&mut o).entry(index.val.clone()) {
                    Occupied(mut e) => {
                        let v = std::mem::take(e.get_mut());
                        match f(V {
                            val: v,
                            depth: inner_depth,
                        })
                        .next()
                        .transpose()?
                        {
                            Some(y) => {
                                deepest = deepest.max(y.depth);
                                e.insert(y.val);
                            }
                            None => {
                                e.swap_remove();
                            }
                        }
                    }
                    Vacant(e) => {
                        if let Some(y) = f(V::scalar(Val::Null)).next().transpose()? {
                            deepest = deepest.max(y.depth);
                            e.insert(y.val);
                        }
                    }
                }
                Ok(V::nested(Val::Obj(o), deepest))
            }
            Val::Arr(mut a) => {
                let i = match &index.val {
                    Val::Num(n @ (Num::Int(_) | Num::BigInt(_))) => n.as_isize(),
                    _ => {
                        return opt.fail(
                            V {
                                val: Val::Arr(a),
                                depth,
                            },
                            |_| Exn::from(Error::typ(index.clone(), "integer")),
                        )
                    }
                };
                let Some(i) = i.and_then(|i| absolute(i, a.len())) else {
                    return opt.fail(
                        V {
                            val: Val::Arr(a),
                            depth,
                        },
                        |_| Exn::from(Error::str(format_args!("index {index} out of bounds"))),
                    );
                };
                charge(1);
                let items = Rc::make_mut(&mut a);
                let x = std::mem::take(&mut items[i]);
                let mut deepest = inner_depth;
                match f(V {
                    val: x,
                    depth: inner_depth,
                })
                .next()
                .transpose()?
                {
                    Some(y) => {
                        deepest = deepest.max(y.depth);
                        items[i] = y.val;
                    }
                    None => {
                        items.remove(i);
                    }
                }
                Ok(V::nested(Val::Arr(a), deepest))
            }
            val => opt.fail(V { val, depth }, |v| {
                Exn::from(Error::typ(v, "iterable (array or object)"))
            }),
        }
    }

    fn map_range<'a, I: Iterator<Item = ValX<'a, V>>>(
        self,
        range: val::Range<&V>,
        opt: path::Opt,
        f: impl Fn(V) -> I,
    ) -> ValX<'a, V> {
        let V { val, depth } = self;
        match val {
            Val::Arr(mut a) => {
                let (from, upto) = match clip(range, a.len()) {
                    Ok(r) => r,
                    Err(e) => {
                        return opt.fail(
                            V {
                                val: Val::Arr(a),
                                depth,
                            },
                            |_| Exn::from(e),
                        )
                    }
                };
                charge_items(upto - from);
                let slice = V {
                    val: Val::Arr(Rc::new(a[from..upto].to_vec())),
                    depth,
                };
                let y = match f(slice).next().transpose()? {
                    Some(y) => y,
                    None => V::nested(Val::Arr(Rc::new(Vec::new())), 0),
                };
                let (replace, deeper) = match y.val {
                    Val::Arr(r) => (r, y.depth.saturating_sub(1)),
                    other => {
                        return Err(Exn::from(Error::typ(
                            V {
                                val: other,
                                depth: y.depth,
                            },
                            "array",
                        )))
                    }
                };
                charge_items(a.len() - (upto - from) + replace.len());
                Rc::make_mut(&mut a).splice(from..upto, replace.iter().cloned());
                Ok(V::nested(Val::Arr(a), depth.saturating_sub(1).max(deeper)))
            }
            Val::TStr(b) => {
                let (from, upto) = match clip(range, char_count(&b)) {
                    Ok(r) => r,
                    Err(e) => return opt.fail(V::scalar(Val::TStr(b)), |_| Exn::from(e)),
                };
                let (start, end) = char_span(&b, from, upto);
                splice_string(*b, start, end, true, f)
            }
            Val::BStr(b) => {
                let (from, upto) = match clip(range, b.len()) {
                    Ok(r) => r,
                    Err(e) => return opt.fail(V::scalar(Val::BStr(b)), |_| Exn::from(e)),
                };
                splice_string(*b, from, upto, false, f)
            }
            val => opt.fail(V { val, depth }, |v| Exn::from(Error::typ(v, "array"))),
        }
    }

    fn as_bool(&self) -> bool {
        !matches!(self.val, Val::Null | Val::Bool(false))
    }

    fn into_string(self) -> V {
        match self.val {
            Val::BStr(b) | Val::TStr(b) => V::scalar(Val::TStr(b)),
            _ => V::string(self.json_text()),
        }
    }
}

/// Replaces bytes `start..end` of a string with what `f` makes of them (a string of the
/// same kind, or nothing for an empty one).
fn splice_string<'a, I: Iterator<Item = ValX<'a, V>>>(
    b: Bytes,
    start: usize,
    end: usize,
    utf8: bool,
    f: impl Fn(V) -> I,
) -> ValX<'a, V> {
    let part = b.slice(start..end);
    let part = V::scalar(if utf8 {
        Val::utf8_str(part)
    } else {
        Val::byte_str(part)
    });
    let y = match f(part).next().transpose()? {
        None => Bytes::new(),
        Some(V {
            val: Val::TStr(y), ..
        }) if utf8 => *y,
        Some(V {
            val: Val::BStr(y), ..
        }) if !utf8 => *y,
        Some(other) => return Err(Exn::from(Error::typ(other, "string"))),
    };
    charge_string(b.len() - (end - start) + y.len());
    let mut out = BytesMut::with_capacity(b.len() - (end - start) + y.len());
    out.put(&b[..start]);
    out.put(&y[..]);
    out.put(&b[end..]);
    let out = out.freeze();
    Ok(V::scalar(if utf8 {
        Val::utf8_str(out)
    } else {
        Val::byte_str(out)
    }))
}

impl jaq_std::ValT for V {
    fn into_seq<S: FromIterator<V>>(self) -> Result<S, V> {
        let depth = self.depth.saturating_sub(1);
        match self.val {
            Val::Arr(a) => {
                charge(a.len() as u64);
                Ok(a.iter()
                    .map(|x| V {
                        val: x.clone(),
                        depth,
                    })
                    .collect())
            }
            val => Err(V {
                val,
                depth: depth + 1,
            }),
        }
    }

    fn is_int(&self) -> bool {
        jaq_std::ValT::is_int(&self.val)
    }

    fn as_isize(&self) -> Option<isize> {
        jaq_std::ValT::as_isize(&self.val)
    }

    fn as_f64(&self) -> Option<f64> {
        jaq_std::ValT::as_f64(&self.val)
    }

    fn is_utf8_str(&self) -> bool {
        matches!(self.val, Val::TStr(_))
    }

    fn as_bytes(&self) -> Option<&[u8]> {
        match &self.val {
            Val::BStr(b) | Val::TStr(b) => Some(b),
            _ => None,
        }
    }

    fn as_sub_str(&self, sub: &[u8]) -> V {
        V::scalar(jaq_std::ValT::as_sub_str(&self.val, sub))
    }

    fn from_utf8_bytes(b: impl AsRef<[u8]> + Send + 'static) -> V {
        charge_string(b.as_ref().len());
        V::scalar(Val::utf8_str(Bytes::from_owner(b)))
    }
}

/// Checks that a string `a` + `b` bytes long may be built, charging for it.
fn string_room(a: usize, b: usize) {
    charge_string(a.saturating_add(b));
}

impl std::ops::Add for V {
    type Output = ValR<V>;
    fn add(self, rhs: V) -> ValR<V> {
        match (&self.val, &rhs.val) {
            (Val::Null, _) => Ok(rhs),
            (_, Val::Null) => Ok(self),
            (Val::Num(x), Val::Num(y)) => Ok(V::num(small(x.clone()) + small(y.clone()))),
            (Val::BStr(l), Val::BStr(r)) | (Val::TStr(l), Val::TStr(r)) => {
                string_room(l.len(), r.len());
                let utf8 = matches!(self.val, Val::TStr(_));
                let mut buf = BytesMut::with_capacity(l.len() + r.len());
                buf.put(&l[..]);
                buf.put(&r[..]);
                let b = buf.freeze();
                Ok(V::scalar(if utf8 {
                    Val::utf8_str(b)
                } else {
                    Val::byte_str(b)
                }))
            }
            (Val::Arr(l), Val::Arr(r)) => {
                charge_items(l.len().saturating_add(r.len()));
                let depth = self.depth.max(rhs.depth);
                let (Val::Arr(mut l), Val::Arr(r)) = (self.val, rhs.val) else {
                    unreachable!("matched above")
                };
                Rc::make_mut(&mut l).extend(r.iter().cloned());
                Ok(V {
                    val: Val::Arr(l),
                    depth,
                })
            }
            (Val::Obj(l), Val::Obj(r)) => {
                charge_items(l.len().saturating_add(r.len()));
                let depth = self.depth.max(rhs.depth);
                let (Val::Obj(mut l), Val::Obj(r)) = (self.val, rhs.val) else {
                    unreachable!("matched above")
                };
                Rc::make_mut(&mut l).extend(r.iter().map(|(k, v)| (k.clone(), v.clone())));
                Ok(V {
                    val: Val::Obj(l),
                    depth,
                })
            }
            _ => Err(Error::math(self, ops::Math::Add, rhs)),
        }
    }
}

impl std::ops::Sub for V {
    type Output = ValR<V>;
    fn sub(self, rhs: V) -> ValR<V> {
        match (&self.val, &rhs.val) {
            (Val::Num(x), Val::Num(y)) => Ok(V::num(small(x.clone()) - small(y.clone()))),
            (Val::Arr(l), Val::Arr(r)) => {
                charge((l.len() + r.len()) as u64);
                let mut remove: Vec<&Val> = r.iter().collect();
                remove.sort_by(|a, b| compare(a, b));
                let kept: Vec<Val> = l
                    .iter()
                    .filter(|x| remove.binary_search_by(|y| compare(y, x)).is_err())
                    .cloned()
                    .collect();
                Ok(V {
                    val: Val::Arr(Rc::new(kept)),
                    depth: self.depth,
                })
            }
            _ => Err(Error::math(self, ops::Math::Sub, rhs)),
        }
    }
}

/// The number of nodes of `v` (a unit of fuel each): what merging it walks.
fn nodes(v: &Val) -> u64 {
    charge(1);
    match v {
        Val::Obj(o) => 1 + o.values().map(nodes).sum::<u64>(),
        _ => 1,
    }
}

impl std::ops::Mul for V {
    type Output = ValR<V>;
    fn mul(self, rhs: V) -> ValR<V> {
        match (&self.val, &rhs.val) {
            (Val::Num(x), Val::Num(y)) => Ok(V::num(small(x.clone()) * small(y.clone()))),
            (Val::BStr(s) | Val::TStr(s), Val::Num(n))
            | (Val::Num(n), Val::BStr(s) | Val::TStr(s))
                if matches!(n, Num::Int(_) | Num::BigInt(_)) =>
            {
                let times = n.as_isize().unwrap_or(if n.to_string().starts_with('-') {
                    -1
                } else {
                    isize::MAX
                });
                if times <= 0 {
                    // jq: a string times zero or less is null.
                    return Ok(V::scalar(Val::Null));
                }
                let bytes = s.len().saturating_mul(times.unsigned_abs());
                if bytes > MAX_STRING_BYTES {
                    stop(Exhausted::Size(format!(
                        "it built a string of {bytes} bytes; at most {MAX_STRING_BYTES} are allowed"
                    )));
                }
                charge_string(bytes);
                let b = Bytes::from(s.repeat(times.unsigned_abs()));
                let utf8 = matches!(self.val, Val::TStr(_)) || matches!(rhs.val, Val::TStr(_));
                Ok(V::scalar(if utf8 {
                    Val::utf8_str(b)
                } else {
                    Val::byte_str(b)
                }))
            }
            (Val::Obj(_), Val::Obj(r)) => {
                // A deep merge walks the right side's objects.
                let _ = nodes(&Val::Obj(r.clone()));
                let depth = self.depth.max(rhs.depth);
                let merged = (self.val * rhs.val).map_err(Error::str)?;
                Ok(V { val: merged, depth })
            }
            _ => Err(Error::math(self, ops::Math::Mul, rhs)),
        }
    }
}

impl std::ops::Div for V {
    type Output = ValR<V>;
    fn div(self, rhs: V) -> ValR<V> {
        match (&self.val, &rhs.val) {
            (Val::Num(x), Val::Num(y)) => Ok(V::num(small(x.clone()) / small(y.clone()))),
            (Val::TStr(x), Val::TStr(y)) | (Val::BStr(x), Val::BStr(y)) => {
                // Count the pieces before making them.
                charge_string(x.len());
                let pieces = if x.is_empty() {
                    0
                } else if y.is_empty() {
                    x.chars().count()
                } else {
                    x.find_iter(&y[..]).count() + 1
                };
                charge_items(pieces);
                let out = (self.val / rhs.val).map_err(Error::str)?;
                Ok(V::measured(out))
            }
            _ => Err(Error::math(self, ops::Math::Div, rhs)),
        }
    }
}

impl std::ops::Rem for V {
    type Output = ValR<V>;
    fn rem(self, rhs: V) -> ValR<V> {
        match (&self.val, &rhs.val) {
            (Val::Num(x), Val::Num(y))
                if !(matches!(y, Num::Int(0)) && matches!(x, Num::Int(_) | Num::BigInt(_))) =>
            {
                Ok(V::num(small(x.clone()) % small(y.clone())))
            }
            _ => Err(Error::math(self, ops::Math::Rem, rhs)),
        }
    }
}

impl std::ops::Neg for V {
    type Output = ValR<V>;
    fn neg(self) -> ValR<V> {
        match &self.val {
            Val::Num(n) => Ok(V::num(-small(n.clone()))),
            _ => Err(Error::typ(self, "number")),
        }
    }
}

/// Sorted for `bsearch` and `sort`: the order of [`compare`].
pub(super) fn order(a: &V, b: &V) -> Ordering {
    compare(&a.val, &b.val)
}
