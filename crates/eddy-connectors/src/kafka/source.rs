//! The Kafka source: a topic's partitions read into Arrow batches, each
//! partition a split with its own watermark.
//!
//! In: records of every partition of one topic (JSON values). Out: batches
//! of one partition each, in the table's physical columns, plus the
//! metadata columns the table declares (`_kafka_timestamp`,
//! `_kafka_partition`, `_kafka_offset`, `_kafka_key`). Values are decoded
//! by the NDJSON decoder, so types, bad rows and limits are the file
//! source's; a bad record is reported as `kafka:<topic>/<partition>@<offset>`.
//!
//! The position is the next offset of every partition. It is checkpointed
//! with the rows before it and is the only record of progress: offsets are
//! never committed to the consumer group, so a resumed job reads exactly
//! what follows its checkpoint. Partitions are assigned, not subscribed:
//! one job reads every partition of the topic.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use eddy_engine::graph::ConnectorSpec;
//! use eddy_engine::source::{SourceContext, SourceReader};
//! use eddy_connectors::kafka::{KafkaSource, KafkaSourceConfig};
//!
//! let options: BTreeMap<String, String> = [
//!     ("bootstrap_servers", "127.0.0.1:9092"),
//!     ("topic", "orders"),
//!     ("stop", "latest"),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_string(), v.to_string()))
//! .collect();
//! let spec = ConnectorSpec {
//!     table: "orders".into(),
//!     connector: "kafka".into(),
//!     options,
//!     schema: Arc::new(Schema::new(vec![Field::new("order_id", DataType::Utf8, true)])),
//!     declared_at: None,
//!     primary_key: Vec::new(),
//!     filter: None,
//!     unread_columns: Vec::new(),
//!     explain: None,
//! };
//! let config = KafkaSourceConfig::from_spec(&spec, 8192).unwrap();
//! let mut source = KafkaSource::open(config, spec.schema.clone(), None).unwrap();
//! let mut ctx = SourceContext::new("orders");
//! while let Some(batch) = source.next_batch(&mut ctx).unwrap() {
//!     println!("{} rows; next offsets {}", batch.num_rows(), source.position());
//! }
//! ```

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, StringArray, TimestampMillisecondArray,
};
use datafusion::arrow::compute::{cast, take};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use eddy_engine::source::{BadRow, RowOrigins, SourceContext, SourceReader};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::config::{KafkaSourceConfig, StartAt, StopAt};
use super::QuietContext;
use crate::error::{ConnectorError, Result};
use crate::ndjson::debezium::DebeziumEnvelope;
use crate::ndjson::decode::{
    decode, Chunk, DecodePool, Decoded, LinePosition, LineSpan, NdjsonOrigins,
};

/// How long metadata and offset look-ups may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a poll waits for a record.
const POLL: Duration = Duration::from_millis(50);

/// How long records taken in may wait for more before they go as a
/// batch that is not full: a slow topic's rows are not held for a full
/// batch, a fast one's batches still fill.
const LINGER: Duration = Duration::from_millis(5);

/// With nothing to read, an empty batch is returned this often, so the
/// job's reader thread notices when the job is gone.
const HEARTBEAT: Duration = Duration::from_millis(250);

/// A column the connector fills from the record rather than its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaColumn {
    Timestamp,
    Partition,
    Offset,
    Key,
}

impl MetaColumn {
    fn of(name: &str) -> Option<Self> {
        Some(match name {
            "_kafka_timestamp" => Self::Timestamp,
            "_kafka_partition" => Self::Partition,
            "_kafka_offset" => Self::Offset,
            "_kafka_key" => Self::Key,
            _ => return None,
        })
    }
}

/// Where each output column comes from.
#[derive(Debug, Clone, Copy)]
enum ColumnSource {
    /// Column `i` of the decoded JSON value.
    Value(usize),
    /// Record metadata.
    Meta(MetaColumn),
}

