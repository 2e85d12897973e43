//! The sending side of a node: one bounded channel per consumer input.
//!
//! A send blocks while the consumer's channel is full (backpressure), but
//! wakes up regularly to notice a cancelled job.

use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{SendTimeoutError, Sender, TrySendError};

use super::control::Control;
use crate::error::{EngineError, Result};
use crate::message::Message;
use crate::metrics::NodeMetrics;
use crate::operator::Collector;

/// How often a blocked send checks for cancellation.
pub(crate) const POLL: Duration = Duration::from_millis(50);

/// The output ports of a node: per port, one sender per subscribed input.
pub(crate) struct Outputs {
    pub ports: Vec<Vec<Sender<Message>>>,
    pub metrics: Arc<NodeMetrics>,
    pub control: Arc<Control>,
    /// Larger batches go on in slices of this many rows.
    pub max_rows: usize,
}

impl Outputs {
    fn send_one(&self, sender: &Sender<Message>, message: Message) -> Result<()> {
        let mut message = match sender.try_send(message) {
            Ok(()) => return Ok(()),
            Err(TrySendError::Disconnected(_)) => return Err(EngineError::Aborted),
            Err(TrySendError::Full(message)) => message,
        };
        loop {
            if self.control.cancelled() {
                return Err(EngineError::Aborted);
            }
            match sender.send_timeout(message, POLL) {
                Ok(()) => return Ok(()),
                Err(SendTimeoutError::Disconnected(_)) => return Err(EngineError::Aborted),
                Err(SendTimeoutError::Timeout(back)) => message = back,
            }
        }
    }

    /// Sends `message` to every subscriber of `port`, counting batch rows.
    pub fn send_port(&self, port: usize, message: Message) -> Result<()> {
        let Some(subscribers) = self.ports.get(port) else {
            return Ok(());
        };
        if let Message::Batch(batch) = &message {
            if !subscribers.is_empty() {
                self.metrics.add_rows_out(batch.num_rows());
            }
        }
        if let Some((last, rest)) = subscribers.split_last() {
            for sub in rest {
                self.send_one(sub, message.clone())?;
            }
            self.send_one(last, message)?;
        }
        Ok(())
    }

    /// Whether anything reads `port`.
    pub fn has_subscribers(&self, port: usize) -> bool {
        self.ports.get(port).is_some_and(|s| !s.is_empty())
    }

    /// Sends `message` on every port.
    pub fn send_all(&self, message: Message) -> Result<()> {
        for port in 0..self.ports.len() {
            self.send_port(port, message.clone())?;
        }
        Ok(())
    }

    /// Sends what an operator emitted, a batch larger than `max_rows` in
    /// slices of it (zero-copy), in order.
    pub fn flush(&self, collector: &mut Collector) -> Result<()> {
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
        let outputs = Outputs {
            ports: vec![vec![tx]],
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
