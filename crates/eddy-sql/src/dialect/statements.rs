//! Splits a SQL file into statements and parses them, keeping positions.
//!
//! In: substituted file text and its [`SourceMap`]. Out: [`ParsedStatement`]s,
//! each a sqlparser AST, its start position, and the `WATERMARK FOR` clause
//! of a `CREATE TABLE` if it had one.
//!
//! The whole file is tokenized once; tokens keep their line and column, so
//! the parser's error positions are positions in the file. A `WATERMARK FOR
//! col AS expr` clause inside a `CREATE TABLE` column list is not standard
//! SQL: it is cut out of the token stream (with its comma) before parsing and
//! returned alongside the statement. Flink's `SET 'key' = 'value'` names its
//! key with a string; the key is turned into a quoted identifier so that
//! sqlparser reads it as an ordinary `SET`.

use datafusion::sql::sqlparser::ast::{BinaryOperator, Expr as SqlExpr, Ident, Statement, Value};
use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::{Parser, ParserError};
use datafusion::sql::sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace, Word};

use crate::error::{Position, Result, SqlError};
use crate::params::SourceMap;

/// `WATERMARK FOR column AS column - INTERVAL ...`.
#[derive(Debug, Clone)]
pub struct WatermarkClause {
    /// The event-time column, as written (read by the session's
    /// [`IdentifierCase`](crate::dialect::identifiers::IdentifierCase)).
    pub column: Ident,
    /// The column the bound is taken from (`col` in `AS col - INTERVAL
    /// ...`): the DDL checks that it is `column`.
    pub bound_column: Ident,
    /// Out-of-orderness bound in milliseconds.
    pub bound_ms: i64,
    /// Where the clause starts.
    pub position: Position,
}

/// One statement of a file.
#[derive(Debug, Clone)]
pub struct ParsedStatement {
    /// The statement.
    pub statement: Statement,
    /// Where it starts.
    pub position: Position,
    /// The watermark clause of a CREATE TABLE.
    pub watermark: Option<WatermarkClause>,
    /// Its words (upper case) where they are written, so that an error
    /// found while planning can point at the construct it is about.
    pub words: Words,
    /// Its `FOR SYSTEM_TIME AS OF` clauses (cut out of the statement).
    pub temporal_joins: Vec<crate::dialect::temporal_joins::TemporalJoin>,
    /// A CREATE TABLE's metadata columns, `col TYPE METADATA FROM 'key'
    /// [VIRTUAL]` (cut out of the column list).
    pub metadata_columns: Vec<MetadataColumn>,
    /// RisingWave's `EMIT ON WINDOW CLOSE` at the end of a query: where it
    /// is written (cut out; the planner checks the query emits only final
    /// rows, which is what it asks for).
    pub emit_on_window_close: Option<Position>,
    /// Its `/*+ uid('name') */` hint.
    pub uid: Option<crate::dialect::hints::QueryUid>,
    /// A `CREATE FUNCTION`'s clauses beyond PostgreSQL's form.
    pub function: Option<crate::dialect::create_function::FunctionClauses>,
}

/// A column read from its record's metadata: `col TYPE METADATA FROM 'key'`.
#[derive(Debug, Clone, PartialEq)]
pub struct MetadataColumn {
    /// The column (lower case).
    pub column: String,
    /// The metadata key, as written.
    pub key: String,
    /// Where `METADATA` is written.
    pub position: Position,
}

/// The words of a statement, upper case, with their positions, in order.
#[derive(Debug, Clone, Default)]
pub struct Words(Vec<(String, Position)>);

impl Words {
    fn of(tokens: &[TokenWithSpan], map: &SourceMap) -> Self {
        Words(
            tokens
                .iter()
                .filter_map(|t| match &t.token {
                    Token::Word(w) if w.quote_style.is_none() && t.span.start.line > 0 => Some((
                        w.value.to_ascii_uppercase(),
                        map.position(t.span.start.line, t.span.start.column),
                    )),
                    _ => None,
                })
                .collect(),
        )
    }

    /// Where the first of `words` (upper case) is written, if it is.
    pub fn find(&self, words: &[&str]) -> Option<&Position> {
        self.0
            .iter()
            .find(|(w, _)| words.contains(&w.as_str()))
            .map(|(_, p)| p)
    }
}

