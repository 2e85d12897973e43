//! The task of a source node, and the reader thread beside it.
//!
//! ```text
//!  reader thread:  SourceReader::next_batch ──(batch, position, bad rows, origins)──┐
//!                                                                          ▼
//!  source task:    control (stop / cancel / checkpoint) ─ next read, or a timer ─ SourceRunner::process
//!                  ─> Batch(port 0), Batch(late port), Batch(bad port), Watermark ... Barrier(n) ... Watermark(+inf), End
//! ```
//!
//! Reading happens on a thread of its own, off the worker pool, so that a
//! read blocked on a silent pipe never holds a worker nor keeps the source
//! from injecting a barrier, noticing a stop or cancel, or declaring
//! itself idle. The source task waits for the next read, a change of the
//! job's control flags, or the next timer that has something to do (an
//! idle timeout, a chained processing-time clock); a source with nothing
//! to read and none of those due is not woken at all. Each batch carries the
//! reader's position after it and the bad rows found while reading it, so
//! that a checkpoint covers exactly the rows sent downstream.

use std::sync::Arc;
use std::time::{Duration, Instant};

use datafusion::arrow::record_batch::RecordBatch;
use serde::{Deserialize, Serialize};

use super::alignment::SourceAlignment;
use super::control::{NodeContext, NodeEvent, Wakes};
use super::outputs::{deliver_taken, Outputs};
use super::pool::{until, Budget};
use crate::checkpoint::{NodeCheckpoint, NodeRuntimeState};
use crate::error::{EngineError, Result};
use crate::message::{Barrier, CheckpointId, Message};
use crate::metrics::NodeMetrics;
use crate::operator::{BAD_PORT, LATE_PORT};
use crate::source::bad_rows::bad_rows_batch;
use crate::source::{
    BadRow, BadRowPolicy, RowOrigins, SourceContext, SourceReader, SourceRunner, SourceRunnerState,
    SplitEvents,
};
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// A source node ready to run.
pub(crate) struct SourceWork {
    pub reader: Box<dyn SourceReader>,
    pub runner: SourceRunner,
    pub idle_timeout: Option<Duration>,
    /// The reader's position when the job (re)starts.
    pub position: serde_json::Value,
    /// The last checkpoint already injected (the one resumed from).
    pub injected: CheckpointId,
    /// The source was idle at that checkpoint.
    pub idle: bool,
    /// The job's watermark alignment and this source's place in it, when
    /// it is a bounded source with event time among several.
    pub alignment: Option<(Arc<SourceAlignment>, usize)>,
}

/// Releases a source's place in the alignment however it stops.
struct AlignedSource(Arc<SourceAlignment>, usize);

impl Drop for AlignedSource {
    fn drop(&mut self) {
        self.0.release(self.1);
    }
}

/// The checkpoint table of a Debezium feed's held rows.
pub(crate) const FEED_TABLE: &str = "feed";

/// What a source checkpoints.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct SourceMeta {
    pub position: serde_json::Value,
    pub runner: SourceRunnerState,
    /// The source had declared itself idle.
    #[serde(default)]
    pub idle: bool,
}

enum Read {
    Batch {
        batch: RecordBatch,
        position: serde_json::Value,
        bad: Vec<BadRow>,
        origins: Option<Box<dyn RowOrigins>>,
        splits: SplitEvents,
        /// A watermark the input carried.
        carried: Option<Timestamp>,
        /// Rows passed over before the batch's (see `SourceContext::skipped`).
        skipped: Vec<RecordBatch>,
        /// The connector's own figures (see `SourceContext::metric`).
        figures: Vec<(String, i64)>,
    },
    End {
        position: serde_json::Value,
        bad: Vec<BadRow>,
    },
    Failed(EngineError),
}

fn spawn_reader(
    name: &str,
    mut reader: Box<dyn SourceReader>,
) -> Result<tokio::sync::mpsc::Receiver<Read>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<Read>(2);
    let mut ctx = SourceContext::new(name);
    std::thread::Builder::new()
        .name(format!("eddy-read-{name}"))
        .spawn(move || loop {
            let read = match reader.next_batch(&mut ctx) {
                Ok(Some(batch)) => Read::Batch {
                    batch,
                    position: reader.position(),
                    bad: ctx.take_bad_rows(),
                    origins: ctx.take_origins(),
                    splits: ctx.take_split_events(),
                    carried: ctx.take_watermark(),
                    skipped: ctx.take_skipped(),
                    figures: ctx.take_metrics(),
                },
                Ok(None) => Read::End {
                    position: reader.position(),
                    bad: ctx.take_bad_rows(),
                },
                Err(e) => Read::Failed(e),
            };
            let last = !matches!(read, Read::Batch { .. });
            if tx.blocking_send(read).is_err() || last {
                return;
            }
        })
        .map_err(|e| EngineError::Graph(format!("cannot start a reader thread: {e}")))?;
    Ok(rx)
}

