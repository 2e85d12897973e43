//! The interval join driven through the `Operator` trait.

use datafusion::arrow::array::StringArray;
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::physical_expr::expressions::Column;

use super::*;

fn side(keys: &[&str], times: &[i64]) -> RecordBatch {
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("t", DataType::Int64, true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringArray::from(keys.to_vec())),
            Arc::new(Int64Array::from(times.to_vec())),
        ],
    )
    .unwrap()
}

fn plan(kind: JoinKind) -> IntervalJoinPlan {
    let schema = side(&[], &[]).schema();
    let output = Arc::new(Schema::new(
        [schema.fields().to_vec(), schema.fields().to_vec()].concat(),
    ));
    IntervalJoinPlan {
        kind,
        left_schema: schema.clone(),
        right_schema: schema,
        output_schema: output,
        left_keys: vec![Arc::new(Column::new("k", 0))],
        right_keys: vec![Arc::new(Column::new("k", 0))],
        time: JoinBound::Interval {
            left_time: 1,
            right_time: 1,
            bound: TimeBound {
                lower_ms: -1_000,
                lower_inclusive: true,
                upper_ms: 3_000,
                upper_inclusive: true,
            },
        },
        allowed_lateness_ms: 500,
        residual: None,
        inputs: Default::default(),
        windows: [None, None],
    }
}

fn rows(out: &mut Collector) -> usize {
    out.drain().map(|(_, b)| b.num_rows()).sum()
}

/// A semi or anti join of `plan`: the left columns alone come out.
fn left_only(kind: JoinKind) -> IntervalJoinPlan {
    let mut plan = plan(kind);
    plan.output_schema = plan.left_schema.clone();
    plan
}

/// Emitted rows as `key@time`, in order.
fn left_rows(out: &mut Collector) -> Vec<String> {
    let mut found = Vec::new();
    for (_, batch) in out.drain() {
        assert_eq!(batch.num_columns(), 2, "the left columns alone");
        let keys = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let times = batch
            .column(1)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for r in 0..batch.num_rows() {
            found.push(format!("{}@{}", keys.value(r), times.value(r)));
        }
    }
    found
}

#[test]
fn a_semi_join_emits_each_left_row_at_its_first_partner_only() {
    let mut op = left_only(JoinKind::Semi).create().unwrap();
    let mut out = Collector::default();
    // a@1000 has two partners in one batch, b@1000 none yet.
    op.on_batch(0, side(&["a", "b"], &[1_000, 1_000]), &mut out)
        .unwrap();
    op.on_batch(1, side(&["a", "a", "c"], &[1_500, 2_000, 1_000]), &mut out)
        .unwrap();
    assert_eq!(left_rows(&mut out), ["a@1000"]);
    // b's partner comes later; a's third partner changes nothing.
    op.on_batch(1, side(&["b", "a"], &[3_900, 3_000]), &mut out)
        .unwrap();
    assert_eq!(left_rows(&mut out), ["b@1000"]);
    // A new left row meets the buffered right rows at once.
    op.on_batch(0, side(&["a"], &[2_500]), &mut out).unwrap();
    assert_eq!(left_rows(&mut out), ["a@2500"]);
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert!(left_rows(&mut out).is_empty(), "nothing is padded");
}

#[test]
fn an_anti_join_emits_the_left_rows_no_partner_met_once_none_can() {
    let mut op = left_only(JoinKind::Anti).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, side(&["a", "b"], &[1_000, 1_000]), &mut out)
        .unwrap();
    op.on_batch(1, side(&["a"], &[1_500]), &mut out).unwrap();
    assert!(left_rows(&mut out).is_empty(), "pairs never come out");
    // b@1000 can meet right rows up to 4000: the watermark must pass
    // them (and the lateness) first.
    op.on_watermark(4_000, &mut out).unwrap();
    assert!(left_rows(&mut out).is_empty());
    // A snapshot keeps b waiting.
    let mut restored = crate::operators::testing::restored(&left_only(JoinKind::Anti), op.as_mut());
    for op in [&mut op, &mut restored] {
        op.on_watermark(5_000, &mut out).unwrap();
        assert_eq!(left_rows(&mut out), ["b@1000"]);
    }
}

