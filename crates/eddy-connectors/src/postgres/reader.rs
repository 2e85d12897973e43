//! A `postgres-cdc` table's reader: the table's rows in chunks, then its
//! changes from the replication slot, as upserts and deletes by key.
//!
//! In: the [`CdcConfig`], the eddy table's physical columns (then the row
//! kind) and primary key, a checkpointed [`CdcPosition`] when resuming.
//! Out: batches of rows with their kind — `+I` for a snapshot row or an
//! insert, `+U` for an update's new row, `-D` for a delete (only its key
//! counts) — which the planner's `changelog_normalize` step behind the
//! source turns into a changelog with the old rows. A batch ends only at a
//! chunk's or a transaction's end, and its position (the end of the last
//! transaction, or the last chunk) is what a checkpoint records.
//!
//! State machine:
//!
//! ```text
//!  Connecting ── table, publication, slot checked or made
//!      │
//!      ▼
//!  Snapshot ── chunk after chunk (see [`super::snapshot`]) ──┐
//!      │ last chunk read: catch_up_until = WAL position now  │ resumed mid-way
//!      ▼                                                     │ from `snapshot_after`
//!  Streaming from `lsn`: each transaction's changes; while its
//!  commit is before `catch_up_until`, a change its key's chunk
//!  already holds is skipped
//! ```
//!
//! The slot's confirmed position moves only when a checkpoint holding a
//! later position completes ([`Confirmations`]), so after a kill the job
//! resumes at its checkpoint and PostgreSQL still has every change after.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_engine::changelog;
use eddy_engine::source::{BadRow, SourceContext, SourceReader};
use pgwire_replication::{Lsn, ReplicationClient, ReplicationEvent};
use serde::{Deserialize, Serialize};

use super::changes::{apply, MappedRelation, Transaction};
use super::config::CdcConfig;
use super::metadata::MetadataColumns;
use super::pgoutput;
use super::snapshot::{read_chunk, ChunkIndex, ChunkRecord};
use super::table::{self, lsn_text, message, parse_lsn, PgTable};
use super::text_columns::TextRows;
use crate::error::{ConnectorError, Result};

/// PostgreSQL's epoch (2000-01-01) in Unix milliseconds.
const POSTGRES_EPOCH_MS: i64 = 946_684_800_000;

/// How long a quiet stream goes before an empty batch reports its figures.
const QUIET_REPORT: std::time::Duration = std::time::Duration::from_secs(1);
/// How long rows read under a steady stream of changes wait for more to
/// fill a batch before they go on.
const LINGER: std::time::Duration = std::time::Duration::from_millis(50);

/// What a checkpoint records of a `postgres-cdc` reader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CdcPosition {
    /// The slot read.
    pub slot: String,
    /// The stream resumes after this position (the end of the last
    /// transaction read, or the slot's position before the snapshot).
    pub lsn: String,
    /// Whether the snapshot is read whole.
    pub snapshot_done: bool,
    /// The key the last snapshot chunk read ended at (none read: `None`).
    #[serde(default)]
    pub snapshot_after: Option<Vec<Option<String>>>,
    /// The chunks read, while changes made during the snapshot may still
    /// come (see `super::snapshot`).
    #[serde(default)]
    pub chunks: Vec<ChunkRecord>,
    /// The WAL position read after the last chunk.
    #[serde(default)]
    pub catch_up_until: Option<String>,
}

/// The slot positions whose checkpoints completed, by slot, shared by the
/// connector (which learns of completed checkpoints) and the readers
/// (which tell PostgreSQL).
#[derive(Debug, Default)]
pub struct Confirmations {
    slots: Mutex<HashMap<String, Arc<AtomicU64>>>,
}

impl Confirmations {
    /// The confirmed position of a slot (`host:port/database/slot`).
    pub fn of(&self, key: &str) -> Arc<AtomicU64> {
        let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        slots.entry(key.to_string()).or_default().clone()
    }

