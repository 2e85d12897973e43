//! The SQL dialect eddy reads, in one place: Flink's and Arroyo's SQL as
//! people write it, turned into statements DataFusion's planner takes.
//!
//! - [`statements`]: tokenizing, statement splitting and parsing with
//!   positions kept, the `WATERMARK FOR` and `METADATA FROM` clauses of a
//!   `CREATE TABLE` (cut from the tokens: sqlparser's generic dialect has
//!   neither);
//! - [`temporal_joins`]: `FOR SYSTEM_TIME AS OF` cut from a join's tokens
//!   and recorded for the planner;
//! - [`match_within`]: Flink's `WITHIN <interval>` after a `MATCH_RECOGNIZE`
//!   pattern, moved into its `DEFINE` list for the planner to read;
//! - [`flink_windows`]: Flink's legacy group windows (`TUMBLE(ts, ...)` in
//!   GROUP BY, `TUMBLE_START`, ...) and `TABLE t` window arguments
//!   rewritten to eddy's window functions;
//! - [`create_function`]: `CREATE [AGGREGATE] FUNCTION ... LANGUAGE PYTHON`'s
//!   `AGGREGATE` and `WITH (...)` cut out for sqlparser;
//! - [`output_names`]: Flink's short names for unaliased function columns;
//! - [`unnest_joins`]: Flink's `CROSS JOIN UNNEST(t.arr) AS u(x)` rewritten
//!   into the projection DataFusion plans as an `Unnest`;
//! - [`row_types`]: Flink's `ROW<...>` column types read as structs;
//! - [`rewrite`]: helpers the rewrites share (a word among tokens, SQL
//!   text parsed back);
//! - [`identifiers`]: how a name is read (quoted keeps its case);
//! - [`hints`]: `/*+ uid('name') */`, a query's name for its state.
//!
//! In: substituted SQL text. Out: sqlparser statements in DataFusion's
//! dialect, with positions, and the clauses cut from them.

pub mod arroyo_tables;
pub mod create_function;
pub mod flink_types;
pub mod flink_windows;
pub mod hints;
pub mod identifiers;
pub mod match_within;
pub mod output_names;
pub mod rewrite;
pub mod row_types;
pub mod statements;
pub mod temporal_joins;
pub mod unnest_joins;
