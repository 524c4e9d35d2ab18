//! Statement parameters with their PostgreSQL types, so a statement can be sent unnamed
//! (`query_typed`) as well as prepared: both cost one round trip.

use tokio_postgres::types::{ToSql, Type};

/// A value with the PostgreSQL type it binds as.
pub(crate) trait Typed: ToSql + Sync {
    fn pg_type() -> Type;
}

macro_rules! typed {
    ($($rust:ty => $pg:ident),* $(,)?) => {
        $(impl Typed for $rust {
            fn pg_type() -> Type {
                Type::$pg
            }
        })*
    };
}

typed!(
    bool => BOOL,
    i32 => INT4,
    i64 => INT8,
    String => TEXT,
    &str => TEXT,
    f64 => FLOAT8,
    Option<f64> => FLOAT8,
    Option<bool> => BOOL,
    Option<i32> => INT4,
    Option<i64> => INT8,
    Option<String> => TEXT,
    Option<&str> => TEXT,
    Option<Vec<String>> => TEXT_ARRAY,
    Vec<bool> => BOOL_ARRAY,
    Vec<i16> => INT2_ARRAY,
    Vec<i32> => INT4_ARRAY,
    Vec<i64> => INT8_ARRAY,
    Vec<String> => TEXT_ARRAY,
    Vec<Option<i32>> => INT4_ARRAY,
    Vec<Option<i64>> => INT8_ARRAY,
    Vec<Option<String>> => TEXT_ARRAY,
);

/// One parameter.
pub(crate) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// `value` as a parameter of its type.
pub(crate) fn p<T: Typed>(value: &T) -> Param<'_> {
    (value, T::pg_type())
}
