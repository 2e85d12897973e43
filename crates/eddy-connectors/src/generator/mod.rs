//! The built-in deterministic generator of the seed pipeline's three streams
//! (`orders`, `payments`, `devices`), used by `connector = 'generator'` and
//! by `eddy generate`.
//!
//! In: a stream name, a seed, a rate (events per second of event time) and an
//! optional row count. Out: record batches in the stream's canonical columns
//! (see [`stream_schema`]), in arrival order. The same arguments always give
//! the same rows; [`scenario`] documents what is planted where.

mod connector;
pub mod pacer;
pub mod rng;
pub mod scenario;

use std::str::FromStr;
use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::Result as EngineResult;

use crate::error::{ConnectorError, Result};
pub use connector::GeneratorConnector;
use scenario::Background;

/// One of the generator's streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeneratedStream {
    /// Orders.
    Orders,
    /// Payments.
    Payments,
    /// Device events.
    Devices,
}

impl FromStr for GeneratedStream {
    type Err = ConnectorError;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "orders" => Ok(Self::Orders),
            "payments" => Ok(Self::Payments),
            "devices" | "device_events" => Ok(Self::Devices),
            other => Err(ConnectorError::bad_option(
                "stream",
                format!("unknown generator stream '{other}' (use orders, payments or devices)"),
            )),
        }
    }
}

/// The canonical columns of a generated stream.
pub fn stream_schema(stream: GeneratedStream) -> SchemaRef {
    let s = |n: &str| Field::new(n, DataType::Utf8, false);
    let f = |n: &str| Field::new(n, DataType::Float64, false);
    let i = |n: &str| Field::new(n, DataType::Int64, false);
    Arc::new(Schema::new(match stream {
        GeneratedStream::Orders => vec![
            s("order_id"),
            s("customer_id"),
            f("order_amount"),
            i("order_ts"),
            s("country"),
        ],
        GeneratedStream::Payments => vec![
            s("payment_id"),
            s("order_id"),
            f("paid_amount"),
            i("payment_ts"),
            s("method"),
        ],
        GeneratedStream::Devices => vec![
            s("device_id"),
            s("site_id"),
            s("event_type"),
            s("status"),
            i("event_ts"),
        ],
    }))
}

/// Generator settings.
#[derive(Debug, Clone, Copy)]
pub struct GeneratorConfig {
    /// Which stream.
    pub stream: GeneratedStream,
    /// Random seed.
    pub seed: u64,
    /// Background events per second of event time.
    pub rate: u32,
    /// Total rows to produce; `None` = the reference scenario (60 s) only.
    pub count: Option<u64>,
    /// Rows per batch.
    pub batch_size: usize,
}

/// Where a generator stands: how many blocks it generated, how far into the
/// last one it is, and how many rows it emitted. Generation is
/// deterministic, so this is all a resumed generator needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorPosition {
    /// Blocks generated.
    pub block: i64,
    /// Rows of the last block emitted.
    pub offset: usize,
    /// Rows emitted in all.
    pub emitted: u64,
}

/// Produces a generated stream batch by batch.
pub struct Generator {
    config: GeneratorConfig,
    block: i64,
    pending: Vec<ArrayRef>,
    pending_rows: usize,
    offset: usize,
    emitted: u64,
}

impl Generator {
    /// A generator at the start of its stream.
    pub fn new(config: GeneratorConfig) -> Self {
        Self {
            config,
            block: 0,
            pending: Vec::new(),
            pending_rows: 0,
            offset: 0,
            emitted: 0,
        }
    }

    /// Where the generator stands.
    pub fn position(&self) -> GeneratorPosition {
        GeneratorPosition {
            block: self.block,
            offset: self.offset,
            emitted: self.emitted,
        }
    }

    /// A generator continuing from `position`.
    pub fn resumed(config: GeneratorConfig, position: GeneratorPosition) -> Result<Self> {
        let mut generator = Self::new(config);
        if position.block > 0 {
            generator.block = position.block - 1;
            generator.load_block()?;
            generator.offset = position.offset.min(generator.pending_rows);
        }
        generator.emitted = position.emitted;
        Ok(generator)
    }

    fn background(&self) -> Background {
        Background {
            seed: self.config.seed,
            rate: self.config.rate.max(1),
        }
    }

