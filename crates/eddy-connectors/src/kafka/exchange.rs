//! Kafka exchanges: how a job scaled out over a consumer group moves rows
//! to the task that owns their key (`format = 'arrow'` on a Kafka sink and
//! source; `eddy run --group` adds them, nobody writes them by hand).
//!
//! ```text
//!  task q: ... ─> exchange sink ── rows hashed by key to partition p, one Arrow IPC record per (batch, p)
//!                              └── at each checkpoint: "q W" watermark marker into every partition
//!  topic (N partitions, written in transactions with checkpoints)
//!  task p: exchange source (partition p) ─> rows; watermark = least over the N producers' markers ─> ...
//! ```
//!
//! In (sink): batches of the edge's rows, the sink's input watermark.
//! Out (sink): [`KafkaRecord`]s with an explicit partition: data records
//! (no key, an Arrow IPC stream as value) and watermark markers (key
//! [`WATERMARK_KEY`], value `<producer> <watermark ms>`). They travel
//! through the exactly-once sink's epochs, so each is in the topic once and
//! in order with the rows around it.
//!
//! In (source): one partition of the topic. Out: the rows as written (the
//! same schema, no JSON in between), and the watermark carried by the
//! markers: a partition's watermark is the least of its producers' last
//! markers (a producer not heard from yet holds it at the minimum), so no
//! row that comes later is older than it — every producer judged
//! lateness before writing, and a marker follows the rows before it. The
//! read ends when every producer has sent the end marker (`i64::MAX`). A
//! record read before (the same sink, epoch and number: a resumed task's
//! commit can write a committed record again, see [`SeenEpoch`]) is
//! dropped, so each row reaches the operator once.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::kafka::exchange::{decode_rows, ExchangeWriter};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("customer_id", DataType::Utf8, true),
//!     Field::new("amount", DataType::Int64, true),
//! ]));
//! // Four partitions, keyed by customer_id; this is producer (task) 0.
//! let mut writer = ExchangeWriter::new(schema.clone(), &["customer_id".into()], 4, 0).unwrap();
//! let batch = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(StringArray::from(vec!["a", "b", "a"])),
//!     Arc::new(Int64Array::from(vec![1, 2, 3])),
//! ]).unwrap();
//! let records = writer.records(&batch).unwrap();
//! let rows: usize = records.iter().map(|r| decode_rows(r.value.as_deref().unwrap_or_default(), &schema).unwrap().num_rows()).sum();
//! assert_eq!(rows, 3);
//! writer.watermark(1_000);
//! assert_eq!(writer.markers().len(), 4); // one per partition
//! assert!(writer.markers().is_empty()); // nothing new to say
//! ```

