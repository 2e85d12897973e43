//! The SQL target: mutated SQL files through the whole front end
//! (parameters, statement splitting, the WATERMARK clause, DDL, DataFusion
//! planning, the streaming planner). Every input must plan or fail with an
//! error: no panic, no hang.

use std::collections::BTreeMap;

/// Tokens that matter to eddy's SQL.
pub const DICTIONARY: &[&str] = &[
    "SELECT ",
    " FROM ",
    " WHERE ",
    " GROUP BY ",
    " HAVING ",
    " ORDER BY ",
    " JOIN ",
    " ON ",
    " LEFT ",
    " FULL OUTER ",
    " BETWEEN ",
    " AND ",
    " OR ",
    " NOT ",
    " UNION ALL ",
    " AS ",
    "tumble(INTERVAL '5' SECOND)",
    "hop(INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
    " OVER (",
    "PARTITION BY ",
    "ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW",
    "late_rows(",
    "bad_rows(",
    "INTERVAL '1' SECOND",
    "INTERVAL '-1' DAY",
    "WATERMARK FOR ",
    " - INTERVAL '2' SECOND",
    "CREATE TABLE ",
    "CREATE VIEW ",
    "INSERT INTO ",
    "WITH (connector = 'file', path = 'x')",
    "GENERATED ALWAYS AS (",
    ") STORED",
    "CAST(",
    " AS TIMESTAMP)",
    "::BIGINT",
    "NULL",
    "(",
    ")",
    ",",
    ";",
    "'",
    "\"",
    "--",
    "/*",
    "*/",
    "${",
    "}",
    "${X:",
    "count(*)",
    "sum(",
    "lag(",
    "row_number()",
    "dynamic_threshold(",
    "welford_mean(",
    "1e400",
    "9223372036854775807",
    "*",
    "SET 'table.exec.state.ttl' = '1 s'",
    "e.",
    "w.start",
    "w.end",
    "\u{feff}",
    "é",
    "TABLE(TUMBLE(TABLE ",
    "TABLE(HOP(TABLE ",
    "DESCRIPTOR(",
    "window_start",
    "window_end",
    "window_time",
    "TUMBLE(",
    "HOP(",
    "TUMBLE_START(",
    "HOP_ROWTIME(",
    "TIMESTAMPDIFF(SECOND, ",
    "TIMESTAMPADD(MONTH, ",
    "MOD(",
    "TO_TIMESTAMP_LTZ(",
    "DATE_FORMAT(",
    "BEGIN STATEMENT SET;",
    "END;",
];

/// Plans `text` as a SQL file; a panic or a hang is the failure the
/// caller looks for, an error is a fine outcome.
pub fn check(text: &[u8]) -> Result<(), String> {
    let text = String::from_utf8_lossy(text).into_owned();
    let files = [eddy_sql::SqlFile {
        name: "fuzz.sql".into(),
        text,
    }];
    let params = BTreeMap::from([("DATA".to_string(), "/nonexistent".to_string())]);
    if let Ok(job) = eddy_sql::compile(&files, &params) {
        let _ = job.graph.explain();
    }
    Ok(())
}