fn is_trivia(token: &Token) -> bool {
    matches!(token, Token::Whitespace(_))
}

fn is_keyword(token: &Token, keyword: Keyword) -> bool {
    matches!(token, Token::Word(w) if w.keyword == keyword && w.quote_style.is_none())
}

/// `WATERMARK` is no sqlparser keyword, so it is matched by its text.
fn is_watermark(token: &Token) -> bool {
    matches!(token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case("watermark"))
}

/// Turns a sqlparser error message into a positioned error.
pub fn parser_error(map: &SourceMap, fallback: &Position, error: &ParserError) -> SqlError {
    let text = error.to_string();
    let text = text.trim_start_matches("sql parser error: ").to_string();
    if let Some(at) = text.rfind(" at Line: ") {
        let tail = &text[at + " at Line: ".len()..];
        let mut parts = tail.split(", Column: ");
        let line = parts.next().and_then(|l| l.trim().parse::<u64>().ok());
        let column = parts.next().and_then(|c| c.trim().parse::<u64>().ok());
        if let (Some(line), Some(column)) = (line, column) {
            return SqlError::at(&map.position(line, column), text[..at].to_string());
        }
    }
    SqlError::at(fallback, text)
}

/// Tokenizes, splits and parses a file.
pub fn parse_file(text: &str, map: &SourceMap) -> Result<Vec<ParsedStatement>> {
    let dialect = GenericDialect {};
    let tokens = Tokenizer::new(&dialect, text)
        .tokenize_with_location()
        .map_err(|e| {
            SqlError::at(
                &map.position(e.location.line, e.location.column),
                e.message.clone(),
            )
        })?;
    let mut statements = Vec::new();
    let mut current: Vec<TokenWithSpan> = Vec::new();
    let mut depth = 0i32;
    for token in tokens {
        match token.token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        if matches!(token.token, Token::SemiColon) && depth <= 0 {
            if let Some(s) = parse_one(std::mem::take(&mut current), map, &dialect)? {
                statements.push(s);
            }
            depth = 0;
            continue;
        }
        if matches!(token.token, Token::EOF) {
            continue;
        }
        current.push(token);
    }
    if let Some(s) = parse_one(current, map, &dialect)? {
        statements.push(s);
    }
    Ok(statements)
}

/// The most binary operators one statement may hold: a chain of them nests
/// as deep as it is long, and planning recurses through it.
pub const MAX_OPERATORS: usize = 1_000;

fn is_operator(token: &Token) -> bool {
    match token {
        Token::Plus
        | Token::Minus
        | Token::Mul
        | Token::Div
        | Token::Mod
        | Token::Eq
        | Token::Neq
        | Token::Lt
        | Token::Gt
        | Token::LtEq
        | Token::GtEq
        | Token::StringConcat => true,
        Token::Word(w) => w.value.eq_ignore_ascii_case("and") || w.value.eq_ignore_ascii_case("or"),
        _ => false,
    }
}