use std::collections::BTreeMap;
use std::io::Cursor;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::array::{ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{concat_batches, take_record_batch};
use datafusion::arrow::datatypes::{Schema, SchemaRef};
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use eddy_engine::distribute::exchanges::{is_key_only, ExchangeTopics};
use eddy_engine::graph::ConnectorSpec;
use eddy_engine::partition::partition_rows;
use eddy_engine::source::{SourceContext, SourceReader};
use eddy_engine::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::{ClientConfig, Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};

use super::sink::KafkaRecord;
use super::QuietContext;
use crate::error::{ConnectorError, Result};

/// The `format` of exchange tables.
pub const FORMAT: &str = "arrow";

/// The key of a watermark marker record.
pub const WATERMARK_KEY: &str = "eddy.watermark";

/// How long a metadata look-up may take.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Encodes `batch` as one Arrow IPC stream.
fn encode_rows(batch: &RecordBatch) -> Result<Vec<u8>> {
    let mut writer = StreamWriter::try_new(Vec::new(), &batch.schema())?;
    writer.write(batch)?;
    writer.finish()?;
    Ok(writer.into_inner()?)
}

/// Decodes what an exchange sink wrote, checking it has `schema`'s columns.
pub fn decode_rows(bytes: &[u8], schema: &SchemaRef) -> Result<RecordBatch> {
    let reader = StreamReader::try_new(Cursor::new(bytes), None)?;
    let written = reader.schema();
    let same = written.fields().len() == schema.fields().len()
        && written
            .fields()
            .iter()
            .zip(schema.fields())
            .all(|(a, b)| a.name() == b.name() && a.data_type() == b.data_type());
    if !same {
        return Err(ConnectorError::bad_option(
            "format",
            format!(
                "an exchange record has columns {} but the job expects {} (the topic was written by another version of the job; give the group a new name or delete the topic)",
                describe(&written),
                describe(schema)
            ),
        ));
    }
    let mut batches = Vec::new();
    for batch in reader {
        let batch = batch?;
        batches.push(RecordBatch::try_new(
            schema.clone(),
            batch.columns().to_vec(),
        )?);
    }
    Ok(concat_batches(schema, &batches)?)
}

fn describe(schema: &Schema) -> String {
    let fields: Vec<String> = schema
        .fields()
        .iter()
        .map(|f| format!("{} {}", f.name(), f.data_type()))
        .collect();
    format!("({})", fields.join(", "))
}

/// The sink half: rows to records by key, and watermark markers.
#[derive(Debug)]
pub struct ExchangeWriter {
    /// Columns sent (the sink's columns but the key-only ones).
    payload: SchemaRef,
    /// Indices of the key columns in the sink's batches.
    keys: Vec<usize>,
    partitions: u32,
    producer: u32,
    watermark: Timestamp,
    marked: Timestamp,
}

impl ExchangeWriter {
    /// A writer for batches of `schema` hashed by the columns `keys` into
    /// `partitions` partitions, writing as producer `producer` (its task).
    /// Key columns named `__eddy_key_<i>` are computed for the exchange
    /// and not sent.
    pub fn new(schema: SchemaRef, keys: &[String], partitions: u32, producer: u32) -> Result<Self> {
        let mut indices = Vec::with_capacity(keys.len());
        for key in keys {
            let index = schema.index_of(key).map_err(|_| {
                ConnectorError::bad_option("partition_columns", format!("no column '{key}'"))
            })?;
            indices.push(index);
        }
        let payload: Vec<_> = schema
            .fields()
            .iter()
            .filter(|f| !is_key_only(f.name()))
            .cloned()
            .collect();
        Ok(Self {
            payload: Arc::new(Schema::new(payload)),
            keys: indices,
            partitions: partitions.max(1),
            producer,
            watermark: WATERMARK_MIN,
            marked: WATERMARK_MIN,
        })
    }

    /// The records of `batch`: for each partition its rows go to, one
    /// record holding them (in their order).
    pub fn records(&mut self, batch: &RecordBatch) -> Result<Vec<KafkaRecord>> {
        let keys: Vec<ArrayRef> = self.keys.iter().map(|&i| batch.column(i).clone()).collect();
        let targets = partition_rows(&keys, batch.num_rows(), self.partitions)
            .map_err(|e| ConnectorError::bad_option("partition_columns", e.to_string()))?;
        let payload = batch.project(
            &(0..batch.num_columns())
                .filter(|&i| !is_key_only(batch.schema().field(i).name()))
                .collect::<Vec<_>>(),
        )?;
        let payload = RecordBatch::try_new(self.payload.clone(), payload.columns().to_vec())?;
        let mut by_partition: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (row, &p) in targets.iter().enumerate() {
            by_partition.entry(p).or_default().push(row as u32);
        }
        let mut records = Vec::with_capacity(by_partition.len());
        for (partition, rows) in by_partition {
            let part = if rows.len() == payload.num_rows() {
                payload.clone()
            } else {
                take_record_batch(&payload, &UInt32Array::from(rows))?
            };
            records.push(KafkaRecord {
                key: None,
                value: Some(encode_rows(&part)?),
                partition: Some(partition as i32),
            });
        }
        Ok(records)
    }

    /// Notes the sink's input watermark.
    pub fn watermark(&mut self, watermark: Timestamp) {
        self.watermark = self.watermark.max(watermark);
    }

    /// One marker per partition with the watermark, if it moved since the
    /// last markers (taken at each checkpoint, after the epoch's rows).
    pub fn markers(&mut self) -> Vec<KafkaRecord> {
        if self.watermark <= self.marked {
            return Vec::new();
        }
        self.marked = self.watermark;
        let value = format!("{} {}", self.producer, self.watermark).into_bytes();
        (0..self.partitions)
            .map(|p| KafkaRecord {
                key: Some(WATERMARK_KEY.to_string()),
                value: Some(value.clone()),
                partition: Some(p as i32),
            })
            .collect()
    }
}

/// The exchanges of a job scaled out over consumer group `group`: topics
/// `<group>.exchange.<operator>.<input>` on `servers`, one partition per
/// task, written exactly once.
#[derive(Debug, Clone)]
pub struct KafkaExchanges {
    /// The cluster the job's topics live on.
    pub servers: String,
    /// The consumer group's name.
    pub group: String,
}

impl KafkaExchanges {
    fn spec(&self, topic: &str, extra: &[(&str, String)]) -> ConnectorSpec {
        let options: BTreeMap<String, String> = [
            ("bootstrap_servers", self.servers.clone()),
            ("topic", topic.to_string()),
            ("format", FORMAT.to_string()),
        ]
        .into_iter()
        .chain(extra.iter().cloned())
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let mut spec = ConnectorSpec {
            table: String::new(),
            connector: "kafka".into(),
            options,
            schema: Arc::new(Schema::empty()),
            declared_at: None,
            primary_key: Vec::new(),
            filter: None,
            unread_columns: Vec::new(),
            explain: None,
        };
        spec.explain = Some(super::connector::explain_sink(&spec));
        spec
    }
}

impl ExchangeTopics for KafkaExchanges {
    fn name(&self, consumer: &str, input: usize) -> String {
        format!(
            "{}.exchange.{}.{input}",
            topic_part(&self.group),
            topic_part(consumer)
        )
    }

    fn sink(&self, name: &str, keys: &[String], tasks: usize) -> ConnectorSpec {
        self.spec(
            name,
            &[
                ("partition_columns", keys.join(",")),
                ("partitions", tasks.to_string()),
                ("delivery", "exactly_once".into()),
            ],
        )
    }

    fn source(&self, name: &str, tasks: usize) -> ConnectorSpec {
        self.spec(name, &[("producers", tasks.to_string())])
    }
}

/// A topic-name-safe form of a name.
fn topic_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// A marker's producer and watermark.
fn parse_marker(value: &[u8]) -> Option<(usize, Timestamp)> {
    let text = std::str::from_utf8(value).ok()?;
    let (producer, watermark) = text.split_once(' ')?;
    Some((producer.parse().ok()?, watermark.parse().ok()?))
}

/// What an exchange source checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangePosition {
    /// The topic.
    pub topic: String,
    /// Each partition read.
    pub partitions: Vec<ExchangePartition>,
}

