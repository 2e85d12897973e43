//! The window aggregation driven through the `Operator` trait.

use super::*;
use crate::operators::testing::{count_and_sum_by_k, fired_windows as fired, timed_rows as rows};

/// `GROUP BY window, k` with `count(v)` and `sum(v)`.
fn plan(window: WindowSpec) -> WindowAggregatePlan {
    WindowAggregatePlan {
        window,
        group_by: count_and_sum_by_k(),
    }
}

#[test]
fn a_tumbling_window_fires_at_its_end_and_counts_what_comes_after_as_late() {
    let plan = plan(WindowSpec::tumble(10));
    assert!(plan.distribution().is_hash());
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(
        0,
        rows(&["a", "b", "a", "a"], &[1, 2, 3, 4], &[1, 5, 9, 12]),
        &mut out,
    )
    .unwrap();
    op.on_watermark(9, &mut out).unwrap();
    assert!(fired(&mut out).is_empty(), "[0, 10) is still open at 9");
    op.on_watermark(10, &mut out).unwrap();
    assert_eq!(fired(&mut out), ["0-10 a 2 4", "0-10 b 1 2"]);
    // A row of the fired window is late: counted, not folded in.
    op.on_batch(0, rows(&["a"], &[100], &[3]), &mut out)
        .unwrap();
    assert_eq!(op.late_rows(), 1);
    // [10, 20) survives a checkpoint and fires from the restored state.
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    restored
        .on_batch(0, rows(&["b"], &[5], &[19]), &mut out)
        .unwrap();
    restored.on_watermark(20, &mut out).unwrap();
    assert_eq!(fired(&mut out), ["10-20 a 1 4", "10-20 b 1 5"]);
}

/// Late rows (with the watermark at their position) as the source
/// sends them.
fn late(keys: &[&str], values: &[i64], times: &[i64], marks: &[i64]) -> LateBatch {
    LateBatch::new(rows(keys, values, times), Int64Array::from(marks.to_vec())).unwrap()
}

#[test]
fn a_late_row_counts_while_its_window_is_open_at_its_own_watermark() {
    let plan = plan(WindowSpec::tumble(10));
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, rows(&["a"], &[1], &[25]), &mut out).unwrap();
    // The operator's own watermark is still 5: only each row's mark says
    // which windows had fired. [0, 10) had at 12; [10, 20) had not at 19.
    op.on_watermark(5, &mut out).unwrap();
    op.on_late_batch(
        0,
        late(&["a", "a", "b"], &[10, 20, 30], &[3, 11, 15], &[12, 19, 20]),
        &mut out,
    )
    .unwrap();
    assert_eq!(op.late_rows(), 2, "3 (at 12) and 15 (at 20) come too late");
    op.on_watermark(30, &mut out).unwrap();
    assert_eq!(fired(&mut out), ["10-20 a 1 20", "20-30 a 1 1"]);
}

#[test]
fn a_late_hop_row_misses_only_the_windows_that_had_fired_and_survives_a_checkpoint() {
    // Windows of 10 every 5: a row at 12 is in [5, 15) and [10, 20),
    // sliced in 5s; at a mark of 16 [5, 15) had fired, [10, 20) not.
    let plan = plan(WindowSpec::hop(5, 10));
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, rows(&["a"], &[2], &[11]), &mut out).unwrap();
    op.on_watermark(11, &mut out).unwrap();
    assert!(fired(&mut out).is_empty());
    op.on_late_batch(0, late(&["a"], &[100], &[12], &[16]), &mut out)
        .unwrap();
    assert_eq!(op.late_rows(), 0, "the row still counts in [10, 20)");
    // Its part of the slice waits in the checkpoint like a frozen slice.
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    restored.on_watermark(30, &mut out).unwrap();
    assert_eq!(
        fired(&mut out),
        ["10-20 a 2 102", "5-15 a 1 2"],
        "the late row is in [10, 20) only"
    );
    // Behind every window that holds it ([15, 25) and [20, 30) had
    // fired at 40): dropped and counted, the count checkpointed.
    restored
        .on_late_batch(0, late(&["a"], &[1], &[21], &[40]), &mut out)
        .unwrap();
    restored.on_watermark(40, &mut out).unwrap();
    assert!(fired(&mut out).is_empty());
    let again = crate::operators::testing::restored(&plan, restored.as_mut());
    assert_eq!(again.late_rows(), 1);
}
#[test]
fn hopping_windows_fold_each_row_once_and_fire_every_window_holding_it() {
    let plan = plan(WindowSpec::hop(5, 10));
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(
        0,
        rows(&["a", "a", "a"], &[1, 10, 100], &[2, 7, 12]),
        &mut out,
    )
    .unwrap();
    // A snapshot in the middle (frozen slices included) changes nothing.
    op.on_watermark(6, &mut out).unwrap();
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    restored.on_watermark(i64::MAX, &mut out).unwrap();
    assert_eq!(
        fired(&mut out),
        ["-5-5 a 1 1", "0-10 a 2 11", "10-20 a 1 100", "5-15 a 2 110",]
    );
}

#[test]
fn an_aggregate_appended_to_a_running_query_is_null_in_windows_begun_before_it() {
    let plan = plan(WindowSpec::hop(5, 10));
    let earlier = plan.earlier_layouts();
    assert_eq!(
        earlier.len(),
        2,
        "the plan without its sum, and without both"
    );
    assert!(
        earlier[0].describe().ends_with("[n]"),
        "{}",
        earlier[0].describe()
    );
    // The query ran with count only ...
    let mut op = earlier[0].create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, rows(&["a", "a"], &[1, 10], &[2, 7]), &mut out)
        .unwrap();
    op.on_watermark(6, &mut out).unwrap();
    assert_eq!(out.drain().len(), 1, "[-5, 5) fired before the change");
    // ... and resumes with the sum appended: every window holding a
    // slice of the old state has no sum, the counts go on.
    let mut evolved = crate::operators::testing::restored(&plan, op.as_mut());
    evolved
        .on_batch(0, rows(&["a"], &[100], &[12]), &mut out)
        .unwrap();
    // Which windows missed rows is checkpointed with the state.
    let mut again = crate::operators::testing::restored(&plan, evolved.as_mut());
    again.on_watermark(i64::MAX, &mut out).unwrap();
    assert_eq!(
        fired(&mut out),
        ["0-10 a 2 NULL", "10-20 a 1 100", "5-15 a 2 NULL"]
    );
}

#[test]
fn windows_spilled_to_disk_fire_and_checkpoint_what_windows_in_memory_do() {
    use crate::operators::testing::{assert_spilled_windows_change_nothing, timed_steps};
    // Rows up to 7 ms out of order, the watermark 8 ms behind.
    let steps = timed_steps(90, 50, 7, 8);
    for window in [
        WindowSpec::tumble(6),
        WindowSpec::hop(2, 8),
        WindowSpec::cumulate(2, 8),
    ] {
        assert_spilled_windows_change_nothing(&plan(window), &steps, 60, fired);
    }
}

#[test]
fn a_window_aggregation_with_nothing_open_has_nothing_to_spill() {
    let plan = plan(WindowSpec::tumble(10));
    let mut op = plan.create().unwrap();
    let space = Arc::new(crate::spill::SpillSpace::new(Default::default()));
    assert!(!op.spill(&space).unwrap());
}