    /// A checkpoint holding `lsn` completed.
    pub fn confirm(&self, key: &str, lsn: u64) {
        self.of(key).fetch_max(lsn, Ordering::SeqCst);
    }
}

/// Which slot a config reads, as [`Confirmations`] names it.
pub fn slot_key(config: &CdcConfig) -> String {
    format!(
        "{}:{}/{}/{}",
        config.host, config.port, config.database, config.slot
    )
}

/// See the module docs.
pub struct CdcReader {
    config: CdcConfig,
    schema: SchemaRef,
    primary_key: Vec<String>,
    batch_rows: usize,
    rows: TextRows,
    /// The declared metadata columns, filled in as batches finish.
    metadata: MetadataColumns,
    /// Whether batches go out without the row kind (a snapshot-only
    /// table is read as a plain, append-only one).
    inserts_only: bool,
    resume: Option<CdcPosition>,
    opened: Option<Opened>,
    confirmed: Arc<AtomicU64>,
    /// Rows taken in (snapshot and changes), to number bad rows.
    sequence: u64,
}

/// A reader's state once connected.
struct Opened {
    table: PgTable,
    position: CdcPosition,
    index: Option<ChunkIndex>,
    catch_up_until: Option<u64>,
    lsn: u64,
    query: Option<postgres::Client>,
    stream: Option<Stream>,
}

impl Drop for Opened {
    fn drop(&mut self) {
        // Closing a blocking client blocks on its own runtime.
        let query = self.query.take();
        super::outside_runtime(move || drop(query));
    }
}

/// The replication stream and what it has told.
struct Stream {
    runtime: tokio::runtime::Runtime,
    client: ReplicationClient,
    acked: u64,
    /// The server's WAL end, as it last said.
    server_end: u64,
    /// The commit time of the last transaction read, µs since 2000-01-01.
    last_commit_micros: i64,
    /// The commit time of the transaction being read, epoch milliseconds.
    reading_commit_ms: i64,
    /// When a batch was last returned.
    returned: std::time::Instant,
    relation: Option<MappedRelation>,
    transaction: Option<Transaction>,
}

impl CdcReader {
    /// A reader of `schema`'s columns (then the row kind; metadata
    /// columns among them), resuming at `resume` when given. Nothing
    /// connects until the first read.
    pub fn new(
        config: CdcConfig,
        schema: SchemaRef,
        primary_key: Vec<String>,
        batch_rows: usize,
        resume: Option<CdcPosition>,
        confirmed: Arc<AtomicU64>,
    ) -> Self {
        // Rows are collected with their kind; a table read as a plain one
        // (no row kind declared: snapshot mode) has it dropped at the end.
        let inserts_only = !schema
            .fields()
            .last()
            .is_some_and(|f| changelog::is_row_kind_field(f));
        let schema = if inserts_only {
            let mut fields: Vec<_> = schema.fields().iter().cloned().collect();
            fields.push(Arc::new(changelog::row_kind_field(&[])));
            Arc::new(datafusion::arrow::datatypes::Schema::new(fields))
        } else {
            schema
        };
        let metadata = MetadataColumns::new(
            &schema,
            [&config.database, &config.schema, &config.pg_table],
        );
        let schema = metadata.table_schema().clone();
        Self {
            rows: TextRows::new(schema.clone()),
            metadata,
            inserts_only,
            config,
            schema,
            primary_key,
            batch_rows: batch_rows.max(1),
            resume,
            opened: None,
            confirmed,
            sequence: 0,
        }
    }

