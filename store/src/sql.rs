//! The one way the store builds SQL whose shape depends on the request
//! (optional filters, a cursor, a window): [`Sql`] collects the text and
//! numbers each parameter as it is added, and [`bind_all!`] binds them in
//! that order on either backend. Nothing counts `$n` by hand, so a filter
//! cannot shift another's parameter.
//!
//! Values are never spliced into the text: only column names and literals
//! Idem itself chose (an enum's text, to match a partial index) are.

use crate::ts::Ts;

/// One parameter's value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Bind {
    Text(String),
    Ts(Ts),
    Int(i64),
}

impl From<String> for Bind {
    fn from(value: String) -> Self {
        Bind::Text(value)
    }
}

impl From<&str> for Bind {
    fn from(value: &str) -> Self {
        Bind::Text(value.to_owned())
    }
}

impl From<Ts> for Bind {
    fn from(value: Ts) -> Self {
        Bind::Ts(value)
    }
}

impl From<i64> for Bind {
    fn from(value: i64) -> Self {
        Bind::Int(value)
    }
}

/// SQL text with numbered parameters, and what to bind to them.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    pub text: String,
    pub binds: Vec<Bind>,
}

impl From<String> for Sql {
    /// SQL text without parameters (yet).
    fn from(text: String) -> Self {
        Sql {
            text,
            binds: Vec::new(),
        }
    }
}

impl Sql {
    /// Adds a parameter; returns its placeholder (`$3`) for the text.
    pub fn param(&mut self, value: impl Into<Bind>) -> String {
        self.binds.push(value.into());
        format!("${}", self.binds.len())
    }

    /// Appends text.
    pub fn push(&mut self, text: &str) {
        self.text.push_str(text);
    }

    /// The condition that keeps only rows whose `column` names a consumer
    /// `within` allows (`None` for every consumer): a person whose rights
    /// are limited to teams never receives another team's row or count.
    pub fn within(&mut self, within: &idem_domain::Within, column: &str) -> Option<String> {
        match within {
            idem_domain::Within::Every => None,
            idem_domain::Within::Only(names) if names.is_empty() => Some("1 = 0".to_owned()),
            idem_domain::Within::Only(names) => {
                let params: Vec<String> = names.iter().map(|n| self.param(n.as_str())).collect();
                Some(format!("{column} IN ({})", params.join(", ")))
            }
        }
    }

    /// [`Self::within`] appended as ` AND …`.
    pub fn and_within(&mut self, within: &idem_domain::Within, column: &str) {
        if let Some(condition) = self.within(within, column) {
            self.push(&format!(" AND {condition}"));
        }
    }

    /// A read of the consumers `reach` allows, written once per consumer:
    /// `one(sql, only)` gives the statement for one of them, `only` being
    /// the condition to append (` AND consumer = $n`), and the parts are
    /// joined with `UNION ALL`. Every consumer: one statement, `only`
    /// empty. None: one statement that matches nothing.
    ///
    /// Each part reads an index that leads with the consumer, so a person
    /// limited to some teams reads their own rows — up to each part's own
    /// `LIMIT` — never walking past another team's: the cost of the answer
    /// does not grow with anyone else's data, nor does its time tell them
    /// how much there is.
    pub fn each_consumer(
        &mut self,
        reach: &idem_domain::Within,
        column: &str,
        mut one: impl FnMut(&mut Sql, &str) -> String,
    ) -> String {
        match reach {
            idem_domain::Within::Every => one(self, ""),
            idem_domain::Within::Only(names) if names.is_empty() => one(self, " AND 1 = 0"),
            idem_domain::Within::Only(names) => {
                let parts: Vec<String> = names
                    .iter()
                    .enumerate()
                    .map(|(i, name)| {
                        let p = self.param(name.as_str());
                        let part = one(self, &format!(" AND {column} = {p}"));
                        format!("SELECT * FROM ({part}) AS part{i}")
                    })
                    .collect();
                parts.join(" UNION ALL ")
            }
        }
    }
}

/// Binds an [`Sql`]'s parameters to a query, in the order they were added
/// (a macro: the query's type differs per backend and per kind of query).
macro_rules! bind_all {
    ($query:expr, $binds:expr) => {{
        let mut query = $query;
        for bind in $binds {
            query = match bind {
                $crate::sql::Bind::Text(s) => query.bind(s.clone()),
                $crate::sql::Bind::Ts(t) => query.bind(*t),
                $crate::sql::Bind::Int(i) => query.bind(*i),
            };
        }
        query
    }};
}
pub(crate) use bind_all;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn within_names_each_consumer_as_a_parameter_and_none_matches_nothing() {
        use idem_domain::{ConsumerName, Within};
        let mut sql = Sql::default();
        assert_eq!(sql.within(&Within::Every, "consumer"), None);
        assert_eq!(
            sql.within(&Within::Only(vec![]), "consumer").as_deref(),
            Some("1 = 0")
        );
        let two = Within::Only(vec![
            ConsumerName::parse("invoices").unwrap(),
            ConsumerName::parse("x' OR '1'='1").unwrap(),
        ]);
        assert_eq!(
            sql.within(&two, "c.consumer").as_deref(),
            Some("c.consumer IN ($1, $2)")
        );
        assert_eq!(sql.binds[1], Bind::Text("x' OR '1'='1".into()));
    }

    #[test]
    fn a_scoped_read_is_one_part_per_consumer_each_with_its_own_limit() {
        use idem_domain::{ConsumerName, Within};
        let two = Within::Only(vec![
            ConsumerName::parse("pay").unwrap(),
            ConsumerName::parse("payments").unwrap(),
        ]);
        let part = |sql: &mut Sql, only: &str| {
            let limit = sql.param(11_i64);
            format!("SELECT 1 FROM claims WHERE status = 'unknown'{only} LIMIT {limit}")
        };
        let mut sql = Sql::default();
        assert_eq!(
            sql.each_consumer(&two, "consumer", part),
            "SELECT * FROM (SELECT 1 FROM claims WHERE status = 'unknown' AND consumer = $1 \
             LIMIT $2) AS part0 UNION ALL SELECT * FROM (SELECT 1 FROM claims WHERE \
             status = 'unknown' AND consumer = $3 LIMIT $4) AS part1"
        );
        assert_eq!(sql.binds[2], Bind::Text("payments".into()));
        let mut every = Sql::default();
        assert_eq!(
            every.each_consumer(&Within::Every, "consumer", part),
            "SELECT 1 FROM claims WHERE status = 'unknown' LIMIT $1"
        );
        let mut none = Sql::default();
        assert!(
            none.each_consumer(&Within::Only(vec![]), "consumer", part)
                .contains("AND 1 = 0")
        );
    }

    #[test]
    fn parameters_are_numbered_in_the_order_they_are_added() {
        let mut sql = Sql::default();
        let limit = sql.param(11_i64);
        sql.push("SELECT 1 FROM claims WHERE consumer = ");
        let consumer = sql.param("reminders");
        sql.push(&consumer);
        sql.push(&format!(" LIMIT {limit}"));
        assert_eq!(
            sql.text,
            "SELECT 1 FROM claims WHERE consumer = $2 LIMIT $1"
        );
        assert_eq!(
            sql.binds,
            vec![Bind::Int(11), Bind::Text("reminders".into())]
        );
    }
}
