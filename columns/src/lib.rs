//! Rows written in one statement, bound from typed structs.
//!
//! The write side and the projections write many rows of several tables in one round
//! trip: each table's rows go as one array per column, read back by `unnest`. Kept by
//! hand, that is a list of positional parameters (`$1::bigint[]`, …) in the SQL and a
//! list of `.bind(…)` calls in the code, in step only by care. Here a row set is a
//! struct declared with [`columns!`]: one line per column gives its name, its Rust
//! type and its SQL type, and from that one list come both the statement's
//! `unnest(…) AS name(columns…)` and the binds, in the same order by construction.
//!
//! A statement is a template naming its row sets as `{name}`; [`Statement::render`]
//! numbers the parameters (a set used twice is bound once), and [`Statement::bind`]
//! binds the sets in the same order. The SQL then reads columns by name
//! (`u.hotel`, `SELECT i.night, …`), never by position.

use sqlx::postgres::PgArguments;
use sqlx::Postgres;

/// A query of this crate's statements.
pub type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

/// A set of rows held column by column, as [`columns!`] declares it.
pub trait Columns: Sync {
    /// Each column's name and SQL element type, in bind order.
    fn columns(&self) -> &'static [(&'static str, &'static str)];
    /// Binds every column, as an array, in the order of [`Columns::columns`].
    fn bind<'q>(&'q self, query: Query<'q>) -> Query<'q>;
    /// How many rows the set holds (the length of its first column).
    fn len(&self) -> usize;
    /// Whether every column holds as many values as the first (a column left short
    /// would be padded with NULLs by `unnest`: a bug in the code that filled it).
    fn aligned(&self) -> bool;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Declares a row set: a struct with one `Vec` per column, and its [`Columns`].
///
/// ```
/// columns::columns! {
///     /// `room_nights` rows to insert.
///     pub struct Nights {
///         hotel: i64 = "bigint",
///         night: chrono::NaiveDate = "date",
///     }
/// }
/// let mut nights = Nights::default();
/// nights.hotel.push(812);
/// nights.night.push(chrono::NaiveDate::from_ymd_opt(2027, 6, 1).unwrap());
/// let sql = columns::Statement::new("INSERT INTO t SELECT n.hotel, n.night FROM {n}");
/// assert_eq!(
///     sql.render(&[("n", &nights)]),
///     "INSERT INTO t SELECT n.hotel, n.night FROM \
///      unnest($1::bigint[], $2::date[]) AS n(hotel, night)"
/// );
/// ```
#[macro_export]
macro_rules! columns {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident $(<$lt:lifetime>)? {
            $( $(#[$field_meta:meta])* $field:ident : $ty:ty = $sql:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $name $(<$lt>)? {
            $( $(#[$field_meta])* pub $field: Vec<$ty>, )+
        }

        impl $(<$lt>)? $crate::Columns for $name $(<$lt>)? {
            fn columns(&self) -> &'static [(&'static str, &'static str)] {
                &[$( (stringify!($field), $sql) ),+]
            }

            fn bind<'q>(&'q self, query: $crate::Query<'q>) -> $crate::Query<'q> {
                query $( .bind(&self.$field) )+
            }

            fn len(&self) -> usize {
                $crate::first_len(&[$( self.$field.len() ),+])
            }

            fn aligned(&self) -> bool {
                let lengths = [$( self.$field.len() ),+];
                lengths.iter().all(|len| *len == lengths[0])
            }
        }
    };
}

#[doc(hidden)]
pub fn first_len(lengths: &[usize]) -> usize {
    lengths.first().copied().unwrap_or(0)
}

/// A statement whose row sets are written `{name}` in its SQL.
#[derive(Debug, Clone, Copy)]
pub struct Statement {
    template: &'static str,
    /// Parameters the caller binds before the sets (`$1` … `$leading`).
    leading: usize,
}

impl Statement {
    pub const fn new(template: &'static str) -> Self {
        Self {
            template,
            leading: 0,
        }
    }

    /// The same statement with `leading` scalar parameters (`$1` … `$leading`) that the
    /// caller binds before the sets; the sets' parameters are numbered after them.
    pub const fn after(self, leading: usize) -> Self {
        Self { leading, ..self }
    }

    /// The SQL, each `{name}` replaced by `unnest($n::type[], …) AS name(column, …)`,
    /// parameters numbered in the order of `sets`. Every set must appear in the
    /// template and every placeholder must name a set (a mistake here is a bug in the
    /// caller's constant SQL: it panics, and the first test that runs it says so).
    pub fn render(&self, sets: &[(&str, &dyn Columns)]) -> String {
        let mut sql = self.template.to_owned();
        let mut next = self.leading + 1;
        for (name, set) in sets {
            let placeholder = format!("{{{name}}}");
            assert!(
                sql.contains(&placeholder),
                "the statement does not use the row set {name}"
            );
            let columns = set.columns();
            let arrays: Vec<String> = columns
                .iter()
                .enumerate()
                .map(|(at, (_, ty))| format!("${}::{ty}[]", next + at))
                .collect();
            let names: Vec<&str> = columns.iter().map(|(column, _)| *column).collect();
            next += columns.len();
            let unnest = format!(
                "unnest({}) AS {name}({})",
                arrays.join(", "),
                names.join(", ")
            );
            sql = sql.replace(&placeholder, &unnest);
        }
        assert!(
            !sql.contains('{'),
            "the statement names a row set it was not given: {sql}"
        );
        sql
    }

    /// `query` (made from [`Statement::render`] of the same sets, its leading
    /// parameters bound) with every set bound.
    pub fn bind<'q>(query: Query<'q>, sets: &[(&str, &'q dyn Columns)]) -> Query<'q> {
        sets.iter().fold(query, |query, (name, set)| {
            debug_assert!(set.aligned(), "the columns of {name} differ in length");
            set.bind(query)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    columns! {
        struct Pairs {
            hotel: i64 = "bigint",
            name: String = "text",
        }
    }

    columns! {
        /// A set may borrow its values.
        struct Names<'a> {
            name: &'a str = "text",
        }
    }

    #[test]
    fn a_set_may_borrow_its_values() {
        let owned = String::from("one");
        let mut names = Names::default();
        names.name.push(&owned);
        let sql = Statement::new("SELECT n.name FROM {n}").render(&[("n", &names)]);
        assert_eq!(sql, "SELECT n.name FROM unnest($1::text[]) AS n(name)");
    }

    columns! {
        struct Flags {
            stored: bool = "bool",
        }
    }

    #[test]
    fn parameters_are_numbered_across_sets_in_their_order_and_a_set_used_twice_is_bound_once() {
        let statement = Statement::new(
            "WITH a AS (SELECT p.hotel FROM {p}), b AS (SELECT p.name FROM {p}) \
             SELECT * FROM {f}",
        );
        let sql = statement.render(&[("p", &Pairs::default()), ("f", &Flags::default())]);
        assert_eq!(
            sql,
            "WITH a AS (SELECT p.hotel FROM unnest($1::bigint[], $2::text[]) AS p(hotel, name)), \
             b AS (SELECT p.name FROM unnest($1::bigint[], $2::text[]) AS p(hotel, name)) \
             SELECT * FROM unnest($3::bool[]) AS f(stored)"
        );
    }

    #[test]
    #[should_panic(expected = "does not use the row set f")]
    fn a_set_the_statement_does_not_use_is_a_mistake() {
        Statement::new("SELECT * FROM {p}")
            .render(&[("p", &Pairs::default()), ("f", &Flags::default())]);
    }

    #[test]
    #[should_panic(expected = "names a row set it was not given")]
    fn a_placeholder_without_its_set_is_a_mistake() {
        Statement::new("SELECT * FROM {p}, {q}").render(&[("p", &Pairs::default())]);
    }

    #[test]
    fn leading_parameters_come_first() {
        let sql = Statement::new("SELECT $1, f.stored FROM {f}")
            .after(1)
            .render(&[("f", &Flags::default())]);
        assert_eq!(
            sql,
            "SELECT $1, f.stored FROM unnest($2::bool[]) AS f(stored)"
        );
    }

    #[test]
    fn a_column_left_short_is_seen() {
        let mut pairs = Pairs::default();
        pairs.hotel.push(1);
        assert!(!pairs.aligned());
        pairs.name.push("one".into());
        assert!(pairs.aligned());
    }

    #[test]
    fn the_length_of_a_set_is_its_rows() {
        let mut pairs = Pairs::default();
        assert!(pairs.is_empty());
        pairs.hotel.push(1);
        pairs.name.push("one".into());
        assert_eq!(pairs.len(), 1);
    }
}