#[test]
fn state_empties_once_the_watermark_passes_the_last_interval() {
    let mut op = plan(JoinKind::Left).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, side(&["a", "b"], &[10_000, 10_000]), &mut out)
        .unwrap();
    op.on_batch(1, side(&["a", "c"], &[12_000, 10_500]), &mut out)
        .unwrap();
    assert_eq!(rows(&mut out), 1, "a matched");
    assert_eq!(op.state_rows(), 4);
    // Left rows stay while tl + 3000 >= W - 500; right rows while tr + 1000 >= W - 500.
    op.on_watermark(13_500, &mut out).unwrap();
    assert_eq!(
        op.state_rows(),
        3,
        "a right row arriving at 13 000 could still match both left rows"
    );
    assert_eq!(
        rows(&mut out),
        0,
        "the unmatched right row c is dropped: a LEFT join does not keep it"
    );
    op.on_watermark(13_501, &mut out).unwrap();
    assert_eq!(op.state_rows(), 0);
    assert_eq!(
        rows(&mut out),
        1,
        "b is emitted null-padded once its interval has passed"
    );
    // The output watermark is held back by the upper bound.
    assert_eq!(op.output_watermark(13_501), 10_501);
}

#[test]
fn an_evicted_row_never_pairs_with_a_late_row() {
    let mut op = plan(JoinKind::Left).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(
        0,
        side(&["a", "b", "z"], &[23_999, 16_000, 40_000]),
        &mut out,
    )
    .unwrap();
    op.on_batch(1, side(&["a"], &[24_500]), &mut out).unwrap();
    assert_eq!(rows(&mut out), 1, "a pairs");
    // Left rows below 21 000 are evicted (tl < W - 500 - 3000): b comes
    // out null-padded.
    op.on_watermark(24_500, &mut out).unwrap();
    assert_eq!(rows(&mut out), 1, "b null-padded");
    assert_eq!(op.state_rows(), 3);
    // A late right row that would pair with b must not: b has been
    // emitted as unmatched already.
    op.on_batch(1, side(&["b"], &[16_500]), &mut out).unwrap();
    assert_eq!(rows(&mut out), 0, "an evicted row never pairs");
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(op.state_rows(), 0);
    assert_eq!(rows(&mut out), 1, "z null-padded at the end");
}

/// Late rows of one side (with the watermark at their position).
fn late(keys: &[&str], times: &[i64], marks: &[i64]) -> LateBatch {
    LateBatch::new(side(keys, times), Int64Array::from(marks.to_vec())).unwrap()
}

/// Rows emitted so far: (late or not, rows).
fn emitted(out: &mut Collector) -> Vec<(bool, usize)> {
    out.drain_emitted()
        .map(|(_, e)| match e {
            crate::operator::Emitted::Rows(b) => (false, b.num_rows()),
            crate::operator::Emitted::Late(l) => (true, l.num_rows()),
        })
        .collect()
}