    fn open(&mut self) -> Result<Opened> {
        let mut client = self
            .config
            .query_config()
            .connect(postgres::NoTls)
            .map_err(|e| {
                ConnectorError::postgres(
                    format!(
                        "connecting to {}:{} database '{}' as '{}'",
                        self.config.host, self.config.port, self.config.database, self.config.user
                    ),
                    message(&e),
                )
            })?;
        let table = table::describe(&mut client, &self.config, &self.schema, &self.primary_key)?;
        if let Some(resume) = &self.resume {
            if resume.slot != self.config.slot {
                return Err(ConnectorError::postgres(
                    format!("replication slot '{}'", self.config.slot),
                    format!(
                        "the job's checkpoint read slot '{}': a table's slot.name cannot change under its state",
                        resume.slot
                    ),
                ));
            }
        }
        let slot = if self.config.snapshot_only {
            table::Slot {
                confirmed: 0,
                created: false,
            }
        } else {
            table::ensure_publication(&mut client, &self.config)?;
            table::ensure_slot(&mut client, &self.config, self.resume.is_some())?
        };
        let position = match self.resume.take() {
            Some(position) => {
                let lsn = parse_lsn(&position.lsn)?;
                if slot.confirmed > lsn {
                    return Err(ConnectorError::postgres(
                        format!("replication slot '{}'", self.config.slot),
                        format!(
                            "it was confirmed to {} by another reader, past the job's checkpoint at {}: the changes in between are lost to this job",
                            lsn_text(slot.confirmed),
                            position.lsn
                        ),
                    ));
                }
                position
            }
            None => CdcPosition {
                slot: self.config.slot.clone(),
                lsn: lsn_text(slot.confirmed),
                snapshot_done: !self.config.snapshot,
                snapshot_after: None,
                chunks: Vec::new(),
                catch_up_until: None,
            },
        };
        if !table.replica_identity_full {
            tracing::debug!(
                table = %self.config.qualified(),
                "REPLICA IDENTITY DEFAULT: an update leaving a TOASTed value unchanged fails the job; set REPLICA IDENTITY FULL for wide text or bytea columns"
            );
        }
        let catch_up_until = position
            .catch_up_until
            .as_deref()
            .map(parse_lsn)
            .transpose()?;
        let index = if position.snapshot_done && !position.chunks.is_empty() {
            Some(ChunkIndex::new(
                position.chunks.clone(),
                &self.schema,
                &table.key,
            )?)
        } else {
            None
        };
        Ok(Opened {
            lsn: parse_lsn(&position.lsn)?,
            table,
            position,
            index,
            catch_up_until,
            query: Some(client),
            stream: None,
        })
    }

    /// Reads snapshot chunks until a batch is full or the table is read.
    fn snapshot_batch(&mut self) -> Result<()> {
        let Some(opened) = self.opened.as_mut() else {
            return Ok(());
        };
        while !opened.position.snapshot_done && self.rows.len() < self.batch_rows {
            let client = match opened.query.as_mut() {
                Some(c) => c,
                None => return Err(ConnectorError::postgres("snapshot", "no connection")),
            };
            let before = self.rows.len();
            let (record, finished) = read_chunk(
                client,
                &self.config,
                &opened.table,
                opened.position.snapshot_after.as_deref(),
                &mut self.rows,
            )?;
            // Flink CDC's op_ts of a snapshot row: 0.
            self.metadata.rows_added(self.rows.len() - before, 0);
            opened.position.snapshot_after = record.last.clone();
            opened.position.chunks.push(record);
            if finished {
                let now: String = client
                    .query_one("SELECT pg_current_wal_lsn()::text", &[])
                    .map_err(|e| ConnectorError::postgres("reading the WAL position", message(&e)))?
                    .get(0);
                opened.position.snapshot_done = true;
                opened.position.catch_up_until = Some(now.clone());
                opened.catch_up_until = Some(parse_lsn(&now)?);
                opened.index = Some(ChunkIndex::new(
                    opened.position.chunks.clone(),
                    &self.schema,
                    &opened.table.key,
                )?);
            }
        }
        Ok(())
    }

