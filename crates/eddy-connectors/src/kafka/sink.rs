//! The Kafka sink: rows as JSON values, keyed by a column if the table
//! says so, exactly once through Kafka transactions tied to checkpoints.
//!
//! In: result batches; at each checkpoint barrier a precommit. Out: records
//! in one topic.
//!
//! - **Exactly once** (`delivery = 'exactly_once'`, the default when the
//!   job checkpoints): the records of a checkpoint epoch are held back and
//!   saved in the checkpoint itself (a write-ahead log). Once the
//!   checkpoint is complete, [`commit`] writes them in one transaction,
//!   each with headers naming the sink (`eddy.sink`, the transactional id),
//!   the epoch (`eddy.epoch`) and its place in it (`eddy.seq`). A job
//!   resumed from a checkpoint whose commit may have been cut short first
//!   takes the transactional id over (fencing the old writer, whose open
//!   transaction the broker aborts), reads back which of the epoch's
//!   records the topic already shows, and writes only the rest. So the
//!   topic gets each record once even on a broker that shows records of
//!   aborted transactions; readers use `isolation.level = read_committed`.
//!   One gap remains: a committed record behind another writer's
//!   transaction still open in the same partition is not visible to the
//!   read-back yet, and is written again. Exchange readers drop such copies
//!   by their headers ([`super::exchange::SeenEpoch`]); an outside reader
//!   of a topic that several tasks of a group write can see one after a
//!   takeover.
//! - **At least once** (`delivery = 'at_least_once'`, or a job without
//!   checkpoints): records are written as they come and flushed at each
//!   checkpoint barrier; a job resumed from a checkpoint writes again what
//!   it wrote after it.
//!
//! ```no_run
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//! use datafusion::arrow::array::StringArray;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::graph::ConnectorSpec;
//! use eddy_engine::sink::{SinkMode, SinkWriter};
//! use eddy_connectors::kafka::{KafkaCommits, KafkaSink, KafkaSinkConfig};
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("customer_id", DataType::Utf8, true)]));
//! let options: BTreeMap<String, String> = [
//!     ("bootstrap_servers", "127.0.0.1:9092"),
//!     ("topic", "alerts"),
//!     ("key_column", "customer_id"),
//! ]
//! .into_iter()
//! .map(|(k, v)| (k.to_string(), v.to_string()))
//! .collect();
//! let spec = ConnectorSpec {
//!     table: "alerts".into(),
//!     connector: "kafka".into(),
//!     options,
//!     schema: schema.clone(),
//!     declared_at: None,
//!     primary_key: Vec::new(),
//!     filter: None,
//!     unread_columns: Vec::new(),
//!     explain: None,
//! };
//! let config = KafkaSinkConfig::from_spec(&spec).unwrap();
//! let mut sink = KafkaSink::open(config, SinkMode::Direct, Arc::new(KafkaCommits::default())).unwrap();
//! let batch = RecordBatch::try_new(schema, vec![Arc::new(StringArray::from(vec!["cust-1"]))]).unwrap();
//! sink.write(&batch).unwrap();
//! sink.finish().unwrap();
//! ```

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::arrow::array::{Array, BinaryArray, Int32Array, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::{SinkMode, SinkWriter};
use eddy_engine::state::StateSnapshot;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{DeliveryResult, Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer, ProducerContext};
use rdkafka::{ClientConfig, ClientContext, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::config::{Delivery, KafkaSinkConfig};
use super::exchange::ExchangeWriter;
use super::source::PartitionOffset;
use super::QuietContext;
use crate::error::{ConnectorError, Result};
use eddy_engine::changelog::{self, RowKind};

/// How long a flush, a transaction call or a look-up may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Header naming the sink (its transactional id).
pub(crate) const SINK_HEADER: &str = "eddy.sink";
/// Header naming the checkpoint epoch.
pub(crate) const EPOCH_HEADER: &str = "eddy.epoch";
/// Header numbering a record within its epoch.
pub(crate) const SEQ_HEADER: &str = "eddy.seq";

/// One record: an optional key, a value (a row as a JSON object, or an
/// exchange's Arrow rows or marker) and, for exchanges, its partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaRecord {
    /// The key column's value.
    pub key: Option<String>,
    /// The value's bytes; `None`: a tombstone (an upsert sink's delete).
    pub value: Option<Vec<u8>>,
    /// The partition it goes to (`None`: the client's partitioner's
    /// choice by key).
    pub partition: Option<i32>,
}

/// The records of one checkpoint epoch, not yet known to be in the topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaEpoch {
    /// The checkpoint whose barrier closed the epoch.
    pub checkpoint: CheckpointId,
    /// Each partition's end offset when the epoch closed: none of its
    /// records can be before them.
    pub start_offsets: Vec<PartitionOffset>,
    /// The records, in order (in the checkpoint: a table of keys and
    /// values, [`epoch_table`], beside the JSON state).
    #[serde(skip)]
    pub records: Vec<KafkaRecord>,
}

