//! Window definitions and row-to-window assignment.
//!
//! Windows are aligned to the Unix epoch and half-open, `[start, end)`. A
//! tumbling window of width W holds a row at time t when
//! `start = t - (t mod W)`. A hopping window of width W and slide S exists for
//! every `start` that is a multiple of S; a row belongs to each window whose
//! `[start, start + W)` contains it (so to `ceil(W / S)` windows when S
//! divides W).
//!
//! A cumulating window of step S and max size M starts every M and has
//! windows ending every S up to M after that start; a row belongs to each
//! one whose end is after it (so to up to `M / S` windows). Session windows
//! depend on the data and live in `operators::session_aggregate`.
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
    /// Growing windows (Flink's CUMULATE): every `max_ms` a new start, and
    /// from it windows ending every `step_ms` up to `max_ms` long, so
    /// `[s, s + step)`, `[s, s + 2 step)`, ... `[s, s + max)`. `step_ms`
    /// divides `max_ms`.
    Cumulate {
        /// Distance between window ends.
        step_ms: i64,
        /// Length of the largest window (and distance between starts).
        max_ms: i64,
    },
}

impl WindowSpec {
    /// How many windows a row can belong to at most.
    pub fn windows_per_row(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { .. } => 1,
            WindowSpec::Hop { slide_ms, width_ms } => (width_ms + slide_ms - 1) / slide_ms,
            WindowSpec::Cumulate { step_ms, max_ms } => max_ms / step_ms,
        }
    }

    /// End of the `k`-th window (k = 0 first) that may contain `t`; `None`
    /// when that window does not contain `t`. A window is identified by its
    /// end: no two windows of one spec share it.
    pub fn end_for(&self, t: i64, k: i64) -> Option<i64> {
        match *self {
            WindowSpec::Tumble { width_ms } => {
                (k == 0).then(|| (t - t.rem_euclid(width_ms)).saturating_add(width_ms))
            }
            WindowSpec::Hop { slide_ms, width_ms } => {
                let start = t - t.rem_euclid(slide_ms) - k * slide_ms;
                let end = start.saturating_add(width_ms);
                (end > t).then_some(end)
            }
            WindowSpec::Cumulate { step_ms, max_ms } => {
                let end = (t - t.rem_euclid(max_ms)).saturating_add(max_ms - k * step_ms);
                (end > t).then_some(end)
            }
        }
    }

    /// Width of the slices a row is aggregated into once, when windows
    /// overlap (hop: the greatest common divisor of slide and width;
    /// cumulate: the step): every window is a run of whole slices, and its
    /// result merges theirs. `None` for tumbling windows.
    pub fn slice_ms(&self) -> Option<i64> {
        match *self {
            WindowSpec::Tumble { .. } => None,
            WindowSpec::Hop { slide_ms, width_ms } => {
                Some(gcd(slide_ms, width_ms)).filter(|_| width_ms > slide_ms)
            }
            WindowSpec::Cumulate { step_ms, max_ms } => Some(step_ms).filter(|_| max_ms > step_ms),
        }
    }

    /// The first window end at or after `t` (window ends are evenly
    /// spaced: by the width, the slide, or the step).
    pub fn first_end_at_or_after(&self, t: i64) -> i64 {
        let (step, phase) = match *self {
            WindowSpec::Tumble { width_ms } => (width_ms, 0),
            WindowSpec::Hop { slide_ms, width_ms } => (slide_ms, width_ms.rem_euclid(slide_ms)),
            WindowSpec::Cumulate { step_ms, .. } => (step_ms, 0),
        };
        t.saturating_add((phase - t).rem_euclid(step))
    }

    /// The distance from one window end to the next.
    pub fn end_step_ms(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms } => width_ms,
            WindowSpec::Hop { slide_ms, .. } => slide_ms,
            WindowSpec::Cumulate { step_ms, .. } => step_ms,
        }
    }

    /// Start of the window that ends at `end`.
    pub fn start_of(&self, end: i64) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms } | WindowSpec::Hop { width_ms, .. } => {
                end.saturating_sub(width_ms)
            }
            WindowSpec::Cumulate { max_ms, .. } => {
                let last = end.saturating_sub(1);
                last - last.rem_euclid(max_ms)
            }
        }
    }
}

impl std::fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowSpec::Tumble { width_ms } => write!(f, "tumble({width_ms}ms)"),
            WindowSpec::Hop { slide_ms, width_ms } => {
                write!(f, "hop(slide {slide_ms}ms, width {width_ms}ms)")
            }
            WindowSpec::Cumulate { step_ms, max_ms } => {
                write!(f, "cumulate(step {step_ms}ms, max {max_ms}ms)")
            }
        }
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
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

/// A column of windows `[starts[i], ends[i])`.
pub fn window_struct_column(starts: Vec<i64>, ends: Vec<i64>) -> ArrayRef {
    let starts: ArrayRef = Arc::new(TimestampMillisecondArray::from(starts));
    let ends: ArrayRef = Arc::new(TimestampMillisecondArray::from(ends));
    Arc::new(StructArray::new(window_fields(), vec![starts, ends], None))
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

    /// Starts of the windows holding `t`, latest first.
    fn windows(spec: WindowSpec, t: i64) -> Vec<i64> {
        (0..spec.windows_per_row())
            .filter_map(|k| spec.end_for(t, k))
            .map(|end| spec.start_of(end))
            .collect()
    }

    #[test]
    fn slices_and_window_ends() {
        let hop = WindowSpec::Hop {
            slide_ms: 3,
            width_ms: 5,
        };
        assert_eq!(hop.slice_ms(), Some(1));
        // hop ends are 5 + 3k: ..., -1, 2, 5, 8, 11, ...
        assert_eq!(hop.first_end_at_or_after(6), 8);
        assert_eq!(hop.first_end_at_or_after(8), 8);
        assert_eq!(hop.first_end_at_or_after(0), 2);
        assert_eq!(hop.first_end_at_or_after(-2), -1);
        let hop = WindowSpec::Hop {
            slide_ms: 2,
            width_ms: 6,
        };
        assert_eq!(hop.slice_ms(), Some(2));
        let cumulate = WindowSpec::Cumulate {
            step_ms: 2,
            max_ms: 6,
        };
        assert_eq!(cumulate.slice_ms(), Some(2));
        assert_eq!(cumulate.first_end_at_or_after(3), 4);
        assert_eq!(WindowSpec::Tumble { width_ms: 5 }.slice_ms(), None);
        assert_eq!(
            WindowSpec::Hop {
                slide_ms: 5,
                width_ms: 5
            }
            .slice_ms(),
            None
        );
    }

    #[test]
    fn cumulate_assigns_every_growing_window() {
        let spec = WindowSpec::Cumulate {
            step_ms: 2,
            max_ms: 6,
        };
        let ends = |t| -> Vec<i64> {
            (0..spec.windows_per_row())
                .filter_map(|k| spec.end_for(t, k))
                .collect()
        };
        // windows [0,2) [0,4) [0,6), then [6,8) ...
        assert_eq!(ends(0), vec![6, 4, 2]);
        assert_eq!(ends(3), vec![6, 4]);
        assert_eq!(ends(5), vec![6]);
        assert_eq!(ends(6), vec![12, 10, 8]);
        assert_eq!(ends(-1), vec![0]);
        assert_eq!(spec.start_of(4), 0);
        assert_eq!(spec.start_of(6), 0);
        assert_eq!(spec.start_of(8), 6);
        assert_eq!(spec.start_of(0), -6);
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
