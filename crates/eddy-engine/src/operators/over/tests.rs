//! The OVER operator driven through the `Operator` trait: rows wait for
//! the watermark, run per key in event-time order, and a restored operator
//! goes on where the snapshot was.

use std::sync::Arc;

use datafusion::arrow::array::{Float64Array, Int64Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::average::avg_udaf;
use datafusion::functions_aggregate::count::count_udaf;
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::logical_expr::{AggregateUDF, Operator};
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::{col, lit, BinaryExpr};
use datafusion::physical_expr::PhysicalExpr;

use super::{Frame, OverFunction, OverPlan, RunningAggregate};
use crate::operator::{Collector, Operator as StreamOperator, OperatorPlan};
use crate::operators::testing::{keyed, kv_schema};
use crate::time::WATERMARK_MAX;

/// `functions` per `k` of `input`, ordered by its column 1 as event time;
/// `appended` names their output columns.
fn keyed_plan(
    input: SchemaRef,
    functions: Vec<OverFunction>,
    appended: Vec<Field>,
    state_ttl_ms: Option<i64>,
) -> OverPlan {
    let fields: Vec<Field> = input
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .chain(appended)
        .collect();
    OverPlan {
        output_schema: Arc::new(Schema::new(fields)),
        partition_by: vec![col("k", &input).unwrap()],
        input_schema: input,
        time_column: 1,
        allowed_lateness_ms: 0,
        functions,
        state_ttl_ms,
    }
}

/// `row_number()`, `lag(v)` and `sum(v)` (rows up to the current one) per
/// `k`, ordered by `v` as event time.
fn plan(state_ttl_ms: Option<i64>) -> OverPlan {
    let input = kv_schema();
    let sum = AggregateExprBuilder::new(sum_udaf(), vec![col("v", &input).unwrap()])
        .schema(input.clone())
        .alias("s")
        .build()
        .unwrap();
    let appended = vec![
        Field::new("rn", DataType::UInt64, true),
        Field::new("prev", DataType::Int64, true),
        Field::new("s", DataType::Int64, true),
    ];
    let functions = vec![
        OverFunction::RowNumber,
        OverFunction::Lag {
            value: col("v", &input).unwrap(),
            offset: 1,
            default: ScalarValue::Int64(None),
        },
        OverFunction::Aggregate {
            expr: Arc::new(sum),
            filter: None,
            frame: Frame::UpToCurrentRow,
            running: None,
        },
    ];
    keyed_plan(input, functions, appended, state_ttl_ms)
}

/// Every emitted row as `k v rn prev s`.
fn rows(out: &mut Collector) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, batch) in out.drain() {
        for r in 0..batch.num_rows() {
            let cells: Vec<String> = (0..batch.num_columns())
                .map(|c| {
                    ScalarValue::try_from_array(batch.column(c), r)
                        .unwrap()
                        .to_string()
                })
                .collect();
            lines.push(cells.join(" "));
        }
    }
    lines
}

#[test]
fn rows_wait_for_the_watermark_and_run_per_key_in_time_order() {
    let mut op = plan(None).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "b", "a"], &[20, 5, 10], None), &mut out)
        .unwrap();
    assert!(rows(&mut out).is_empty(), "nothing before the watermark");
    op.on_watermark(15, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["b 5 1 NULL 5", "a 10 1 NULL 10"]);
    assert_eq!(
        op.state_rows(),
        3,
        "a's row at 20 waits; a and b hold state"
    );
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 20 2 10 30"]);
}

#[test]
fn a_late_row_whose_place_in_time_order_had_passed_at_its_mark_is_dropped() {
    let plan = plan(None);
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a"], &[10], None), &mut out)
        .unwrap();
    // Both came behind their source's watermark: 12 was passed at a mark of
    // 13, 30 was not at 25 (the operator's own watermark is still 5).
    op.on_watermark(5, &mut out).unwrap();
    let late = crate::message::LateBatch::new(
        keyed(&["a", "a"], &[12, 30], None),
        Int64Array::from(vec![13, 25]),
    )
    .unwrap();
    op.on_late_batch(0, late, &mut out).unwrap();
    assert_eq!(op.late_rows(), 1);
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 10 1 NULL 10", "a 30 2 10 40"]);
    let restored = crate::operators::testing::restored(&plan, op.as_mut());
    assert_eq!(restored.late_rows(), 1, "the count is checkpointed");
}

