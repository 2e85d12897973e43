//! NDJSON input: newline-delimited JSON objects from a file, a pipe or
//! stdin, decoded into record batches with arrow-json.
//!
//! - [`source`]: [`NdjsonSource`], the reader: lines in input order, byte
//!   offsets and line numbers for checkpoints and bad-row reports;
//! - [`decode`]: chunks of lines into batches, on worker threads, bad
//!   lines found and reported one by one;
//! - [`bad_line`]: why a line the decoder refused is bad;
//! - [`flat`]: the fast path for chunks of flat objects of scalars;
//! - [`debezium`]: Debezium change events into changelog rows.

mod bad_line;
pub mod debezium;
pub mod decode;
pub mod flat;
pub mod source;

pub use source::NdjsonSource;