/// What an exactly-once Kafka sink saves in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KafkaSinkState {
    /// Names this run of the job (from its fresh start on; a resumed job
    /// keeps it): with the checkpoint number it makes each epoch's
    /// `eddy.epoch` header unique, so records of an earlier run of the
    /// same job are never taken for this one's.
    pub run: String,
    /// The topic.
    pub topic: String,
    /// The transactional id.
    pub transactional_id: String,
    /// Epochs to write, oldest first.
    pub epochs: Vec<KafkaEpoch>,
}

/// A Kafka sink's state as checkpoints hold it: tagged `"format": "kafka"`,
/// as file sinks' states carry their own tag, so a commit can tell them
/// apart.
#[derive(Debug, Deserialize)]
#[serde(tag = "format", rename_all = "lowercase")]
enum TaggedState {
    Kafka(KafkaSinkState),
}

/// [`TaggedState`] written without copying the state.
#[derive(Debug, Serialize)]
#[serde(tag = "format", rename_all = "lowercase")]
enum TaggedStateRef<'a> {
    Kafka(&'a KafkaSinkState),
}

impl KafkaSinkState {
    /// The state in `snapshot` (its epochs without their records); `None`
    /// when the snapshot holds none, or another sink's.
    pub fn from_snapshot(snapshot: &StateSnapshot) -> Result<Option<Self>> {
        if snapshot.meta.get("format").and_then(|f| f.as_str()) != Some("kafka") {
            return Ok(None);
        }
        let TaggedState::Kafka(state) = snapshot
            .meta()
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))?;
        Ok(Some(state))
    }

    /// The state in `snapshot` with every epoch's records, read from the
    /// tables beside it: what a commit writes.
    pub fn from_checkpoint(snapshot: &StateSnapshot) -> Result<Option<Self>> {
        let Some(mut state) = Self::from_snapshot(snapshot)? else {
            return Ok(None);
        };
        for epoch in &mut state.epochs {
            let name = epoch_table(epoch.checkpoint);
            let table = snapshot
                .tables
                .iter()
                .find(|t| t.name == name)
                .ok_or_else(|| {
                    ConnectorError::bad_option(
                        "checkpoint",
                        format!(
                            "the Kafka sink's records of checkpoint {} are missing",
                            epoch.checkpoint
                        ),
                    )
                })?;
            epoch.records = records_from_batch(&table.batch)?;
        }
        Ok(Some(state))
    }

    /// The snapshot holding this state (the records go beside it).
    pub fn to_snapshot(&self) -> Result<StateSnapshot> {
        StateSnapshot::with_meta(&TaggedStateRef::Kafka(self))
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))
    }
}

/// What this process knows about exactly-once commits: the epochs it
/// closed itself (their records cannot be in the topic before their first
/// commit) and the ones it has tried to write, and a transactional producer
/// per transactional id. Shared by a job's sinks and its commits.
#[derive(Default)]
pub struct KafkaCommits {
    inner: Mutex<CommitsInner>,
}

#[derive(Default)]
struct CommitsInner {
    closed_here: HashSet<(String, String)>,
    attempted: HashSet<(String, String)>,
    committed: HashSet<(String, String)>,
    producers: HashMap<String, BaseProducer<DeliveryErrors>>,
}

