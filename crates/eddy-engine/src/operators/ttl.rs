//! State time-to-live in event time (`SET 'table.exec.state.ttl'`), as the
//! updating operators count it: a key no row touched while the watermark
//! advanced by more than the TTL is forgotten.
//!
//! In: the operator's watermarks. Out: when a sweep is due (every half TTL
//! of watermark, never at the end of input), the cutoff below which a key's
//! last touch makes it expire.
//!
//! ```
//! use eddy_engine::operators::ttl::TtlSweeps;
//!
//! let mut sweeps = TtlSweeps::new(Some(10));
//! assert_eq!(sweeps.due(100), Some(90)); // keys last touched before 90 go
//! assert_eq!(sweeps.due(103), None); // less than half a TTL later
//! assert_eq!(sweeps.due(105), Some(95));
//! ```

use crate::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};

/// When an operator sweeps its idle keys.
#[derive(Debug, Clone, Copy)]
pub struct TtlSweeps {
    ttl_ms: Option<i64>,
    last: Timestamp,
}

impl TtlSweeps {
    /// Sweeps for a TTL of `ttl_ms` (none: never).
    pub fn new(ttl_ms: Option<i64>) -> Self {
        Self {
            ttl_ms,
            last: WATERMARK_MIN,
        }
    }

    /// At watermark `watermark`: the cutoff if a sweep is due (keys last
    /// touched before it expire).
    pub fn due(&mut self, watermark: Timestamp) -> Option<Timestamp> {
        let ttl = self.ttl_ms?;
        if watermark == WATERMARK_MAX || watermark.saturating_sub(self.last) < (ttl / 2).max(1) {
            return None;
        }
        self.last = watermark;
        Some(watermark.saturating_sub(ttl))
    }

    /// Goes on from a restored watermark (the next sweep half a TTL on).
    pub fn resume(&mut self, watermark: Timestamp) {
        self.last = watermark;
    }
}
