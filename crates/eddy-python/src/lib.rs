//! # eddy-python
//!
//! Python functions in eddy's SQL: `CREATE FUNCTION ... LANGUAGE PYTHON`.
//!
//! In: [`FunctionDefinition`]s (what the SQL front end read), a
//! [`PythonConfig`] (which Python, where modules come from). Out: DataFusion
//! scalar UDFs ([`PythonScalarFunction`]) and UDAFs
//! ([`PythonAggregateFunction`]) that the planner registers like built-in
//! functions, and per-function counts ([`FunctionReport`]).
//!
//! Python runs out of process: a job's [`PythonRuntime`] starts worker
//! processes (`python3` on PATH, or `EDDY_PYTHON`) on the first call and
//! exchanges Arrow buffers with them over pipes, a batch per request
//! ([`wire`] describes the frames). A function that crashes its worker,
//! hangs past its timeout or raises (when told to fail) fails its job with
//! Python's account; eddy, and a server's other jobs, go on. Building eddy
//! needs no Python at all.
//!
//! - [`definition`]: what a declaration says, checked;
//! - [`wire`]: the frames, eddy's side;
//! - [`worker`]: one worker process;
//! - [`runtime`]: a job's functions and its pool of workers;
//! - [`scalar`], [`aggregate`]: the DataFusion functions.

pub mod aggregate;
pub mod definition;
pub mod error;
pub mod runtime;
pub mod scalar;
pub mod wire;
pub mod worker;

pub use aggregate::PythonAggregateFunction;
pub use definition::{FunctionBody, FunctionDefinition, FunctionKind, OnError};
pub use error::{PythonError, Result};
pub use runtime::{FunctionReport, PythonConfig, PythonRuntime};
pub use scalar::PythonScalarFunction;