#[test]
fn a_restored_operator_goes_on_where_the_snapshot_was() {
    let plan = plan(None);
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "a", "a"], &[1, 2, 9], None), &mut out)
        .unwrap();
    op.on_watermark(5, &mut out).unwrap();
    rows(&mut out);
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    for op in [&mut op, &mut restored] {
        op.on_batch(0, keyed(&["a"], &[7], None), &mut out).unwrap();
        op.on_watermark(10, &mut out).unwrap();
        assert_eq!(rows(&mut out), ["a 7 3 2 10", "a 9 4 7 19"]);
    }
}

#[test]
fn a_key_idle_past_the_ttl_starts_from_empty_state() {
    let mut op = plan(Some(10)).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "a"], &[1, 30], None), &mut out)
        .unwrap();
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    assert_eq!(
        rows(&mut out),
        ["a 1 1 NULL 1", "a 30 1 NULL 30"],
        "29 ms after its previous row, a starts afresh"
    );
}

/// Schema of the native-form tests: key, event time (ms), a DOUBLE and a
/// BIGINT argument, both with NULLs.
fn numbers_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("t", DataType::Int64, false),
        Field::new("x", DataType::Float64, true),
        Field::new("i", DataType::Int64, true),
    ]))
}

fn numbers(rows: &[(&str, i64, Option<f64>, Option<i64>)]) -> RecordBatch {
    RecordBatch::try_new(
        numbers_schema(),
        vec![
            Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(Int64Array::from_iter_values(rows.iter().map(|r| r.1))),
            Arc::new(Float64Array::from_iter(rows.iter().map(|r| r.2))),
            Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.3))),
        ],
    )
    .unwrap()
}

/// count(x), sum(x), sum(i), avg(x) and count(*) FILTER (x > 2) over every
/// running frame, per `k`; `native` picks the native forms where they exist.
fn numbers_plan(native: bool) -> OverPlan {
    let input = numbers_schema();
    let aggregate = |udaf: Arc<AggregateUDF>, arg: &str, name: &str| {
        let args = if arg.is_empty() {
            vec![lit(1i64)]
        } else {
            vec![col(arg, &input).unwrap()]
        };
        Arc::new(
            AggregateExprBuilder::new(udaf, args)
                .schema(input.clone())
                .alias(name)
                .build()
                .unwrap(),
        )
    };
    let over_x: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
        col("x", &input).unwrap(),
        Operator::Gt,
        lit(2.0f64),
    ));
    let mut functions = Vec::new();
    let mut fields = Vec::new();
    for frame in [
        Frame::UpToCurrentRow,
        Frame::BeforeCurrentRow,
        Frame::UpToPeers,
    ] {
        for (udaf, arg, filter) in [
            (count_udaf(), "x", None),
            (sum_udaf(), "x", None),
            (sum_udaf(), "i", None),
            (avg_udaf(), "x", None),
            (count_udaf(), "", Some(over_x.clone())),
        ] {
            let name = format!("f{}", functions.len());
            let expr = aggregate(udaf, arg, &name);
            fields.push(Field::new(&name, expr.field().data_type().clone(), true));
            let running = if native {
                let running = RunningAggregate::builtin(&expr, &input);
                assert!(running.is_some(), "{name} has a native form");
                running
            } else {
                None
            };
            functions.push(OverFunction::Aggregate {
                expr,
                filter: filter.clone(),
                frame,
                running,
            });
        }
    }
    keyed_plan(input, functions, fields, None)
}

/// Rows with NULLs, peers (equal times) and two keys, in three batches.
fn numbers_input() -> Vec<RecordBatch> {
    vec![
        numbers(&[
            ("a", 1, Some(1.5), Some(7)),
            ("b", 1, None, None),
            ("a", 2, Some(2.5), None),
            ("a", 2, Some(-0.25), Some(-3)),
        ]),
        numbers(&[
            ("b", 3, Some(4.0), Some(i64::MAX)),
            ("b", 4, Some(0.1), Some(2)),
            ("a", 5, None, Some(1)),
        ]),
        numbers(&[("a", 6, Some(3.75), Some(5)), ("b", 6, Some(0.2), None)]),
    ]
}