fn parse_one(
    tokens: Vec<TokenWithSpan>,
    map: &SourceMap,
    dialect: &GenericDialect,
) -> Result<Option<ParsedStatement>> {
    let Some(first) = tokens.iter().find(|t| !is_trivia(&t.token)) else {
        return Ok(None);
    };
    let position = map.position(first.span.start.line, first.span.start.column);
    let words = Words::of(&tokens, map);
    let operators = tokens.iter().filter(|t| is_operator(&t.token)).count();
    if operators > MAX_OPERATORS {
        return Err(SqlError::at(
            &position,
            format!("this statement has {operators} operators; at most {MAX_OPERATORS} are allowed in one statement (for a long list of alternatives use IN (...))"),
        ));
    }
    if is_statement_set_marker(&tokens) {
        return Ok(None);
    }
    if let Some(class) = java_function_class(&tokens) {
        let python = tokens
            .iter()
            .any(|t| crate::dialect::rewrite::is_word(&t.token, "PYTHON"));
        return Err(SqlError::at(
            &position,
            if python {
                format!("CREATE FUNCTION ... AS '{class}' LANGUAGE PYTHON is Flink's form, whose types are declared in Python; eddy takes them in SQL: CREATE FUNCTION name(arg TYPE, ...) RETURNS TYPE LANGUAGE PYTHON AS 'module:function' (or AS $$ def name(...): ... $$)")
            } else {
                format!("CREATE FUNCTION ... AS '{class}' names a Java class, and eddy runs no Java: write the function as a SQL expression where it is called (Nexmark q14's count_char(extra, 'c') is length(extra) - length(replace(extra, 'c', ''))), or in Python (CREATE FUNCTION ... LANGUAGE PYTHON)")
            },
        ));
    }
    let uid = crate::dialect::hints::query_uid(&tokens, map)?;
    if let Some((tokens, clauses)) =
        crate::dialect::create_function::cut_function_clauses(&tokens, map)?
    {
        let statement = parse_whole(tokens, map, &position, dialect)?;
        return Ok(Some(ParsedStatement {
            statement,
            position,
            watermark: None,
            words,
            temporal_joins: Vec::new(),
            metadata_columns: Vec::new(),
            emit_on_window_close: None,
            uid,
            function: Some(clauses),
        }));
    }
    let (tokens, emit_on_window_close) = cut_emit_on_window_close(tokens, map);
    let (tokens, watermark) = cut_watermark(tokens, map, dialect)?;
    let (tokens, metadata_columns) = cut_metadata_columns(tokens, map);
    let tokens = flink_computed_columns(quote_keyword_columns(
        crate::dialect::row_types::struct_row_types(tokens),
    ));
    let tokens = crate::dialect::flink_types::flink_types(tokens)
        .map_err(|(line, column, message)| SqlError::at(&map.position(line, column), message))?;
    let tokens = quote_time_units(quote_set_key(tokens));
    let (tokens, mut window_tvfs) = crate::dialect::flink_windows::cut_window_tvfs(tokens)
        .map_err(|(line, column, message)| SqlError::at(&map.position(line, column), message))?;
    let (tokens, temporal_joins) = crate::dialect::temporal_joins::cut_temporal_joins(tokens)
        .map_err(|(line, column, message)| SqlError::at(&map.position(line, column), message))?;
    let tokens = crate::dialect::match_within::move_within(tokens);
    let tokens = crate::functions::flink::renames::map_literals(tokens);
    let tokens = crate::functions::flink::json_build::drop_json_object_keys(
        crate::functions::flink::json_build::cut_is_json(tokens),
    );
    let mut statement = parse_whole(tokens, map, &position, dialect)?;
    window_tvfs.extend(crate::dialect::flink_windows::cut_function_tvfs(
        &mut statement,
    ));
    crate::dialect::flink_windows::rewrite_group_windows(&mut statement);
    crate::dialect::flink_windows::rewrite_tvf_selects(&mut statement, &window_tvfs)
        .map_err(|((line, column), e)| SqlError::at(&map.position(line, column), e.to_string()))?;
    crate::dialect::unnest_joins::rewrite_unnest_joins(&mut statement).map_err(|e| {
        let at = words
            .find(&["UNNEST"])
            .cloned()
            .unwrap_or_else(|| position.clone());
        SqlError::at(&at, e.to_string())
    })?;
    crate::dialect::output_names::name_function_columns(&mut statement);
    crate::functions::flink::renames::rename_functions(&mut statement);
    crate::functions::flink::json_build::rewrite_json_functions(&mut statement);
    crate::functions::arroyo_json::bind_json_operators(&mut statement);
    Ok(Some(ParsedStatement {
        statement,
        position,
        watermark,
        words,
        temporal_joins,
        metadata_columns,
        emit_on_window_close,
        uid,
        function: None,
    }))
}

/// Parses one statement from `tokens`, which it must use up: text after
/// it is an error, never dropped (`... WHERE id > 3 EMIT SOMETHING ELSE`).
fn parse_whole(
    tokens: Vec<TokenWithSpan>,
    map: &SourceMap,
    position: &Position,
    dialect: &GenericDialect,
) -> Result<Statement> {
    let mut parser = Parser::new(dialect).with_tokens_with_locations(tokens);
    let statement = parser
        .parse_statement()
        .map_err(|e| parser_error(map, position, &e))?;
    let rest = parser.peek_token();
    if !matches!(rest.token, Token::EOF) {
        return Err(SqlError::at(
            &map.position(rest.span.start.line, rest.span.start.column),
            format!(
                "unexpected '{}' after the end of the statement: eddy does not understand what follows (a statement ends with ';')",
                rest.token
            ),
        ));
    }
    Ok(statement)
}

