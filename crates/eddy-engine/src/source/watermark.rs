//! Per-row lateness in source order, and the watermark it implies.
//!
//! In: event times of consecutive batches. Out: which rows are on time or
//! late (and the watermark each late row was judged against); the
//! watermark `max event time seen - bound`. Judgement never depends on
//! batch boundaries.

use datafusion::arrow::array::{Array, BooleanArray, BooleanBufferBuilder, Int64Array};
use datafusion::arrow::buffer::BooleanBuffer;

use super::layout::EventTimeSpec;
use crate::time::{Timestamp, WATERMARK_MIN};

/// Splits one batch into on-time and late rows, in row order.
#[derive(Debug, Clone, Copy)]
pub struct WatermarkTracker {
    spec: EventTimeSpec,
    max_seen: Timestamp,
}

/// Result of judging one batch.
#[derive(Debug)]
pub struct Judged {
    /// true for rows that go on (not late, event time present).
    pub on_time: BooleanArray,
    /// true for late rows.
    pub late: BooleanArray,
    /// Watermark each late row was judged against (same length as the batch;
    /// meaningful only where `late`).
    pub watermark_ms: Vec<i64>,
    /// Rows whose event time is NULL (neither on time nor late).
    pub null_time_rows: Vec<usize>,
    /// Rows whose event time is more than `max_future_skew` ahead of the
    /// largest event time seen before them, with how far ahead (ms); like
    /// NULL-time rows they are neither on time nor late, and do not move
    /// the watermark.
    pub future_rows: Vec<(usize, i64)>,
    /// Rows whose event time lies outside [`EVENT_TIME_RANGE`]; neither on
    /// time nor late.
    pub out_of_range_rows: Vec<usize>,
}

/// Event times eddy accepts, in epoch milliseconds: years 0000 to 9999.
/// Outside it, window and lateness arithmetic could overflow.
pub const EVENT_TIME_RANGE: std::ops::RangeInclusive<i64> =
    -62_167_219_200_000..=253_402_300_799_999;

impl WatermarkTracker {
    /// A tracker that has seen nothing yet.
    pub fn new(spec: EventTimeSpec) -> Self {
        Self {
            spec,
            max_seen: WATERMARK_MIN,
        }
    }

    /// A tracker that has already seen rows up to `max_seen` (a resumed job).
    pub fn resumed(spec: EventTimeSpec, max_seen: Timestamp) -> Self {
        Self { spec, max_seen }
    }

    /// The largest event time seen so far.
    pub fn max_seen(&self) -> Timestamp {
        self.max_seen
    }

    /// The current watermark: max event time seen - bound.
    pub fn watermark(&self) -> Timestamp {
        if self.max_seen == WATERMARK_MIN {
            WATERMARK_MIN
        } else {
            self.max_seen.saturating_sub(self.spec.bound_ms)
        }
    }

    /// Judges each row of `times` in order: row i is late when its time is
    /// below (max of rows 0..i-1) - bound - allowed_lateness.
    pub fn judge(&mut self, times: &Int64Array) -> Judged {
        self.judge_above(times, WATERMARK_MIN)
    }

    /// Like [`WatermarkTracker::judge`], against `max(own watermark,
    /// floor)`: a split of a partitioned source judges its rows against the
    /// source's watermark already sent too, so a partition back from idle
    /// never slips rows behind windows that have fired.
    pub fn judge_above(&mut self, times: &Int64Array, floor: Timestamp) -> Judged {
        if times.null_count() == 0 {
            if let Some(judged) = self.judge_all_on_time(times.values(), floor) {
                return judged;
            }
        }
        self.judge_each(times, floor)
    }

    /// The common batch in one tight pass: when every row is in range, not
    /// too far ahead and on time, the verdict is the same for all and is
    /// built whole. `None`, with nothing changed, as soon as a row is
    /// anything else: [`Self::judge_each`] then judges the batch row by row.
    fn judge_all_on_time(&mut self, times: &[i64], floor: Timestamp) -> Option<Judged> {
        let mut max_seen = self.max_seen;
        for &t in times {
            if !EVENT_TIME_RANGE.contains(&t)
                || self.ahead_by(t, max_seen).is_some()
                || self.is_late(t, self.against(max_seen, floor))
            {
                return None;
            }
            max_seen = max_seen.max(t);
        }
        self.max_seen = max_seen;
        let n = times.len();
        Some(Judged {
            on_time: BooleanArray::new(BooleanBuffer::new_set(n), None),
            late: BooleanArray::new(BooleanBuffer::new_unset(n), None),
            watermark_ms: vec![0; n],
            null_time_rows: Vec::new(),
            future_rows: Vec::new(),
            out_of_range_rows: Vec::new(),
        })
    }

