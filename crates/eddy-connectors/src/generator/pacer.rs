//! Pacing a generated stream to the wall clock: a batch is handed on only
//! once the wall-clock time since the first batch has caught up with the
//! event time its latest row carries, so event time advances with the wall
//! clock (a live feed for demos, consoles and latency measurements).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use datafusion::arrow::array::{Array, Int64Array};
use datafusion::arrow::record_batch::RecordBatch;

/// Sleeps so that event time keeps pace with the wall clock.
#[derive(Debug)]
pub struct Pacer {
    time_column: usize,
    started: Instant,
    started_wall_ms: i64,
    origin: Option<i64>,
}

impl Pacer {
    /// A pacer reading event times (epoch ms) from column `time_column`.
    pub fn new(time_column: usize) -> Self {
        Self {
            time_column,
            started: Instant::now(),
            started_wall_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or_default(),
            origin: None,
        }
    }

    /// Once the first batch is paced: the event time that corresponds to
    /// the pacer's start, and that start on the wall clock (epoch ms). An
    /// event of time `t` is due at wall-clock `start + (t - origin)`.
    pub fn origin(&self) -> Option<(i64, i64)> {
        self.origin.map(|o| (o, self.started_wall_ms))
    }

    /// Waits until `batch`'s latest event time is due.
    pub fn wait(&mut self, batch: &RecordBatch) {
        let Some(times) = batch
            .columns()
            .get(self.time_column)
            .and_then(|c| c.as_any().downcast_ref::<Int64Array>())
        else {
            return;
        };
        let (Some(earliest), Some(latest)) =
            (times.iter().flatten().min(), times.iter().flatten().max())
        else {
            return;
        };
        if self.origin.is_none() {
            // The clock starts with the first batch (setting the generator
            // up can take seconds; those must not be paced away in a burst).
            self.started = Instant::now();
            self.started_wall_ms = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or_default();
        }
        let origin = *self.origin.get_or_insert(earliest);
        let due = Duration::from_millis(latest.saturating_sub(origin).max(0) as u64);
        if let Some(wait) = due.checked_sub(self.started.elapsed()) {
            std::thread::sleep(wait);
        }
    }
}