impl std::fmt::Debug for KafkaCommits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaCommits").finish_non_exhaustive()
    }
}

/// Counts failed deliveries (the client reports them in a callback).
#[derive(Default)]
pub struct DeliveryErrors {
    failed: AtomicU64,
    last: Mutex<Option<String>>,
}

impl ClientContext for DeliveryErrors {}

impl ProducerContext for DeliveryErrors {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        if let Err((error, _)) = result {
            self.failed.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut last) = self.last.lock() {
                *last = Some(error.to_string());
            }
        }
    }
}

impl DeliveryErrors {
    /// An error if any delivery failed since the last check.
    fn check(&self, topic: &str) -> Result<()> {
        let failed = self.failed.swap(0, Ordering::Relaxed);
        if failed == 0 {
            return Ok(());
        }
        let last = self
            .last
            .lock()
            .ok()
            .and_then(|l| l.clone())
            .unwrap_or_default();
        Err(ConnectorError::kafka(
            format!("writing topic '{topic}'"),
            KafkaError::MessageProduction(RDKafkaErrorCode::Fail),
        )
        .with_detail(format!(
            "{failed} records were not delivered (last: {last})"
        )))
    }
}

impl ConnectorError {
    /// A Kafka error with more said about it.
    fn with_detail(self, detail: String) -> Self {
        match self {
            Self::Kafka { context, source } => Self::Kafka {
                context: format!("{context}: {detail}"),
                source,
            },
            other => other,
        }
    }
}

fn producer(
    client: &ClientConfig,
    transactional_id: Option<&str>,
) -> Result<BaseProducer<DeliveryErrors>> {
    let mut config = client.clone();
    if config.get("linger.ms").is_none() {
        config.set("linger.ms", "5");
    }
    match transactional_id {
        Some(id) => {
            config.set("transactional.id", id);
            config.set("enable.idempotence", "true");
        }
        None => {
            if config.get("acks").is_none() {
                config.set("acks", "all");
            }
        }
    }
    config
        .create_with_context(DeliveryErrors::default())
        .map_err(|e| ConnectorError::kafka("creating a producer", e))
}

/// Sends one record, waiting while the client's queue is full.
fn send(
    producer: &BaseProducer<DeliveryErrors>,
    topic: &str,
    record: &KafkaRecord,
    headers: Option<OwnedHeaders>,
) -> Result<()> {
    let mut base = BaseRecord::<str, [u8]>::to(topic);
    if let Some(value) = &record.value {
        base = base.payload(value.as_slice());
    }
    if let Some(key) = &record.key {
        base = base.key(key.as_str());
    }
    if let Some(partition) = record.partition {
        base = base.partition(partition);
    }
    if let Some(headers) = headers {
        base = base.headers(headers);
    }
    loop {
        match producer.send(base) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                producer.poll(Duration::from_millis(20));
                base = back;
            }
            Err((e, _)) => {
                return Err(ConnectorError::kafka(format!("writing topic '{topic}'"), e))
            }
        }
    }
}

/// Writes one table's rows to a topic; see the module docs.
pub struct KafkaSink {
    config: KafkaSinkConfig,
    writer: Writer,
    /// An exchange's rows and markers instead of JSON rows.
    exchange: Option<ExchangeWriter>,
}

enum Writer {
    /// Records go out as they come.
    Direct(BaseProducer<DeliveryErrors>),
    /// Records wait for their checkpoint (exactly once).
    Epochs {
        run: String,
        current: Vec<KafkaRecord>,
        pending: Vec<KafkaEpoch>,
        probe: BaseConsumer<QuietContext>,
        commits: Arc<KafkaCommits>,
    },
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("topic", &self.config.topic)
            .field("delivery", &self.config.delivery)
            .finish()
    }
}

