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

    /// Sends what an operator emitted.
    pub fn flush(&self, collector: &mut Collector) -> Result<()> {
        for (port, batch) in collector.drain() {
            self.send_port(port, Message::Batch(batch))?;
        }
        Ok(())
    }
}