/// One partition's place and its producers' last markers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExchangePartition {
    /// The partition.
    pub partition: i32,
    /// The next offset to read.
    pub offset: i64,
    /// The last watermark each producer marked (index = producer).
    pub marks: Vec<Timestamp>,
    /// The records read lately, per writing sink: see [`SeenEpoch`].
    #[serde(default)]
    pub seen: BTreeMap<String, Vec<SeenEpoch>>,
}

impl ExchangePartition {
    fn watermark(&self) -> Timestamp {
        self.marks.iter().copied().min().unwrap_or(WATERMARK_MIN)
    }

    /// Notes a data record of `sink`'s `epoch`, number `seq`; false if it
    /// was read before (a copy: see [`SeenEpoch`]).
    fn first_sight(&mut self, sink: &str, epoch: &str, seq: u64) -> bool {
        let epochs = self.seen.entry(sink.to_string()).or_default();
        if let Some(known) = epochs.iter_mut().find(|e| e.epoch == epoch) {
            if known.seqs.contains(&seq) {
                return false;
            }
            known.seqs.push(seq);
            return true;
        }
        epochs.push(SeenEpoch {
            epoch: epoch.to_string(),
            seqs: vec![seq],
        });
        if epochs.len() > SEEN_EPOCHS {
            epochs.remove(0);
        }
        true
    }
}

/// How many of a sink's latest epochs a reader remembers.
const SEEN_EPOCHS: usize = 8;

