//! # eddy-engine
//!
//! The dataflow runtime of eddy. A [`graph::JobGraph`] of sources, operators
//! and sinks goes in; [`runtime::start_job`] runs it with a thread per task
//! (a chain of nodes that pass batches by call, [`chains`]) and bounded
//! channels between tasks, and returns a
//! [`runtime::JobHandle`]; result rows leave through sinks and per-node
//! counters through [`metrics`]. With a state directory the job takes
//! [`checkpoint`]s and resumes from the latest one after a crash.
//!
//! Edges carry [`message::Message`]s: record batches, watermarks,
//! checkpoint barriers and end-of-stream. Event time is epoch milliseconds ([`time`]); sources judge
//! lateness and produce watermarks ([`source`]); operators implement one
//! lifecycle trait ([`operator::Operator`]); windows are defined in
//! [`window`]; the built-in operators live in [`operators`].

pub mod chains;
pub mod changelog;
pub mod checkpoint;
pub mod distribute;
pub mod error;
pub mod graph;
pub mod identity;
pub mod interval_text;
pub mod key_groups;
pub mod lookup;
pub mod memory;
pub mod message;
pub mod metrics;
pub mod operator;
pub mod operators;
pub mod parallel;
pub mod partition;
pub mod position;
pub mod rescale;
pub mod running_stats;
pub mod runtime;
pub mod shape;
pub mod sink;
pub mod source;
pub mod spill;
pub mod state;
pub mod suggest;
pub mod time;
pub mod window;

pub use error::{EngineError, Result};
