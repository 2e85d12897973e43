//! The MATCH_RECOGNIZE operator driven through the `Operator` trait: a
//! small payment followed by a large one per key, released by the
//! watermark, bounded by WITHIN, and restored from a snapshot.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, StringArray, TimestampMillisecondArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::logical_expr::Operator as BinaryOp;
use datafusion::physical_expr::expressions::{binary, col, lit};

use super::navigation::{column_name, Navigation, Reach};
use super::pattern::Pattern;
use super::{AfterMatch, Condition, MatchRecognizePlan};
use crate::operator::{Collector, OperatorPlan};
use crate::operators::testing::{timed_rows, timed_schema};
use crate::time::WATERMARK_MAX;

const S: usize = 0;
const L: usize = 1;

fn nav(reach: Reach, var: Option<usize>, arg: usize, data_type: DataType) -> Navigation {
    Navigation {
        reach,
        var,
        arg: Some(arg),
        data_type,
    }
}

/// `PARTITION BY k ORDER BY ts MEASURES k, FIRST(S.ts) AS small_at, L.v AS
/// large PATTERN (S L) [WITHIN ...] DEFINE S AS S.v < 10, L AS L.v > 10 * S.v`.
fn plan(within_ms: Option<i64>) -> MatchRecognizePlan {
    plan_over(timed_schema(), within_ms)
}

/// [`plan`] over an input schema like `timed_schema`'s (`k` of any string type).
fn plan_over(input: SchemaRef, within_ms: Option<i64>) -> MatchRecognizePlan {
    let small = binary(col("v", &input).unwrap(), BinaryOp::Lt, lit(10i64), &input).unwrap();
    let navigating = Arc::new(Schema::new(vec![
        Field::new(column_name(0), DataType::Int64, true),
        Field::new(column_name(1), DataType::Int64, true),
    ]));
    let large = binary(
        col(&column_name(0), &navigating).unwrap(),
        BinaryOp::Gt,
        binary(
            lit(10i64),
            BinaryOp::Multiply,
            col(&column_name(1), &navigating).unwrap(),
            &navigating,
        )
        .unwrap(),
        &navigating,
    )
    .unwrap();
    let time = DataType::Timestamp(TimeUnit::Millisecond, None);
    let key_type = input.field(0).data_type().clone();
    let measure_schema = Arc::new(Schema::new(vec![
        Field::new("m0", key_type.clone(), true),
        Field::new("m1", time.clone(), true),
        Field::new("m2", DataType::Int64, true),
    ]));
    MatchRecognizePlan {
        input_schema: input.clone(),
        partition_by: vec![col("k", &input).unwrap()],
        time_column: 2,
        order_by: Vec::new(),
        allowed_lateness_ms: 0,
        variables: vec!["S".into(), "L".into()],
        pattern: Pattern::Concat(vec![Pattern::Var(S), Pattern::Var(L)]),
        conditions: vec![
            Condition::Row(3),
            Condition::Navigating {
                navigations: vec![
                    nav(Reach::Last(0), Some(L), 1, DataType::Int64),
                    nav(Reach::Last(0), Some(S), 1, DataType::Int64),
                ],
                schema: navigating,
                expr: large,
            },
        ],
        args: vec![
            col("k", &input).unwrap(),
            col("v", &input).unwrap(),
            col("ts", &input).unwrap(),
            small,
        ],
        measures: vec![
            nav(Reach::Last(0), None, 0, key_type.clone()),
            nav(Reach::First(0), Some(S), 2, time.clone()),
            nav(Reach::Last(0), Some(L), 1, DataType::Int64),
        ],
        outputs: vec![
            col("m0", &measure_schema).unwrap(),
            col("m1", &measure_schema).unwrap(),
            col("m2", &measure_schema).unwrap(),
        ],
        measure_schema,
        output_schema: Arc::new(Schema::new(vec![
            Field::new("k", key_type, true),
            Field::new("small_at", time, true),
            Field::new("large", DataType::Int64, true),
        ])),
        after_match: AfterMatch::PastLastRow,
        within_ms,
    }
}

/// Output rows as `k small_at large`.
fn rows(out: &mut Collector) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, batch) in out.drain() {
        let k = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        let at = batch
            .column(1)
            .as_any()
            .downcast_ref::<TimestampMillisecondArray>()
            .unwrap();
        let large = batch
            .column(2)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        for i in 0..batch.num_rows() {
            lines.push(format!("{} {} {}", k.value(i), at.value(i), large.value(i)));
        }
    }
    lines
}

#[test]
fn a_small_payment_then_a_large_one_matches_once_the_watermark_passes() {
    let mut op = plan(None).create().unwrap();
    let mut out = Collector::default();
    // Out of order within the batch; key b's large payment is not 10x.
    op.on_batch(
        0,
        timed_rows(
            &["a", "b", "a", "b", "b"],
            &[600, 5, 5, 20, 600],
            &[2_000, 1_000, 1_000, 1_500, 2_500],
        ),
        &mut out,
    )
    .unwrap();
    op.on_watermark(1_500, &mut out).unwrap();
    assert!(
        rows(&mut out).is_empty(),
        "a's large payment is not released yet"
    );
    // The kept small payment of `a` holds the output watermark.
    assert_eq!(op.output_watermark(1_500), 1_000);
    op.on_watermark(3_000, &mut out).unwrap();
    assert_eq!(rows(&mut out), vec!["a 1000 600"]);
    assert_eq!(op.output_watermark(3_000), 3_000);
    assert_eq!(op.state_rows(), 0, "every row is decided");
}