    /// Reads changes until a batch is full, or the stream is quiet with
    /// rows in hand.
    fn stream_batch(&mut self) -> Result<()> {
        let Some(opened) = self.opened.as_mut() else {
            return Ok(());
        };
        opened.query = None;
        if opened.stream.is_none() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| ConnectorError::postgres("starting the replication client", e))?;
            let config = self.config.replication_config(opened.lsn, opened.lsn);
            let client = runtime
                .block_on(ReplicationClient::connect(config))
                .map_err(|e| {
                    ConnectorError::postgres(
                        format!("starting replication from slot '{}'", self.config.slot),
                        e,
                    )
                })?;
            opened.stream = Some(Stream {
                runtime,
                client,
                acked: opened.lsn,
                server_end: opened.lsn,
                last_commit_micros: 0,
                reading_commit_ms: 0,
                returned: std::time::Instant::now(),
                relation: None,
                transaction: None,
            });
        }
        loop {
            let Some(stream) = opened.stream.as_mut() else {
                return Ok(());
            };
            let confirmed = self.confirmed.load(Ordering::SeqCst);
            if confirmed > stream.acked {
                stream.client.update_applied_lsn(Lsn(confirmed));
                stream.acked = confirmed;
            }
            let event = stream.runtime.block_on(async {
                tokio::time::timeout(self.config.poll, stream.client.recv()).await
            });
            let event = match event {
                Err(_quiet) => {
                    // Rows in hand go on; with none, an empty batch now and
                    // then carries the slot's figures.
                    if stream.transaction.is_none()
                        && (!self.rows.is_empty() || stream.returned.elapsed() >= QUIET_REPORT)
                    {
                        return Ok(());
                    }
                    continue;
                }
                Ok(Err(e)) => {
                    return Err(ConnectorError::postgres(
                        format!("reading slot '{}'", self.config.slot),
                        e,
                    ))
                }
                Ok(Ok(None)) => {
                    return Err(ConnectorError::postgres(
                        format!("reading slot '{}'", self.config.slot),
                        "the server ended the replication stream",
                    ))
                }
                Ok(Ok(Some(event))) => event,
            };
            match event {
                ReplicationEvent::Begin {
                    final_lsn,
                    xid,
                    commit_time_micros,
                } => {
                    stream.reading_commit_ms = POSTGRES_EPOCH_MS + commit_time_micros / 1000;
                    let check = match opened.catch_up_until {
                        Some(until) if final_lsn.0 < until => true,
                        Some(_) => {
                            // Past every chunk's snapshot: forget them.
                            opened.catch_up_until = None;
                            opened.index = None;
                            opened.position.chunks.clear();
                            opened.position.catch_up_until = None;
                            false
                        }
                        None => false,
                    };
                    stream.transaction = Some(Transaction { xid, check });
                }
                ReplicationEvent::XLogData {
                    data, wal_start, ..
                } => {
                    let change = pgoutput::decode(&data).map_err(|e| {
                        ConnectorError::postgres(
                            format!("reading slot '{}' at {wal_start}", self.config.slot),
                            e,
                        )
                    })?;
                    let transaction = stream.transaction;
                    let before = self.rows.len();
                    apply(
                        &self.config,
                        &opened.table,
                        opened.index.as_ref(),
                        &mut stream.relation,
                        transaction,
                        change,
                        &mut self.rows,
                        wal_start.0,
                    )?;
                    self.metadata
                        .rows_added(self.rows.len() - before, stream.reading_commit_ms);
                }
                ReplicationEvent::KeepAlive { wal_end, .. } => {
                    stream.server_end = stream.server_end.max(wal_end.0);
                    // Between transactions the stream has passed every
                    // commit before the server's position (one committing
                    // later is sent later): the slot may move on with it,
                    // so a quiet table does not hold back the server's WAL.
                    if stream.transaction.is_none() && wal_end.0 > opened.lsn {
                        opened.lsn = wal_end.0;
                        opened.position.lsn = lsn_text(wal_end.0);
                    }
                }
                ReplicationEvent::Commit {
                    end_lsn,
                    commit_time_micros,
                    ..
                } => {
                    stream.transaction = None;
                    stream.server_end = stream.server_end.max(end_lsn.0);
                    stream.last_commit_micros = commit_time_micros;
                    opened.lsn = end_lsn.0;
                    opened.position.lsn = lsn_text(end_lsn.0);
                    // A full batch goes; so do rows held for a while under
                    // a steady stream that never goes quiet.
                    if self.rows.len() >= self.batch_rows
                        || (!self.rows.is_empty() && stream.returned.elapsed() >= LINGER)
                    {
                        return Ok(());
                    }
                }
                ReplicationEvent::StoppedAt { .. } => {
                    return Err(ConnectorError::postgres(
                        format!("reading slot '{}'", self.config.slot),
                        "the replication stream stopped",
                    ))
                }
                _ => {}
            }
        }
    }

    /// The slot's figures, for the source's metrics.
    fn report(&mut self, ctx: &mut SourceContext) {
        let Some(opened) = self.opened.as_mut() else {
            return;
        };
        ctx.metric("read_lsn", opened.lsn as i64);
        ctx.metric(
            "slot_confirmed_lsn",
            i64::try_from(self.confirmed.load(Ordering::SeqCst)).unwrap_or(i64::MAX),
        );
        ctx.metric("snapshot_chunks", opened.position.chunks.len() as i64);
        let Some(stream) = opened.stream.as_mut() else {
            ctx.metric("snapshot_done", 0);
            return;
        };
        ctx.metric("snapshot_done", 1);
        stream.returned = std::time::Instant::now();
        let behind = stream.server_end.saturating_sub(opened.lsn);
        ctx.metric("lag_bytes", behind as i64);
        // How old the last change read is, while there is more to read.
        let lag_ms = if behind == 0 || stream.last_commit_micros == 0 {
            0
        } else {
            let committed_ms = POSTGRES_EPOCH_MS + stream.last_commit_micros / 1000;
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(committed_ms);
            (now_ms - committed_ms).max(0)
        };
        ctx.metric("lag_ms", lag_ms);
    }

    fn take_batch(&mut self, ctx: &mut SourceContext) -> Result<RecordBatch> {
        let taken = self.rows.len() as u64;
        let (batch, bad) = self.rows.finish()?;
        let mut dropped: Vec<usize> = bad.iter().map(|b| b.row).collect();
        dropped.dedup();
        let mut batch = self.metadata.complete(batch, &dropped)?;
        if self.inserts_only {
            batch =
                batch.project(&(0..batch.num_columns().saturating_sub(1)).collect::<Vec<_>>())?;
        }
        for b in bad {
            ctx.bad_row(BadRow {
                path: format!("postgres-cdc {}", self.config.qualified()),
                line: None,
                offset: Some(self.sequence + b.row as u64),
                column: Some(b.column.clone()),
                reason: format!("'{}' does not fit column '{}'", b.text, b.column),
                raw: b.text,
            });
        }
        self.sequence += taken;
        Ok(batch)
    }
}