impl KafkaSink {
    /// Opens the sink: exactly once when `mode` is transactional and the
    /// table does not ask for at-least-once. A resumed sink starts with no
    /// pending epochs (the resumed checkpoint's are committed before the
    /// job starts).
    pub fn open(
        config: KafkaSinkConfig,
        mode: SinkMode<'_>,
        commits: Arc<KafkaCommits>,
    ) -> Result<Self> {
        let exactly_once = matches!(mode, SinkMode::Transactional { .. })
            && config.delivery == Delivery::ExactlyOnce;
        let exchange = match &config.exchange {
            Some(options) if !exactly_once => {
                return Err(ConnectorError::bad_option(
                    "format",
                    format!(
                        "exchange topic '{}' is written exactly once, with checkpoints (partitions = {})",
                        config.topic, options.partitions
                    ),
                ))
            }
            Some(options) => Some(ExchangeWriter::new(
                config.schema.clone(),
                &options.keys,
                options.partitions,
                options.producer,
            )?),
            None => None,
        };
        let writer = if exactly_once {
            let mut probe_config = config.client.clone();
            probe_config.set("group.id", format!("{}-probe", config.transactional_id));
            let probe: BaseConsumer<QuietContext> = probe_config
                .create_with_context(QuietContext)
                .map_err(|e| ConnectorError::kafka("connecting", e))?;
            let resumed = match mode {
                SinkMode::Transactional {
                    resume: Some(snapshot),
                } => KafkaSinkState::from_snapshot(snapshot)?.map(|state| state.run),
                _ => None,
            };
            Writer::Epochs {
                run: resumed.unwrap_or_else(new_run_id),
                current: Vec::new(),
                pending: Vec::new(),
                probe,
                commits,
            }
        } else {
            Writer::Direct(producer(&config.client, None)?)
        };
        Ok(Self {
            config,
            writer,
            exchange,
        })
    }

    /// The records of `batch`.
    fn records(&mut self, batch: &RecordBatch) -> Result<Vec<KafkaRecord>> {
        if let Some(exchange) = &mut self.exchange {
            return exchange.records(batch);
        }
        let mut text = Vec::new();
        let line_rows = if self.config.upsert {
            self.config
                .lines
                .encode_lines(&changelog::data_columns(batch)?, &mut text)?
        } else {
            self.config.lines.encode_lines(batch, &mut text)?
        };
        let keys = match self.config.key_column {
            Some(i) => {
                let column = cast(batch.column(i), &DataType::Utf8)?;
                let strings = column
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .cloned()
                    .unwrap_or_else(|| StringArray::new_null(batch.num_rows()));
                Some(strings)
            }
            None => None,
        };
        let key_of = |row: usize| {
            keys.as_ref()
                .filter(|k| k.is_valid(row))
                .map(|k| k.value(row).to_string())
        };
        let mut records = Vec::with_capacity(line_rows.len());
        let kinds = changelog::row_kinds(batch);
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        for (&row, line) in line_rows.iter().zip(&lines) {
            let value = match kinds.map(|k| RowKind::of(k.value(row))) {
                // Upsert: the key's current row, or a tombstone.
                Some(Some(RowKind::Delete)) if self.config.upsert => None,
                Some(Some(RowKind::UpdateBefore)) if self.config.upsert => {
                    let replaced = kinds.is_some_and(|k| {
                        row + 1 < k.len()
                            && RowKind::of(k.value(row + 1)) == Some(RowKind::UpdateAfter)
                            && key_of(row + 1) == key_of(row)
                    });
                    if replaced {
                        continue; // its +U overwrites the key
                    }
                    None
                }
                _ => Some(line.to_vec()),
            };
            records.push(KafkaRecord {
                key: key_of(row),
                value,
                partition: None,
            });
        }
        Ok(records)
    }
}

/// The checkpoint table holding an epoch's records.
pub fn epoch_table(checkpoint: CheckpointId) -> String {
    format!("epoch-{checkpoint}")
}

fn records_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
        Field::new("partition", DataType::Int32, true),
    ]))
}

