//! The session aggregate driven through the `Operator` trait.

use super::*;
use crate::operator::Collector;
use crate::operators::testing::{count_and_sum_by_k, fired_windows as fired, timed_rows as rows};

/// `GROUP BY session(gap 10 ms), k` with `count(v)` and `sum(v)`.
fn plan() -> SessionAggregatePlan {
    SessionAggregatePlan {
        gap_ms: 10,
        group_by: count_and_sum_by_k(),
    }
}

#[test]
fn a_row_bridging_two_sessions_merges_them_and_a_gap_closes_one() {
    assert!(plan().distribution().is_hash());
    let mut op = plan().create().unwrap();
    let mut out = Collector::default();
    // a: 0 and 18 would be two sessions; 9 (out of order) bridges them.
    // b: 0, then 40 after a gap: two sessions.
    op.on_batch(0, rows(&["a", "a", "b"], &[1, 2, 3], &[0, 18, 0]), &mut out)
        .unwrap();
    op.on_batch(0, rows(&["a", "b"], &[4, 5], &[9, 40]), &mut out)
        .unwrap();
    // A checkpoint while rows wait for the watermark loses none.
    let mut restored = crate::operators::testing::restored(&plan(), op.as_mut());
    restored.on_watermark(25, &mut out).unwrap();
    assert_eq!(
        fired(&mut out),
        ["0-10 b 1 3"],
        "a's session ends at 28: a watermark past it fires it"
    );
    restored.on_watermark(i64::MAX, &mut out).unwrap();
    assert_eq!(fired(&mut out), ["0-28 a 3 7", "40-50 b 1 5"]);
}

/// Rows of keys `a`..`e` at times that open, extend, bridge and close
/// sessions, then watermarks, through one operator that spills after
/// every step and one that never does: the same sessions fire, in the
/// same order, and a checkpoint of the spilled one (sessions on disk and
/// in memory) restores to the same end.
#[test]
fn spilled_sessions_come_back_by_key_and_by_end_and_fire_as_unspilled_ones() {
    use crate::spill::{SpillConfig, SpillSpace};
    let space = std::sync::Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut whole = plan().create().unwrap();
    let mut spilling = plan().create().unwrap();
    let steps: [(&[&str], &[i64], i64); 5] = [
        (&["a", "b", "c", "d"], &[0, 1, 2, 100], 5),
        // a extends, b closes after its gap (and opens anew), c bridges.
        (&["a", "b", "c", "c"], &[8, 30, 14, 7], 20),
        // d ends at 110: this watermark fires it from disk; e is new.
        (&["e", "a"], &[111, 40], 112),
        (&["e"], &[115], 130),
        (&["c"], &[135], 140),
    ];
    let (mut a, mut b) = (Collector::default(), Collector::default());
    let mut spilled_any = false;
    for (i, (keys, times, watermark)) in steps.iter().enumerate() {
        let values: Vec<i64> = (0..keys.len() as i64).map(|v| v + i as i64 * 10).collect();
        for (op, out) in [(&mut whole, &mut a), (&mut spilling, &mut b)] {
            op.on_batch(0, rows(keys, &values, times), out).unwrap();
            op.on_watermark(*watermark, out).unwrap();
        }
        assert_eq!(fired(&mut a), fired(&mut b), "step {i}");
        assert_eq!(whole.state_rows(), spilling.state_rows(), "step {i}");
        spilled_any |= spilling.spill(&space).unwrap();
        assert!(spilling.state_bytes() <= whole.state_bytes(), "step {i}");
    }
    assert!(spilled_any);
    let stats = spilling.spill_stats();
    assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    // A checkpoint holds disk's sessions and memory's alike, streamed to
    // files.
    let snapshot = spilling.snapshot().unwrap();
    assert_eq!((snapshot.tables.len(), snapshot.files.len()), (0, 2));
    let mut restored = crate::operators::testing::restored(&plan(), spilling.as_mut());
    assert_eq!(restored.state_rows(), whole.state_rows());
    for (op, out) in [(&mut whole, &mut a), (&mut spilling, &mut b)] {
        op.on_watermark(i64::MAX, out).unwrap();
    }
    let mut c = Collector::default();
    restored.on_watermark(i64::MAX, &mut c).unwrap();
    let expected = fired(&mut a);
    assert!(!expected.is_empty());
    assert_eq!(fired(&mut b), expected);
    assert_eq!(fired(&mut c), expected);
}

/// Nothing spills from an operator holding nothing; rows waiting for
/// the watermark spill and come back when it reaches them.
#[test]
fn rows_waiting_for_the_watermark_spill_and_come_back_at_it() {
    use crate::spill::{SpillConfig, SpillSpace};
    let space = std::sync::Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut op = plan().create().unwrap();
    assert!(!op.spill(&space).unwrap());
    let mut out = Collector::default();
    op.on_batch(
        0,
        rows(&["a", "b", "a"], &[1, 2, 3], &[50, 70, 55]),
        &mut out,
    )
    .unwrap();
    assert!(op.spill(&space).unwrap(), "the rows wait for the watermark");
    assert_eq!((op.state_rows(), op.state_bytes()), (3, 0));
    op.on_watermark(60, &mut out).unwrap();
    assert_eq!(fired(&mut out), Vec::<String>::new());
    // a's session [50, 65) is open, b's row still waits.
    assert_eq!(op.state_rows(), 2);
    let mut restored = crate::operators::testing::restored(&plan(), op.as_mut());
    restored.on_watermark(i64::MAX, &mut out).unwrap();
    assert_eq!(fired(&mut out), ["50-65 a 2 4", "70-80 b 1 2"]);
}