/// The records of one epoch of one sink a reader has read (their
/// `eddy.seq` numbers).
///
/// An exchange record can reach a partition twice: a task resumed from a
/// checkpoint commits that checkpoint's epochs again, writing the records
/// its read-back did not find — and the read-back, reading committed
/// records only, does not see committed records that sit behind another
/// task's transaction still open in the same partition (every task writes
/// every partition of an exchange topic). So the reader drops a record
/// whose sink, epoch and number it has read already; the numbers of each
/// sink's latest epochs are part of the reader's checkpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenEpoch {
    /// `eddy.epoch` of the records.
    pub epoch: String,
    /// Their `eddy.seq` numbers.
    pub seqs: Vec<u64>,
}

/// The sink, epoch and number a committed record's headers carry.
fn record_identity(message: &impl Message) -> Option<(String, String, u64)> {
    use rdkafka::message::Headers;
    let headers = message.headers()?;
    let (mut sink, mut epoch, mut seq) = (None, None, None);
    for header in headers.iter() {
        let value = header
            .value
            .map(|v| String::from_utf8_lossy(v).into_owned());
        match header.key {
            super::sink::SINK_HEADER => sink = value,
            super::sink::EPOCH_HEADER => epoch = value,
            super::sink::SEQ_HEADER => seq = value.and_then(|v| v.parse().ok()),
            _ => {}
        }
    }
    Some((sink?, epoch?, seq?))
}

/// The source half; see the module docs.
pub struct ExchangeSource {
    topic: String,
    consumer: BaseConsumer<QuietContext>,
    schema: SchemaRef,
    batch_size: usize,
    partitions: BTreeMap<i32, ExchangePartition>,
}

impl std::fmt::Debug for ExchangeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExchangeSource")
            .field("topic", &self.topic)
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

impl ExchangeSource {
    /// Reads `only` (or every) partition of `topic`, written by `producers`
    /// tasks, from the checkpointed position or the beginning.
    pub fn open(
        client: &ClientConfig,
        topic: &str,
        schema: SchemaRef,
        producers: usize,
        only: Option<&[i32]>,
        batch_size: usize,
        resume: Option<&ExchangePosition>,
    ) -> Result<Self> {
        let mut config = client.clone();
        config
            .set("enable.partition.eof", "false")
            .set("isolation.level", "read_committed");
        let consumer: BaseConsumer<QuietContext> = config
            .create_with_context(QuietContext)
            .map_err(|e| ConnectorError::kafka(format!("connecting to read topic '{topic}'"), e))?;
        let metadata = consumer
            .fetch_metadata(Some(topic), LOOKUP_TIMEOUT)
            .map_err(|e| ConnectorError::kafka(format!("looking up topic '{topic}'"), e))?;
        let ids: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|t| t.name() == topic && t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .filter(|p| only.is_none_or(|o| o.contains(p)))
            .collect();
        if ids.is_empty() {
            return Err(ConnectorError::bad_option(
                "topic",
                format!("exchange topic '{topic}' does not exist"),
            ));
        }
        let mut partitions = BTreeMap::new();
        let mut assignment = TopicPartitionList::new();
        for p in ids {
            let state = match resume.and_then(|r| r.partitions.iter().find(|s| s.partition == p)) {
                Some(s) if s.marks.len() == producers => s.clone(),
                Some(_) => {
                    return Err(ConnectorError::bad_option(
                        "producers",
                        format!(
                        "the checkpoint read exchange topic '{topic}' from another number of tasks"
                    ),
                    ))
                }
                None => {
                    let (low, _) = consumer
                        .fetch_watermarks(topic, p, LOOKUP_TIMEOUT)
                        .map_err(|e| {
                            ConnectorError::kafka(
                                format!("reading the offsets of topic '{topic}'"),
                                e,
                            )
                        })?;
                    ExchangePartition {
                        partition: p,
                        offset: low,
                        marks: vec![WATERMARK_MIN; producers.max(1)],
                        seen: BTreeMap::new(),
                    }
                }
            };
            assignment
                .add_partition_offset(topic, p, Offset::Offset(state.offset))
                .map_err(|e| ConnectorError::kafka("assigning", e))?;
            partitions.insert(p, state);
        }
        consumer
            .assign(&assignment)
            .map_err(|e| ConnectorError::kafka(format!("reading topic '{topic}'"), e))?;
        Ok(Self {
            topic: topic.to_string(),
            consumer,
            schema,
            batch_size: batch_size.max(1),
            partitions,
        })
    }