/// Records as a batch (key, value, partition): columnar in the checkpoint
/// rather than inside its JSON manifest.
fn records_batch(records: &[KafkaRecord]) -> Result<RecordBatch> {
    let keys = StringArray::from_iter(records.iter().map(|r| r.key.as_deref()));
    let values = BinaryArray::from_iter(records.iter().map(|r| r.value.as_deref()));
    let partitions = Int32Array::from_iter(records.iter().map(|r| r.partition));
    Ok(RecordBatch::try_new(
        records_schema(),
        vec![Arc::new(keys), Arc::new(values), Arc::new(partitions)],
    )?)
}

/// Reads back what [`records_batch`] wrote.
pub fn records_from_batch(batch: &RecordBatch) -> Result<Vec<KafkaRecord>> {
    let damaged = || ConnectorError::bad_option("checkpoint", "a Kafka epoch table is damaged");
    let column = |i: usize| batch.columns().get(i).ok_or_else(damaged);
    let keys = column(0)?
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or_else(damaged)?;
    let values = column(1)?
        .as_any()
        .downcast_ref::<BinaryArray>()
        .ok_or_else(damaged)?;
    let partitions = column(2)?
        .as_any()
        .downcast_ref::<Int32Array>()
        .ok_or_else(damaged)?;
    Ok((0..batch.num_rows())
        .map(|i| KafkaRecord {
            key: keys.is_valid(i).then(|| keys.value(i).to_string()),
            value: values.is_valid(i).then(|| values.value(i).to_vec()),
            partition: partitions.is_valid(i).then(|| partitions.value(i)),
        })
        .collect())
}

/// An epoch's `eddy.epoch` header: the run and the checkpoint.
fn epoch_name(run: &str, checkpoint: CheckpointId) -> String {
    format!("{run}-{checkpoint}")
}

/// A name for a fresh run: the time it started and the process.
fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("{nanos:x}-{:x}", std::process::id())
}

fn end_offsets(consumer: &BaseConsumer<QuietContext>, topic: &str) -> Result<BTreeMap<i32, i64>> {
    let metadata = consumer
        .fetch_metadata(Some(topic), TIMEOUT)
        .map_err(|e| ConnectorError::kafka(format!("looking up topic '{topic}'"), e))?;
    let mut offsets = BTreeMap::new();
    for t in metadata.topics().iter().filter(|t| t.name() == topic) {
        if let Some(e) = t.error() {
            return Err(ConnectorError::bad_option(
                "topic",
                format!("topic '{topic}' cannot be written: {e:?}"),
            ));
        }
        for p in t.partitions() {
            let (_, high) = consumer
                .fetch_watermarks(topic, p.id(), TIMEOUT)
                .map_err(|e| {
                    ConnectorError::kafka(format!("reading the offsets of topic '{topic}'"), e)
                })?;
            offsets.insert(p.id(), high);
        }
    }
    if offsets.is_empty() {
        return Err(ConnectorError::bad_option(
            "topic",
            format!("topic '{topic}' does not exist"),
        ));
    }
    Ok(offsets)
}

impl SinkWriter for KafkaSink {
    fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
        let table = self.config.table.clone();
        let records = self.records(batch).map_err(|e| e.for_table(&table))?;
        match &mut self.writer {
            Writer::Direct(producer) => {
                for record in &records {
                    send(producer, &self.config.topic, record, None)
                        .map_err(|e| e.for_table(&table))?;
                }
                producer.poll(Duration::ZERO);
                producer
                    .context()
                    .check(&self.config.topic)
                    .map_err(|e| e.for_table(&table))
            }
            Writer::Epochs { current, .. } => {
                current.extend(records);
                Ok(())
            }
        }
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> eddy_engine::Result<StateSnapshot> {
        let table = self.config.table.clone();
        let fail = |e: ConnectorError| e.for_table(&table);
        match &mut self.writer {
            Writer::Direct(_) => {
                self.flush()?;
                Ok(StateSnapshot::default())
            }
            Writer::Epochs {
                run,
                current,
                pending,
                probe,
                commits,
            } => {
                pending.retain(|e| e.checkpoint > completed);
                if let Some(exchange) = &mut self.exchange {
                    current.extend(exchange.markers());
                }
                if !current.is_empty() {
                    let started = std::time::Instant::now();
                    let start_offsets = end_offsets(probe, &self.config.topic)
                        .map_err(fail)?
                        .into_iter()
                        .map(|(partition, offset)| PartitionOffset { partition, offset })
                        .collect();
                    tracing::debug!(sink = %self.config.table, "end offsets looked up in {:?}", started.elapsed());
                    pending.push(KafkaEpoch {
                        checkpoint,
                        start_offsets,
                        records: std::mem::take(current),
                    });
                    if let Ok(mut inner) = commits.inner.lock() {
                        inner.closed_here.insert((
                            self.config.transactional_id.clone(),
                            epoch_name(run, checkpoint),
                        ));
                    }
                }
                let state = KafkaSinkState {
                    run: run.clone(),
                    topic: self.config.topic.clone(),
                    transactional_id: self.config.transactional_id.clone(),
                    epochs: pending.clone(),
                };
                let mut snapshot = state.to_snapshot().map_err(fail)?;
                for epoch in pending.iter() {
                    snapshot.push_table(
                        epoch_table(epoch.checkpoint),
                        records_batch(&epoch.records).map_err(fail)?,
                    );
                }
                Ok(snapshot)
            }
        }
    }

