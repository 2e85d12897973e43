//! The sending side of a node: per output port, its consumers. A consumer
//! is a bounded channel to another task, or the node chained after this
//! one ([`crate::chains`]), handed each message by a call.
//!
//! ```text
//!  Outputs::send_port ─> Channel: try_send ── full ──> held, in order
//!                        Chained: Link::push (by call)
//!  the task, between messages:  deliver ─> awaits room for what is held
//! ```
//!
//! Nodes emit from plain (not async) code, so a send to a full channel
//! does not wait there: the message is held, with every later one for
//! that channel behind it, and the task delivers what its nodes hold
//! before it reads its next input ([`deliver`]). A full channel thus still
//! stops the task that feeds it (backpressure), at a message boundary,
//! without holding a worker while it waits.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::mpsc::Sender;

use super::chain_link::Link;
use super::control::{Control, Wakes};
use crate::error::{EngineError, Result};
use crate::message::Message;
use crate::metrics::NodeMetrics;
use crate::operator::{Collector, Emitted};

/// A channel to another task, with the messages held while it was full.
pub(crate) struct Channel {
    sender: Sender<Message>,
    held: VecDeque<Message>,
}

impl Channel {
    pub fn new(sender: Sender<Message>) -> Self {
        Self {
            sender,
            held: VecDeque::new(),
        }
    }
}

/// Messages held for a full channel, taken out to be delivered.
pub(crate) struct Held {
    sender: Sender<Message>,
    messages: VecDeque<Message>,
}

/// One consumer of an output port.
pub(crate) enum Target {
    /// Another task's input channel.
    Channel(Channel),
    /// The node chained after this one, in this task.
    Chained(Box<Link>),
}

impl Target {
    /// A target sending into `sender`.
    pub fn channel(sender: Sender<Message>) -> Self {
        Target::Channel(Channel::new(sender))
    }

    fn send(&mut self, message: Message) -> Result<()> {
        let channel = match self {
            Target::Chained(link) => return link.push(message),
            Target::Channel(channel) => channel,
        };
        if !channel.held.is_empty() {
            channel.held.push_back(message);
            return Ok(());
        }
        match channel.sender.try_send(message) {
            Ok(()) => Ok(()),
            Err(TrySendError::Closed(_)) => Err(EngineError::Aborted),
            Err(TrySendError::Full(message)) => {
                channel.held.push_back(message);
                Ok(())
            }
        }
    }

    fn take_held(&mut self, into: &mut Vec<Held>) {
        match self {
            Target::Chained(link) => link.take_held(into),
            Target::Channel(channel) => {
                if !channel.held.is_empty() {
                    into.push(Held {
                        sender: channel.sender.clone(),
                        messages: std::mem::take(&mut channel.held),
                    });
                }
            }
        }
    }
}

/// Takes out what `take` gives (the held messages of a node, or of a
/// task's chain) and delivers it.
pub(crate) async fn deliver_taken(
    take: impl FnOnce(&mut Vec<Held>),
    control: &Control,
    wakes: &mut Wakes,
) -> Result<()> {
    let mut held = Vec::new();
    take(&mut held);
    if held.is_empty() {
        return Ok(());
    }
    deliver(held, control, wakes).await
}

/// Sends what was held for full channels, in order, waiting (without a
/// worker) for room; gives up when the job is cancelled.
pub(crate) async fn deliver(held: Vec<Held>, control: &Control, wakes: &mut Wakes) -> Result<()> {
    for Held {
        sender,
        mut messages,
    } in held
    {
        while let Some(message) = messages.pop_front() {
            loop {
                if control.cancelled() {
                    return Err(EngineError::Aborted);
                }
                tokio::select! {
                    biased;
                    permit = sender.reserve() => {
                        permit.map_err(|_| EngineError::Aborted)?.send(message);
                        break;
                    }
                    changed = wakes.changed() => {
                        changed.map_err(|_| EngineError::Aborted)?;
                    }
                }
            }
        }
    }
    Ok(())
}