/// RisingWave's `EMIT ON WINDOW CLOSE` ending a statement: cut out, with
/// where it is written.
fn cut_emit_on_window_close(
    mut tokens: Vec<TokenWithSpan>,
    map: &SourceMap,
) -> (Vec<TokenWithSpan>, Option<Position>) {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    let Some(last4) = significant.len().checked_sub(4).map(|k| &significant[k..]) else {
        return (tokens, None);
    };
    let words = ["EMIT", "ON", "WINDOW", "CLOSE"];
    let is_clause = last4
        .iter()
        .zip(words)
        .all(|(&i, word)| crate::dialect::rewrite::is_word(&tokens[i].token, word));
    if !is_clause {
        return (tokens, None);
    }
    let start = tokens[last4[0]].span.start;
    tokens.truncate(last4[0]);
    (tokens, Some(map.position(start.line, start.column)))
}

/// Whether a metadata column's clause ends where a column ends (`,` or
/// `)` after it, or `VIRTUAL`).
fn from_key_is_complete(
    tokens: &[TokenWithSpan],
    after: Option<usize>,
    end: usize,
    last: usize,
) -> bool {
    end != last || after.is_none_or(|a| matches!(tokens[a].token, Token::Comma | Token::RParen))
}

/// Flink's metadata columns, `CREATE TABLE t (..., ts TIMESTAMP(3) METADATA
/// FROM 'value.source.timestamp' VIRTUAL, ...)`: `METADATA FROM '<key>'`
/// (and `VIRTUAL`) are cut out, leaving an ordinary column, and the column
/// and key recorded (see `ddl`, which says which keys a format has).
fn cut_metadata_columns(
    tokens: Vec<TokenWithSpan>,
    map: &SourceMap,
) -> (Vec<TokenWithSpan>, Vec<MetadataColumn>) {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    let word = |i: usize, text: &str| matches!(&tokens[i].token, Token::Word(w) if w.quote_style.is_none() && w.value.eq_ignore_ascii_case(text));
    let mut found = Vec::new();
    let mut depth = 0i32;
    let mut item_name: Option<String> = None;
    let mut item_start = true;
    for (k, &i) in significant.iter().enumerate() {
        match &tokens[i].token {
            Token::LParen => {
                depth += 1;
                if depth == 1 {
                    item_start = true;
                }
                continue;
            }
            Token::RParen => {
                depth -= 1;
                continue;
            }
            Token::Comma if depth == 1 => {
                item_start = true;
                continue;
            }
            Token::Word(w) if depth == 1 && item_start => {
                item_name = Some(w.value.to_lowercase());
                item_start = false;
                continue;
            }
            _ => {}
        }
        item_start = false;
        if depth != 1 || !word(i, "metadata") {
            continue;
        }
        let Some(name) = &item_name else {
            continue;
        };
        // `METADATA FROM 'key' [VIRTUAL]`, or `METADATA [VIRTUAL]`: the
        // column's own name is the key.
        let from_key = match (significant.get(k + 1), significant.get(k + 2)) {
            (Some(&from), Some(&key)) if word(from, "from") => match &tokens[key].token {
                Token::SingleQuotedString(text) => Some((key, text.clone())),
                _ => continue,
            },
            _ => None,
        };
        let (last, key, after) = match from_key {
            Some((key, text)) => (key, text, k + 3),
            None => (i, name.clone(), k + 1),
        };
        let end = match significant.get(after) {
            Some(&v) if word(v, "virtual") => v,
            _ => last,
        };
        if from_key_is_complete(&tokens, significant.get(after).copied(), end, last) {
            found.push((i, end, name.clone(), key));
        }
    }
    if found.is_empty() {
        return (tokens, Vec::new());
    }
    let mut rest = Vec::with_capacity(tokens.len());
    let mut next = 0;
    let mut columns = Vec::new();
    for (start, end, column, key) in found {
        rest.extend_from_slice(&tokens[next..start]);
        next = end + 1;
        let at = tokens[start].span.start;
        columns.push(MetadataColumn {
            column,
            key,
            position: map.position(at.line, at.column),
        });
    }
    rest.extend_from_slice(&tokens[next..]);
    (rest, columns)
}