#[test]
fn a_late_row_pairs_only_with_partners_still_held_at_its_own_watermark() {
    // Bound: right.t - left.t in [-1000, 3000], lateness 500.
    let mut op = plan(JoinKind::Inner).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(1, side(&["a", "a"], &[9_000, 12_000]), &mut out)
        .unwrap();
    // A late left row at 10 000 judged at 13 000: horizon 12 500, so
    // right rows before 11 500 were evicted there; 12 000 still held.
    op.on_late_batch(0, late(&["a"], &[10_000], &[13_000]), &mut out)
        .unwrap();
    assert_eq!(emitted(&mut out), [(true, 1)], "one pair, late");
    // The other way round: a right row arriving later meets the held
    // late left row only if the left row still held it at its mark.
    op.on_batch(1, side(&["a"], &[11_000]), &mut out).unwrap();
    assert!(emitted(&mut out).is_empty(), "11 000 < 12 500 - 1000");
    op.on_batch(1, side(&["a"], &[11_600]), &mut out).unwrap();
    assert_eq!(emitted(&mut out), [(true, 1)]);
    // A late left row no held partner can meet is dropped (inner).
    op.on_late_batch(0, late(&["a"], &[1_000], &[13_000]), &mut out)
        .unwrap();
    assert!(emitted(&mut out).is_empty());
    assert_eq!(op.late_rows(), 1);
    // Marks and the count survive a checkpoint.
    let mut restored = crate::operators::testing::restored(&plan(JoinKind::Inner), op.as_mut());
    assert_eq!(restored.late_rows(), 1);
    restored
        .on_batch(1, side(&["a"], &[11_000]), &mut out)
        .unwrap();
    assert!(
        emitted(&mut out).is_empty(),
        "the restored row kept its mark"
    );
}

#[test]
fn a_left_join_pads_a_late_left_row_it_can_pair_with_nothing_at_once() {
    let mut op = plan(JoinKind::Left).create().unwrap();
    let mut out = Collector::default();
    op.on_late_batch(0, late(&["a"], &[1_000], &[13_000]), &mut out)
        .unwrap();
    assert_eq!(emitted(&mut out), [(true, 1)], "padded, late");
    assert_eq!(op.late_rows(), 0, "kept, not dropped");
    // A late left row that can still pair waits; unpaired, it is padded
    // (late) when evicted.
    op.on_late_batch(0, late(&["b"], &[10_000], &[13_000]), &mut out)
        .unwrap();
    assert!(emitted(&mut out).is_empty());
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(emitted(&mut out), [(true, 1)]);
}

#[test]
fn a_window_join_drops_a_late_row_whose_window_had_fired() {
    let mut plan = plan(JoinKind::Left);
    // The time column is also the window bound (a 10 s window's start).
    plan.windows = [
        Some(JoinWindow {
            column: 1,
            to_end_ms: 10_000,
        }),
        None,
    ];
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    // Window [0, 10 000) had fired at 12 000; [10 000, 20 000) not.
    op.on_late_batch(
        0,
        late(&["a", "b"], &[0, 10_000], &[12_500, 12_500]),
        &mut out,
    )
    .unwrap();
    assert_eq!(op.late_rows(), 1, "dropped, not padded");
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(emitted(&mut out), [(true, 1)], "b padded at the end");
}

#[test]
fn a_regular_join_keeps_every_row_and_pairs_across_any_time() {
    let mut plan = plan(JoinKind::Inner);
    plan.time = JoinBound::Unbounded;
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, side(&["a", "b", "a"], &[0, 5, 1]), &mut out)
        .unwrap();
    op.on_watermark(1_000_000_000, &mut out).unwrap();
    assert_eq!(op.state_rows(), 3, "nothing is evicted by the watermark");
    // Times far apart and a NULL time still pair: the join ignores time.
    let late = RecordBatch::try_new(
        side(&[], &[]).schema(),
        vec![
            Arc::new(StringArray::from(vec!["a", "c"])),
            Arc::new(Int64Array::from(vec![None, Some(2_000_000_000)])),
        ],
    )
    .unwrap();
    op.on_batch(1, late, &mut out).unwrap();
    assert_eq!(rows(&mut out), 2, "the right a pairs with both left a rows");
    op.on_batch(0, side(&["c"], &[-7]), &mut out).unwrap();
    assert_eq!(
        rows(&mut out),
        1,
        "a later left c pairs with the buffered right c"
    );
    assert_eq!(op.output_watermark(1_000_000_000), WATERMARK_MIN);
    assert_eq!(op.output_watermark(WATERMARK_MAX), WATERMARK_MAX);
}