    fn load_block(&mut self) -> Result<()> {
        let bg = self.background();
        let block = self.block;
        self.block += 1;
        let strings = |v: Vec<String>| -> ArrayRef { Arc::new(StringArray::from(v)) };
        let columns: Vec<ArrayRef> = match self.config.stream {
            GeneratedStream::Orders => {
                let rows: Vec<_> = scenario::orders(&bg, block)
                    .into_iter()
                    .map(|a| a.event)
                    .collect();
                vec![
                    strings(rows.iter().map(|r| r.order_id.clone()).collect()),
                    strings(rows.iter().map(|r| r.customer_id.clone()).collect()),
                    Arc::new(Float64Array::from_iter_values(
                        rows.iter().map(|r| r.order_amount),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|r| r.order_ts),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.country),
                    )),
                ]
            }
            GeneratedStream::Payments => {
                let rows: Vec<_> = scenario::payments(&bg, block)
                    .into_iter()
                    .map(|a| a.event)
                    .collect();
                vec![
                    strings(rows.iter().map(|r| r.payment_id.clone()).collect()),
                    strings(rows.iter().map(|r| r.order_id.clone()).collect()),
                    Arc::new(Float64Array::from_iter_values(
                        rows.iter().map(|r| r.paid_amount),
                    )),
                    Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|r| r.payment_ts),
                    )),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.method))),
                ]
            }
            GeneratedStream::Devices => {
                let rows: Vec<_> = scenario::devices(&bg, block)
                    .into_iter()
                    .map(|a| a.event)
                    .collect();
                vec![
                    Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.device_id),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.site_id),
                    )),
                    Arc::new(StringArray::from_iter_values(
                        rows.iter().map(|r| r.event_type),
                    )),
                    Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.status))),
                    Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|r| r.event_ts),
                    )),
                ]
            }
        };
        self.pending_rows = columns.first().map(|c| c.len()).unwrap_or(0);
        self.pending = columns;
        self.offset = 0;
        Ok(())
    }

    /// The next batch in the canonical schema, or `None` when done.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>> {
        let limit = self.config.count;
        loop {
            if let Some(limit) = limit {
                if self.emitted >= limit {
                    return Ok(None);
                }
            }
            if self.offset < self.pending_rows {
                let mut len = self
                    .config
                    .batch_size
                    .max(1)
                    .min(self.pending_rows - self.offset);
                if let Some(limit) = limit {
                    len = len.min((limit - self.emitted) as usize);
                }
                let columns = self
                    .pending
                    .iter()
                    .map(|c| c.slice(self.offset, len))
                    .collect();
                self.offset += len;
                self.emitted += len as u64;
                return Ok(Some(RecordBatch::try_new(
                    stream_schema(self.config.stream),
                    columns,
                )?));
            }
            if self.block > 0 && limit.is_none() {
                return Ok(None);
            }
            self.load_block()?;
        }
    }
}

/// Where each paced table of a job started: its pacer's origin event time
/// and the wall-clock time (epoch ms) it maps to ([`pacer::Pacer::origin`]).
pub type PacedStarts =
    std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, (i64, i64)>>>;

/// A generator bound to a declared table: columns are picked by name from
/// the canonical ones and cast to the declared types.
pub struct GeneratorSource {
    generator: Generator,
    schema: SchemaRef,
    picks: Vec<usize>,
    pacer: Option<pacer::Pacer>,
    /// Where to record the pacer's start, until it is recorded.
    report_start: Option<PacedStarts>,
}