    /// How far `t` is ahead of `max_seen`, when the skew guard refuses it.
    fn ahead_by(&self, t: Timestamp, max_seen: Timestamp) -> Option<i64> {
        let skew = self.spec.max_future_skew_ms?;
        let ahead = t.saturating_sub(max_seen);
        (max_seen != WATERMARK_MIN && ahead > skew).then_some(ahead)
    }

    /// The watermark a row is judged against after `max_seen`: its own,
    /// or `floor` when that is higher.
    fn against(&self, max_seen: Timestamp, floor: Timestamp) -> Timestamp {
        let own = if max_seen == WATERMARK_MIN {
            WATERMARK_MIN
        } else {
            max_seen.saturating_sub(self.spec.bound_ms)
        };
        own.max(floor)
    }

    /// Whether a row at `t` is late against the watermark `against`.
    fn is_late(&self, t: Timestamp, against: Timestamp) -> bool {
        against != WATERMARK_MIN && t < against.saturating_sub(self.spec.allowed_lateness_ms)
    }

    /// [`Self::judge_above`] row by row, whatever the rows are.
    fn judge_each(&mut self, times: &Int64Array, floor: Timestamp) -> Judged {
        let n = times.len();
        let mut on_time = BooleanBufferBuilder::new(n);
        let mut late = BooleanBufferBuilder::new(n);
        let mut watermark_ms = vec![0i64; n];
        let mut null_time_rows = Vec::new();
        let mut future_rows = Vec::new();
        let mut out_of_range_rows = Vec::new();
        let mut max_seen = self.max_seen;
        for i in 0..n {
            if times.is_null(i) {
                on_time.append(false);
                late.append(false);
                null_time_rows.push(i);
                continue;
            }
            let t = times.value(i);
            if !EVENT_TIME_RANGE.contains(&t) {
                on_time.append(false);
                late.append(false);
                out_of_range_rows.push(i);
                continue;
            }
            if let Some(ahead) = self.ahead_by(t, max_seen) {
                on_time.append(false);
                late.append(false);
                future_rows.push((i, ahead));
                continue;
            }
            let against = self.against(max_seen, floor);
            let is_late = self.is_late(t, against);
            if is_late {
                watermark_ms[i] = against;
            } else if t > max_seen {
                max_seen = t;
            }
            on_time.append(!is_late);
            late.append(is_late);
        }
        self.max_seen = max_seen;
        Judged {
            on_time: BooleanArray::new(on_time.finish(), None),
            late: BooleanArray::new(late.finish(), None),
            watermark_ms,
            null_time_rows,
            future_rows,
            out_of_range_rows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(bound: i64, lateness: i64) -> WatermarkTracker {
        WatermarkTracker::new(EventTimeSpec {
            column: 0,
            bound_ms: bound,
            allowed_lateness_ms: lateness,
            max_future_skew_ms: None,
            late_rows: Default::default(),
        })
    }

    #[test]
    fn a_row_too_far_ahead_neither_moves_the_watermark_nor_makes_others_late() {
        let mut t = WatermarkTracker::new(EventTimeSpec {
            column: 0,
            bound_ms: 10,
            allowed_lateness_ms: 0,
            max_future_skew_ms: Some(1_000),
            late_rows: Default::default(),
        });
        let j = t.judge(&Int64Array::from(vec![
            5_000, 6_000, 1_000_000, 6_001, 7_000,
        ]));
        assert_eq!(j.future_rows, vec![(2, 994_000)]);
        assert_eq!(late_rows(&j), Vec::<usize>::new());
        assert!(!j.on_time.value(2));
        assert_eq!(t.max_seen(), 7_000);
        // Exactly the skew ahead is still accepted.
        let j = t.judge(&Int64Array::from(vec![8_000, 9_001]));
        assert_eq!(j.future_rows, vec![(1, 1_001)]);
    }

    fn late_rows(judged: &Judged) -> Vec<usize> {
        (0..judged.late.len())
            .filter(|&i| judged.late.value(i))
            .collect()
    }

    #[test]
    fn lateness_edges_without_allowed_lateness() {
        let mut t = tracker(2000, 0);
        // max 10_000 -> rows below 8_000 are late; exactly 8_000 is on time.
        let j = t.judge(&Int64Array::from(vec![10_000, 8_000, 7_999]));
        assert_eq!(late_rows(&j), vec![2]);
        assert_eq!(j.watermark_ms[2], 8_000);
        assert_eq!(t.watermark(), 8_000);
    }

    #[test]
    fn lateness_edges_with_allowed_lateness() {
        let mut t = tracker(2000, 2000);
        let j = t.judge(&Int64Array::from(vec![10_000, 6_000, 5_999, 12_000, 7_999]));
        assert_eq!(late_rows(&j), vec![2, 4]);
        assert_eq!(j.watermark_ms[2], 8_000);
        assert_eq!(j.watermark_ms[4], 10_000);
    }

    #[test]
    fn a_floor_above_the_own_watermark_makes_rows_behind_it_late() {
        let mut t = tracker(2000, 1000);
        // Own watermark 3_000; the source already sent 9_000.
        let j = t.judge_above(&Int64Array::from(vec![5_000, 7_999, 8_000, 12_000]), 9_000);
        assert_eq!(late_rows(&j), vec![0, 1]);
        assert_eq!(j.watermark_ms[1], 9_000);
        // Once its own watermark passes the floor, that rules.
        let j = t.judge_above(&Int64Array::from(vec![9_500, 8_999]), 9_000);
        assert_eq!(late_rows(&j), vec![1]);
        assert_eq!(j.watermark_ms[1], 10_000);
    }

    /// The whole-batch verdict is the row-by-row one whenever it is taken,
    /// with and without floors, skew guards, NULLs and rows out of range.
    #[test]
    fn the_all_on_time_pass_agrees_with_judging_each_row() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut whole_batches = 0;
        for round in 0..3000 {
            let spec = EventTimeSpec {
                column: 0,
                bound_ms: next(50) as i64,
                allowed_lateness_ms: next(20) as i64,
                max_future_skew_ms: (next(2) == 0).then(|| next(200) as i64),
                late_rows: Default::default(),
            };
            let (mut fast, mut each) = (WatermarkTracker::new(spec), WatermarkTracker::new(spec));
            let mut base = 1_000i64;
            for _ in 0..8 {
                let n = 1 + next(16) as usize;
                // Mostly rising times with small jitter; now and then a late
                // row, a jump ahead, a NULL or a time out of range.
                let times: Int64Array = (0..n)
                    .map(|_| {
                        base += next(10) as i64;
                        match next(40) {
                            0 => None,
                            1 => Some(base - 100),
                            2 => Some(base + 1_000),
                            3 if round % 7 == 0 => Some(i64::MAX),
                            _ => Some(base - next(30) as i64),
                        }
                    })
                    .collect();
                let floor = [WATERMARK_MIN, base - 60, base + 5][next(3) as usize];
                let used_fast = times.null_count() == 0
                    && fast
                        .clone()
                        .judge_all_on_time(times.values(), floor)
                        .is_some();
                whole_batches += used_fast as usize;
                let (a, b) = (
                    fast.judge_above(&times, floor),
                    each.judge_each(&times, floor),
                );
                assert_eq!(a.on_time, b.on_time, "{times:?} floor {floor} {spec:?}");
                assert_eq!(a.late, b.late);
                assert_eq!(a.watermark_ms, b.watermark_ms);
                assert_eq!(a.null_time_rows, b.null_time_rows);
                assert_eq!(a.future_rows, b.future_rows);
                assert_eq!(a.out_of_range_rows, b.out_of_range_rows);
                assert_eq!(fast.max_seen(), each.max_seen());
            }
        }
        assert!(whole_batches > 2000, "{whole_batches} batches judged whole");
    }

    #[test]
    fn judgement_does_not_depend_on_batch_boundaries() {
        let times: Vec<i64> = vec![5, 1, 9, 3, 2, 15, 12, 4, 20, 13];
        let mut whole = tracker(3, 1);
        let expected = late_rows(&whole.judge(&Int64Array::from(times.clone())));
        for size in 1..times.len() {
            let mut t = tracker(3, 1);
            let mut got = Vec::new();
            for (k, chunk) in times.chunks(size).enumerate() {
                let j = t.judge(&Int64Array::from(chunk.to_vec()));
                got.extend(late_rows(&j).into_iter().map(|i| i + k * size));
            }
            assert_eq!(got, expected, "batch size {size}");
        }
    }
}
