//! Window definitions and row-to-window assignment.
//!
//! Windows are aligned to the Unix epoch and half-open, `[start, end)`. A
//! tumbling window of width W holds a row at time t when
//! `start = t - (t mod W)`. A hopping window of width W and slide S exists for
//! every `start` that is a multiple of S; a row belongs to each window whose
//! `[start, start + W)` contains it (so to `ceil(W / S)` windows when S
//! divides W).
//!
//! A window value travels as a struct column `{start, end}` of millisecond
//! timestamps (see [`window_struct_type`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StructArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit};

/// The kind and size of a window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `width_ms`.
    Tumble {
        /// Window length.
        width_ms: i64,
    },
    /// Overlapping windows of `width_ms` starting every `slide_ms`.
    Hop {
        /// Distance between window starts.
        slide_ms: i64,
        /// Window length.
        width_ms: i64,
    },
}

impl WindowSpec {
    /// Window length.
    pub fn width_ms(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms } | WindowSpec::Hop { width_ms, .. } => width_ms,
        }
    }

    /// Distance between consecutive window starts.
    pub fn slide_ms(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms } => width_ms,
            WindowSpec::Hop { slide_ms, .. } => slide_ms,
        }
    }

    /// How many windows a row can belong to at most.
    pub fn windows_per_row(&self) -> i64 {
        let (w, s) = (self.width_ms(), self.slide_ms());
        (w + s - 1) / s
    }

    /// The latest window start containing `t`.
    pub fn last_start(&self, t: i64) -> i64 {
        t - t.rem_euclid(self.slide_ms())
    }

    /// Start of the `k`-th window (k = 0 is the latest) that may contain `t`;
    /// `None` when that window does not contain `t`.
    pub fn start_for(&self, t: i64, k: i64) -> Option<i64> {
        let start = self.last_start(t) - k * self.slide_ms();
        (start + self.width_ms() > t).then_some(start)
    }
}

impl std::fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowSpec::Tumble { width_ms } => write!(f, "tumble({width_ms}ms)"),
            WindowSpec::Hop { slide_ms, width_ms } => {
                write!(f, "hop(slide {slide_ms}ms, width {width_ms}ms)")
            }
        }
    }
}

/// The Arrow type of a window value: `Struct<start: Timestamp(ms), end: Timestamp(ms)>`.
pub fn window_struct_type() -> DataType {
    DataType::Struct(window_fields())
}

fn window_fields() -> Fields {
    Fields::from(vec![
        Field::new(
            "start",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
        Field::new(
            "end",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ])
}

/// A column of `rows` copies of the window `[start, end)`.
pub fn window_struct_array(start: i64, end: i64, rows: usize) -> ArrayRef {
    let starts: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![start; rows]));
    let ends: ArrayRef = Arc::new(TimestampMillisecondArray::from(vec![end; rows]));
    Arc::new(StructArray::new(window_fields(), vec![starts, ends], None))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(spec: WindowSpec, t: i64) -> Vec<i64> {
        (0..spec.windows_per_row())
            .filter_map(|k| spec.start_for(t, k))
            .collect()
    }

    #[test]
    fn tumble_assigns_one_window_half_open() {
        let spec = WindowSpec::Tumble { width_ms: 10 };
        assert_eq!(windows(spec, 0), vec![0]);
        assert_eq!(windows(spec, 9), vec![0]);
        assert_eq!(windows(spec, 10), vec![10]);
        assert_eq!(windows(spec, -1), vec![-10]);
    }

    #[test]
    fn hop_assigns_every_containing_window() {
        let spec = WindowSpec::Hop {
            slide_ms: 2,
            width_ms: 5,
        };
        // windows starting at multiples of 2 with start <= t < start + 5
        assert_eq!(windows(spec, 6), vec![6, 4, 2]);
        assert_eq!(windows(spec, 7), vec![6, 4]);
        let spec = WindowSpec::Hop {
            slide_ms: 1000,
            width_ms: 5000,
        };
        assert_eq!(windows(spec, 13_100).len(), 5);
    }
}