impl GeneratorSource {
    /// Binds `config`'s stream to the declared physical `schema`, starting
    /// at `resume` (a checkpointed [`GeneratorPosition`]) if given; with
    /// `realtime`, rows are paced so that event time advances with the wall
    /// clock.
    pub fn new(
        config: GeneratorConfig,
        schema: SchemaRef,
        resume: Option<&serde_json::Value>,
        realtime: bool,
    ) -> Result<Self> {
        let canonical = stream_schema(config.stream);
        let picks = schema
            .fields()
            .iter()
            .map(|f| {
                canonical.index_of(f.name()).map_err(|_| {
                    let names: Vec<&str> = canonical
                        .fields()
                        .iter()
                        .map(|f| f.name().as_str())
                        .collect();
                    ConnectorError::bad_option(
                        "stream",
                        format!(
                            "the generator's {:?} stream has no column '{}' (it has {})",
                            config.stream,
                            f.name(),
                            names.join(", ")
                        ),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let generator = match resume {
            None => Generator::new(config),
            Some(value) => {
                let position: GeneratorPosition =
                    serde_json::from_value(value.clone()).map_err(|e| {
                        ConnectorError::bad_option("stream", format!("checkpointed position: {e}"))
                    })?;
                Generator::resumed(config, position)?
            }
        };
        let pacer = realtime.then(|| {
            let canonical = stream_schema(config.stream);
            pacer::Pacer::new(
                canonical
                    .fields()
                    .iter()
                    .position(|f| f.name().ends_with("_ts"))
                    .unwrap_or(0),
            )
        });
        Ok(Self {
            generator,
            schema,
            picks,
            pacer,
            report_start: None,
        })
    }

    /// Records where its pacer started in `starts` once the first batch
    /// goes out (a paced source; others record nothing).
    pub fn reporting_to(mut self, starts: PacedStarts) -> Self {
        self.report_start = self.pacer.is_some().then_some(starts);
        self
    }
}

impl SourceReader for GeneratorSource {
    fn bounded(&self) -> bool {
        self.pacer.is_none()
    }

    fn next_batch(&mut self, ctx: &mut SourceContext) -> EngineResult<Option<RecordBatch>> {
        let table = ctx.table().to_string();
        let Some(batch) = self
            .generator
            .next_batch()
            .map_err(|e| e.for_table(&table))?
        else {
            return Ok(None);
        };
        if let Some(pacer) = self.pacer.as_mut() {
            pacer.wait(&batch);
            if let Some(origin) = pacer.origin() {
                if let Some(starts) = self.report_start.take() {
                    if let Ok(mut starts) = starts.lock() {
                        starts.insert(table.clone(), origin);
                    }
                }
            }
        }
        let columns = self
            .picks
            .iter()
            .zip(self.schema.fields())
            .map(|(&i, field)| {
                let c = batch.column(i);
                if c.data_type() == field.data_type() {
                    Ok(c.clone())
                } else {
                    cast(c, field.data_type())
                }
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| ConnectorError::from(e).for_table(&table))?;
        Ok(Some(
            RecordBatch::try_new(self.schema.clone(), columns)
                .map_err(|e| ConnectorError::from(e).for_table(&table))?,
        ))
    }

    fn position(&self) -> serde_json::Value {
        serde_json::to_value(self.generator.position()).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(
        stream: GeneratedStream,
        seed: u64,
        count: Option<u64>,
        batch_size: usize,
    ) -> Vec<RecordBatch> {
        let mut g = Generator::new(GeneratorConfig {
            stream,
            seed,
            rate: 2,
            count,
            batch_size,
        });
        let mut out = Vec::new();
        while let Some(b) = g.next_batch().unwrap() {
            out.push(b);
        }
        out
    }

    #[test]
    fn same_seed_same_rows_any_batch_size() {
        for stream in [
            GeneratedStream::Orders,
            GeneratedStream::Payments,
            GeneratedStream::Devices,
        ] {
            let a = datafusion::arrow::compute::concat_batches(
                &stream_schema(stream),
                &all(stream, 7, None, 7),
            )
            .unwrap();
            let b = datafusion::arrow::compute::concat_batches(
                &stream_schema(stream),
                &all(stream, 7, None, 1000),
            )
            .unwrap();
            assert_eq!(a, b);
            let c = datafusion::arrow::compute::concat_batches(
                &stream_schema(stream),
                &all(stream, 8, None, 1000),
            )
            .unwrap();
            assert_ne!(a, c, "a different seed changes the data");
        }
    }

    #[test]
    fn a_resumed_generator_continues_where_it_stood() {
        let config = GeneratorConfig {
            stream: GeneratedStream::Payments,
            seed: 7,
            rate: 2,
            count: Some(3000),
            batch_size: 97,
        };
        let schema = stream_schema(config.stream);
        let whole = datafusion::arrow::compute::concat_batches(
            &schema,
            &all(config.stream, 7, Some(3000), 97),
        )
        .unwrap();
        for stop_after in [0, 1, 5, 20] {
            let mut first = Generator::new(config);
            let mut batches = Vec::new();
            for _ in 0..stop_after {
                if let Some(b) = first.next_batch().unwrap() {
                    batches.push(b);
                }
            }
            let mut second = Generator::resumed(config, first.position()).unwrap();
            while let Some(b) = second.next_batch().unwrap() {
                batches.push(b);
            }
            assert_eq!(
                datafusion::arrow::compute::concat_batches(&schema, &batches).unwrap(),
                whole,
                "stopped after {stop_after}"
            );
        }
    }

    #[test]
    fn count_extends_past_the_scenario() {
        let rows: usize = all(GeneratedStream::Orders, 7, Some(500), 64)
            .iter()
            .map(|b| b.num_rows())
            .sum();
        assert_eq!(rows, 500);
    }
}
