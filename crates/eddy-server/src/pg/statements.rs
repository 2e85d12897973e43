//! What a client's SQL text asks of the PostgreSQL port: statements split
//! at their semicolons, and each one told apart as one of eddy's own
//! commands (DDL kept in the session catalog, a materialized view or an
//! `INSERT INTO` started as a job, a drop, an eddy setting) or a query
//! DataFusion answers over the views (`SHOW JOBS` and `SHOW VIEWS` read
//! eddy's system tables).
//!
//! In: the text of a Query or Parse message. Out: [`Statement`]s, each
//! with its own text.
//!
//! eddy's DDL is not PostgreSQL's (`WATERMARK FOR`, `WITH ('connector' =
//! ...)`), so commands are recognized by their leading words, from tokens
//! (comments and quoted text are never mistaken for words), not parsed.

use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};

/// What `CREATE`/`DROP` name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObjectKind {
    /// `CREATE TABLE`: a source or sink.
    Table,
    /// `CREATE VIEW`: a named query other statements read.
    View,
    /// `CREATE FUNCTION`: a function other statements call.
    Function,
    /// `CREATE MATERIALIZED VIEW`: a job whose result is queried.
    MaterializedView,
}

impl ObjectKind {
    /// As SQL writes it.
    pub fn sql(self) -> &'static str {
        match self {
            Self::Table => "TABLE",
            Self::View => "VIEW",
            Self::Function => "FUNCTION",
            Self::MaterializedView => "MATERIALIZED VIEW",
        }
    }
}

/// One statement of a client's text.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `CREATE TABLE`, `CREATE VIEW` or `CREATE FUNCTION`: kept for the
    /// statements that follow.
    Declare {
        /// What it declares.
        kind: ObjectKind,
        /// Its name.
        name: String,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
        /// The statement, as written.
        sql: String,
        /// Characters of the client's text before it.
        at: usize,
    },
    /// `CREATE MATERIALIZED VIEW name AS query`.
    CreateMaterializedView {
        /// The view's name.
        name: String,
        /// `IF NOT EXISTS`.
        if_not_exists: bool,
        /// The query after `AS`, as written.
        query: String,
        /// Characters of the client's text before the query.
        query_at: usize,
    },
    /// `DROP TABLE|VIEW|FUNCTION|MATERIALIZED VIEW [IF EXISTS] name`.
    Drop {
        /// What it drops.
        kind: ObjectKind,
        /// Its name.
        name: String,
        /// `IF EXISTS`.
        if_exists: bool,
    },
    /// `INSERT INTO sink ...`: a job.
    Insert {
        /// The statement, as written.
        sql: String,
        /// Characters of the client's text before it.
        at: usize,
    },
    /// `SET eddy.min_epoch = N`: later queries wait until each view they
    /// read has published checkpoint `N` (read-your-writes).
    SetMinEpoch(u64),
    /// Anything else: a query (or a PostgreSQL setting) DataFusion
    /// answers, with `SHOW JOBS`/`SHOW VIEWS` rewritten to read eddy's
    /// system tables.
    Query(String),
}

impl Statement {
    /// The tag PostgreSQL answers the command with.
    pub fn tag(&self) -> &'static str {
        match self {
            Self::Declare { kind, .. } => match kind {
                ObjectKind::Table => "CREATE TABLE",
                ObjectKind::View => "CREATE VIEW",
                ObjectKind::Function => "CREATE FUNCTION",
                ObjectKind::MaterializedView => "CREATE MATERIALIZED VIEW",
            },
            Self::CreateMaterializedView { .. } => "CREATE MATERIALIZED VIEW",
            Self::Drop { kind, .. } => match kind {
                ObjectKind::Table => "DROP TABLE",
                ObjectKind::View => "DROP VIEW",
                ObjectKind::Function => "DROP FUNCTION",
                ObjectKind::MaterializedView => "DROP MATERIALIZED VIEW",
            },
            Self::Insert { .. } => "INSERT",
            Self::SetMinEpoch(_) => "SET",
            Self::Query(_) => "SELECT",
        }
    }
}

/// A statement's text could not be read.
#[derive(Debug, Clone, PartialEq)]
pub struct StatementError {
    /// What is wrong.
    pub message: String,
}

/// A token and where it starts in the client's text (bytes).
struct Placed {
    token: Token,
    start: usize,
}

/// Byte offsets of each line's start.
fn line_starts(text: &str) -> Vec<usize> {
    std::iter::once(0)
        .chain(text.match_indices('\n').map(|(i, _)| i + 1))
        .collect()
}

/// The byte offset of a 1-based line and column (in characters).
fn byte_at(text: &str, lines: &[usize], line: u64, column: u64) -> usize {
    let Some(&start) = lines.get((line as usize).saturating_sub(1)) else {
        return text.len();
    };
    text[start..]
        .char_indices()
        .nth((column as usize).saturating_sub(1))
        .map_or(text.len(), |(i, _)| start + i)
}

