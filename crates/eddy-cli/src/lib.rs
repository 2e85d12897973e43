//! # eddy-cli
//!
//! The `eddy` binary's commands as a library, so tests drive exactly what
//! users run: [`job`] (run, explain), [`client`] (submit, jobs, job, stop
//! against `eddy serve`), [`generate`], [`bench`].

pub mod bench;
pub mod client;
pub mod error;
pub mod generate;
pub mod job;

pub use error::{CliError, Result};