/// The indices of the tokens that are not whitespace or comments.
fn significant_tokens(tokens: &[TokenWithSpan]) -> Vec<usize> {
    (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect()
}

/// Whether the statement is a `CREATE [TEMPORARY ...] TABLE`.
fn is_create_table(tokens: &[TokenWithSpan], significant: &[usize]) -> bool {
    significant.len() > 2
        && is_keyword(&tokens[significant[0]].token, Keyword::CREATE)
        && significant[1..]
            .iter()
            .take(4)
            .any(|&i| is_keyword(&tokens[i].token, Keyword::TABLE))
}

/// Columns named like a table constraint's keyword, `CREATE TABLE t (key
/// VARCHAR, index BIGINT, ...)`: sqlparser's generic dialect reads `KEY`
/// and `INDEX` at the start of an item as MySQL's index constraint, so a
/// column so named (an item whose first word is one of them, followed by a
/// type's name) is turned into a quoted identifier of its folded name.
fn quote_keyword_columns(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant = significant_tokens(&tokens);
    if !is_create_table(&tokens, &significant) {
        return tokens;
    }
    let mut depth = 0;
    let mut item_start = false;
    let mut quote = Vec::new();
    for (k, &i) in significant.iter().enumerate() {
        match &tokens[i].token {
            Token::LParen => {
                depth += 1;
                item_start = depth == 1;
                continue;
            }
            Token::RParen => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
                continue;
            }
            Token::Comma if depth == 1 => {
                item_start = true;
                continue;
            }
            token if depth == 1 && item_start => {
                let next_is_type = significant.get(k + 1).is_some_and(
                    |&j| matches!(&tokens[j].token, Token::Word(w) if w.quote_style.is_none()),
                );
                if (is_keyword(token, Keyword::KEY) || is_keyword(token, Keyword::INDEX))
                    && next_is_type
                {
                    quote.push(i);
                }
            }
            _ => {}
        }
        item_start = false;
    }
    for i in quote {
        if let Token::Word(w) = &tokens[i].token {
            tokens[i].token = Token::Word(Word {
                value: w.value.to_lowercase(),
                quote_style: Some('"'),
                keyword: Keyword::NoKeyword,
            });
        }
    }
    tokens
}

/// Flink's computed columns, `CREATE TABLE t (..., ts AS expr, ...)`:
/// rewritten as `ts <inferred> GENERATED ALWAYS AS (expr) STORED`, the column
/// taking its expression's type (see `ddl`).
fn flink_computed_columns(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant = significant_tokens(&tokens);
    if !is_create_table(&tokens, &significant) {
        return tokens;
    }
    // (name index, AS index, index of the item's end) of each `name AS expr`.
    let mut found = Vec::new();
    let mut depth = 0;
    let mut item_start = None;
    for (k, &i) in significant.iter().enumerate() {
        match tokens[i].token {
            Token::LParen => {
                depth += 1;
                if depth == 1 && item_start.is_none() && found.is_empty() {
                    item_start = Some(k + 1);
                }
                continue;
            }
            Token::RParen => {
                if depth == 1 {
                    if let Some((name, as_at, None)) = found.last().copied() {
                        found.pop();
                        found.push((name, as_at, Some(k)));
                    }
                    break;
                }
                depth -= 1;
                continue;
            }
            Token::Comma if depth == 1 => {
                if let Some((name, as_at, None)) = found.last().copied() {
                    found.pop();
                    found.push((name, as_at, Some(k)));
                }
                item_start = Some(k + 1);
                continue;
            }
            _ => {}
        }
        if depth == 1 && item_start == Some(k) {
            let next = significant.get(k + 1).map(|&j| &tokens[j].token);
            // Any word: a column may be named like a keyword (`dateTime`),
            // and no constraint starts with `<word> AS`.
            let is_name = matches!(&tokens[i].token, Token::Word(_));
            if is_name && next.is_some_and(|t| is_keyword(t, Keyword::AS)) {
                found.push((k, k + 1, None));
            }
        }
    }
    let found: Vec<(usize, usize, usize)> = found
        .into_iter()
        .filter_map(|(n, a, end)| Some((n, a, end?)))
        .collect();
    if found.is_empty() {
        return tokens;
    }
    let word = |text: &str| TokenWithSpan::wrap(Token::make_word(text, None));
    let space = || TokenWithSpan::wrap(Token::Whitespace(Whitespace::Space));
    let mut out = Vec::with_capacity(tokens.len() + found.len() * 10);
    let mut next = 0;
    for (name, as_at, end) in found {
        let (name, as_at, end) = (significant[name], significant[as_at], significant[end]);
        out.extend_from_slice(&tokens[next..=name]);
        out.extend([
            space(),
            word(crate::ddl::INFERRED_TYPE),
            space(),
            word("GENERATED"),
            space(),
            word("ALWAYS"),
            space(),
            word("AS"),
            TokenWithSpan::wrap(Token::LParen),
        ]);
        out.extend_from_slice(&tokens[as_at + 1..end]);
        out.extend([TokenWithSpan::wrap(Token::RParen), space(), word("STORED")]);
        next = end;
    }
    out.extend_from_slice(&tokens[next..]);
    out
}