    fn flush(&mut self) -> eddy_engine::Result<()> {
        if let Writer::Direct(producer) = &self.writer {
            let table = &self.config.table;
            producer.flush(TIMEOUT).map_err(|e| {
                ConnectorError::kafka(format!("flushing topic '{}'", self.config.topic), e)
                    .for_table(table)
            })?;
            producer
                .context()
                .check(&self.config.topic)
                .map_err(|e| e.for_table(table))?;
        }
        Ok(())
    }

    fn finish(&mut self) -> eddy_engine::Result<()> {
        self.flush()
    }

    fn watermark(&mut self, watermark: eddy_engine::time::Timestamp) -> eddy_engine::Result<()> {
        if let Some(exchange) = &mut self.exchange {
            exchange.watermark(watermark);
        }
        Ok(())
    }
}

/// Writes the epochs of a completed checkpoint, each once: see the module
/// docs. `client` is the sink table's client configuration.
pub fn commit(client: &ClientConfig, state: &KafkaSinkState, commits: &KafkaCommits) -> Result<()> {
    let id = &state.transactional_id;
    let topic = &state.topic;
    let mut inner = commits
        .inner
        .lock()
        .map_err(|_| ConnectorError::bad_option("delivery", "a commit failed before"))?;
    for epoch in &state.epochs {
        let epoch_text = epoch_name(&state.run, epoch.checkpoint);
        let key = (id.clone(), epoch_text.clone());
        if inner.committed.contains(&key) || epoch.records.is_empty() {
            continue;
        }
        let fresh = inner.closed_here.contains(&key) && !inner.attempted.contains(&key);
        if !inner.producers.contains_key(id) {
            let producer = producer(client, Some(id))?;
            producer.init_transactions(TIMEOUT).map_err(|e| {
                ConnectorError::kafka(format!("taking over transactional id '{id}'"), e)
            })?;
            inner.producers.insert(id.clone(), producer);
        }
        let written = if fresh {
            HashSet::new()
        } else {
            written_seqs(client, state, epoch)?
        };
        inner.attempted.insert(key.clone());
        let started = std::time::Instant::now();
        let result = (|| -> Result<()> {
            let producer = inner
                .producers
                .get(id)
                .ok_or_else(|| ConnectorError::bad_option("delivery", "no producer"))?;
            producer.begin_transaction().map_err(|e| {
                ConnectorError::kafka(format!("beginning a transaction on topic '{topic}'"), e)
            })?;
            for (seq, record) in epoch.records.iter().enumerate() {
                if written.contains(&(seq as u64)) {
                    continue;
                }
                let seq_text = seq.to_string();
                let headers = OwnedHeaders::new()
                    .insert(Header {
                        key: SINK_HEADER,
                        value: Some(id.as_str()),
                    })
                    .insert(Header {
                        key: EPOCH_HEADER,
                        value: Some(epoch_text.as_str()),
                    })
                    .insert(Header {
                        key: SEQ_HEADER,
                        value: Some(seq_text.as_str()),
                    });
                send(producer, topic, record, Some(headers))?;
            }
            producer.commit_transaction(TIMEOUT).map_err(|e| {
                ConnectorError::kafka(format!("committing a transaction on topic '{topic}'"), e)
            })?;
            producer.context().check(topic)
        })();
        if let Err(e) = result {
            // A fresh producer (and a look at what got through) next time.
            inner.producers.remove(id);
            return Err(e);
        }
        if !written.is_empty() {
            tracing::info!(
                sink = %id,
                "checkpoint {}: {} of {} records were already in topic '{topic}'; wrote the rest",
                epoch.checkpoint,
                written.len(),
                epoch.records.len()
            );
        }
        tracing::debug!(sink = %id, "epoch {epoch_text}: {} records written in {:?}", epoch.records.len(), started.elapsed());
        inner.closed_here.remove(&key);
        inner.committed.insert(key);
    }
    Ok(())
}

