//! A node chained after another ([`crate::chains`]): the node before it
//! hands it each message by a call instead of a channel send.
//!
//! ```text
//!  node before ─ Outputs::send_port ─> Link::push(message)
//!      Batch / Watermark / Idle:  stage.on_message (its one input)
//!      Barrier(n):                aligned on arrival ─> stage.checkpoint ─> Barrier(n) on
//!      End:                       stage.on_message, then stage.finish (its one input ended)
//! ```
//!
//! The link's errors and panics are its own node's: they are named for it
//! as they pass back up the chain, so the job's error says which node of a
//! task failed.

use std::time::Instant;

use super::control::{attributed, panicked};
use super::inputs::InputClock;
use super::stage::Stage;
use crate::error::Result;
use crate::message::Message;

/// A chained node with the clock of its one input.
pub(crate) struct Link {
    stage: Box<dyn Stage>,
    clock: InputClock,
}

impl Link {
    /// A node chained after another; `clock` is its input's (restored
    /// when resuming).
    pub fn new(stage: Box<dyn Stage>, clock: InputClock) -> Self {
        Self { stage, clock }
    }

    /// Handles one message of the node's input.
    pub fn push(&mut self, message: Message) -> Result<()> {
        let handled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.handle(message)));
        match handled {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(attributed(self.stage.name(), error)),
            Err(payload) => Err(panicked(self.stage.name(), payload)),
        }
    }

    fn handle(&mut self, message: Message) -> Result<()> {
        match message {
            Message::Barrier(barrier) => {
                self.stage.checkpoint(&self.clock, barrier)?;
            }
            message => {
                self.stage.on_message(&mut self.clock, 0, message)?;
                if self.clock.all_ended() {
                    self.stage.finish(&self.clock)?;
                }
            }
        }
        Ok(())
    }

    /// When this node's processing-time clock, or that of a node chained
    /// after it, is next due.
    pub fn next_tick(&self) -> Option<Instant> {
        self.stage.next_tick()
    }

    /// Takes out what this node, and the nodes chained after it, hold for
    /// full channels.
    pub fn take_held(&mut self, into: &mut Vec<super::outputs::Held>) {
        self.stage.take_held(into);
    }

    /// Runs the processing-time clocks that are due.
    pub fn tick(&mut self) -> Result<()> {
        self.stage
            .tick()
            .map_err(|error| attributed(self.stage.name(), error))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use tokio::sync::mpsc;

    use datafusion::arrow::array::{Array, Int64Array};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;

    use super::*;
    use crate::error::EngineError;
    use crate::message::Barrier;
    use crate::metrics::NodeMetrics;
    use crate::operator::{Collector, Operator};
    use crate::runtime::control::{Control, NodeContext, NodeEvent};
    use crate::runtime::operator_task::OperatorStage;
    use crate::runtime::outputs::{Outputs, Target};
    use crate::runtime::sink_task::SinkStage;
    use crate::sink::SinkWriter;
    use crate::time::WATERMARK_MAX;

    /// Passes rows on; a strict one fails on a negative value and panics
    /// on 13.
    struct PassOn {
        strict: bool,
    }

    impl Operator for PassOn {
        fn on_batch(&mut self, _: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
            let n = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            if self.strict && n.values().contains(&13) {
                panic!("thirteen");
            }
            if self.strict && n.values().iter().any(|v| *v < 0) {
                return Err(EngineError::State("a negative value".into()));
            }
            out.emit(batch);
            Ok(())
        }
    }

    /// Keeps the rows it is given.
    struct Kept(Arc<Mutex<Vec<i64>>>, Arc<Mutex<bool>>);

    impl SinkWriter for Kept {
        fn write(&mut self, batch: &RecordBatch) -> Result<()> {
            let n = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            self.0.lock().unwrap().extend(n.values().iter());
            Ok(())
        }
        fn finish(&mut self) -> Result<()> {
            *self.1.lock().unwrap() = true;
            Ok(())
        }
    }

    fn rows(values: &[i64]) -> Message {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        Message::Batch(
            RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from(values.to_vec()))])
                .unwrap(),
        )
    }

    struct Job {
        control: Arc<Control>,
        events: mpsc::UnboundedSender<NodeEvent>,
        reported: mpsc::UnboundedReceiver<NodeEvent>,
    }

    impl Job {
        fn new(checkpointing: bool) -> Self {
            let (events, reported) = mpsc::unbounded_channel();
            Self {
                control: Control::new(checkpointing, false, 0),
                events,
                reported,
            }
        }

        fn ctx(&self, id: usize, name: &str) -> NodeContext {
            NodeContext {
                id,
                name: name.into(),
                metrics: NodeMetrics::new_shared(1),
                control: self.control.clone(),
                events: self.events.clone(),
                memory: crate::memory::MemoryReservation::new(Vec::new(), name),
                spill: Arc::new(crate::spill::SpillSpace::new(Default::default())),
            }
        }

        fn outputs(&self, ctx: &NodeContext, to: Target) -> Outputs {
            Outputs {
                ports: vec![vec![to]],
                metrics: ctx.metrics.clone(),
                max_rows: 8192,
            }
        }

        /// An operator node `id` chained after another, sending to `to`.
        fn pass_on(&self, id: usize, to: Target) -> (Link, Arc<NodeMetrics>) {
            self.operator(id, to, false)
        }

        fn operator(&self, id: usize, to: Target, strict: bool) -> (Link, Arc<NodeMetrics>) {
            let ctx = self.ctx(id, &format!("pass_on#{id}"));
            let metrics = ctx.metrics.clone();
            let outputs = self.outputs(&ctx, to);
            let stage = OperatorStage::new(
                ctx,
                Box::new(PassOn { strict }),
                Vec::new(),
                i64::MIN,
                outputs,
            );
            (Link::new(Box::new(stage), InputClock::new(1)), metrics)
        }
    }

    #[test]
    fn a_chained_operator_passes_everything_on_and_reports_under_its_own_id() {
        let job = Job::new(true);
        let (tx, mut rx) = tokio::sync::mpsc::channel(16);
        let (mut link, metrics) = job.pass_on(3, Target::channel(tx));
        link.push(rows(&[1, 2, 3])).unwrap();
        link.push(Message::Watermark(10)).unwrap();
        link.push(Message::Barrier(Barrier {
            checkpoint: 1,
            stop: false,
        }))
        .unwrap();
        link.push(Message::End).unwrap();
        let sent: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|m| match m {
                Message::Batch(b) => format!("batch {}", b.num_rows()),
                Message::Late(b) => format!("late {}", b.num_rows()),
                Message::Watermark(w) if w == WATERMARK_MAX => "watermark max".into(),
                Message::Watermark(w) => format!("watermark {w}"),
                Message::Barrier(b) => format!("barrier {}", b.checkpoint),
                Message::Idle => "idle".into(),
                Message::End => "end".into(),
            })
            .collect();
        assert_eq!(
            sent,
            [
                "batch 3",
                "watermark 10",
                "barrier 1",
                "watermark max",
                "end"
            ]
        );
        let mut job = job;
        let events: Vec<String> = std::iter::from_fn(|| job.reported.try_recv().ok())
            .map(|e| match e {
                NodeEvent::Snapshot {
                    node, checkpoint, ..
                } => format!("snapshot {node} {checkpoint}"),
                NodeEvent::Finished { node, data } => {
                    assert!(data.runtime.finished);
                    format!("finished {node}")
                }
                NodeEvent::Stopped => "stopped".into(),
            })
            .collect();
        assert_eq!(events, ["snapshot 3 1", "finished 3"]);
        assert_eq!(metrics.snapshot().rows_out, 3);
    }

    #[test]
    fn a_chain_of_an_operator_and_a_sink_writes_and_finishes_by_call() {
        let job = Job::new(false);
        let written = Arc::new(Mutex::new(Vec::new()));
        let finished = Arc::new(Mutex::new(false));
        let sink_ctx = job.ctx(5, "out");
        let sink = Link::new(
            Box::new(SinkStage::new(
                sink_ctx,
                Box::new(Kept(written.clone(), finished.clone())),
            )),
            InputClock::new(1),
        );
        let (mut link, _) = job.pass_on(4, Target::Chained(Box::new(sink)));
        link.push(rows(&[7, 8])).unwrap();
        link.push(rows(&[9])).unwrap();
        assert_eq!(*written.lock().unwrap(), [7, 8, 9]);
        assert!(!*finished.lock().unwrap());
        link.push(Message::End).unwrap();
        assert!(*finished.lock().unwrap());
        let mut job = job;
        let finished_nodes: Vec<usize> = std::iter::from_fn(|| job.reported.try_recv().ok())
            .filter_map(|e| match e {
                NodeEvent::Finished { node, .. } => Some(node),
                _ => None,
            })
            .collect();
        // The sink finishes inside the operator's End, before it.
        assert_eq!(finished_nodes, [5, 4]);
    }

    #[test]
    fn an_error_or_a_panic_in_a_chained_node_is_named_for_it() {
        let job = Job::new(false);
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let (inner, _) = job.operator(2, Target::channel(tx), true);
        // Node 1 hands on to node 2; node 2 fails, and the error passes
        // back through node 1 named for node 2.
        let (mut link, _) = job.pass_on(1, Target::Chained(Box::new(inner)));
        let error = link.push(rows(&[-1])).unwrap_err();
        assert!(
            matches!(&error, EngineError::Operator { operator, message }
                if operator == "pass_on#2" && message.contains("a negative value")),
            "{error}"
        );
        let (tx, _rx) = tokio::sync::mpsc::channel(16);
        let (inner, _) = job.operator(2, Target::channel(tx), true);
        let (mut link, _) = job.pass_on(1, Target::Chained(Box::new(inner)));
        let error = link.push(rows(&[13])).unwrap_err().to_string();
        assert!(
            error.starts_with("pass_on#2: internal error (please report): thirteen"),
            "{error}"
        );
    }
}