/// Flink's `TIMESTAMPDIFF(SECOND, ...)` / `TIMESTAMPADD(DAY, ...)`: the unit
/// keyword becomes the string `'SECOND'` the functions take.
fn quote_time_units(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    for window in significant.windows(4) {
        let [f, open, unit, comma] = window else {
            continue;
        };
        let is_function = matches!(&tokens[*f].token, Token::Word(w)
            if w.quote_style.is_none()
                && (w.value.eq_ignore_ascii_case("timestampdiff") || w.value.eq_ignore_ascii_case("timestampadd")));
        if is_function
            && tokens[*open].token == Token::LParen
            && tokens[*comma].token == Token::Comma
        {
            if let Token::Word(w) = &tokens[*unit].token {
                if w.quote_style.is_none() {
                    tokens[*unit].token = Token::SingleQuotedString(w.value.to_uppercase());
                }
            }
        }
    }
    tokens
}

/// Flink's `CREATE [TEMPORARY] [SYSTEM] FUNCTION name AS 'java.Class'
/// [LANGUAGE JAVA]`: the class named, if the statement is one.
fn java_function_class(tokens: &[TokenWithSpan]) -> Option<String> {
    let significant: Vec<&Token> = tokens
        .iter()
        .map(|t| &t.token)
        .filter(|t| !is_trivia(t))
        .collect();
    if !is_keyword(significant.first()?, Keyword::CREATE) {
        return None;
    }
    let function = significant
        .iter()
        .take(4)
        .position(|t| is_keyword(t, Keyword::FUNCTION))?;
    match significant.get(function + 2..function + 4)? {
        [as_word, Token::SingleQuotedString(class)] if is_keyword(as_word, Keyword::AS) => {
            Some(class.clone())
        }
        _ => None,
    }
}

/// `BEGIN STATEMENT SET;` and `END;` (Flink's grouping of INSERTs): every
/// statement of a file already runs as one job, so they mean nothing more.
fn is_statement_set_marker(tokens: &[TokenWithSpan]) -> bool {
    let words: Vec<String> = tokens
        .iter()
        .filter(|t| !is_trivia(&t.token))
        .map(|t| match &t.token {
            Token::Word(w) if w.quote_style.is_none() => w.value.to_ascii_uppercase(),
            _ => String::from("\0"),
        })
        .collect();
    matches!(
        words.iter().map(String::as_str).collect::<Vec<_>>()[..],
        ["BEGIN", "STATEMENT", "SET"] | ["END"] | ["EXECUTE", "STATEMENT", "SET", "BEGIN"]
    )
}

/// `SET 'a.b' = ...` (Flink's form): the string key becomes the quoted
/// identifier `"a.b"`.
fn quote_set_key(mut tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    if let [first, second, ..] = significant[..] {
        if is_keyword(&tokens[first].token, Keyword::SET) {
            if let Token::SingleQuotedString(key) = &tokens[second].token {
                let word = Word {
                    value: key.clone(),
                    quote_style: Some('"'),
                    keyword: Keyword::NoKeyword,
                };
                tokens[second].token = Token::Word(word);
            }
        }
    }
    tokens
}