/// Delivers what the source's outputs hold for full channels.
async fn deliver_outputs(
    outputs: &mut Outputs,
    ctx: &NodeContext,
    wakes: &mut Wakes,
) -> Result<()> {
    deliver_taken(|held| outputs.take_held(held), &ctx.control, wakes).await
}

/// The earliest of two optional instants.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Runs a source until its input ends, the job stops, or it fails.
pub(crate) async fn run_source(
    ctx: &mut NodeContext,
    work: SourceWork,
    outputs: &mut Outputs,
) -> Result<()> {
    let SourceWork {
        reader,
        mut runner,
        idle_timeout,
        mut position,
        mut injected,
        mut idle,
        alignment,
    } = work;
    let aligned = alignment.map(|(alignment, place)| AlignedSource(alignment, place));
    let metrics = &ctx.metrics;
    let control = &ctx.control;
    let mut reads = spawn_reader(&ctx.name, reader)?;
    let mut wakes = control.wakes();
    let mut budget = Budget::new();
    let mut source_ctx = SourceContext::new(&ctx.name);
    let mut dead_letters = DeadLetters {
        source: &ctx.name,
        policy: runner.bad_row_policy(),
        metrics,
        watermark: WATERMARK_MIN,
    };
    let mut last_input = Instant::now();
    let snapshot = |runner: &mut SourceRunner,
                    position: &serde_json::Value,
                    idle: bool,
                    finished: bool|
     -> Result<NodeCheckpoint> {
        let meta = SourceMeta {
            position: position.clone(),
            runner: runner.state(),
            idle,
        };
        let mut state = StateSnapshot::with_meta(&meta)?;
        if let Some((feed, keyed)) = runner.feed_snapshot(FEED_TABLE, control.incremental)? {
            state.push_table(FEED_TABLE, feed);
            state.keyed.extend(keyed);
        }
        Ok(NodeCheckpoint {
            runtime: NodeRuntimeState {
                finished,
                metrics: metrics.snapshot(),
                clock: None,
                forwarded: WATERMARK_MIN,
            },
            state,
        })
    };
    loop {
        if control.cancelled() {
            return Err(EngineError::Aborted);
        }
        let (requested, stop_at) = control.requested();
        while injected < requested {
            injected += 1;
            let stop = injected == stop_at;
            if control.checkpointing {
                let data = snapshot(&mut runner, &position, idle, false)?;
                ctx.report(NodeEvent::Snapshot {
                    node: ctx.id,
                    checkpoint: injected,
                    data,
                })?;
            }
            outputs.send_all(Message::Barrier(Barrier {
                checkpoint: injected,
                stop,
            }))?;
            if stop {
                deliver_outputs(outputs, ctx, &mut wakes).await?;
                return ctx.report(NodeEvent::Stopped);
            }
        }
        deliver_outputs(outputs, ctx, &mut wakes).await?;
        // Ahead of the slowest bounded source: wait (still answering the
        // control requests above) instead of reading on.
        if let Some(AlignedSource(alignment, place)) = &aligned {
            if alignment.ahead(*place) {
                tokio::select! {
                    biased;
                    changed = wakes.changed() => {
                        changed.map_err(|_| EngineError::Aborted)?;
                    }
                    () = alignment.wait_while_ahead(*place) => {}
                }
                continue;
            }
        }
        // A processing-time operator chained after the source keeps its
        // clock while no input comes.
        outputs.tick()?;
        deliver_outputs(outputs, ctx, &mut wakes).await?;
        // The next time something is due without input: a chained clock,
        // the source going idle, a split going idle.
        let idle_at = idle_timeout
            .filter(|_| !idle)
            .map(|timeout| last_input + timeout);
        let deadline = earliest(
            earliest(outputs.next_tick(), idle_at),
            runner.next_idle_at(),
        );
        let read = tokio::select! {
            biased;
            changed = wakes.changed() => {
                changed.map_err(|_| EngineError::Aborted)?;
                continue;
            }
            read = reads.recv() => Some(read),
            () = until(deadline) => None,
        };
        budget.spend().await;
        match read {
            Some(Some(Read::Batch {
                batch,
                position: after,
                bad,
                origins,
                splits,
                carried,
                skipped,
                figures,
            })) => {
                for (name, value) in &figures {
                    metrics.set_connector_metric(name, *value);
                }
                for rows in &skipped {
                    // Bad rows among them count as read, as they would
                    // had they been read in full.
                    let bad = runner.observe_skipped(rows, splits.current, &mut source_ctx)?;
                    metrics.add_rows_in(bad);
                }
                if batch.num_rows() > 0 || !bad.is_empty() {
                    idle = false;
                    last_input = Instant::now();
                }
                metrics.add_rows_in(batch.num_rows() + bad.len());
                runner.split_events(&splits);
                let mut out = if batch.num_rows() > 0 {
                    runner.process(&batch, splits.current, origins.as_deref(), &mut source_ctx)?
                } else {
                    crate::source::SourceOutput {
                        watermark: runner.tick(),
                        ..Default::default()
                    }
                };
                if let Some(carried) = carried.and_then(|w| runner.carried_watermark(w)) {
                    out.watermark = Some(carried);
                }
                let (held, bytes) = runner.feed_size();
                if bytes > 0 {
                    metrics.set_state_rows(held);
                    metrics.set_state_bytes(bytes);
                    // A change feed's table cannot spill: a refusal fails the job.
                    ctx.memory.try_resize(bytes as u64)?;
                }
                let mut bad = bad;
                bad.extend(source_ctx.take_bad_rows());
                bad.sort_by_key(|row| row.line);
                dead_letters.handle(bad, outputs)?;
                if let Some(late) = out.late {
                    metrics.add_late_rows(late.num_rows());
                    outputs.send_port(LATE_PORT, Message::Batch(late))?;
                }
                if let Some(on_time) = out.on_time.filter(|b| b.num_rows() > 0) {
                    outputs.send_port(0, Message::Batch(on_time))?;
                }
                if let Some(kept) = out.late_kept {
                    outputs.send_port(0, Message::Late(kept))?;
                }
                if let Some(wm) = out.watermark {
                    metrics.set_watermark(wm);
                    outputs.send_port(0, Message::Watermark(wm))?;
                    if let Some(AlignedSource(alignment, place)) = &aligned {
                        alignment.advance(*place, wm);
                    }
                }
                if let Some(wm) = out.late_watermark {
                    outputs.send_port(LATE_PORT, Message::Watermark(wm))?;
                }
                position = after;
            }
            Some(Some(Read::End {
                position: after,
                bad,
            })) => {
                metrics.add_rows_in(bad.len());
                dead_letters.handle(bad, outputs)?;
                position = after;
                break;
            }
            Some(Some(Read::Failed(e))) => return Err(e),
            None => {
                if let Some(wm) = runner.tick() {
                    metrics.set_watermark(wm);
                    outputs.send_port(0, Message::Watermark(wm))?;
                    if let Some(AlignedSource(alignment, place)) = &aligned {
                        alignment.advance(*place, wm);
                    }
                }
                if let Some(timeout) = idle_timeout {
                    if !idle && last_input.elapsed() >= timeout {
                        idle = true;
                        tracing::info!(source = %ctx.name, "idle: no input for {timeout:?}; its watermark no longer holds the job back");
                        outputs.send_all(Message::Idle)?;
                    }
                }
            }
            Some(None) => {
                return Err(EngineError::connector(
                    &ctx.name,
                    "the reader stopped unexpectedly",
                ))
            }
        }
    }
    drop(aligned);
    metrics.set_watermark(WATERMARK_MAX);
    outputs.send_all(Message::Watermark(WATERMARK_MAX))?;
    outputs.send_all(Message::End)?;
    deliver_outputs(outputs, ctx, &mut wakes).await?;
    let data = if control.checkpointing {
        snapshot(&mut runner, &position, false, true)?
    } else {
        NodeCheckpoint::default()
    };
    ctx.report(NodeEvent::Finished { node: ctx.id, data })
}

