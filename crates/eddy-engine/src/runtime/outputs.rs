//! The sending side of a node: per output port, its consumers. A consumer
//! is a bounded channel to another task, or the node chained after this
//! one ([`crate::chains`]), handed each message by a call.
//!
//! A send to a channel blocks while it is full (backpressure), but wakes up
//! regularly to notice a cancelled job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{SendTimeoutError, Sender, TrySendError};

use super::chain_link::Link;
use super::control::Control;
use crate::error::{EngineError, Result};
use crate::message::Message;
use crate::metrics::NodeMetrics;
use crate::operator::Collector;

/// How often a blocked send checks for cancellation.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// One consumer of an output port.
pub(crate) enum Target {
    /// Another task's input channel.
    Channel(Sender<Message>),
    /// The node chained after this one, in this task.
    Chained(Box<Link>),
}

impl Target {
    fn send(&mut self, control: &Control, message: Message) -> Result<()> {
        let sender = match self {
            Target::Chained(link) => return link.push(message),
            Target::Channel(sender) => sender,
        };
        let mut message = match sender.try_send(message) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Disconnected(_)) => return Err(EngineError::Aborted),
            Err(TrySendError::Full(message)) => message,
        };
        loop {
            if control.cancelled() {
                return Err(EngineError::Aborted);
            }
            match sender.send_timeout(message, POLL) {
                Ok(()) => return Ok(()),
                Err(SendTimeoutError::Disconnected(_)) => return Err(EngineError::Aborted),
                Err(SendTimeoutError::Timeout(back)) => message = back,
            }
        }
    }
}

/// The output ports of a node: per port, its consumers.
pub(crate) struct Outputs {
    pub ports: Vec<Vec<Target>>,
    pub metrics: Arc<NodeMetrics>,
    pub control: Arc<Control>,
    /// Larger batches go on in slices of this many rows.
    pub max_rows: usize,
}

impl Outputs {
    /// Sends `message` to every subscriber of `port`, counting batch rows.
    pub fn send_port(&mut self, port: usize, message: Message) -> Result<()> {
        let Some(subscribers) = self.ports.get_mut(port) else {
            return Ok(());
        };
        if let Message::Batch(batch) = &message {
            if !subscribers.is_empty() {
                self.metrics.add_rows_out(batch.num_rows());
            }
        }
        if let Some((last, rest)) = subscribers.split_last_mut() {
            for sub in rest {
                sub.send(&self.control, message.clone())?;
            }
            last.send(&self.control, message)?;
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
    /// slices of it (zero-copy), in order.
    pub fn flush(&mut self, collector: &mut Collector) -> Result<()> {
        for (port, batch) in collector.drain() {
            let rows = batch.num_rows();
            if rows <= self.max_rows.max(1) {
                self.send_port(port, Message::Batch(batch))?;
                continue;
            }
            let step = self.max_rows.max(1);
            for offset in (0..rows).step_by(step) {
                let slice = batch.slice(offset, step.min(rows - offset));
                self.send_port(port, Message::Batch(slice))?;
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

    #[test]
    fn a_large_emission_goes_on_in_slices_in_order() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut outputs = Outputs {
            ports: vec![vec![Target::Channel(tx)]],
            metrics: NodeMetrics::new_shared(1),
            control: Control::new(false, false, 0),
            max_rows: 4096,
        };
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
}
