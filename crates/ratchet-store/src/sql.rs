use std::collections::HashMap;

/// Named SQL statements read from a `.sql` file in which each statement follows a
/// `-- name: some_name` line. Backends keep their SQL in such files, one per table.
#[derive(Debug, Clone, Default)]
pub struct NamedQueries {
    queries: HashMap<String, String>,
}

impl NamedQueries {
    /// Parses one or more files' text.
    pub fn parse(texts: &[&str]) -> Self {
        let mut queries = HashMap::new();
        for text in texts {
            let mut name: Option<String> = None;
            let mut body = String::new();
            for line in text.lines() {
                if let Some(n) = line.trim().strip_prefix("-- name:") {
                    if let Some(prev) = name.take() {
                        queries.insert(prev, body.trim().to_string());
                    }
                    name = Some(n.trim().to_string());
                    body.clear();
                } else if name.is_some() {
                    body.push_str(line);
                    body.push('\n');
                }
            }
            if let Some(prev) = name {
                queries.insert(prev, body.trim().to_string());
            }
        }
        Self { queries }
    }

    /// The same statements, each rewritten by `f` (a backend putting its schema in).
    pub fn map(self, f: impl Fn(&str) -> String) -> Self {
        Self {
            queries: self
                .queries
                .into_iter()
                .map(|(name, sql)| {
                    let sql = f(&sql);
                    (name, sql)
                })
                .collect(),
        }
    }

    /// The statement named `name`.
    ///
    /// # Panics
    ///
    /// When no statement has that name: names are compile-time constants in the backend, and a
    /// test prepares every one of them, so this can only fire during development.
    pub fn get(&self, name: &str) -> &str {
        match self.queries.get(name) {
            Some(q) => q,
            None => panic!("no SQL statement named {name}"),
        }
    }

    /// Every name and statement, for the test that prepares them all.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.queries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_named_blocks() {
        let q = NamedQueries::parse(&[
            "-- a comment\n-- name: one\nSELECT 1;\n\n-- name: two\nSELECT\n 2;\n",
        ]);
        assert_eq!(q.get("one"), "SELECT 1;");
        assert_eq!(q.get("two"), "SELECT\n 2;");
        assert_eq!(q.iter().count(), 2);
    }
}
