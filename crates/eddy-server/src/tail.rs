//! Live tails of sink output: every sink of a server job is wrapped in a
//! [`TeeSink`] that, besides writing, offers each batch on a broadcast
//! channel; `GET /api/v1/jobs/{id}/sinks/{sink}/tail` turns a subscription
//! into Server-Sent Events, one `row` event per row (its JSON), or for an
//! updating sink one `change` event per row, `{"kind": "+U", "row": {...}}`.
//! The first event, `from` (`{"row": n}`), says how many rows the sink had
//! written before the subscription began (what a reader did not see).
//!
//! The job never waits for a reader: a batch nobody listens to costs a
//! counter check, and a reader that falls behind loses the oldest batches.
//! Each batch carries the sequence number of its first row and a reader
//! knows where it started, so it is told exactly how many rows it missed
//! (a `skipped` event with `{"rows": n}`). When the job ends the stream
//! sends `end` and closes.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::response::sse::Event;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_connectors::json_lines::encode_json_lines;
use eddy_connectors::sinks::changelog::kind_prefixes;
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

/// One sink's channel and the number of rows it has written.
#[derive(Debug, Clone)]
pub struct Tap {
    sender: broadcast::Sender<TapItem>,
    written: Arc<AtomicU64>,
}

impl Default for Tap {
    fn default() -> Self {
        Self {
            sender: broadcast::channel(TAIL_CAPACITY).0,
            written: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Tap {
    /// A new reader and the row sequence number it starts at: rows written
    /// after that and not delivered to it are reported as skipped.
    pub fn subscribe(&self) -> (broadcast::Receiver<TapItem>, u64) {
        let start = self.written.load(Ordering::SeqCst);
        (self.sender.subscribe(), start)
    }
}

/// The taps of one job's sinks.
#[derive(Debug, Default)]
pub struct Taps {
    sinks: BTreeMap<String, Tap>,
}

impl Taps {
    /// Taps for the given sinks.
    pub fn new<'a>(sinks: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            sinks: sinks
                .into_iter()
                .map(|s| (s.to_string(), Tap::default()))
                .collect(),
        }
    }

    /// The tap of `sink`.
    pub fn tap(&self, sink: &str) -> Option<Tap> {
        self.sinks.get(sink).cloned()
    }
}

/// A sink writer that also offers what it writes to tail readers.
pub struct TeeSink {
    inner: Box<dyn SinkWriter>,
    tap: Tap,
}

impl TeeSink {
    /// Wraps `inner`.
    pub fn new(inner: Box<dyn SinkWriter>, tap: Tap) -> Self {
        Self { inner, tap }
    }
}

impl TeeSink {
    /// Sends `batch`, just written, to the tail's readers.
    fn send_to_readers(&self, batch: &RecordBatch) {
        let first_row = self.tap.written.load(Ordering::SeqCst);
        if self.tap.sender.receiver_count() > 0 {
            // A send fails only when every reader left; that is fine.
            let _ = self.tap.sender.send(TapItem {
                first_row,
                batch: batch.clone(),
            });
        }
        self.tap
            .written
            .store(first_row + batch.num_rows() as u64, Ordering::SeqCst);
    }
}

impl SinkWriter for TeeSink {
    fn write(&mut self, batch: &RecordBatch) -> eddy_engine::Result<()> {
        self.inner.write(batch)?;
        self.send_to_readers(batch);
        Ok(())
    }

    fn write_late(&mut self, late: &eddy_engine::message::LateBatch) -> eddy_engine::Result<()> {
        self.inner.write_late(late)?;
        self.send_to_readers(late.rows());
        Ok(())
    }

    fn watermark(&mut self, watermark: eddy_engine::time::Timestamp) -> eddy_engine::Result<()> {
        self.inner.watermark(watermark)
    }

    fn figures(&self) -> Vec<(&'static str, i64)> {
        self.inner.figures()
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

/// The SSE events of a tail subscription that started at row `start`:
/// `from` first (`start`), `row` per row, `skipped` when the reader fell
/// behind, `end` when the job's sink is gone.
pub fn events(
    receiver: broadcast::Receiver<TapItem>,
    start: u64,
) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut expected = start;
    let from = Event::default()
        .event("from")
        .data(format!("{{\"row\":{start}}}"));
    futures::stream::once(async move { from })
        .chain(
            BroadcastStream::new(receiver)
                .map(move |item| {
                    let Ok(item) = item else { return Vec::new() };
                    let mut events = Vec::with_capacity(item.batch.num_rows() + 1);
                    if item.first_row > expected {
                        let skipped = format!("{{\"rows\":{}}}", item.first_row - expected);
                        events.push(Event::default().event("skipped").data(skipped));
                    }
                    expected = expected.max(item.first_row + item.batch.num_rows() as u64);
                    let mut text = Vec::new();
                    // An updating sink's rows carry their kind: `change` events.
                    let kinds = kind_prefixes(&item.batch);
                    let rows = eddy_engine::changelog::data_columns(&item.batch);
                    if let Ok(()) = rows
                        .map_err(|_| ())
                        .and_then(|rows| encode_json_lines(&rows, &mut text).map_err(|_| ()))
                    {
                        for (i, line) in String::from_utf8_lossy(&text).lines().enumerate() {
                            match kinds.as_ref().and_then(|k| k.get(i)) {
                                Some(kind) => events.push(
                                    Event::default()
                                        .event("change")
                                        .data(format!("{{\"kind\":\"{kind}\",\"row\":{line}}}")),
                                ),
                                None => events.push(Event::default().event("row").data(line)),
                            }
                        }
                    }
                    events
                })
                .flat_map(futures::stream::iter),
        )
        .map(Ok)
        .chain(futures::stream::once(async {
            Ok(Event::default().event("end").data("{}"))
        }))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    use super::*;

    fn batch(values: Vec<i64>) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values))]).unwrap()
    }

    /// A reader that falls behind is told how many rows it missed, and the
    /// writer never waits for it.
    #[tokio::test]
    async fn a_slow_reader_is_told_what_it_skipped() {
        let tap = Tap::default();
        let (receiver, start) = tap.subscribe();
        let mut sink = TeeSink::new(Box::new(eddy_connectors::blackhole::BlackholeSink), tap);
        // Far more batches than the channel holds, before the reader reads anything.
        for i in 0..(TAIL_CAPACITY as i64 + 10) {
            sink.write(&batch(vec![i * 2, i * 2 + 1])).unwrap();
        }
        drop(sink);
        let events: Vec<Event> = events(receiver, start).map(|e| e.unwrap()).collect().await;
        let text: Vec<String> = events.iter().map(|e| format!("{e:?}")).collect();
        let rows = text.iter().filter(|t| t.contains("event: row")).count();
        assert_eq!(rows, 2 * TAIL_CAPACITY, "the newest batches are delivered");
        assert!(
            text[0].contains("event: from") && text[0].contains("{\\\"row\\\":0}"),
            "{}",
            text[0]
        );
        assert!(
            text[1].contains("event: skipped") && text[1].contains("{\\\"rows\\\":20}"),
            "{}",
            text[1]
        );
        assert!(
            text[2].contains("event: row") && text[2].contains("{\\\"n\\\":20}"),
            "{}",
            text[2]
        );
        assert!(text.last().unwrap().contains("event: end"));
    }
}
