//! # eddy-sql
//!
//! The SQL front end of eddy: `.sql` text in, an executable
//! [`eddy_engine::graph::JobGraph`] out.
//!
//! - [`params`]: `${NAME:default}` substitution with position mapping;
//! - [`statements`]: tokenizing, statement splitting, the `WATERMARK FOR` clause;
//! - [`ddl`]: `CREATE TABLE` into table definitions (computed columns, event time);
//! - [`udf`]: the `tumble` and `hop` window functions;
//! - [`planner`]: DataFusion logical plans into streaming operators.
//!
//! Every user error is a [`SqlError`] naming file, line and column.

pub mod context;
pub mod ddl;
pub mod error;
pub mod flink_functions;
pub mod flink_windows;
pub mod output_names;
pub mod params;
pub mod planner;
pub mod side_streams;
pub mod statements;
pub mod temporal_joins;
pub mod udaf;
pub mod udf;

pub use error::{Position, Result, SqlError};
pub use planner::{compile, CompiledJob, SqlFile};