/// The `eddy.seq` of the records of `epoch` that `topic` already shows
/// (read committed, from the offsets the epoch started at).
fn written_seqs(
    client: &ClientConfig,
    state: &KafkaSinkState,
    epoch: &KafkaEpoch,
) -> Result<HashSet<u64>> {
    let topic = &state.topic;
    let mut config = client.clone();
    config
        .set("group.id", format!("{}-check", state.transactional_id))
        .set("enable.auto.commit", "false")
        .set("enable.partition.eof", "true")
        .set("fetch.wait.max.ms", "10")
        .set("isolation.level", "read_committed");
    let consumer: BaseConsumer<QuietContext> = config
        .create_with_context(QuietContext)
        .map_err(|e| ConnectorError::kafka("connecting", e))?;
    // Every partition is read from where the epoch started to its end (the
    // fetch's end of partition, not the listed end offset, which some
    // brokers report short).
    let partitions = end_offsets(&consumer, topic)?;
    let mut assignment = TopicPartitionList::new();
    let mut open: HashSet<i32> = HashSet::new();
    for &p in partitions.keys() {
        let start = epoch
            .start_offsets
            .iter()
            .find(|o| o.partition == p)
            .map_or(0, |o| o.offset);
        assignment
            .add_partition_offset(topic, p, Offset::Offset(start))
            .map_err(|e| ConnectorError::kafka("assigning", e))?;
        open.insert(p);
    }
    let mut seqs = HashSet::new();
    consumer
        .assign(&assignment)
        .map_err(|e| ConnectorError::kafka(format!("reading back topic '{topic}'"), e))?;
    let epoch_text = epoch_name(&state.run, epoch.checkpoint);
    let deadline = std::time::Instant::now() + TIMEOUT;
    while !open.is_empty() {
        if std::time::Instant::now() > deadline {
            return Err(ConnectorError::kafka(
                format!("reading back topic '{topic}'"),
                KafkaError::MessageConsumption(RDKafkaErrorCode::RequestTimedOut),
            ));
        }
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                let Some(headers) = message.headers() else {
                    continue;
                };
                let mut sink = None;
                let mut at_epoch = None;
                let mut seq = None;
                for header in headers.iter() {
                    let value = header
                        .value
                        .map(|v| String::from_utf8_lossy(v).into_owned());
                    match header.key {
                        SINK_HEADER => sink = value,
                        EPOCH_HEADER => at_epoch = value,
                        SEQ_HEADER => seq = value.and_then(|v| v.parse::<u64>().ok()),
                        _ => {}
                    }
                }
                if sink.as_deref() == Some(state.transactional_id.as_str())
                    && at_epoch.as_deref() == Some(epoch_text.as_str())
                {
                    if let Some(seq) = seq {
                        seqs.insert(seq);
                    }
                }
            }
            Some(Err(KafkaError::PartitionEOF(p))) => {
                open.remove(&p);
            }
            Some(Err(e)) => tracing::warn!(topic = %topic, "kafka: {e}"),
            None => {}
        }
    }
    Ok(seqs)
}
