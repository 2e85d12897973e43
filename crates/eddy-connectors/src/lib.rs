//! # eddy-connectors
//!
//! Sources and sinks behind `CREATE TABLE ... WITH (connector = '...')`.
//!
//! Each connector is one module implementing [`Connector`] — its options
//! declared once ([`options`]), its checks, opening its readers and
//! writers, its commits — and one line in the [`Registry`]:
//!
//! | connector | source | sink | module |
//! |---|---|---|---|
//! | `file` (`ndjson`) | NDJSON file | NDJSON file(s), rolled, partitioned | [`file`] |
//! | `stdin` | NDJSON on stdin | | [`stdin`] |
//! | `generator` | the reference pipeline's streams | | [`generator`] |
//! | `nexmark` | Nexmark's auction streams | | [`nexmark`] |
//! | `values` | rows written into the job (`VALUES`) | | [`values`] |
//! | `kafka` | topics (JSON, Debezium, upserts) | topics, exactly once | [`kafka`] |
//! | `stdout` (`print`) | | tagged JSON lines | [`stdout`] |
//! | `parquet` | | Parquet files, rolled, partitioned | [`parquet`] |
//! | `blackhole` | | nothing | [`blackhole`] |
//!
//! `eddy connectors` prints every option ([`Registry::reference`]).
//! [`Connectors`] is the engine's [`eddy_engine::graph::ConnectorFactory`]:
//! it applies the run's overrides ([`ConnectorConfig`]: `--input`,
//! `--output`, a scaled-out task's partitions) and hands each table to
//! its connector. What several connectors share lives beside them: NDJSON
//! decoding ([`ndjson`]), file sinks and changelog encodings ([`sinks`]),
//! JSON lines ([`json_lines`]), a server's path roots ([`roots`]).

pub mod blackhole;
pub mod config;
pub mod connector;
pub mod datagen;
pub mod delta;
pub mod error;
pub mod factory;
pub mod file;
pub mod generator;
pub mod json_lines;
pub mod json_timestamps;
pub mod kafka;
pub mod ndjson;
pub mod nexmark;
pub mod options;
pub mod parquet;
pub mod postgres;
pub mod registry;
pub mod roots;
pub mod settings;
pub mod sinks;
pub mod stdin;
pub mod stdout;
pub mod storage;
pub mod values;
pub mod view;

mod checks;
mod swar;

pub use config::{ConnectorConfig, OutputFormat, DEFAULT_BATCH_SIZE};
pub use connector::{Connector, Role};
pub use error::{ConnectorError, Result};
pub use factory::Connectors;
pub use kafka::KafkaTopicRef;
pub use registry::Registry;
pub use roots::PathRoots;