/// The statements of `text`, in order (empty ones left out).
pub fn split(text: &str) -> Result<Vec<Statement>, StatementError> {
    let dialect = PostgreSqlDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| StatementError {
            message: e.to_string(),
        })?;
    let lines = line_starts(text);
    let mut statements = Vec::new();
    let mut current: Vec<Placed> = Vec::new();
    for t in tokens {
        let start = byte_at(text, &lines, t.span.start.line, t.span.start.column);
        if t.token == Token::SemiColon {
            statements.extend(classify(text, std::mem::take(&mut current), start)?);
        } else {
            current.push(Placed {
                token: t.token,
                start,
            });
        }
    }
    statements.extend(classify(text, current, text.len())?);
    Ok(statements)
}

/// Significant tokens of one statement.
struct Words<'a> {
    text: &'a str,
    tokens: Vec<Placed>,
    /// Where the statement ends (its `;`, or the text's end).
    end: usize,
}

impl Words<'_> {
    fn token(&self, at: usize) -> Option<&Token> {
        self.tokens.get(at).map(|p| &p.token)
    }

    fn keyword(&self, at: usize) -> Option<Keyword> {
        match self.token(at)? {
            Token::Word(w) if w.quote_style.is_none() => Some(w.keyword),
            _ => None,
        }
    }

    fn is(&self, at: usize, keyword: Keyword) -> bool {
        self.keyword(at) == Some(keyword)
    }

    fn word_is(&self, at: usize, word: &str) -> bool {
        matches!(
            self.token(at),
            Some(Token::Word(w)) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(word)
        )
    }

    /// What `CREATE`/`DROP` at token `at` names, and the index after it.
    fn object_kind(&self, at: usize) -> Option<(ObjectKind, usize)> {
        if self.is(at, Keyword::MATERIALIZED) && self.is(at + 1, Keyword::VIEW) {
            return Some((ObjectKind::MaterializedView, at + 2));
        }
        let kind = match self.keyword(at)? {
            Keyword::TABLE => ObjectKind::Table,
            Keyword::VIEW => ObjectKind::View,
            Keyword::FUNCTION => ObjectKind::Function,
            _ => return None,
        };
        Some((kind, at + 1))
    }

    /// A possibly qualified name starting at token `at`, and the index
    /// after it.
    fn name(&self, mut at: usize) -> Option<(String, usize)> {
        let mut name = String::new();
        loop {
            match self.token(at)? {
                Token::Word(w) => name.push_str(&w.value),
                _ => return None,
            }
            at += 1;
            if self.token(at) == Some(&Token::Period) {
                name.push('.');
                at += 1;
            } else {
                return Some((name, at));
            }
        }
    }

    /// The client's text from token `at` to the statement's end, and the
    /// characters before it.
    fn rest(&self, at: usize) -> (String, usize) {
        let start = self.tokens.get(at).map_or(self.end, |p| p.start);
        (
            self.text[start..self.end].trim_end().to_string(),
            self.text[..start].chars().count(),
        )
    }
}