#[test]
fn time_bound_edges() {
    let b = TimeBound {
        lower_ms: -10,
        lower_inclusive: true,
        upper_ms: 10,
        upper_inclusive: false,
    };
    assert!(b.holds(100, 90));
    assert!(!b.holds(100, 89));
    assert!(b.holds(100, 109));
    assert!(!b.holds(100, 110));
}

/// Everything emitted, a row a line (`late@mark` first for late rows), sorted.
fn sorted_lines(out: &mut Collector) -> Vec<String> {
    use crate::operators::testing::table_lines;
    let mut lines = Vec::new();
    for (_, emitted) in out.drain_emitted() {
        match emitted {
            crate::operator::Emitted::Rows(b) => lines.extend(table_lines(&b)),
            crate::operator::Emitted::Late(l) => {
                // `table_lines` sorts: pair each row with its mark first.
                let marks = l.watermarks().clone();
                let marked = l.rows().clone();
                let mut columns = marked.columns().to_vec();
                columns.push(Arc::new(marks));
                let mut fields: Vec<Field> = marked
                    .schema()
                    .fields()
                    .iter()
                    .map(|f| f.as_ref().clone())
                    .collect();
                fields.push(Field::new("__mark", DataType::Int64, false));
                let with_marks =
                    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
                lines.extend(
                    table_lines(&with_marks)
                        .into_iter()
                        .map(|r| format!("late {r}")),
                );
            }
        }
    }
    lines.sort();
    lines
}

/// Steps of a two-sided stream over `keys` keys: rows of either side at
/// times about `i * 100` (up to 2 s ahead), the watermark 1.5 s behind,
/// and every seventh step a late batch (behind its mark by up to 1.4 s).
fn two_sided_steps(steps: i64, keys: usize) -> Vec<(usize, Option<Vec<i64>>, RecordBatch, i64)> {
    use crate::operators::testing::next_pick;
    let mut seed = 11u64;
    (0..steps)
        .map(|i| {
            let input = next_pick(&mut seed) % 2;
            let watermark = if i == steps - 1 {
                WATERMARK_MAX
            } else {
                i * 100 - 1_500
            };
            let came_late = i % 7 == 6;
            let (mut ks, mut times) = (Vec::new(), Vec::new());
            for _ in 0..10 {
                let pick = next_pick(&mut seed);
                ks.push(format!("k{}", pick % keys));
                times.push(if came_late {
                    watermark - 100 - (pick / keys % 1_300) as i64
                } else {
                    i * 100 + (pick / keys % 2_000) as i64
                });
            }
            let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
            let marks = came_late.then(|| vec![watermark - 50; 10]);
            (input, marks, side(&ks, &times), watermark)
        })
        .collect()
}