/// The checkpointed position: the next offset of every partition.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaPosition {
    /// The topic.
    pub topic: String,
    /// The offset of the next record to read, per partition.
    pub offsets: Vec<PartitionOffset>,
}

/// A partition and an offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionOffset {
    /// The partition.
    pub partition: i32,
    /// The offset.
    pub offset: i64,
}

impl KafkaPosition {
    fn offset_of(&self, partition: i32) -> Option<i64> {
        self.offsets
            .iter()
            .find(|o| o.partition == partition)
            .map(|o| o.offset)
    }
}

/// Records of one partition read but not yet handed on.
#[derive(Debug, Default)]
struct Pending {
    bytes: Vec<u8>,
    lines: Vec<LineSpan>,
    offsets: Vec<i64>,
    timestamps: Vec<Option<i64>>,
    keys: Vec<Option<String>>,
    bad: Vec<BadRow>,
    /// The offset after the last record consumed (also skipped ones).
    end: Option<i64>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.lines.is_empty() && self.bad.is_empty() && self.end.is_none()
    }
}

/// One partition's progress.
#[derive(Debug)]
struct PartitionRead {
    /// The next offset to hand on (after the last batch returned).
    next: i64,
    /// The offset after the last record taken in (pending or decoding).
    consumed: i64,
    /// A bounded read (`stop = 'latest'`): the partition ends when reading
    /// reaches its end.
    bounded: bool,
    /// Read to its end (bounded).
    finished: bool,
    /// Finished, and its last rows handed to the decoders (the runner is
    /// told with them).
    announced_finished: bool,
    pending: Pending,
}

/// Reads one topic of a Kafka cluster; see the module docs.
pub struct KafkaSource {
    config: KafkaSourceConfig,
    consumer: BaseConsumer<QuietContext>,
    schema: SchemaRef,
    /// What record values are decoded into (a change feed's: the
    /// Debezium envelope).
    value_schema: SchemaRef,
    /// A change feed's envelope.
    envelope: Option<DebeziumEnvelope>,
    columns: Vec<ColumnSource>,
    wants_keys: bool,
    partitions: BTreeMap<i32, PartitionRead>,
    skip_before_ms: Option<i64>,
    announced: bool,
    last_return: Instant,
    /// Since when records have been waiting to go (none: nothing pending).
    pending_since: Option<Instant>,
    /// Decodes chunks on worker threads while the reader polls on.
    pool: DecodePool,
    /// What the chunks being decoded came with, oldest first.
    decoding: VecDeque<ChunkMeta>,
    /// Chunks decoded inline (no decoding thread), oldest first.
    inline: VecDeque<Decoded>,
}