fn classify(
    text: &str,
    tokens: Vec<Placed>,
    end: usize,
) -> Result<Option<Statement>, StatementError> {
    let tokens: Vec<Placed> = tokens
        .into_iter()
        .filter(|p| !matches!(p.token, Token::Whitespace(_)))
        .collect();
    if tokens.is_empty() {
        return Ok(None);
    }
    let words = Words { text, tokens, end };
    let (sql, at) = words.rest(0);
    let bad = |message: &str| StatementError {
        message: format!("{message}: {sql}"),
    };
    if words.is(0, Keyword::CREATE) {
        let mut i = 1;
        if words.is(i, Keyword::OR) && words.is(i + 1, Keyword::REPLACE) {
            i += 2;
        }
        if words.is(i, Keyword::TEMPORARY) || words.is(i, Keyword::TEMP) {
            i += 1;
        }
        let Some((kind, after_kind)) = words.object_kind(i) else {
            return Ok(Some(Statement::Query(sql)));
        };
        i = after_kind;
        let if_not_exists = words.is(i, Keyword::IF)
            && words.is(i + 1, Keyword::NOT)
            && words.is(i + 2, Keyword::EXISTS);
        if if_not_exists {
            i += 3;
        }
        let (name, after) = words
            .name(i)
            .ok_or_else(|| bad(&format!("CREATE {} needs a name", kind.sql())))?;
        if kind == ObjectKind::MaterializedView {
            if !words.is(after, Keyword::AS) {
                return Err(bad(
                    "CREATE MATERIALIZED VIEW name AS SELECT ...: no AS after the name",
                ));
            }
            let (query, query_at) = words.rest(after + 1);
            return Ok(Some(Statement::CreateMaterializedView {
                name,
                if_not_exists,
                query,
                query_at,
            }));
        }
        return Ok(Some(Statement::Declare {
            kind,
            name,
            if_not_exists,
            sql,
            at,
        }));
    }
    if words.is(0, Keyword::DROP) {
        let Some((kind, mut i)) = words.object_kind(1) else {
            return Ok(Some(Statement::Query(sql)));
        };
        let if_exists = words.is(i, Keyword::IF) && words.is(i + 1, Keyword::EXISTS);
        if if_exists {
            i += 2;
        }
        let (name, _) = words
            .name(i)
            .ok_or_else(|| bad(&format!("DROP {} needs a name", kind.sql())))?;
        return Ok(Some(Statement::Drop {
            kind,
            name,
            if_exists,
        }));
    }
    if words.is(0, Keyword::INSERT) {
        return Ok(Some(Statement::Insert { sql, at }));
    }
    if words.is(0, Keyword::SHOW) && words.tokens.len() == 2 {
        if words.word_is(1, "jobs") {
            return Ok(Some(Statement::Query(
                "SELECT * FROM eddy.jobs ORDER BY created_at".into(),
            )));
        }
        if words.word_is(1, "views") {
            return Ok(Some(Statement::Query(
                "SELECT * FROM eddy.views ORDER BY name".into(),
            )));
        }
    }
    if words.is(0, Keyword::SET) {
        let i = if words.is(1, Keyword::SESSION) { 2 } else { 1 };
        if let Some((name, after)) = words.name(i) {
            if name.eq_ignore_ascii_case("eddy.min_epoch") {
                if !(words.is(after, Keyword::TO) || words.token(after) == Some(&Token::Eq)) {
                    return Err(bad("SET eddy.min_epoch = N"));
                }
                let (value, _) = words.rest(after + 1);
                let epoch = value.trim_matches('\'').parse::<u64>().map_err(|_| {
                    bad("eddy.min_epoch is a checkpoint number (0 to wait for none)")
                })?;
                return Ok(Some(Statement::SetMinEpoch(epoch)));
            }
        }
    }
    Ok(Some(Statement::Query(sql)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eddy_ddl_is_told_apart_from_queries() {
        let text = "-- totals; per key\n\
            CREATE TABLE orders (k VARCHAR, n BIGINT, ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ('connector' = 'file', 'path' = 'a;b.ndjson');\n\
            create materialized view IF NOT EXISTS totals as SELECT k, sum(n) AS n FROM orders GROUP BY k;\n\
            SELECT * FROM totals WHERE k = 'x;y';\
            DROP MATERIALIZED VIEW IF EXISTS totals; SHOW JOBS; show views; SET eddy.min_epoch = 4; SET search_path = public;\
            INSERT INTO out SELECT * FROM orders";
        let statements = split(text).expect("splits");
        assert_eq!(statements.len(), 9, "{statements:#?}");
        assert!(matches!(
            &statements[0],
            Statement::Declare { kind: ObjectKind::Table, name, sql, at: 19, .. }
                if name == "orders" && sql.contains("'a;b.ndjson'") && sql.contains("WATERMARK FOR") && sql.ends_with("'a;b.ndjson')")
        ));
        let Statement::CreateMaterializedView {
            name,
            if_not_exists: true,
            query,
            query_at,
        } = &statements[1]
        else {
            panic!("{statements:#?}");
        };
        assert_eq!(
            (name.as_str(), query.as_str()),
            ("totals", "SELECT k, sum(n) AS n FROM orders GROUP BY k")
        );
        let before: String = text.chars().take(*query_at).collect();
        assert!(
            before.ends_with("create materialized view IF NOT EXISTS totals as "),
            "{before}"
        );
        assert_eq!(
            statements[2],
            Statement::Query("SELECT * FROM totals WHERE k = 'x;y'".into())
        );
        assert_eq!(
            statements[3],
            Statement::Drop {
                kind: ObjectKind::MaterializedView,
                name: "totals".into(),
                if_exists: true
            }
        );
        assert!(matches!(&statements[4], Statement::Query(q) if q.contains("eddy.jobs")));
        assert!(matches!(&statements[5], Statement::Query(q) if q.contains("eddy.views")));
        assert_eq!(statements[6], Statement::SetMinEpoch(4));
        assert!(matches!(&statements[7], Statement::Query(q) if q.starts_with("SET search_path")));
        assert!(
            matches!(&statements[8], Statement::Insert { sql, .. } if sql == "INSERT INTO out SELECT * FROM orders")
        );
    }

    #[test]
    fn unreadable_commands_say_what_is_missing() {
        let err = split("CREATE MATERIALIZED VIEW v SELECT 1").expect_err("no AS");
        assert!(err.message.contains("no AS"), "{}", err.message);
        let err = split("SET eddy.min_epoch = soon").expect_err("not a number");
        assert!(err.message.contains("checkpoint number"), "{}", err.message);
        assert!(split("  ;; -- nothing\n").expect("splits").is_empty());
    }

    #[test]
    fn a_function_body_in_dollar_quotes_is_one_statement() {
        let statements =
            split("CREATE FUNCTION f(x BIGINT) RETURNS BIGINT LANGUAGE python AS $$\nreturn x; # one\n$$; SELECT f(1)")
                .expect("splits");
        assert_eq!(statements.len(), 2);
        assert!(matches!(
            &statements[0],
            Statement::Declare { kind: ObjectKind::Function, name, .. } if name == "f"
        ));
    }
}