    fn watermark(&self) -> Timestamp {
        self.partitions
            .values()
            .map(ExchangePartition::watermark)
            .min()
            .unwrap_or(WATERMARK_MIN)
    }

    fn ended(&self) -> bool {
        self.watermark() == WATERMARK_MAX
    }
}

impl SourceReader for ExchangeSource {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> eddy_engine::Result<Option<RecordBatch>> {
        let table = ctx.table().to_string();
        let fail = |e: ConnectorError| e.for_table(&table);
        if self.ended() {
            return Ok(None);
        }
        let before = self.watermark();
        let mut batches = Vec::new();
        let mut rows = 0;
        let deadline = std::time::Instant::now() + Duration::from_millis(100);
        while rows < self.batch_size && std::time::Instant::now() < deadline {
            let message = match self.consumer.poll(Duration::from_millis(20)) {
                None => {
                    if rows > 0 {
                        break;
                    }
                    continue;
                }
                Some(Err(KafkaError::PartitionEOF(_))) => continue,
                Some(Err(e)) => {
                    return Err(fail(ConnectorError::kafka(
                        format!("reading exchange topic '{}'", self.topic),
                        e,
                    )))
                }
                Some(Ok(message)) => message,
            };
            let Some(state) = self.partitions.get_mut(&message.partition()) else {
                continue;
            };
            state.offset = message.offset() + 1;
            let value = message.payload().unwrap_or_default();
            if message.key() == Some(WATERMARK_KEY.as_bytes()) {
                let Some((producer, watermark)) = parse_marker(value) else {
                    tracing::warn!(topic = %self.topic, "a damaged watermark marker at offset {}", message.offset());
                    continue;
                };
                if let Some(mark) = state.marks.get_mut(producer) {
                    *mark = (*mark).max(watermark);
                }
                if self
                    .partitions
                    .values()
                    .all(|s| s.watermark() == WATERMARK_MAX)
                {
                    break;
                }
                continue;
            }
            if let Some((sink, epoch, seq)) = record_identity(&message) {
                if !state.first_sight(&sink, &epoch, seq) {
                    tracing::debug!(topic = %self.topic, "dropped a copy of record {seq} of {sink} epoch {epoch} at offset {}", message.offset());
                    continue;
                }
            }
            let batch = decode_rows(value, &self.schema).map_err(|e| {
                fail(ConnectorError::bad_option(
                    "format",
                    format!(
                        "exchange topic '{}' partition {} offset {}: {e}",
                        self.topic,
                        message.partition(),
                        message.offset()
                    ),
                ))
            })?;
            rows += batch.num_rows();
            batches.push(batch);
        }
        let after = self.watermark();
        if after > before {
            ctx.advance_watermark(after);
        }
        Ok(Some(
            concat_batches(&self.schema, &batches).map_err(|e| fail(e.into()))?,
        ))
    }