/// Applies a table's `bad_rows` policy to the bad rows of each batch.
struct DeadLetters<'a> {
    source: &'a str,
    policy: BadRowPolicy,
    metrics: &'a NodeMetrics,
    /// Latest arrival time sent as the bad stream's watermark.
    watermark: i64,
}

impl DeadLetters<'_> {
    /// Counts `rows`; sends them to `bad_rows(table)` (dead_letter), or
    /// fails with the first (fail).
    fn handle(&mut self, rows: Vec<BadRow>, outputs: &mut Outputs) -> Result<()> {
        if rows.is_empty() {
            return Ok(());
        }
        self.metrics.add_bad_rows(rows.len());
        match self.policy {
            BadRowPolicy::Drop => Ok(()),
            BadRowPolicy::Fail => {
                let first = &rows[0];
                Err(EngineError::BadRow {
                    source_table: self.source.to_string(),
                    location: first.location(),
                    reason: first.describe(),
                })
            }
            BadRowPolicy::DeadLetter => {
                if !outputs.has_subscribers(BAD_PORT) {
                    return Ok(());
                }
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_millis() as i64)
                    .unwrap_or_default()
                    .max(self.watermark);
                outputs.send_port(
                    BAD_PORT,
                    Message::Batch(bad_rows_batch(self.source, &rows, now)?),
                )?;
                if now > self.watermark {
                    self.watermark = now;
                    outputs.send_port(BAD_PORT, Message::Watermark(now))?;
                }
                Ok(())
            }
        }
    }
}
