//! The `jdbc` sink's writes into PostgreSQL: appends, or upserts and
//! deletes by the sink's `PRIMARY KEY`, batched, exactly once with
//! checkpoints.
//!
//! In: batches of the sink's columns (and the row kind, for a changelog).
//! Out: statements on the target table, each writing up to
//! `sink.buffer-flush.max-rows` rows through arrays (`INSERT ... SELECT
//! FROM unnest($1::text[], ...) ON CONFLICT (key) DO UPDATE`, `DELETE ...
//! USING unnest(...)`); a changelog's rows are first folded to each key's
//! last change (`-U` rows are skipped: the `+U` after them upserts).
//!
//! Exactly once: with checkpoints, a checkpoint's rows travel in the
//! checkpoint itself ([`JdbcSink::precommit`]) and are written once it
//! completes ([`commit`]) in one transaction that also moves the sink's
//! row of `eddy_sink_progress` to the checkpoint's number; a commit of a
//! checkpoint the progress table already holds (a job resumed after a
//! kill commits its checkpoint again) writes nothing. Without
//! checkpoints, each batch is written as it comes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use datafusion::arrow::array::{Array, StringArray};
use datafusion::arrow::compute::{cast, concat_batches};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::{RowConverter, SortField};
use eddy_engine::changelog::{self, RowKind};
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::SinkWriter;
use eddy_engine::state::{StateSnapshot, StateTable};
use postgres::Client;

use super::config::quote_ident;
use super::outside_runtime;
use super::sink_config::{JdbcConfig, Target};
use super::table::message;
use crate::error::{ConnectorError, Result};

/// The state table a checkpoint's rows travel in.
const ROWS_TABLE: &str = "jdbc_rows";

/// What a jdbc sink wrote in this run (the run summary's line).
#[derive(Debug, Default)]
pub struct Written {
    /// Rows taken in by the transactions that wrote.
    pub rows: AtomicU64,
    /// Transactions committed.
    pub transactions: AtomicU64,
    /// Checkpoints found published before (a resumed job's), not written.
    pub skipped: AtomicU64,
}