/// A chunk handed to the decoders: its partition, where the partition
/// stands after it, and its records' metadata.
struct ChunkMeta {
    partition: i32,
    end: Option<i64>,
    finishes: bool,
    offsets: Vec<i64>,
    timestamps: Vec<Option<i64>>,
    keys: Vec<Option<String>>,
    bad: Vec<BadRow>,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("topic", &self.config.topic)
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

impl KafkaSource {
    /// Connects, finds the topic's partitions and assigns them at the
    /// checkpointed offsets (`resume`) or where `start` says.
    pub fn open(
        config: KafkaSourceConfig,
        schema: SchemaRef,
        resume: Option<&KafkaPosition>,
    ) -> Result<Self> {
        let topic = config.topic.clone();
        let context = |what: &str| format!("{what} topic '{topic}'");
        if let Some(resume) = resume {
            if resume.topic != topic {
                return Err(ConnectorError::bad_option(
                    "topic",
                    format!(
                        "the checkpoint was reading topic '{}', the job now reads '{topic}' (use --ignore-state to start afresh)",
                        resume.topic
                    ),
                ));
            }
        }
        let consumer: BaseConsumer<QuietContext> = config
            .client
            .create_with_context(QuietContext)
            .map_err(|e| ConnectorError::kafka(context("connecting to read"), e))?;
        let metadata = consumer
            .fetch_metadata(Some(&topic), LOOKUP_TIMEOUT)
            .map_err(|e| ConnectorError::kafka(context("looking up"), e))?;
        let partition_ids: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect();
        if partition_ids.is_empty() {
            return Err(ConnectorError::bad_option(
                "topic",
                format!(
                    "topic '{topic}' does not exist (or has no partitions) on {}",
                    config.client.get("bootstrap.servers").unwrap_or("?")
                ),
            ));
        }
        let partition_ids: Vec<i32> = match &config.partitions {
            Some(only) => partition_ids
                .into_iter()
                .filter(|p| only.contains(p))
                .collect(),
            None => partition_ids,
        };
        let mut skip_before_ms = None;
        let mut starts: BTreeMap<i32, i64> = BTreeMap::new();
        if let StartAt::Timestamp(ms) = config.start {
            let mut wanted = TopicPartitionList::new();
            for &p in &partition_ids {
                wanted
                    .add_partition_offset(&topic, p, Offset::Offset(ms))
                    .map_err(|e| ConnectorError::kafka(context("looking up offsets of"), e))?;
            }
            let found = consumer
                .offsets_for_times(wanted, LOOKUP_TIMEOUT)
                .map_err(|e| ConnectorError::kafka(context("looking up offsets of"), e))?;
            for element in found.elements() {
                if let Offset::Offset(o) = element.offset() {
                    starts.insert(element.partition(), o);
                }
            }
            // Records before the instant are also skipped one by one, so the
            // start holds whatever the broker's time index says.
            skip_before_ms = Some(ms);
        }
        let mut partitions = BTreeMap::new();
        let mut assignment = TopicPartitionList::new();
        for &p in &partition_ids {
            let (low, high) = consumer
                .fetch_watermarks(&topic, p, LOOKUP_TIMEOUT)
                .map_err(|e| {
                    ConnectorError::kafka(
                        format!("{} partition {p}", context("reading the offsets of")),
                        e,
                    )
                })?;
            let next = match resume.and_then(|r| r.offset_of(p)) {
                Some(o) => o,
                None => match config.start {
                    StartAt::Earliest => low,
                    StartAt::Latest => high,
                    StartAt::Timestamp(_) => starts.get(&p).copied().unwrap_or(low).max(low),
                },
            };
            assignment
                .add_partition_offset(&topic, p, Offset::Offset(next))
                .map_err(|e| ConnectorError::kafka(context("assigning"), e))?;
            partitions.insert(
                p,
                PartitionRead {
                    next,
                    consumed: next,
                    bounded: config.stop == StopAt::Latest,
                    finished: false,
                    announced_finished: false,
                    pending: Pending::default(),
                },
            );
        }
        consumer
            .assign(&assignment)
            .map_err(|e| ConnectorError::kafka(context("assigning the partitions of"), e))?;
        let mut value_fields = Vec::new();
        let mut columns = Vec::new();
        for field in schema.fields() {
            match MetaColumn::of(field.name()) {
                Some(meta) => columns.push(ColumnSource::Meta(meta)),
                None => {
                    columns.push(ColumnSource::Value(value_fields.len()));
                    value_fields.push(field.clone());
                }
            }
        }
        let wants_keys = columns
            .iter()
            .any(|c| matches!(c, ColumnSource::Meta(MetaColumn::Key)));
        let value_schema: SchemaRef = Arc::new(Schema::new(value_fields));
        // A change feed (the schema ends in the row kind): values are
        // Debezium change events.
        let envelope = eddy_engine::changelog::is_updating(&value_schema)
            .then(|| DebeziumEnvelope::new(value_schema.clone()));
        let value_schema = envelope
            .as_ref()
            .map_or(value_schema, DebeziumEnvelope::envelope_schema);
        let pool = DecodePool::new(
            config.decode_threads.max(1),
            value_schema.clone(),
            format!("kafka:{topic}"),
            &[],
        );
        Ok(Self {
            config,
            consumer,
            schema,
            value_schema,
            envelope,
            columns,
            wants_keys,
            partitions,
            skip_before_ms,
            announced: false,
            last_return: Instant::now(),
            pending_since: None,
            pool,
            decoding: VecDeque::new(),
            inline: VecDeque::new(),
        })
    }