/// Removes `[,] WATERMARK FOR col AS expr` from a parenthesised column list.
fn cut_watermark(
    tokens: Vec<TokenWithSpan>,
    map: &SourceMap,
    dialect: &GenericDialect,
) -> Result<(Vec<TokenWithSpan>, Option<WatermarkClause>)> {
    let significant: Vec<usize> = (0..tokens.len())
        .filter(|&i| !is_trivia(&tokens[i].token))
        .collect();
    let mut depth = 0i32;
    let mut found = None;
    for (k, &i) in significant.iter().enumerate() {
        match tokens[i].token {
            Token::LParen => depth += 1,
            Token::RParen => depth -= 1,
            _ => {}
        }
        let next_is_for = significant
            .get(k + 1)
            .is_some_and(|&j| is_keyword(&tokens[j].token, Keyword::FOR));
        if depth == 1 && is_watermark(&tokens[i].token) && next_is_for {
            found = Some(k);
            break;
        }
    }
    let Some(k) = found else {
        return Ok((tokens, None));
    };
    let start = significant[k];
    let position = map.position(
        tokens[start].span.start.line,
        tokens[start].span.start.column,
    );
    // The clause ends before the next ',' at depth 1 or the ')' closing the list.
    let mut end = tokens.len();
    let mut inner = 0i32;
    for (j, token) in tokens.iter().enumerate().skip(start) {
        match token.token {
            Token::LParen => inner += 1,
            Token::RParen if inner == 0 => {
                end = j;
                break;
            }
            Token::RParen => inner -= 1,
            Token::Comma if inner == 0 => {
                end = j;
                break;
            }
            _ => {}
        }
    }
    // Remove the preceding comma (or, if the clause is first, the following one).
    let previous = significant[..k].last().copied();
    let (cut_from, cut_to) = match previous {
        Some(p) if matches!(tokens[p].token, Token::Comma) => (p, end),
        _ if end < tokens.len() && matches!(tokens[end].token, Token::Comma) => (start, end + 1),
        _ => (start, end),
    };
    let clause: Vec<TokenWithSpan> = tokens[start..end].to_vec();
    let mut rest = tokens[..cut_from].to_vec();
    rest.extend_from_slice(&tokens[cut_to..]);
    let watermark = parse_watermark(clause, map, dialect, position)?;
    Ok((rest, Some(watermark)))
}