/// Whether a cut before row `at` of a changelog would part an update's
/// `-U` row from the `+U` after it.
fn splits_an_update(kinds: &datafusion::arrow::array::Int8Array, at: usize) -> bool {
    use crate::changelog::RowKind;
    at > 0
        && at < kinds.len()
        && kinds.value(at - 1) == RowKind::UpdateBefore.byte()
        && kinds.value(at) == RowKind::UpdateAfter.byte()
}

/// The output ports of a node: per port, its consumers.
pub(crate) struct Outputs {
    pub ports: Vec<Vec<Target>>,
    pub metrics: Arc<NodeMetrics>,
    /// Larger batches go on in slices of this many rows.
    pub max_rows: usize,
}

impl Outputs {
    /// Sends `message` to every subscriber of `port`, counting batch rows.
    pub fn send_port(&mut self, port: usize, message: Message) -> Result<()> {
        let Some(subscribers) = self.ports.get_mut(port) else {
            return Ok(());
        };
        let rows = match &message {
            Message::Batch(batch) => batch.num_rows(),
            Message::Late(late) => late.num_rows(),
            _ => 0,
        };
        if rows > 0 && !subscribers.is_empty() {
            self.metrics.add_rows_out(rows);
        }
        if let Some((last, rest)) = subscribers.split_last_mut() {
            for sub in rest {
                sub.send(message.clone())?;
            }
            last.send(message)?;
        }
        Ok(())
    }