/// Drives a join of `plan` and a twin that spills after every third step,
/// and from the checkpoint at step 45 a third restored from the spilled
/// twin's; asserts that spilling changes nothing: the same rows at every
/// step (sorted), the same checkpoint tables and rows held, rows read
/// back, and (for an interval join) nothing held at the end.
fn assert_spilled_join_changes_nothing(plan: &IntervalJoinPlan, keys: usize) {
    use crate::operators::testing::table_lines;
    use crate::spill::{SpillConfig, SpillSpace};
    let space = Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut whole = plan.create().unwrap();
    let mut spilling = plan.create().unwrap();
    let mut restored: Option<Box<dyn Operator>> = None;
    for (i, (input, marks, batch, watermark)) in two_sided_steps(120, keys).into_iter().enumerate()
    {
        let mut emitted = Vec::new();
        for op in [Some(&mut whole), Some(&mut spilling), restored.as_mut()]
            .into_iter()
            .flatten()
        {
            let mut out = Collector::default();
            match &marks {
                None => op.on_batch(input, batch.clone(), &mut out).unwrap(),
                Some(m) => {
                    let late = LateBatch::new(batch.clone(), Int64Array::from(m.clone())).unwrap();
                    op.on_late_batch(input, late, &mut out).unwrap()
                }
            }
            op.on_watermark(watermark, &mut out).unwrap();
            emitted.push(sorted_lines(&mut out));
        }
        for other in &emitted[1..] {
            assert_eq!(&emitted[0], other, "step {i}");
        }
        if i % 3 == 0 && spilling.state_rows() > 0 {
            let before = spilling.state_bytes();
            assert!(spilling.spill(&space).unwrap(), "step {i}");
            assert!(spilling.state_bytes() < before, "memory starts afresh");
        }
        if i == 45 {
            let (mut expected, mut got) = (whole.snapshot().unwrap(), spilling.snapshot().unwrap());
            assert_eq!(
                (got.tables.len(), got.files.len()),
                (0, 2),
                "both sides streamed to files"
            );
            assert_eq!(whole.state_rows(), spilling.state_rows(), "rows held");
            let mut fresh = plan.create().unwrap();
            fresh.restore(got.clone()).unwrap();
            restored = Some(fresh);
            for spec in plan.state_tables().unwrap() {
                assert_eq!(
                    table_lines(&expected.take_table(spec.name()).unwrap()),
                    table_lines(&got.take_table(spec.name()).unwrap()),
                    "table {}",
                    spec.name()
                );
            }
        }
    }
    let stats = spilling.spill_stats();
    assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    assert_eq!(
        whole.state_rows(),
        spilling.state_rows(),
        "rows held at the end"
    );
    if plan.time != JoinBound::Unbounded {
        assert_eq!(spilling.state_rows(), 0, "everything evicted");
    }
}

#[test]
fn spilled_rows_come_back_as_they_left_for_every_kind_of_join() {
    for kind in [
        JoinKind::Inner,
        JoinKind::Left,
        JoinKind::Right,
        JoinKind::Full,
    ] {
        assert_spilled_join_changes_nothing(&plan(kind), 12);
    }
    for kind in [JoinKind::Semi, JoinKind::Anti] {
        assert_spilled_join_changes_nothing(&left_only(kind), 12);
    }
    // Many keys: most are on disk when a row brings them, or when the
    // watermark evicts them.
    assert_spilled_join_changes_nothing(&plan(JoinKind::Full), 400);
}

#[test]
fn a_spilled_regular_join_keeps_every_row_and_pairs_as_in_memory() {
    let mut regular = plan(JoinKind::Inner);
    regular.time = JoinBound::Unbounded;
    regular.allowed_lateness_ms = 0;
    assert_spilled_join_changes_nothing(&regular, 40);
}

#[test]
fn rows_taken_from_a_larger_view_batch_count_their_own_bytes_only() {
    use datafusion::arrow::array::{StringViewArray, UInt32Array};
    // Keys as the source's view columns come: every batch a few rows
    // taken from one large batch, so all share its data buffers.
    let schema = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8View, true),
        Field::new("t", DataType::Int64, true),
    ]));
    let mut plan = plan(JoinKind::Inner);
    plan.left_schema = schema.clone();
    plan.right_schema = schema.clone();
    plan.output_schema = Arc::new(Schema::new(
        [schema.fields().to_vec(), schema.fields().to_vec()].concat(),
    ));
    let source = RecordBatch::try_new(
        schema,
        vec![
            Arc::new(StringViewArray::from_iter_values((0..10_000).map(|i| {
                format!("a key longer than a view's inline twelve bytes, {i}")
            }))),
            Arc::new(Int64Array::from_iter_values(0..10_000)),
        ],
    )
    .unwrap();
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    for b in 0..100u32 {
        let rows = UInt32Array::from_iter_values((0..10).map(|i| b * 100 + i));
        let batch = datafusion::arrow::compute::take_record_batch(&source, &rows).unwrap();
        op.on_batch(0, batch, &mut out).unwrap();
    }
    assert_eq!(op.state_rows(), 1_000);
    // The source's key bytes alone are 600 KB; counted once per batch
    // they came to 60 MB.
    let per_row = op.state_bytes() / 1_000;
    assert!(per_row < 1_000, "{per_row} bytes counted a row");
}