    fn location(&self, partition: i32) -> String {
        format!("kafka:{}/{partition}", self.config.topic)
    }

    /// Takes one record into its partition's pending rows.
    fn take_record(
        partitions: &mut BTreeMap<i32, PartitionRead>,
        topic: &str,
        skip_before_ms: Option<i64>,
        wants_keys: bool,
        upsert_key: Option<&str>,
        message: &rdkafka::message::BorrowedMessage<'_>,
    ) {
        let partition = message.partition();
        let offset = message.offset();
        let Some(read) = partitions.get_mut(&partition) else {
            return;
        };
        if read.finished || offset < read.consumed {
            return;
        }
        read.consumed = offset + 1;
        let pending = &mut read.pending;
        pending.end = Some(offset + 1);
        let timestamp = message.timestamp().to_millis();
        if let (Some(skip), Some(ts)) = (skip_before_ms, timestamp) {
            if ts < skip {
                return;
            }
        }
        let upsert_line;
        let value = match (upsert_key, message.payload()) {
            // An upsert topic: each record the new value of its key, a
            // tombstone a delete of it (see `DebeziumEnvelope`'s upsert ops).
            (Some(_), Some(value)) => {
                let mut line = b"{\"after\":".to_vec();
                line.extend_from_slice(value);
                line.extend_from_slice(b",\"op\":\"upsert\"}");
                upsert_line = line;
                Some(upsert_line.as_slice())
            }
            (Some(column), None) => match message.key() {
                Some(key) => {
                    let key = serde_json::Value::String(String::from_utf8_lossy(key).into_owned());
                    let column = serde_json::Value::String(column.to_string());
                    upsert_line = format!("{{\"before\":{{{column}:{key}}},\"op\":\"tombstone\"}}")
                        .into_bytes();
                    Some(upsert_line.as_slice())
                }
                None => None,
            },
            (None, value) => value,
        };
        let Some(value) = value else {
            pending.bad.push(BadRow {
                path: format!("kafka:{topic}/{partition}"),
                line: None,
                offset: Some(offset as u64),
                column: None,
                reason: "a record without a value (a tombstone)".into(),
                raw: String::new(),
            });
            return;
        };
        let start = pending.bytes.len();
        // A JSON value has raw line breaks only as whitespace: one line each.
        pending.bytes.extend(
            value
                .iter()
                .map(|&b| if b == b'\n' || b == b'\r' { b' ' } else { b }),
        );
        pending.bytes.push(b'\n');
        pending.lines.push(LineSpan {
            number: pending.lines.len() as u64 + 1,
            offset: offset as u64,
            start,
            end: pending.bytes.len(),
        });
        pending.offsets.push(offset);
        pending.timestamps.push(timestamp);
        if wants_keys {
            pending.keys.push(
                message
                    .key()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
            );
        }
    }

    /// Hands the pending rows of `partition` to the decoders (inline when
    /// no decoding thread could start).
    fn submit(&mut self, partition: i32) -> Result<()> {
        let read = self
            .partitions
            .get_mut(&partition)
            .ok_or_else(|| ConnectorError::bad_option("topic", "unknown partition"))?;
        let pending = std::mem::take(&mut read.pending);
        let finishes = read.finished && !read.announced_finished;
        if finishes {
            read.announced_finished = true;
        }
        self.decoding.push_back(ChunkMeta {
            partition,
            end: pending.end,
            finishes,
            offsets: pending.offsets,
            timestamps: pending.timestamps,
            keys: pending.keys,
            bad: pending.bad,
        });
        let chunk = Chunk {
            bytes: pending.bytes,
            lines: pending.lines,
            blocks: Vec::new(),
            line_ends: Vec::new(),
            max_line_bytes: usize::MAX,
            bad: Vec::new(),
            end: LinePosition::default(),
        };
        if self.pool.capacity() == 0 {
            let location = format!("kafka:{}", self.config.topic);
            self.inline
                .push_back(decode(&self.value_schema, &location, chunk));
            return Ok(());
        }
        self.pool.submit(chunk)
    }