fn parse_watermark(
    clause: Vec<TokenWithSpan>,
    map: &SourceMap,
    dialect: &GenericDialect,
    position: Position,
) -> Result<WatermarkClause> {
    let mut parser = Parser::new(dialect).with_tokens_with_locations(clause);
    let syntax = |e: ParserError| parser_error(map, &position, &e);
    parser.next_token(); // WATERMARK, checked by the caller
    parser.expect_keyword(Keyword::FOR).map_err(syntax)?;
    let column = parser.parse_identifier().map_err(syntax)?;
    // `WATERMARK FOR col` alone (Arroyo's spelling) is a zero bound.
    if parser.peek_token().token == Token::EOF {
        return Ok(WatermarkClause {
            bound_column: column.clone(),
            column,
            bound_ms: 0,
            position,
        });
    }
    parser.expect_keyword(Keyword::AS).map_err(syntax)?;
    let expr = parser.parse_expr().map_err(syntax)?;
    let shape = "a watermark must be `WATERMARK FOR col AS col` or `WATERMARK FOR col AS col - INTERVAL '2' SECOND` (in parentheses or not)";
    // Arroyo writes the expression in parentheses: `AS (ts - INTERVAL ...)`.
    fn unnested(expr: &SqlExpr) -> &SqlExpr {
        match expr {
            SqlExpr::Nested(inner) => unnested(inner),
            other => other,
        }
    }
    let (bound_column, bound_ms) = match unnested(&expr) {
        SqlExpr::Identifier(id) => (id.clone(), 0),
        SqlExpr::BinaryOp {
            left,
            op: BinaryOperator::Minus,
            right,
        } => match (unnested(left), unnested(right)) {
            (SqlExpr::Identifier(id), SqlExpr::Interval(interval)) => {
                let text = match interval.value.as_ref() {
                    SqlExpr::Value(v) => match &v.value {
                        Value::SingleQuotedString(s) | Value::Number(s, _) => s.clone(),
                        _ => return Err(SqlError::at(&position, shape)),
                    },
                    _ => return Err(SqlError::at(&position, shape)),
                };
                let text = match &interval.leading_field {
                    Some(unit) => format!("{text} {unit}"),
                    None => text,
                };
                let duration = eddy_engine::time::parse_duration(&text)
                    .map_err(|e| SqlError::at(&position, format!("watermark interval: {e}")))?;
                (id.clone(), duration.as_millis() as i64)
            }
            _ => return Err(SqlError::at(&position, shape)),
        },
        _ => return Err(SqlError::at(&position, shape)),
    };
    Ok(WatermarkClause {
        column,
        bound_column,
        bound_ms,
        position,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;
    use crate::params::substitute;

    fn parse(text: &str) -> Result<Vec<ParsedStatement>> {
        let (text, map) = substitute("t.sql", text, &BTreeMap::new(), &mut BTreeSet::new())?;
        parse_file(&text, &map)
    }

    #[test]
    fn cuts_watermark_clause() {
        let s = parse(
            "CREATE TABLE t (a BIGINT, ts TIMESTAMP,\n WATERMARK FOR ts AS ts - INTERVAL '2' SECOND\n) WITH (connector = 'file');\nSELECT a FROM t;",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        let w = s[0].watermark.as_ref().unwrap();
        assert_eq!((w.column.value.as_str(), w.bound_ms), ("ts", 2000));
        assert_eq!((w.position.line, w.position.column), (2, 2));
        assert_eq!(s[1].position.line, 4);
    }

    #[test]
    fn a_watermark_in_parentheses_is_arroyos_spelling_of_the_same() {
        for clause in [
            "WATERMARK FOR ts AS (ts - INTERVAL '1' MINUTE)",
            "WATERMARK FOR ts AS ((ts) - (INTERVAL '1 minute'))",
        ] {
            let s = parse(&format!(
                "CREATE TABLE t (a BIGINT, ts TIMESTAMP, {clause}) WITH (connector = 'file');"
            ))
            .unwrap();
            let w = s[0].watermark.as_ref().unwrap();
            assert_eq!(
                (w.column.value.as_str(), w.bound_ms),
                ("ts", 60_000),
                "{clause}"
            );
        }
    }

    #[test]
    fn metadata_columns_are_cut_and_recorded() {
        let s = parse(
            "CREATE TABLE r (k VARCHAR,\n  changed TIMESTAMP(3) METADATA FROM 'value.source.timestamp' VIRTUAL,\n  rate BIGINT) WITH (connector = 'file');",
        )
        .unwrap();
        let m = &s[0].metadata_columns;
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].column.as_str(), m[0].key.as_str()),
            ("changed", "value.source.timestamp")
        );
        assert_eq!((m[0].position.line, m[0].position.column), (2, 24));
        let Statement::CreateTable(create) = &s[0].statement else {
            panic!("a CREATE TABLE");
        };
        let names: Vec<String> = create
            .columns
            .iter()
            .map(|c| c.name.value.clone())
            .collect();
        assert_eq!(names, ["k", "changed", "rate"]);
    }

    #[test]
    fn a_metadata_column_without_from_reads_its_own_name() {
        let s = parse(
            "CREATE TABLE r (k VARCHAR, table_name STRING METADATA VIRTUAL, op_ts TIMESTAMP_LTZ(3) METADATA, v INT) WITH (connector = 'file');",
        )
        .unwrap();
        let m: Vec<(&str, &str)> = s[0]
            .metadata_columns
            .iter()
            .map(|m| (m.column.as_str(), m.key.as_str()))
            .collect();
        assert_eq!(m, [("table_name", "table_name"), ("op_ts", "op_ts")]);
        let Statement::CreateTable(create) = &s[0].statement else {
            panic!("a CREATE TABLE");
        };
        assert_eq!(create.columns.len(), 4);
    }

    #[test]
    fn syntax_errors_have_positions() {
        let err = parse("SELECT a\nFROM t WHERE ,").unwrap_err();
        assert!(err.to_string().starts_with("t.sql:2:14: "), "{err}");
    }
}
