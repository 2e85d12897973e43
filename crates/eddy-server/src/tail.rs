//! Live tails of sink output: every sink of a server job is wrapped in a
//! [`TeeSink`] that, besides writing, offers each batch on a broadcast
//! channel; `GET /api/v1/jobs/{id}/sinks/{sink}/tail` turns a subscription
//! into Server-Sent Events, one `row` event per row (its JSON).
//!
//! The job never waits for a reader: a batch nobody listens to costs a
//! counter check, and a reader that falls behind loses the oldest batches.
//! Each batch carries the sequence number of its first row, so the reader
//! is told exactly how many rows it missed (a `skipped` event with
//! `{"rows": n}`). When the job ends the stream sends `end` and closes.

use std::collections::BTreeMap;
use std::convert::Infallible;

use axum::response::sse::Event;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_connectors::json_lines::encode_json_lines;
use eddy_engine::message::CheckpointId;
use eddy_engine::sink::SinkWriter;
use eddy_engine::state::StateSnapshot;
use futures::{Stream, StreamExt};
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;

/// Batches buffered per sink for readers that are behind.
const TAIL_CAPACITY: usize = 64;

/// A batch offered to tail readers.
#[derive(Debug, Clone)]
pub struct TapItem {
    /// Sequence number (from 0 in this run) of the batch's first row.
    pub first_row: u64,
    /// The rows.
    pub batch: RecordBatch,
}

/// The broadcast channels of one job's sinks.
#[derive(Debug, Default)]
pub struct Taps {
    sinks: BTreeMap<String, broadcast::Sender<TapItem>>,
}

impl Taps {
    /// Channels for the given sinks.
    pub fn new<'a>(sinks: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            sinks: sinks
                .into_iter()
                .map(|s| (s.to_string(), broadcast::channel(TAIL_CAPACITY).0))
                .collect(),
        }
    }

    /// The channel of `sink`.
    pub fn sender(&self, sink: &str) -> Option<broadcast::Sender<TapItem>> {
        self.sinks.get(sink).cloned()
    }

    /// A new reader of `sink`.
    pub fn subscribe(&self, sink: &str) -> Option<broadcast::Receiver<TapItem>> {
        self.sinks.get(sink).map(|s| s.subscribe())
    }
}

/// A sink writer that also offers what it writes to tail readers.
pub struct TeeSink {
    inner: Box<dyn SinkWriter>,
    sender: broadcast::Sender<TapItem>,
    next_row: u64,
}

impl TeeSink {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn SinkWriter>, sender: broadcast::Sender<TapItem>) -> Self {
        Self {
            inner,
            sender,
            next_row: 0,
        }
    }
}

impl SinkWriter for TeeSink {
    fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
        self.inner.write(batch)?;
        if self.sender.receiver_count() > 0 {
            // A send fails only when every reader left; that is fine.
            let _ = self.sender.send(TapItem {
                first_row: self.next_row,
                batch: batch.clone(),
            });
        }
        self.next_row += batch.num_rows() as u64;
        Ok(())
    }

    fn precommit(
        &mut self,
        checkpoint: CheckpointId,
        completed: CheckpointId,
    ) -> eddy_engine::Result<StateSnapshot> {
        self.inner.precommit(checkpoint, completed)
    }

    fn flush(&mut self) -> eddy_engine::Result<()> {
        self.inner.flush()
    }

    fn finish(&mut self) -> eddy_engine::Result<()> {
        self.inner.finish()
    }
}

/// The SSE events of a tail subscription: `row` per row, `skipped` when the
/// reader fell behind, `end` when the job's sink is gone.
pub fn events(
    receiver: broadcast::Receiver<TapItem>,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut expected: Option<u64> = None;
    BroadcastStream::new(receiver)
        .map(move |item| {
            let Ok(item) = item else { return Vec::new() };
            let mut events = Vec::with_capacity(item.batch.num_rows() + 1);
            if let Some(expected) = expected.filter(|&e| item.first_row > e) {
                let skipped = format!("{{\"rows\":{}}}", item.first_row - expected);
                events.push(Event::default().event("skipped").data(skipped));
            }
            expected = Some(item.first_row + item.batch.num_rows() as u64);
            let mut text = Vec::new();
            if encode_json_lines(&item.batch, &mut text).is_ok() {
                for line in String::from_utf8_lossy(&text).lines() {
                    events.push(Event::default().event("row").data(line));
                }
            }
            events
        })
        .flat_map(futures::stream::iter)
        .map(Ok)
        .chain(futures::stream::once(async {
            Ok(Event::default().event("end").data("{}"))
        }))
}
