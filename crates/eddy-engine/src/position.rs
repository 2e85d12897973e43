//! A place in the SQL a job was written in: where a table is declared,
//! carried as data from the SQL front end through the job graph into
//! errors, so an API client gets the line and column, not a message to
//! parse.
//!
//! ```
//! use eddy_engine::position::Position;
//!
//! let at = Position { file: "job.sql".into(), line: 3, column: 1 };
//! assert_eq!(at.to_string(), "job.sql:3:1");
//! ```

use std::fmt;

/// A position in a SQL file (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The file (or `<sql>` for inline text).
    pub file: String,
    /// 1-based line.
    pub line: u64,
    /// 1-based column.
    pub column: u64,
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// `file:line:col: ` of `at`, or empty: the prefix of a message about a
/// place in the SQL.
pub fn prefix(at: Option<&Position>) -> String {
    at.map(|p| format!("{p}: ")).unwrap_or_default()
}
