//! # eddy-sql
//!
//! The SQL front end of eddy: `.sql` text in, an executable
//! [`eddy_engine::graph::JobGraph`] out.
//!
//! - [`params`]: `${NAME:default}` substitution with position mapping;
//! - [`dialect`]: tokenizing, statement splitting, the clauses and functions of
//!   Flink's and Arroyo's SQL (`WATERMARK FOR`, `FOR SYSTEM_TIME AS OF`, group
//!   windows, ...) in DataFusion's terms;
//! - [`ddl`]: `CREATE TABLE` into table definitions (computed columns, event time);
//! - [`functions`]: eddy's SQL functions, one home, by dialect (windows,
//!   running statistics, Flink's, Arroyo's);
//! - [`planner`]: DataFusion logical plans into streaming operators.
//!
//! Every user error is a [`SqlError`] naming file, line and column.

pub mod context;
pub mod ddl;
pub mod dialect;
pub mod error;
pub mod functions;
pub mod params;
pub mod planner;
pub mod side_streams;

pub use error::{Position, Result, SqlError};
pub use planner::{compile, compile_with, CompileOptions, CompiledJob, SqlFile};