impl Written {
    fn count(&self, rows: usize, written: bool) {
        if written {
            self.rows.fetch_add(rows as u64, Ordering::Relaxed);
            self.transactions.fetch_add(1, Ordering::Relaxed);
        } else {
            self.skipped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// See the module docs.
pub struct JdbcSink {
    config: JdbcConfig,
    target: Target,
    schema: SchemaRef,
    /// With checkpoints: the rows since the last barrier.
    pending: Option<Vec<RecordBatch>>,
    /// The number the last precommit gave its rows.
    last_epoch: u64,
    client: Option<Client>,
    written: Arc<Written>,
}

/// The number a checkpoint's rows carry in a snapshot's meta.
pub fn snapshot_epoch(state: &StateSnapshot) -> Option<u64> {
    state.meta.get("jdbc_checkpoint").and_then(|c| c.as_u64())
}

/// How a sink's rows reach PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Each batch as it comes (no checkpoints).
    Direct,
    /// Each checkpoint's rows once it completes.
    Checkpointed {
        /// A start without state: the sink's progress is forgotten
        /// (checkpoint numbers start again).
        fresh: bool,
        /// The number of the checkpoint resumed from (0: none).
        resumed: u64,
    },
}

impl JdbcSink {
    /// A sink writing `target` over `client`, counting into `written`.
    pub fn open(
        config: JdbcConfig,
        target: Target,
        schema: SchemaRef,
        delivery: Delivery,
        mut client: Client,
        written: Arc<Written>,
    ) -> Result<Self> {
        if let Delivery::Checkpointed { fresh: true, .. } = delivery {
            outside_runtime(|| {
                client.execute(
                    &format!("DELETE FROM {} WHERE sink = $1", config.progress_table()),
                    &[&config.progress_id],
                )
            })
            .map_err(|e| ConnectorError::postgres("resetting the sink's progress", message(&e)))?;
        }
        let (pending, last_epoch) = match delivery {
            Delivery::Direct => (None, 0),
            Delivery::Checkpointed { resumed, .. } => (Some(Vec::new()), resumed),
        };
        Ok(Self {
            config,
            target,
            schema,
            pending,
            last_epoch,
            client: Some(client),
            written,
        })
    }
}

impl Drop for JdbcSink {
    fn drop(&mut self) {
        // Closing a blocking client blocks on its own runtime.
        let client = self.client.take();
        outside_runtime(move || drop(client));
    }
}

impl SinkWriter for JdbcSink {
    /// `rows_written`, `transactions` (committed in this run) and
    /// `checkpoints_skipped` (found published before, not written again).
    fn figures(&self) -> Vec<(&'static str, i64)> {
        let figure = |n: &AtomicU64| i64::try_from(n.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        vec![
            ("rows_written", figure(&self.written.rows)),
            ("transactions", figure(&self.written.transactions)),
            ("checkpoints_skipped", figure(&self.written.skipped)),
        ]
    }

    fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if let Some(pending) = &mut self.pending {
            pending.push(batch.clone());
            return Ok(());
        }
        let table = self.config.table.clone();
        let (config, target) = (&self.config, &self.target);
        let client = &mut self.client;
        let written = outside_runtime(|| {
            with_retries(config, client, |c| {
                write_rows(c, config, target, batch, None)
            })
        })
        .map_err(|e| e.for_table(&table))?;
        self.written.count(batch.num_rows(), written);
        Ok(())
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        _completed: CheckpointId,
    ) -> eddy_engine::Result<StateSnapshot> {
        let Some(pending) = &mut self.pending else {
            return Ok(StateSnapshot::default());
        };
        let batches = std::mem::take(pending);
        let schema = batches
            .first()
            .map(|b| b.schema())
            .unwrap_or_else(|| self.schema.clone());
        let rows = concat_batches(&schema, &batches)?;
        // The job's last precommit (at its end) has no number of its own:
        // it follows the one before.
        let epoch = if checkpoint == CheckpointId::MAX {
            self.last_epoch + 1
        } else {
            checkpoint
        };
        self.last_epoch = epoch;
        Ok(StateSnapshot {
            meta: serde_json::json!({ "jdbc_checkpoint": epoch }),
            tables: vec![StateTable {
                name: ROWS_TABLE.into(),
                batch: rows,
            }],
            keyed: Vec::new(),
            files: Vec::new(),
        })
    }

    fn finish(&mut self) -> eddy_engine::Result<()> {
        Ok(())
    }
}

/// Publishes a checkpoint's rows (see the module docs); `client` is
/// reconnected when it broke.
pub fn commit(
    client: &mut Option<Client>,
    config: &JdbcConfig,
    target: &Target,
    state: &StateSnapshot,
    counts: &Written,
) -> Result<()> {
    let Some(checkpoint) = snapshot_epoch(state).and_then(|c| i64::try_from(c).ok()) else {
        return Ok(());
    };
    let Some(rows) = state.tables.iter().find(|t| t.name == ROWS_TABLE) else {
        return Ok(());
    };
    if rows.batch.num_rows() == 0 {
        // Nothing to write, and nothing a replay could write twice: no
        // transaction (a quiet job checkpointing every second would
        // otherwise commit one a second).
        return Ok(());
    }
    let written = outside_runtime(|| {
        with_retries(config, client, |c| {
            write_rows(c, config, target, &rows.batch, Some(checkpoint))
        })
    })?;
    counts.count(rows.batch.num_rows(), written);
    tracing::debug!(
        table = %config.table,
        checkpoint,
        rows = rows.batch.num_rows(),
        "{}",
        if written { "published" } else { "published before: skipped" }
    );
    Ok(())
}

/// Tries `work` with a connection, again on a new one after a failure,
/// up to the configured retries.
fn with_retries<T>(
    config: &JdbcConfig,
    client: &mut Option<Client>,
    mut work: impl FnMut(&mut Client) -> Result<T>,
) -> Result<T> {
    let mut attempt = 0;
    loop {
        if client.as_ref().is_none_or(|c| c.is_closed()) {
            *client = Some(config.connect()?);
        }
        let Some(c) = client.as_mut() else {
            continue;
        };
        match work(c) {
            Ok(value) => return Ok(value),
            Err(e)
                if attempt < config.max_retries
                    && client.as_ref().is_some_and(|c| c.is_closed()) =>
            {
                tracing::warn!(table = %config.table, "writing to PostgreSQL failed, retrying on a new connection: {e}");
                attempt += 1;
                *client = None;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes `batch` in one transaction; with `checkpoint`, only when the
/// progress table does not hold it yet, moving it there.
fn write_rows(
    client: &mut Client,
    config: &JdbcConfig,
    target: &Target,
    batch: &RecordBatch,
    checkpoint: Option<i64>,
) -> Result<bool> {
    let fail = |e: postgres::Error| {
        ConnectorError::postgres(format!("writing {}", config.qualified()), message(&e))
    };
    let mut tx = client.transaction().map_err(fail)?;
    if let Some(checkpoint) = checkpoint {
        let progress = config.progress_table();
        tx.execute(
            &format!(
                "INSERT INTO {progress} (sink, epoch) VALUES ($1, 0) ON CONFLICT (sink) DO NOTHING"
            ),
            &[&config.progress_id],
        )
        .map_err(fail)?;
        let done: i64 = tx
            .query_one(
                &format!("SELECT epoch FROM {progress} WHERE sink = $1 FOR UPDATE"),
                &[&config.progress_id],
            )
            .map_err(fail)?
            .get(0);
        if done >= checkpoint {
            return Ok(false);
        }
        tx.execute(
            &format!("UPDATE {progress} SET epoch = $2, committed_at = now() WHERE sink = $1"),
            &[&config.progress_id, &checkpoint],
        )
        .map_err(fail)?;
    }
    let (upserts, deletes) = fold(batch, target)?;
    let data = changelog::data_columns(batch)?;
    let texts: Vec<StringArray> = data
        .columns()
        .iter()
        .map(|c| {
            cast(c, &DataType::Utf8).map(|a| {
                a.as_any()
                    .downcast_ref::<StringArray>()
                    .cloned()
                    .unwrap_or_else(|| StringArray::from(Vec::<Option<&str>>::new()))
            })
        })
        .collect::<std::result::Result<_, _>>()?;
    for rows in deletes.chunks(config.flush_rows) {
        let keys: Vec<Vec<Option<String>>> = target
            .key
            .iter()
            .map(|&k| {
                rows.iter()
                    .map(|&r| texts[k].is_valid(r).then(|| texts[k].value(r).to_string()))
                    .collect()
            })
            .collect();
        let names: Vec<String> = (0..keys.len()).map(|i| format!("k{i}")).collect();
        let arrays: Vec<String> = (0..keys.len())
            .map(|i| format!("${}::text[]", i + 1))
            .collect();
        let matches: Vec<String> = target
            .key
            .iter()
            .enumerate()
            .map(|(i, &k)| {
                format!(
                    "t.{} = d.k{i}::{}",
                    quote_ident(&target.columns[k]),
                    target.types[k]
                )
            })
            .collect();
        let sql = format!(
            "DELETE FROM {} AS t USING unnest({}) AS d({}) WHERE {}",
            config.qualified(),
            arrays.join(", "),
            names.join(", "),
            matches.join(" AND ")
        );
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = keys
            .iter()
            .map(|k| k as &(dyn postgres::types::ToSql + Sync))
            .collect();
        tx.execute(sql.as_str(), &params).map_err(fail)?;
    }
    for rows in upserts.chunks(config.flush_rows) {
        let columns: Vec<Vec<Option<String>>> = texts
            .iter()
            .map(|t| {
                rows.iter()
                    .map(|&r| t.is_valid(r).then(|| t.value(r).to_string()))
                    .collect()
            })
            .collect();
        let names: Vec<String> = target.columns.iter().map(|c| quote_ident(c)).collect();
        let arrays: Vec<String> = (0..columns.len())
            .map(|i| format!("${}::text[]", i + 1))
            .collect();
        let values: Vec<String> = (0..columns.len())
            .map(|i| format!("u.c{i}::{}", target.types[i]))
            .collect();
        let aliases: Vec<String> = (0..columns.len()).map(|i| format!("c{i}")).collect();
        let mut sql = format!(
            "INSERT INTO {} ({}) SELECT {} FROM unnest({}) AS u({})",
            config.qualified(),
            names.join(", "),
            values.join(", "),
            arrays.join(", "),
            aliases.join(", ")
        );
        if !target.key.is_empty() {
            let keys: Vec<String> = target.key.iter().map(|&k| names[k].clone()).collect();
            let sets: Vec<String> = (0..names.len())
                .filter(|i| !target.key.contains(i))
                .map(|i| format!("{0} = EXCLUDED.{0}", names[i]))
                .collect();
            if sets.is_empty() {
                sql.push_str(&format!(" ON CONFLICT ({}) DO NOTHING", keys.join(", ")));
            } else {
                sql.push_str(&format!(
                    " ON CONFLICT ({}) DO UPDATE SET {}",
                    keys.join(", "),
                    sets.join(", ")
                ));
            }
        }
        let params: Vec<&(dyn postgres::types::ToSql + Sync)> = columns
            .iter()
            .map(|c| c as &(dyn postgres::types::ToSql + Sync))
            .collect();
        tx.execute(sql.as_str(), &params).map_err(fail)?;
    }
    tx.commit().map_err(fail)?;
    Ok(true)
}

/// The rows to upsert and to delete: for a changelog with a key, each
/// key's last change (`-U` skipped); otherwise every row, appended.
fn fold(batch: &RecordBatch, target: &Target) -> Result<(Vec<usize>, Vec<usize>)> {
    let Some(kinds) = changelog::row_kinds(batch) else {
        return Ok(((0..batch.num_rows()).collect(), Vec::new()));
    };
    if target.key.is_empty() {
        return Err(ConnectorError::bad_option(
            "table-name",
            "the query updates its rows: declare the sink's PRIMARY KEY (...) NOT ENFORCED so they are upserted and deleted by it",
        ));
    }
    let converter = RowConverter::new(
        target
            .key
            .iter()
            .map(|&k| SortField::new(batch.column(k).data_type().clone()))
            .collect(),
    )?;
    let key_columns: Vec<Arc<dyn Array>> = target
        .key
        .iter()
        .map(|&k| batch.column(k).clone())
        .collect();
    let keys = converter.convert_columns(&key_columns)?;
    let mut last: HashMap<&[u8], usize> = HashMap::with_capacity(batch.num_rows());
    for r in 0..batch.num_rows() {
        if RowKind::of(kinds.value(r)) == Some(RowKind::UpdateBefore) {
            continue;
        }
        last.insert(keys.row(r).data(), r);
    }
    let mut upserts = Vec::new();
    let mut deletes = Vec::new();
    let mut rows: Vec<usize> = last.into_values().collect();
    rows.sort_unstable();
    for r in rows {
        if RowKind::of(kinds.value(r)) == Some(RowKind::Delete) {
            deletes.push(r);
        } else {
            upserts.push(r);
        }
    }
    Ok((upserts, deletes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, Int8Array};
    use datafusion::arrow::datatypes::{Field, Schema};

    #[test]
    fn a_changelog_folds_to_each_keys_last_change() {
        let schema = changelog::updating_schema(
            &Schema::new(vec![
                Field::new("k", DataType::Utf8, false),
                Field::new("v", DataType::Int64, true),
            ]),
            &["k".to_string()],
        );
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(vec!["a", "a", "a", "b", "c", "c"])),
                Arc::new(Int64Array::from(vec![1, 1, 2, 5, 7, 7])),
                Arc::new(Int8Array::from(vec![0, 1, 2, 0, 0, 3])),
            ],
        )
        .unwrap();
        let target = Target {
            columns: vec!["k".into(), "v".into()],
            types: vec!["text".into(), "int8".into()],
            key: vec![0],
        };
        assert_eq!(fold(&batch, &target).unwrap(), (vec![2, 3], vec![5]));
        let append = Target {
            key: vec![],
            ..target
        };
        assert!(fold(&batch, &append)
            .unwrap_err()
            .to_string()
            .contains("PRIMARY KEY"));
    }
}