/// Runs `op` over `batches`, a watermark after each; the output rows.
fn run_numbers(
    op: &mut dyn StreamOperator,
    batches: &[RecordBatch],
    watermarks: &[i64],
) -> Vec<String> {
    let mut out = Collector::default();
    let mut lines = Vec::new();
    for (batch, watermark) in batches.iter().zip(watermarks) {
        op.on_batch(0, batch.clone(), &mut out).unwrap();
        op.on_watermark(*watermark, &mut out).unwrap();
        lines.extend(rows(&mut out));
    }
    lines
}

#[test]
fn native_running_aggregates_equal_datafusion_accumulators() {
    let batches = numbers_input();
    let watermarks = [2, 5, WATERMARK_MAX];
    let expected = run_numbers(
        numbers_plan(false).create().unwrap().as_mut(),
        &batches,
        &watermarks,
    );
    assert_eq!(expected.len(), 9);
    let native = run_numbers(
        numbers_plan(true).create().unwrap().as_mut(),
        &batches,
        &watermarks,
    );
    assert_eq!(native, expected);
    // b's first row: x NULL, so count 0 and the sums and average NULL.
    assert!(
        expected[1].starts_with("b 1 NULL NULL 0 NULL NULL NULL 0 0 NULL NULL NULL 0"),
        "{}",
        expected[1]
    );
}

#[test]
fn native_and_datafusion_checkpoints_restore_into_each_other() {
    let batches = numbers_input();
    for (from, into) in [(true, false), (false, true), (true, true)] {
        let mut op = numbers_plan(from).create().unwrap();
        let head = run_numbers(op.as_mut(), &batches[..2], &[2, 5]);
        let mut restored = crate::operators::testing::restored(&numbers_plan(into), op.as_mut());
        let tail = run_numbers(restored.as_mut(), &batches[2..], &[WATERMARK_MAX]);
        let whole = run_numbers(
            numbers_plan(false).create().unwrap().as_mut(),
            &batches,
            &[2, 5, WATERMARK_MAX],
        );
        assert_eq!(
            [head, tail].concat(),
            whole,
            "from native {from} into native {into}"
        );
    }
}

#[test]
fn lag_reaches_back_across_batches_and_snapshots() {
    let input = kv_schema();
    let lag = OverFunction::Lag {
        value: col("v", &input).unwrap(),
        offset: 2,
        default: ScalarValue::Int64(Some(-1)),
    };
    let prev2 = Field::new("prev2", DataType::Int64, true);
    let plan = keyed_plan(input, vec![lag], vec![prev2], None);
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "b", "a"], &[1, 2, 3], None), &mut out)
        .unwrap();
    op.on_watermark(10, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 1 -1", "b 2 -1", "a 3 -1"]);
    op.on_batch(0, keyed(&["a", "b"], &[11, 12], None), &mut out)
        .unwrap();
    op.on_watermark(20, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 11 1", "b 12 -1"]);
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    for op in [&mut op, &mut restored] {
        op.on_batch(0, keyed(&["a", "b", "a"], &[21, 22, 23], None), &mut out)
            .unwrap();
        op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
        assert_eq!(rows(&mut out), ["a 21 3", "b 22 2", "a 23 11"]);
    }
}

fn lead_plan(offset: usize, state_ttl_ms: Option<i64>) -> OverPlan {
    let input = kv_schema();
    let lead = OverFunction::Lead {
        value: col("v", &input).unwrap(),
        offset,
        default: ScalarValue::Int64(Some(-1)),
    };
    let rn = Field::new("rn", DataType::UInt64, true);
    let next = Field::new("next", DataType::Int64, true);
    keyed_plan(
        input,
        vec![OverFunction::RowNumber, lead],
        vec![rn, next],
        state_ttl_ms,
    )
}

#[test]
fn lead_rows_wait_for_their_successors_and_hold_the_watermark() {
    let plan = lead_plan(1, None);
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "b", "a"], &[1, 2, 3], None), &mut out)
        .unwrap();
    op.on_watermark(10, &mut out).unwrap();
    // a's 1 has its successor; a's 3 and b's 2 wait.
    assert_eq!(rows(&mut out), ["a 1 1 3"]);
    assert_eq!(
        op.output_watermark(10),
        2,
        "held at the earliest waiting row"
    );
    // A snapshot keeps the waiting rows.
    let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
    assert_eq!(restored.output_watermark(10), 2);
    for op in [&mut op, &mut restored] {
        op.on_batch(0, keyed(&["b", "a"], &[12, 15], None), &mut out)
            .unwrap();
        op.on_watermark(20, &mut out).unwrap();
        assert_eq!(rows(&mut out), ["b 2 1 12", "a 3 2 15"]);
        assert_eq!(op.output_watermark(20), 12);
        op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
        // The last rows of each key: the default.
        assert_eq!(rows(&mut out), ["b 12 2 -1", "a 15 3 -1"]);
        assert_eq!(op.output_watermark(WATERMARK_MAX), WATERMARK_MAX);
        assert_eq!(op.state_rows(), 2, "only the keys' row numbers remain");
    }
}