    fn position(&self) -> serde_json::Value {
        serde_json::to_value(ExchangePosition {
            topic: self.topic.clone(),
            partitions: self.partitions.values().cloned().collect(),
        })
        .unwrap_or(serde_json::Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_read_again_is_dropped_and_old_epochs_are_forgotten() {
        let mut partition = ExchangePartition {
            partition: 0,
            offset: 0,
            marks: vec![WATERMARK_MIN],
            seen: BTreeMap::new(),
        };
        assert!(partition.first_sight("task-1", "r-5", 0));
        assert!(partition.first_sight("task-1", "r-5", 1));
        assert!(partition.first_sight("task-2", "r-5", 0), "another sink");
        assert!(!partition.first_sight("task-1", "r-5", 1), "a copy");
        for epoch in 6..6 + SEEN_EPOCHS {
            assert!(partition.first_sight("task-1", &format!("r-{epoch}"), 0));
        }
        assert_eq!(partition.seen["task-1"].len(), SEEN_EPOCHS);
        assert!(
            partition.first_sight("task-1", "r-5", 1),
            "an epoch that old is forgotten"
        );
        // What a checkpoint holds comes back whole.
        let text = serde_json::to_string(&partition).unwrap();
        let back: ExchangePartition = serde_json::from_str(&text).unwrap();
        assert_eq!(back, partition);
        // A position written before the field existed still reads.
        let old: ExchangePartition =
            serde_json::from_str(r#"{"partition":1,"offset":7,"marks":[1,2]}"#).unwrap();
        assert!(old.seen.is_empty());
    }
    use datafusion::arrow::array::{Array, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field};

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("v", DataType::Int64, true),
            Field::new("__eddy_key_0", DataType::Utf8, true),
        ]))
    }

    #[test]
    fn rows_of_a_key_go_to_one_partition_and_key_only_columns_stay_behind() {
        let schema = schema();
        let mut writer =
            ExchangeWriter::new(schema.clone(), &["__eddy_key_0".into()], 8, 3).unwrap();
        let keys: Vec<Option<&str>> = (0..200)
            .map(|i| {
                if i % 17 == 0 {
                    None
                } else {
                    Some(["a", "b", "c", "d", "e"][i % 5])
                }
            })
            .collect();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(keys.clone())),
                Arc::new(Int64Array::from_iter_values(0..200)),
                Arc::new(StringArray::from(keys)),
            ],
        )
        .unwrap();
        let records = writer.records(&batch).unwrap();
        let payload = Arc::new(Schema::new(schema.fields()[..2].to_vec()));
        let mut seen: BTreeMap<Option<String>, i32> = BTreeMap::new();
        let mut total = 0;
        for record in &records {
            let rows = decode_rows(record.value.as_deref().unwrap_or_default(), &payload).unwrap();
            total += rows.num_rows();
            let keys = rows
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for i in 0..rows.num_rows() {
                let key = keys.is_valid(i).then(|| keys.value(i).to_string());
                let p = *seen.entry(key).or_insert(record.partition.unwrap());
                assert_eq!(p, record.partition.unwrap(), "a key in two partitions");
            }
        }
        assert_eq!(total, 200);
        assert!(
            records.len() > 1,
            "five keys and NULL in one of eight partitions"
        );
        // The same rows from another producer land alike.
        let mut other = ExchangeWriter::new(schema, &["__eddy_key_0".into()], 8, 0).unwrap();
        let again: Vec<Option<i32>> = other
            .records(&batch)
            .unwrap()
            .iter()
            .map(|r| r.partition)
            .collect();
        assert_eq!(
            again,
            records.iter().map(|r| r.partition).collect::<Vec<_>>()
        );
    }

    #[test]
    fn without_keys_every_row_goes_to_partition_zero() {
        let schema = schema();
        let mut writer = ExchangeWriter::new(schema.clone(), &[], 4, 0).unwrap();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["x", "y"])),
                Arc::new(Int64Array::from(vec![1, 2])),
                Arc::new(StringArray::from(vec!["x", "y"])),
            ],
        )
        .unwrap();
        let records = writer.records(&batch).unwrap();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].partition, Some(0));
    }

    #[test]
    fn markers_name_the_producer_and_a_partition_waits_for_every_producer() {
        let mut writer = ExchangeWriter::new(schema(), &[], 2, 1).unwrap();
        writer.watermark(5);
        let markers = writer.markers();
        assert_eq!(markers.len(), 2);
        assert_eq!(
            parse_marker(markers[0].value.as_deref().unwrap_or_default()),
            Some((1, 5))
        );
        let mut partition = ExchangePartition {
            partition: 0,
            offset: 0,
            marks: vec![WATERMARK_MIN; 2],
            seen: BTreeMap::new(),
        };
        partition.marks[1] = 5;
        assert_eq!(partition.watermark(), WATERMARK_MIN);
        partition.marks[0] = 9;
        assert_eq!(partition.watermark(), 5);
    }

    #[test]
    fn a_record_of_other_columns_is_refused_with_both_schemas() {
        let schema = schema();
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(vec!["x"])),
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(StringArray::from(vec!["x"])),
            ],
        )
        .unwrap();
        let bytes = encode_rows(&batch).unwrap();
        let other = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
        let err = decode_rows(&bytes, &other).unwrap_err().to_string();
        assert!(
            err.contains("(k Utf8, v Int64, __eddy_key_0 Utf8)"),
            "{err}"
        );
    }
}
