//! Watermark alignment: the job's bounded sources are read in step by event
//! time.
//!
//! In: each aligned source's watermark as it advances (and `release` when
//! it ends or fails). Out: whether a source is more than the maximum
//! drift ahead of the slowest aligned source, in which case it waits
//! before taking its next batch.
//!
//! Files and unpaced generators are read as fast as the job takes them, so
//! without this one of them can run far ahead of another in event time: a
//! join (or a union feeding a window) then buffers the fast side's rows
//! until the slow side's watermark catches up, which for two large files
//! over different periods can be the whole of one file. Flink offers the
//! same (`watermark alignment`, opt in per source); eddy aligns bounded
//! sources always, since waiting costs them nothing but time they would
//! spend buffering anyway, and leaves live sources (pipes, Kafka) out: they
//! neither wait nor hold the others back, as a quiet topic must not stop a
//! file. A waiting source still answers checkpoint, stop and cancel
//! requests. The slowest source never waits, so the job always moves.
//!
//! ```text
//!   source i waits while  watermark(i) > min(watermark(j), j aligned, j != i) + max drift
//! ```

use std::sync::atomic::{AtomicI64, Ordering};

use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// How far (event time) an aligned source may run ahead of the slowest.
pub const DEFAULT_MAX_DRIFT_MS: i64 = 5_000;

/// The watermarks of a job's aligned sources.
#[derive(Debug)]
pub(crate) struct SourceAlignment {
    watermarks: Vec<AtomicI64>,
    max_drift_ms: i64,
    /// Wakes the sources waiting while ahead when a watermark advances.
    advanced: tokio::sync::Notify,
}

impl SourceAlignment {
    /// Alignment of `sources` sources, each starting at no watermark.
    pub fn new(sources: usize, max_drift_ms: i64) -> Self {
        Self {
            watermarks: (0..sources)
                .map(|_| AtomicI64::new(WATERMARK_MIN))
                .collect(),
            max_drift_ms,
            advanced: tokio::sync::Notify::new(),
        }
    }

    /// Source `source`'s watermark is now `watermark`.
    pub fn advance(&self, source: usize, watermark: Timestamp) {
        if let Some(slot) = self.watermarks.get(source) {
            let before = slot.fetch_max(watermark, Ordering::AcqRel);
            if watermark > before {
                self.advanced.notify_waiters();
            }
        }
    }

    /// Source `source` no longer holds the others back (it ended or
    /// failed; a bounded source is never idle, it only waits for a read).
    pub fn release(&self, source: usize) {
        self.advance(source, WATERMARK_MAX);
    }

    /// Whether `source` is more than the maximum drift ahead of the
    /// slowest other source.
    pub fn ahead(&self, source: usize) -> bool {
        let Some(own) = self.watermarks.get(source) else {
            return false;
        };
        let own = own.load(Ordering::Acquire);
        let slowest = self
            .watermarks
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != source)
            .map(|(_, w)| w.load(Ordering::Acquire))
            .min()
            .unwrap_or(WATERMARK_MAX);
        own != WATERMARK_MIN && own > slowest.saturating_add(self.max_drift_ms)
    }

    /// Waits (without a worker) while `source` is ahead, until another
    /// source's watermark advances; returns at once when it is not ahead.
    /// The caller looks again: it may still be ahead.
    pub async fn wait_while_ahead(&self, source: usize) {
        let advanced = self.advanced.notified();
        tokio::pin!(advanced);
        // Registered before the look, so an advance right after it wakes.
        advanced.as_mut().enable();
        if self.ahead(source) {
            advanced.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_source_never_waits_and_a_released_one_holds_nobody() {
        let a = SourceAlignment::new(3, 1_000);
        assert!(!a.ahead(0), "no watermark yet: nothing to be ahead of");
        a.advance(0, 10_000);
        a.advance(1, 8_500);
        assert!(a.ahead(0), "source 2 has no watermark yet");
        a.advance(2, 9_500);
        assert!(!a.ahead(1), "the slowest never waits");
        assert!(a.ahead(0), "10 000 > 8 500 + 1 000");
        assert!(!a.ahead(2), "9 500 <= 8 500 + 1 000");
        a.advance(1, 9_000);
        assert!(!a.ahead(0), "10 000 <= 9 000 + 1 000");
        a.release(1);
        a.advance(0, 20_000);
        assert!(a.ahead(0), "source 2 at 9 500 still holds it");
        a.release(2);
        assert!(!a.ahead(0), "every other source released");
        futures::executor::block_on(a.wait_while_ahead(0));
    }

    #[test]
    fn a_waiting_source_wakes_when_the_slowest_advances() {
        let a = std::sync::Arc::new(SourceAlignment::new(2, 0));
        a.advance(0, 5_000);
        a.advance(1, 1_000);
        let slow = a.clone();
        let waker = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            slow.advance(1, 5_000);
        });
        let mut waits = 0;
        while a.ahead(0) {
            futures::executor::block_on(a.wait_while_ahead(0));
            waits += 1;
            assert!(waits < 100);
        }
        waker.join().unwrap();
        assert!(!a.ahead(0));
    }
}