#[test]
fn within_bounds_a_match_and_decides_it_when_the_watermark_passes_the_bound() {
    let mut op = plan(Some(60_000)).create().unwrap();
    let mut out = Collector::default();
    let mut batch = |k, t| {
        op.on_batch(0, timed_rows(&[k, k], &[5, 600], &[0, t]), &mut out)
            .unwrap()
    };
    batch("a", 60_001);
    batch("c", 60_000);
    // c's match lasts exactly the interval: within. It is undecided until
    // every row up to the bound is in.
    op.on_watermark(60_000, &mut out).unwrap();
    assert!(rows(&mut out).is_empty());
    op.on_watermark(60_001, &mut out).unwrap();
    // a's large payment is a minute and a millisecond after its small one.
    assert_eq!(rows(&mut out), vec!["c 0 600"]);
    op.on_watermark(70_000, &mut out).unwrap();
    assert!(rows(&mut out).is_empty());
    assert_eq!(op.state_rows(), 0);
}

#[test]
fn late_rows_are_counted_and_dropped() {
    let mut op = plan(None).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, timed_rows(&["a"], &[5], &[1_000]), &mut out)
        .unwrap();
    op.on_watermark(5_000, &mut out).unwrap();
    op.on_batch(
        0,
        timed_rows(&["a", "a"], &[600, 700], &[900, 6_000]),
        &mut out,
    )
    .unwrap();
    assert_eq!(op.late_rows(), 1);
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(rows(&mut out), vec!["a 1000 700"]);
}

#[test]
fn a_restored_operator_goes_on_where_the_snapshot_was() {
    let input = [
        (
            vec!["a", "b", "a"],
            vec![5, 3, 900],
            vec![1_000, 1_100, 1_200],
        ),
        (
            vec!["b", "a", "a"],
            vec![100, 4, 50],
            vec![1_300, 1_400, 1_500],
        ),
    ];
    let run = |snapshot_after: Option<usize>| {
        let plan = plan(Some(10_000));
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        let mut lines = Vec::new();
        for (i, (k, v, t)) in input.iter().enumerate() {
            op.on_batch(0, timed_rows(k, v, t), &mut out).unwrap();
            op.on_watermark(t[0] + 100, &mut out).unwrap();
            lines.extend(rows(&mut out));
            if snapshot_after == Some(i) {
                let state = op.snapshot().unwrap();
                op = plan.create().unwrap();
                op.restore(state).unwrap();
            }
        }
        op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
        lines.extend(rows(&mut out));
        lines
    };
    let straight = run(None);
    assert_eq!(straight, vec!["a 1000 900", "b 1100 100", "a 1400 50"]);
    assert_eq!(run(Some(0)), straight);
    assert_eq!(run(Some(1)), straight);
}

#[test]
fn explain_names_the_pattern_and_conditions() {
    let text = plan(Some(60_000)).describe();
    assert!(
        text.starts_with("pattern (S L) within 60000ms ordered by ts"),
        "{text}"
    );
    assert!(text.contains("skip past last row"), "{text}");
    assert!(text.contains("S AS v@1 < 10"), "{text}");
    assert!(text.contains("L AS L.v@1 > 10 * S.v@1"), "{text}");
}

#[test]
fn null_keys_and_values_do_not_break_matching() {
    let mut op = plan(None).create().unwrap();
    let mut out = Collector::default();
    let batch = datafusion::arrow::record_batch::RecordBatch::try_new(
        timed_schema(),
        vec![
            Arc::new(StringArray::from(vec![None, None, Some("a")])),
            Arc::new(Int64Array::from(vec![Some(1), Some(500), None])),
            Arc::new(TimestampMillisecondArray::from(vec![1, 2, 3])),
        ],
    )
    .unwrap();
    op.on_batch(0, batch, &mut out).unwrap();
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    let batches: Vec<_> = out.drain().map(|(_, b)| b).collect();
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0].num_rows(), 1);
    assert!(
        batches[0].column(0).is_null(0),
        "the NULL key is a partition of its own"
    );
}

#[test]
fn kept_rows_never_hold_the_string_data_of_released_batches() {
    // String-view keys: a row kept (waiting, or of an undecided match) must
    // not keep the whole batch it came in, nor earlier ones, alive.
    let input = Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8View, true),
        Field::new("v", DataType::Int64, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]));
    let mut op = plan_over(input.clone(), Some(1_000)).create().unwrap();
    let mut out = Collector::default();
    let padding = "x".repeat(200);
    let mut time = 0i64;
    let mut largest = 0;
    for round in 0..200 {
        let keys: Vec<String> = (0..500)
            .map(|i| format!("key-{}-{padding}", i % 50))
            .collect();
        // Every tenth row small (a start that waits), the rest neither.
        let values: Vec<i64> = (0..500).map(|i| if i % 10 == 0 { 5 } else { 50 }).collect();
        let times: Vec<i64> = (0..500).map(|i| time + i).collect();
        time += 500;
        let batch = datafusion::arrow::record_batch::RecordBatch::try_new(
            input.clone(),
            vec![
                Arc::new(datafusion::arrow::array::StringViewArray::from_iter_values(
                    keys,
                )),
                Arc::new(Int64Array::from(values)),
                Arc::new(TimestampMillisecondArray::from(times)),
            ],
        )
        .unwrap();
        op.on_batch(0, batch, &mut out).unwrap();
        // The watermark cuts the batch in half: half its rows wait.
        op.on_watermark(time - 250, &mut out).unwrap();
        out.drain().for_each(drop);
        if round > 10 {
            largest = largest.max(op.snapshot().unwrap().table_bytes());
        }
    }
    // One batch's strings are about 500 x 200 bytes; what is kept (WITHIN
    // 1 s: a few batches' worth) is a small multiple of that, not the 20 MB
    // seen so far.
    assert!(largest < 2_000_000, "a snapshot holds {largest} bytes");
}
