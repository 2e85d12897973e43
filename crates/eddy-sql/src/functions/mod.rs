//! eddy's SQL functions, in one home: a registry of function sets by the
//! dialect whose meaning they carry.
//!
//! | set | dialect | functions |
//! |---|---|---|
//! | [`windows`] | eddy | `tumble`, `hop`, `cumulate`, `session`: event-time windows (placeholders the planner reads in a `GROUP BY`) |
//! | [`running_stats`] | eddy | `welford_mean`, `welford_var_pop`, `welford_stddev_pop`, `dynamic_threshold`: running statistics (OVER runs them natively) |
//! | [`flink`] | Flink | `MOD`, `TO_TIMESTAMP_LTZ`, `TIMESTAMPDIFF`, `DATE_FORMAT`, `JSON_VALUE`, `PROCTIME()`, ... with Flink's meaning |
//! | [`arroyo_json`], [`median`] | Arroyo | `->`, `->>`, `json_get_*`, `extract_json`, ...; `median` keeping an integer column's type |
//!
//! In: a DataFusion session. Out: the session with every set registered
//! ([`register_all`]; the planning session and the batch queries eddy is
//! compared with both use it). A new built-in function goes in the module
//! of its dialect's set, registered by that set's `register`; Python
//! functions are declared by the job (`CREATE FUNCTION ... LANGUAGE
//! PYTHON`, planned in `planner/python_functions.rs`), not here.
//!
//! ```
//! use datafusion::execution::FunctionRegistry;
//! use eddy_sql::functions::{register_all, Dialect, SETS};
//!
//! let ctx = datafusion::prelude::SessionContext::new();
//! register_all(&ctx);
//! assert!(ctx.udf("tumble").is_ok() && ctx.udf("json_value").is_ok());
//! assert!(SETS.iter().any(|set| set.dialect == Dialect::Arroyo));
//! ```

pub mod arroyo_json;
pub mod flink;
pub mod median;
pub mod running_stats;
pub mod windows;

use datafusion::logical_expr::AggregateUDF;
use datafusion::prelude::SessionContext;

/// Whose meaning a set's functions carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// eddy's own (windows, running statistics).
    Eddy,
    /// Flink SQL's, as Flink computes them.
    Flink,
    /// Arroyo's, as Arroyo computes them.
    Arroyo,
}

/// A set of functions registered together.
#[derive(Debug, Clone, Copy)]
pub struct FunctionSet {
    /// Whose they are.
    pub dialect: Dialect,
    /// What they are, for the reader.
    pub summary: &'static str,
    /// Registers them with a session.
    pub register: fn(&SessionContext) -> datafusion::error::Result<()>,
}

/// Every set, in the order registered (a later set's name wins).
pub const SETS: &[FunctionSet] = &[
    FunctionSet {
        dialect: Dialect::Eddy,
        summary: "event-time window functions",
        register: |ctx| {
            windows::register(ctx);
            Ok(())
        },
    },
    FunctionSet {
        dialect: Dialect::Eddy,
        summary: "running statistics",
        register: |ctx| {
            running_stats::register(ctx);
            Ok(())
        },
    },
    FunctionSet {
        dialect: Dialect::Flink,
        summary: "Flink's functions",
        register: |ctx| {
            flink::register(ctx);
            Ok(())
        },
    },
    FunctionSet {
        dialect: Dialect::Arroyo,
        summary: "Arroyo's JSON functions and median",
        register: |ctx| {
            ctx.register_udaf(AggregateUDF::from(median::Median::new()));
            arroyo_json::register(ctx)
        },
    },
];

/// Registers every set with `ctx` (the planning session; a batch session
/// running eddy's SQL). A set that fails to register is logged and left
/// out: its functions are then unknown to the queries.
pub fn register_all(ctx: &SessionContext) {
    for set in SETS {
        if let Err(e) = (set.register)(ctx) {
            tracing::error!("{} could not be registered: {e}", set.summary);
        }
    }
}
