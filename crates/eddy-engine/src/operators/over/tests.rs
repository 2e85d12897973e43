//! The OVER operator driven through the `Operator` trait: rows wait for
//! the watermark, run per key in event-time order, and a restored operator
//! goes on where the snapshot was.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::ScalarValue;
use datafusion::functions_aggregate::sum::sum_udaf;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::col;

use super::{Frame, OverFunction, OverPlan};
use crate::operator::{Collector, OperatorPlan};
use crate::operators::testing::{keyed, kv_schema};
use crate::time::WATERMARK_MAX;

/// `row_number()`, `lag(v)` and `sum(v)` (rows up to the current one) per
/// `k`, ordered by `v` as event time.
fn plan(state_ttl_ms: Option<i64>) -> OverPlan {
    let input = kv_schema();
    let sum = AggregateExprBuilder::new(sum_udaf(), vec![col("v", &input).unwrap()])
        .schema(input.clone())
        .alias("s")
        .build()
        .unwrap();
    let mut fields: Vec<Field> = input.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.push(Field::new("rn", DataType::UInt64, true));
    fields.push(Field::new("prev", DataType::Int64, true));
    fields.push(Field::new("s", DataType::Int64, true));
    OverPlan {
        input_schema: input.clone(),
        output_schema: Arc::new(Schema::new(fields)),
        partition_by: vec![col("k", &input).unwrap()],
        time_column: 1,
        allowed_lateness_ms: 0,
        functions: vec![
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
            },
        ],
        state_ttl_ms,
    }
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
fn a_restored_operator_goes_on_where_the_snapshot_was() {
    let plan = plan(None);
    let mut op = plan.create().unwrap();
    let mut out = Collector::default();
    op.on_batch(0, keyed(&["a", "a", "a"], &[1, 2, 9], None), &mut out)
        .unwrap();
    op.on_watermark(5, &mut out).unwrap();
    rows(&mut out);
    let mut restored = plan.create().unwrap();
    restored.restore(op.snapshot().unwrap()).unwrap();
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