    /// Chunks handed to the decoders and not yet returned.
    fn in_flight(&self) -> usize {
        self.decoding.len()
    }

    /// Returns the oldest chunk handed to the decoders as a batch.
    fn take_decoded(&mut self, ctx: &mut SourceContext) -> Result<RecordBatch> {
        let decoded = match self.inline.pop_front() {
            Some(decoded) => decoded,
            None => self.pool.take()?,
        };
        let meta = self
            .decoding
            .pop_front()
            .ok_or_else(|| ConnectorError::bad_option("topic", "no chunk being decoded"))?;
        let partition = meta.partition;
        let location = self.location(partition);
        if let Some(read) = self.partitions.get_mut(&partition) {
            if let Some(end) = meta.end {
                read.next = end;
            }
        }
        ctx.set_split(partition as u32);
        if meta.finishes {
            ctx.finish_split(partition as u32);
        }
        for row in meta.bad {
            ctx.bad_row(row);
        }
        for mut row in decoded.bad {
            row.path = location.clone();
            row.line = None;
            ctx.bad_row(row);
        }
        let Some(values) = decoded.batch? else {
            return Ok(RecordBatch::new_empty(self.schema.clone()));
        };
        let (values, origins) = match &self.envelope {
            Some(envelope) => {
                let mut bad = Vec::new();
                let unwrapped = envelope.unwrap(&values, decoded.origins, &mut bad)?;
                for mut row in bad {
                    row.path = location.clone();
                    row.line = None;
                    ctx.bad_row(row);
                }
                match unwrapped {
                    (Some(rows), origins) => (rows, origins),
                    (None, _) => return Ok(RecordBatch::new_empty(self.schema.clone())),
                }
            }
            None => (values, decoded.origins),
        };
        let rows =
            Int64Array::from_iter_values(origins.spans().iter().map(|s| s.number as i64 - 1));
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for (source, field) in self.columns.iter().zip(self.schema.fields()) {
            let array: ArrayRef = match source {
                ColumnSource::Value(i) => values.column(*i).clone(),
                ColumnSource::Meta(meta_column) => {
                    let all: ArrayRef = match meta_column {
                        MetaColumn::Timestamp => {
                            Arc::new(TimestampMillisecondArray::from(meta.timestamps.clone()))
                        }
                        MetaColumn::Partition => {
                            Arc::new(Int32Array::from(vec![partition; meta.offsets.len()]))
                        }
                        MetaColumn::Offset => Arc::new(Int64Array::from(meta.offsets.clone())),
                        MetaColumn::Key => Arc::new(StringArray::from(meta.keys.clone())),
                    };
                    cast(&take(&all, &rows, None)?, field.data_type())?
                }
            };
            columns.push(array);
        }
        ctx.set_origins(Box::new(KafkaOrigins {
            lines: origins,
            location,
        }));
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }

    fn poll_error(&mut self, error: KafkaError) -> Result<()> {
        match error {
            KafkaError::PartitionEOF(partition) => {
                if let Some(read) = self.partitions.get_mut(&partition) {
                    if read.bounded {
                        read.finished = true;
                        if read.pending.end.is_none() {
                            read.pending.end = Some(read.consumed);
                        }
                    }
                }
                Ok(())
            }
            other => {
                tracing::warn!(source = %self.config.table, topic = %self.config.topic, "kafka: {other}");
                Ok(())
            }
        }
    }

