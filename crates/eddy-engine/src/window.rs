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
//! An offset (Flink's fourth window argument) shifts every window start
//! by that much from the epoch grid: tumbling windows of 5 s offset 1 s are
//! `[1 s, 6 s)`, `[6 s, 11 s)`, ...
//!
//! A window value travels as a struct column `{start, end}` of millisecond
//! timestamps (see [`window_struct_type`]).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StructArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit};

/// The kind and size of a window.
///
/// `offset_ms` shifts where windows start (Flink's window offset): with
/// offset o, windows start at o plus a multiple of the width (tumble), the
/// slide (hop) or the max size (cumulate) instead of at multiples of them.
/// 0 aligns them to the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSpec {
    /// Fixed, non-overlapping windows of `width_ms`.
    Tumble {
        /// Window length.
        width_ms: i64,
        /// Where windows start, past a multiple of the width.
        offset_ms: i64,
    },
    /// Overlapping windows of `width_ms` starting every `slide_ms`.
    Hop {
        /// Distance between window starts.
        slide_ms: i64,
        /// Window length.
        width_ms: i64,
        /// Where windows start, past a multiple of the slide.
        offset_ms: i64,
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
        /// Where windows start, past a multiple of the max size.
        offset_ms: i64,
    },
}

impl WindowSpec {
    /// Epoch-aligned tumbling windows of `width_ms`.
    pub fn tumble(width_ms: i64) -> Self {
        WindowSpec::Tumble {
            width_ms,
            offset_ms: 0,
        }
    }

    /// Epoch-aligned hopping windows.
    pub fn hop(slide_ms: i64, width_ms: i64) -> Self {
        WindowSpec::Hop {
            slide_ms,
            width_ms,
            offset_ms: 0,
        }
    }

    /// Epoch-aligned cumulating windows.
    pub fn cumulate(step_ms: i64, max_ms: i64) -> Self {
        WindowSpec::Cumulate {
            step_ms,
            max_ms,
            offset_ms: 0,
        }
    }

    /// The same windows shifted by `offset_ms`.
    pub fn with_offset(self, offset: i64) -> Self {
        match self {
            WindowSpec::Tumble { width_ms, .. } => WindowSpec::Tumble {
                width_ms,
                offset_ms: offset,
            },
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => WindowSpec::Hop {
                slide_ms,
                width_ms,
                offset_ms: offset,
            },
            WindowSpec::Cumulate {
                step_ms, max_ms, ..
            } => WindowSpec::Cumulate {
                step_ms,
                max_ms,
                offset_ms: offset,
            },
        }
    }

    /// The windows' offset from the epoch.
    pub fn offset_ms(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { offset_ms, .. }
            | WindowSpec::Hop { offset_ms, .. }
            | WindowSpec::Cumulate { offset_ms, .. } => offset_ms,
        }
    }

    /// The length of every window, when they all have one (not cumulate's).
    pub fn width_ms(&self) -> Option<i64> {
        match *self {
            WindowSpec::Tumble { width_ms, .. } | WindowSpec::Hop { width_ms, .. } => {
                Some(width_ms)
            }
            WindowSpec::Cumulate { .. } => None,
        }
    }

    /// How many windows a row can belong to at most.
    pub fn windows_per_row(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { .. } => 1,
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => (width_ms + slide_ms - 1) / slide_ms,
            WindowSpec::Cumulate {
                step_ms, max_ms, ..
            } => max_ms / step_ms,
        }
    }

    /// The start at or before `t` of a grid of `step` shifted by the offset.
    fn floor(&self, t: i64, step: i64) -> i64 {
        t - t.wrapping_sub(self.offset_ms()).rem_euclid(step)
    }

    /// End of the `k`-th window (k = 0 first) that may contain `t`; `None`
    /// when that window does not contain `t`. A window is identified by its
    /// end: no two windows of one spec share it.
    pub fn end_for(&self, t: i64, k: i64) -> Option<i64> {
        match *self {
            WindowSpec::Tumble { width_ms, .. } => {
                (k == 0).then(|| self.floor(t, width_ms).saturating_add(width_ms))
            }
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => {
                let start = self.floor(t, slide_ms) - k * slide_ms;
                let end = start.saturating_add(width_ms);
                (end > t).then_some(end)
            }
            WindowSpec::Cumulate {
                step_ms, max_ms, ..
            } => {
                let end = self.floor(t, max_ms).saturating_add(max_ms - k * step_ms);
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
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => Some(gcd(slide_ms, width_ms)).filter(|_| width_ms > slide_ms),
            WindowSpec::Cumulate {
                step_ms, max_ms, ..
            } => Some(step_ms).filter(|_| max_ms > step_ms),
        }
    }

    /// The slices of [`Self::slice_ms`] as tumbling windows (same offset).
    pub fn slices(&self) -> Option<WindowSpec> {
        self.slice_ms()
            .map(|width| WindowSpec::tumble(width).with_offset(self.offset_ms()))
    }

    /// The first window end at or after `t` (window ends are evenly
    /// spaced: by the width, the slide, or the step).
    pub fn first_end_at_or_after(&self, t: i64) -> i64 {
        let (step, phase) = match *self {
            WindowSpec::Tumble { width_ms, .. } => (width_ms, 0),
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => (slide_ms, width_ms.rem_euclid(slide_ms)),
            WindowSpec::Cumulate { step_ms, .. } => (step_ms, 0),
        };
        let phase = phase.wrapping_add(self.offset_ms());
        t.saturating_add(phase.wrapping_sub(t).rem_euclid(step))
    }

    /// The distance from one window end to the next.
    pub fn end_step_ms(&self) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms, .. } => width_ms,
            WindowSpec::Hop { slide_ms, .. } => slide_ms,
            WindowSpec::Cumulate { step_ms, .. } => step_ms,
        }
    }

    /// Start of the window that ends at `end`.
    pub fn start_of(&self, end: i64) -> i64 {
        match *self {
            WindowSpec::Tumble { width_ms, .. } | WindowSpec::Hop { width_ms, .. } => {
                end.saturating_sub(width_ms)
            }
            WindowSpec::Cumulate { max_ms, .. } => self.floor(end.saturating_sub(1), max_ms),
        }
    }
}