impl SourceReader for CdcReader {
    fn next_batch(&mut self, ctx: &mut SourceContext) -> eddy_engine::Result<Option<RecordBatch>> {
        let table = self.config.table.clone();
        let fail = |e: ConnectorError| e.for_table(&table);
        if self.opened.is_none() {
            self.opened = Some(self.open().map_err(fail)?);
        }
        let snapshot_done = self
            .opened
            .as_ref()
            .is_some_and(|o| o.position.snapshot_done);
        if snapshot_done && self.config.snapshot_only {
            if self.rows.is_empty() {
                return Ok(None);
            }
        } else if snapshot_done {
            self.stream_batch().map_err(fail)?;
        } else {
            self.snapshot_batch().map_err(fail)?;
        }
        self.report(ctx);
        self.take_batch(ctx).map(Some).map_err(fail)
    }

    /// `scan.startup.mode = 'snapshot'` reads the table and ends.
    fn bounded(&self) -> bool {
        self.config.snapshot_only
    }

    fn position(&self) -> serde_json::Value {
        match (&self.opened, &self.resume) {
            (Some(opened), _) => serde_json::to_value(&opened.position).unwrap_or_default(),
            (None, Some(resume)) => serde_json::to_value(resume).unwrap_or_default(),
            (None, None) => serde_json::Value::Null,
        }
    }
}