    /// A partition whose pending rows should go now: a full batch, or
    /// (when `any`) the fullest one with something pending.
    fn ready(&self, any: bool) -> Option<i32> {
        let batch = self.config.batch_size;
        self.partitions
            .iter()
            .filter(|(_, r)| {
                r.pending.lines.len() >= batch
                    || (r.finished && !r.announced_finished)
                    || (any && !r.pending.is_empty())
            })
            .max_by_key(|(_, r)| r.pending.lines.len())
            .map(|(&p, _)| p)
    }
}

impl SourceReader for KafkaSource {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> eddy_engine::Result<Option<RecordBatch>> {
        let table = self.config.table.clone();
        let fail = |e: ConnectorError| e.for_table(&table);
        if !self.announced {
            self.announced = true;
            ctx.open_splits(self.partitions.keys().map(|&p| p as u32));
        }
        // Whether the partitions may have changed state (any but a record
        // taken in): only then are they all looked at, not once per record.
        let mut look = true;
        loop {
            if look {
                if let Some(p) = self.ready(false) {
                    self.submit(p).map_err(fail)?;
                }
            }
            if self.in_flight() > 0 && self.in_flight() >= self.pool.capacity().max(1) {
                self.last_return = Instant::now();
                return self.take_decoded(ctx).map(Some).map_err(fail);
            }
            if look
                && self.in_flight() == 0
                && self
                    .partitions
                    .values()
                    .all(|r| r.finished && r.announced_finished)
            {
                return Ok(None);
            }
            look = true;
            // While chunks decode, look for more records without waiting.
            // Records waiting to go wait at most LINGER for more: then
            // what is pending goes, full batch or not.
            if !self.partitions.values().any(|r| !r.pending.is_empty()) {
                self.pending_since = None;
            } else if self.pending_since.is_none() {
                self.pending_since = Some(Instant::now());
            }
            let wait = if self.in_flight() > 0 {
                Duration::ZERO
            } else if let Some(since) = self.pending_since {
                LINGER.saturating_sub(since.elapsed())
            } else {
                POLL
            };
            match self.consumer.poll(wait) {
                Some(Ok(message)) => {
                    let partition = message.partition();
                    Self::take_record(
                        &mut self.partitions,
                        &self.config.topic,
                        self.skip_before_ms,
                        self.wants_keys,
                        self.config.upsert_key.as_deref(),
                        &message,
                    );
                    // A record can only fill its own partition's batch.
                    look = false;
                    if self
                        .partitions
                        .get(&partition)
                        .is_some_and(|r| r.pending.lines.len() >= self.config.batch_size)
                    {
                        self.submit(partition).map_err(fail)?;
                    }
                }
                Some(Err(e)) => self.poll_error(e).map_err(fail)?,
                None => {
                    if let Some(p) = self.ready(true) {
                        self.submit(p).map_err(fail)?;
                    } else if self.in_flight() > 0 {
                        self.last_return = Instant::now();
                        return self.take_decoded(ctx).map(Some).map_err(fail);
                    } else if self.last_return.elapsed() >= HEARTBEAT {
                        self.last_return = Instant::now();
                        return Ok(Some(RecordBatch::new_empty(self.schema.clone())));
                    }
                }
            }
        }
    }

    fn position(&self) -> serde_json::Value {
        let position = KafkaPosition {
            topic: self.config.topic.clone(),
            offsets: self
                .partitions
                .iter()
                .map(|(&partition, r)| PartitionOffset {
                    partition,
                    offset: r.next,
                })
                .collect(),
        };
        serde_json::to_value(position).unwrap_or(serde_json::Value::Null)
    }
}

/// Where a row came from: its partition and offset.
struct KafkaOrigins {
    lines: NdjsonOrigins,
    location: String,
}

impl RowOrigins for KafkaOrigins {
    fn origin(&self, row: usize) -> BadRow {
        let mut origin = self.lines.origin(row);
        origin.path = self.location.clone();
        origin.line = None;
        origin
    }
}