    /// Whether anything reads `port`.
    pub fn has_subscribers(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|s| !s.is_empty())
    }

    /// Sends `message` on every port.
    pub fn send_all(&mut self, message: Message) -> Result<()> {
        for port in 0..self.ports.len() {
            self.send_port(port, message.clone())?;
        }
        Ok(())
    }

    /// Sends what an operator emitted, a batch larger than `max_rows` in
    /// slices of it (zero-copy), in order. An update's `-U` row and the
    /// `+U` right after it stay in one slice (one row past `max_rows`
    /// where a cut would fall between them): a reader that applies each
    /// message whole, as a lookup join's table does, never holds the key
    /// without a row between the two.
    pub fn flush(&mut self, collector: &mut Collector) -> Result<()> {
        let step = self.max_rows.max(1);
        for (port, emitted) in collector.drain_emitted() {
            match emitted {
                Emitted::Rows(batch) => {
                    let rows = batch.num_rows();
                    if rows <= step {
                        self.send_port(port, Message::Batch(batch))?;
                        continue;
                    }
                    let kinds = crate::changelog::row_kinds(&batch).cloned();
                    let mut offset = 0;
                    while offset < rows {
                        let mut end = (offset + step).min(rows);
                        if let Some(kinds) = &kinds {
                            end += usize::from(splits_an_update(kinds, end));
                        }
                        let slice = batch.slice(offset, end - offset);
                        self.send_port(port, Message::Batch(slice))?;
                        offset = end;
                    }
                }
                Emitted::Late(late) => {
                    let rows = late.num_rows();
                    if rows <= step {
                        self.send_port(port, Message::Late(late))?;
                        continue;
                    }
                    for offset in (0..rows).step_by(step) {
                        let slice = late.slice(offset, step.min(rows - offset));
                        self.send_port(port, Message::Late(slice))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// When a chained node's processing-time clock is next due.
    pub fn next_tick(&self) -> Option<Instant> {
        self.ports
            .iter()
            .flatten()
            .filter_map(|target| match target {
                Target::Chained(link) => link.next_tick(),
                Target::Channel(_) => None,
            })
            .min()
    }

    /// Takes out what this node, and the nodes chained after it, hold for
    /// full channels.
    pub fn take_held(&mut self, into: &mut Vec<Held>) {
        for target in self.ports.iter_mut().flatten() {
            target.take_held(into);
        }
    }

    /// Runs the chained nodes' processing-time clocks that are due.
    pub fn tick(&mut self) -> Result<()> {
        for target in self.ports.iter_mut().flatten() {
            if let Target::Chained(link) = target {
                link.tick()?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;

    use super::*;

    /// One port sending into `tx`, slicing at 4096 rows.
    fn outputs_to(tx: Sender<Message>) -> Outputs {
        Outputs {
            ports: vec![vec![Target::channel(tx)]],
            metrics: NodeMetrics::new_shared(1),
            max_rows: 4096,
        }
    }

    #[test]
    fn a_large_emission_goes_on_in_slices_in_order() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let mut outputs = outputs_to(tx);
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let rows: Vec<i64> = (0..10_000).collect();
        let mut collector = Collector::default();
        collector.emit(
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(rows.clone()))]).unwrap(),
        );
        outputs.flush(&mut collector).unwrap();
        let mut sizes = Vec::new();
        let mut seen = Vec::new();
        while let Ok(Message::Batch(batch)) = rx.try_recv() {
            sizes.push(batch.num_rows());
            let n = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            seen.extend((0..n.len()).map(|i| n.value(i)));
        }
        assert_eq!(sizes, vec![4096, 4096, 1808]);
        assert_eq!(seen, rows);
        assert_eq!(outputs.metrics.snapshot().rows_out, 10_000);
    }

    #[test]
    fn an_updates_before_and_after_rows_go_on_in_one_slice() {
        use crate::changelog::{updating_schema, RowKind};
        use datafusion::arrow::array::Int8Array;
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let mut outputs = outputs_to(tx);
        outputs.max_rows = 1;
        let data = Schema::new(vec![Field::new("n", DataType::Int64, false)]);
        let schema = updating_schema(&data, &["n".to_string()]);
        // +I 1, -U 1, +U 2, -D 2, -U 3, +U 4.
        let kinds = [
            RowKind::Insert,
            RowKind::UpdateBefore,
            RowKind::UpdateAfter,
            RowKind::Delete,
            RowKind::UpdateBefore,
            RowKind::UpdateAfter,
        ];
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![1, 1, 2, 2, 3, 4])),
                Arc::new(Int8Array::from_iter_values(kinds.iter().map(|k| k.byte()))),
            ],
        )
        .unwrap();
        let mut collector = Collector::default();
        collector.emit(batch);
        outputs.flush(&mut collector).unwrap();
        let mut sizes = Vec::new();
        while let Ok(Message::Batch(batch)) = rx.try_recv() {
            sizes.push(batch.num_rows());
        }
        assert_eq!(sizes, vec![1, 2, 1, 2]);
    }

    #[test]
    fn a_full_channel_holds_messages_in_order_until_delivered() {
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let mut outputs = outputs_to(tx);
        for wm in 1..=5 {
            outputs.send_port(0, Message::Watermark(wm)).unwrap();
        }
        let mut held = Vec::new();
        outputs.take_held(&mut held);
        assert_eq!(held.len(), 1);
        assert_eq!(held[0].messages.len(), 4, "one fit, four are held");
        let control = Control::new(false, false, 0);
        let mut wakes = control.wakes();
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            while let Some(message) = rx.blocking_recv() {
                if let Message::Watermark(wm) = message {
                    seen.push(wm);
                }
            }
            seen
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime
            .block_on(deliver(held, &control, &mut wakes))
            .unwrap();
        drop(outputs);
        assert_eq!(reader.join().unwrap(), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn delivering_to_a_full_channel_gives_up_when_the_job_is_cancelled() {
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let mut outputs = outputs_to(tx);
        outputs.send_port(0, Message::Watermark(1)).unwrap();
        outputs.send_port(0, Message::Watermark(2)).unwrap();
        let mut held = Vec::new();
        outputs.take_held(&mut held);
        let control = Control::new(false, false, 0);
        let mut wakes = control.wakes();
        let canceller = control.clone();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let result = runtime.block_on(async {
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                canceller.cancel_by_user();
            });
            deliver(held, &control, &mut wakes).await
        });
        assert!(matches!(result, Err(EngineError::Aborted)));
    }
}