#[test]
fn a_lead_n_rows_ahead_waits_for_n_and_stops_at_the_ttl_gap() {
    let mut op = lead_plan(2, None).create().unwrap();
    let mut out = Collector::default();
    op.on_batch(
        0,
        keyed(&["a", "a", "a", "a"], &[1, 2, 3, 4], None),
        &mut out,
    )
    .unwrap();
    op.on_watermark(10, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 1 1 3", "a 2 2 4"]);

    // With a TTL of 5, rows further apart are separate runs: a lead stops
    // at the gap, and a run the watermark has passed by the TTL is over.
    let mut op = lead_plan(1, Some(5)).create().unwrap();
    op.on_batch(0, keyed(&["a", "a", "a"], &[1, 3, 20], None), &mut out)
        .unwrap();
    op.on_watermark(10, &mut out).unwrap();
    // At 10 the run (1, 3) is over: rows still to come are at 10 or later,
    // more than the TTL after 3.
    assert_eq!(rows(&mut out), ["a 1 1 3", "a 3 2 -1"]);
    op.on_watermark(30, &mut out).unwrap();
    assert_eq!(rows(&mut out), ["a 20 1 -1"], "its run closed at 20 + 5");
}

/// Running aggregates (native and DataFusion's) over keys that spill
/// after every watermark, against the same plan never spilling: the same
/// rows; a checkpoint of the spilled one (keys on disk and in memory)
/// restores to the same end. A plan with `lag` keeps its state in memory.
#[test]
fn running_aggregates_spill_their_keys_and_read_them_back_for_their_next_rows() {
    use crate::spill::{SpillConfig, SpillSpace};
    let space = Arc::new(SpillSpace::new(SpillConfig::default()));
    let batches = numbers_input();
    let watermarks = [2, 5, WATERMARK_MAX];
    for native in [true, false] {
        let whole = run_numbers(
            numbers_plan(native).create().unwrap().as_mut(),
            &batches,
            &watermarks,
        );
        let mut op = numbers_plan(native).create().unwrap();
        let mut out = Collector::default();
        let mut lines = Vec::new();
        for (i, (batch, watermark)) in batches.iter().zip(watermarks).enumerate() {
            op.on_batch(0, batch.clone(), &mut out).unwrap();
            op.on_watermark(watermark, &mut out).unwrap();
            lines.extend(rows(&mut out));
            if i == 0 {
                assert!(op.spill(&space).unwrap(), "native {native}");
                assert_eq!(
                    op.state_rows(),
                    2 + 2,
                    "a and b on disk, a's rows at 2 waiting"
                );
                // A checkpoint holds the keys on disk: restored, the rest
                // of the input gives the same rows.
                let mut restored =
                    crate::operators::testing::restored(&numbers_plan(native), op.as_mut());
                let tail = run_numbers(restored.as_mut(), &batches[1..], &watermarks[1..]);
                assert_eq!([lines.clone(), tail].concat(), whole, "native {native}");
            }
        }
        assert_eq!(lines, whole, "native {native}");
        let stats = op.spill_stats();
        assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    }
    let mut with_lag = plan(None).create().unwrap();
    let mut out = Collector::default();
    with_lag
        .on_batch(0, keyed(&["a"], &[1], None), &mut out)
        .unwrap();
    with_lag.on_watermark(5, &mut out).unwrap();
    assert!(!with_lag.spill(&space).unwrap(), "lag does not spill yet");
}