impl std::fmt::Display for WindowSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WindowSpec::Tumble { width_ms, .. } => write!(f, "tumble({width_ms}ms")?,
            WindowSpec::Hop {
                slide_ms, width_ms, ..
            } => write!(f, "hop(slide {slide_ms}ms, width {width_ms}ms")?,
            WindowSpec::Cumulate {
                step_ms, max_ms, ..
            } => write!(f, "cumulate(step {step_ms}ms, max {max_ms}ms")?,
        }
        match self.offset_ms() {
            0 => write!(f, ")"),
            offset => write!(f, ", offset {offset}ms)"),
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
        let hop = WindowSpec::hop(3, 5);
        assert_eq!(hop.slice_ms(), Some(1));
        // hop ends are 5 + 3k: ..., -1, 2, 5, 8, 11, ...
        assert_eq!(hop.first_end_at_or_after(6), 8);
        assert_eq!(hop.first_end_at_or_after(8), 8);
        assert_eq!(hop.first_end_at_or_after(0), 2);
        assert_eq!(hop.first_end_at_or_after(-2), -1);
        let hop = WindowSpec::hop(2, 6);
        assert_eq!(hop.slice_ms(), Some(2));
        let cumulate = WindowSpec::cumulate(2, 6);
        assert_eq!(cumulate.slice_ms(), Some(2));
        assert_eq!(cumulate.first_end_at_or_after(3), 4);
        assert_eq!(WindowSpec::tumble(5).slice_ms(), None);
        assert_eq!(WindowSpec::hop(5, 5).slice_ms(), None);
    }

    #[test]
    fn cumulate_assigns_every_growing_window() {
        let spec = WindowSpec::cumulate(2, 6);
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
    fn offsets_shift_every_window() {
        let spec = WindowSpec::tumble(5).with_offset(1);
        assert_eq!(windows(spec, 0), vec![-4]);
        assert_eq!(windows(spec, 1), vec![1]);
        assert_eq!(windows(spec, 5), vec![1]);
        assert_eq!(windows(spec, 6), vec![6]);
        assert_eq!(spec.first_end_at_or_after(2), 6);
        assert_eq!(spec.to_string(), "tumble(5ms, offset 1ms)");
        // A negative offset is the same grid as its remainder.
        assert_eq!(windows(WindowSpec::tumble(5).with_offset(-4), 3), vec![1]);

        let hop = WindowSpec::hop(5, 10).with_offset(1);
        assert_eq!(windows(hop, 6), vec![6, 1]);
        assert_eq!(windows(hop, 5), vec![1, -4]);
        assert_eq!(hop.first_end_at_or_after(7), 11);
        assert_eq!(hop.slices(), Some(WindowSpec::tumble(5).with_offset(1)));

        let cumulate = WindowSpec::cumulate(5, 10).with_offset(1);
        let ends: Vec<i64> = (0..cumulate.windows_per_row())
            .filter_map(|k| cumulate.end_for(3, k))
            .collect();
        assert_eq!(ends, vec![11, 6]);
        assert_eq!(cumulate.start_of(6), 1);
        assert_eq!(cumulate.start_of(11), 1);
        assert_eq!(cumulate.start_of(16), 11);
        assert_eq!(cumulate.first_end_at_or_after(7), 11);
    }

    #[test]
    fn tumble_assigns_one_window_half_open() {
        let spec = WindowSpec::tumble(10);
        assert_eq!(windows(spec, 0), vec![0]);
        assert_eq!(windows(spec, 9), vec![0]);
        assert_eq!(windows(spec, 10), vec![10]);
        assert_eq!(windows(spec, -1), vec![-10]);
    }

    #[test]
    fn hop_assigns_every_containing_window() {
        let spec = WindowSpec::hop(2, 5);
        // windows starting at multiples of 2 with start <= t < start + 5
        assert_eq!(windows(spec, 6), vec![6, 4, 2]);
        assert_eq!(windows(spec, 7), vec![6, 4]);
        let spec = WindowSpec::hop(1000, 5000);
        assert_eq!(windows(spec, 13_100).len(), 5);
    }
}
