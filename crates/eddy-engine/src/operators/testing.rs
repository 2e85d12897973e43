//! Helpers for operator unit tests over (k VARCHAR, v BIGINT) rows, plain
//! or as a changelog, or with an event time `ts`, and for reading what an
//! updating operator or a window emitted.

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, Int64Array, Int8Array, StringArray, StructArray, TimestampMillisecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::logical_expr::AggregateUDF;
use datafusion::physical_expr::aggregate::AggregateExprBuilder;
use datafusion::physical_expr::expressions::col;

use crate::changelog::{self, RowKind};
use crate::operator::Collector;
use crate::operators::windowed_group_by::WindowedGroupBy;
use crate::operators::AggregateCall;
use crate::window::window_struct_type;

/// The rows' schema: `k VARCHAR, v BIGINT`.
pub fn kv_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
    ]))
}

/// Rows `(k, v)`; with `kinds`, an updating batch of those row kinds.
pub fn kv_rows(keys: &[Option<&str>], values: &[i64], kinds: Option<&[i8]>) -> RecordBatch {
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(keys.to_vec())),
        Arc::new(Int64Array::from(values.to_vec())),
    ];
    match kinds {
        None => RecordBatch::try_new(kv_schema(), columns).expect("rows"),
        Some(kinds) => {
            columns.push(Arc::new(Int8Array::from(kinds.to_vec())));
            RecordBatch::try_new(changelog::updating_schema(&kv_schema(), &[]), columns)
                .expect("changelog rows")
        }
    }
}

/// [`kv_rows`] with every key present.
pub fn keyed(keys: &[&str], values: &[i64], kinds: Option<&[i8]>) -> RecordBatch {
    let keys: Vec<Option<&str>> = keys.iter().map(|k| Some(*k)).collect();
    kv_rows(&keys, values, kinds)
}

/// What an updating operator emitted, a row a line: its kind, then its
/// values (`+U a 2 13`).
pub fn changes(out: &mut Collector) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, batch) in out.drain() {
        let kinds = changelog::row_kinds(&batch)
            .expect("an updating batch")
            .clone();
        for r in 0..batch.num_rows() {
            let mut line = RowKind::of(kinds.value(r))
                .map_or("?", RowKind::short)
                .to_string();
            for c in 0..batch.num_columns() - 1 {
                let value = ScalarValue::try_from_array(batch.column(c), r).expect("value");
                line.push(' ');
                line.push_str(&value.to_string());
            }
            lines.push(line);
        }
    }
    lines
}

/// Rows with an event time: `k VARCHAR, v BIGINT, ts TIMESTAMP(3)`.
pub fn timed_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Utf8, true),
        Field::new("v", DataType::Int64, true),
        Field::new(
            "ts",
            DataType::Timestamp(TimeUnit::Millisecond, None),
            false,
        ),
    ]))
}

/// Rows `(k, v, ts)` of [`timed_schema`].
pub fn timed_rows(keys: &[&str], values: &[i64], times: &[i64]) -> RecordBatch {
    RecordBatch::try_new(
        timed_schema(),
        vec![
            Arc::new(StringArray::from(keys.to_vec())),
            Arc::new(Int64Array::from(values.to_vec())),
            Arc::new(TimestampMillisecondArray::from(times.to_vec())),
        ],
    )
    .expect("timed rows")
}

/// `function(v)` over [`timed_schema`] rows, named `name`.
pub fn aggregate_call(function: Arc<AggregateUDF>, name: &str) -> AggregateCall {
    let schema = timed_schema();
    AggregateCall {
        expr: Arc::new(
            AggregateExprBuilder::new(function, vec![col("v", &schema).expect("v")])
                .schema(schema)
                .alias(name)
                .build()
                .expect("aggregate"),
        ),
        filter: None,
    }
}

/// The output of `GROUP BY window, k` with two BIGINT aggregates:
/// `window, k, n, total`.
pub fn windowed_output() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("window", window_struct_type(), true),
        Field::new("k", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
        Field::new("total", DataType::Int64, true),
    ]))
}

/// What windows of [`windowed_output`] fired, a row a line: `start-end key
/// n total` (a NULL total as `NULL`), sorted.
pub fn fired_windows(out: &mut Collector) -> Vec<String> {
    let mut lines = Vec::new();
    for (_, batch) in out.drain() {
        let window = batch
            .column(0)
            .as_any()
            .downcast_ref::<StructArray>()
            .expect("a window struct");
        let bound = |name: &str| {
            window
                .column_by_name(name)
                .and_then(|c| c.as_any().downcast_ref::<TimestampMillisecondArray>())
                .expect("a window bound")
                .clone()
        };
        let (start, end) = (bound("start"), bound("end"));
        let int = |i: usize| {
            batch
                .column(i)
                .as_any()
                .downcast_ref::<Int64Array>()
                .expect("BIGINT")
                .clone()
        };
        let keys = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .expect("keys");
        let (n, total) = (int(2), int(3));
        for r in 0..batch.num_rows() {
            let total = if total.is_null(r) {
                "NULL".to_string()
            } else {
                total.value(r).to_string()
            };
            lines.push(format!(
                "{}-{} {} {} {total}",
                start.value(r),
                end.value(r),
                keys.value(r),
                n.value(r)
            ));
        }
    }
    lines.sort();
    lines
}

/// `GROUP BY window, k` over [`timed_schema`] rows (timed by `t`, no
/// lateness) with `count(v) AS n` and `sum(v) AS total`, as
/// [`windowed_output`] has them.
pub fn count_and_sum_by_k() -> WindowedGroupBy {
    use crate::operators::windowed_group_by::GroupColumn;
    use datafusion::functions_aggregate::count::count_udaf;
    use datafusion::functions_aggregate::sum::sum_udaf;
    WindowedGroupBy {
        input_schema: timed_schema(),
        output_schema: windowed_output(),
        time_column: 2,
        allowed_lateness_ms: 0,
        group_columns: vec![GroupColumn::Window, GroupColumn::Key(0)],
        keys: vec![(col("k", &timed_schema()).expect("k"), "k".into())],
        aggregates: vec![
            aggregate_call(count_udaf(), "n"),
            aggregate_call(sum_udaf(), "total"),
        ],
    }
}

/// Instance `instance` of `to` of `plan`'s operator, restored from the
/// snapshots `parts` of `from` old instances as a resumed job hands them
/// over ([`crate::key_groups::KeyGroups::handed_over`]), through
/// [`crate::operator::OperatorPlan::rescale_state`].
pub fn rescaled_instance(
    plan: &dyn crate::operator::OperatorPlan,
    parts: &[crate::state::StateSnapshot],
    groups: crate::key_groups::KeyGroups,
    instance: u32,
    to: u32,
    from: u32,
) -> Box<dyn crate::operator::Operator> {
    let handed = groups
        .handed_over(instance, to, from)
        .into_iter()
        .map(|(old, counted)| crate::rescale::InstanceState {
            state: parts[old as usize].clone(),
            counted,
        })
        .collect();
    let range = crate::rescale::KeyRange::of_instance(groups, instance, to);
    let mut op = plan.create().expect("an operator");
    let state = plan.rescale_state(handed, &range).expect("rescaled state");
    let declared = crate::state::declared::of_plan(plan).expect("declared tables");
    crate::state::declared::check_restored(&declared, &state).expect("rescaled state fits");
    op.restore(state).expect("restored");
    op
}

/// A fresh operator of `plan` restored from a snapshot of `op`, as a
/// resumed job makes it: the snapshot is checked against the plan's
/// declared state tables as the runtime checks it when it is taken and
/// before it is restored.
pub fn restored(
    plan: &dyn crate::operator::OperatorPlan,
    op: &mut dyn crate::operator::Operator,
) -> Box<dyn crate::operator::Operator> {
    let state = op.snapshot().expect("a snapshot");
    let declared = crate::state::declared::of_plan(plan).expect("declared tables");
    crate::state::declared::check_snapshot(&declared, &state).expect("only declared tables");
    crate::state::declared::check_restored(&declared, &state).expect("the snapshot fits");
    let mut fresh = plan.create().expect("an operator");
    fresh.restore(state).expect("restored");
    fresh
}

/// A (key, row) bytes state table's pairs, sorted: what
/// [`crate::state::keyed_rows::KeyedRows`] checkpoints.
pub fn binary_pairs(table: &RecordBatch) -> Vec<(Vec<u8>, Vec<u8>)> {
    let column = |i: usize| {
        table
            .column(i)
            .as_any()
            .downcast_ref::<datafusion::arrow::array::BinaryArray>()
            .expect("a binary column")
            .iter()
            .map(|v| v.expect("not null").to_vec())
            .collect::<Vec<_>>()
    };
    let mut pairs: Vec<_> = column(0).into_iter().zip(column(1)).collect();
    pairs.sort();
    pairs
}

/// The keyed table `whole` with the one change `changed`/`keyed`
/// (a [`crate::state::KeyedTable`] holding a change) applied, as the
/// checkpoint store reads it back.
pub fn with_change(
    whole: RecordBatch,
    changed: RecordBatch,
    keyed: &crate::state::KeyedTable,
) -> RecordBatch {
    let change = keyed.change.clone().expect("a change");
    crate::checkpoint::changes::apply(
        whole,
        vec![crate::checkpoint::changes::Change {
            changed,
            removed: Some(change.removed),
        }],
        keyed.key_columns,
    )
    .expect("the change applies")
}

/// Rows of a state table as sorted lines, a column's value after another.
pub fn table_lines(table: &RecordBatch) -> Vec<String> {
    let mut lines: Vec<String> = (0..table.num_rows())
        .map(|r| {
            table
                .columns()
                .iter()
                .map(|c| {
                    ScalarValue::try_from_array(c, r)
                        .expect("value")
                        .to_string()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.sort();
    lines
}

/// Drives two operators of `plan` through `batches` (input, batch), the
/// watermark at the batch's number before each, one of them spilling
/// after every third of all but the last `tail` batches, and asserts that
/// spilling changes nothing: the same changes batch by batch, the same
/// rows held, the same checkpoint tables (as sorted rows), and an
/// operator restored from the spilled checkpoint going on with the same
/// changes over the last `tail` batches.
pub fn assert_spilling_changes_nothing(
    plan: &dyn crate::operator::OperatorPlan,
    batches: &[(usize, RecordBatch)],
    tail: usize,
) {
    use crate::operator::Operator;
    use crate::spill::{SpillConfig, SpillSpace};
    /// What each operator emits for the batch, in order.
    fn each(
        ops: &mut [&mut Box<dyn Operator>],
        input: usize,
        batch: &RecordBatch,
    ) -> Vec<Vec<String>> {
        ops.iter_mut()
            .map(|op| {
                let mut out = Collector::default();
                op.on_batch(input, batch.clone(), &mut out)
                    .expect("a batch");
                changes(&mut out)
            })
            .collect()
    }
    let space = Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut whole = plan.create().expect("an operator");
    let mut spilling = plan.create().expect("an operator");
    let head = batches.len() - tail;
    for (i, (input, batch)) in batches[..head].iter().enumerate() {
        for op in [&mut whole, &mut spilling] {
            op.on_watermark(i as i64, &mut Collector::default())
                .expect("a watermark");
        }
        let out = each(&mut [&mut whole, &mut spilling], *input, batch);
        assert_eq!(out[0], out[1], "batch {i}");
        if i % 3 == 0 {
            assert!(spilling.spill(&space).expect("a spill"), "batch {i}");
            assert_eq!(spilling.state_bytes(), 0, "memory starts afresh");
        }
    }
    let stats = spilling.spill_stats();
    assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    let (mut expected, got) = (
        whole.snapshot().expect("a snapshot"),
        spilling.snapshot().expect("a snapshot"),
    );
    assert_eq!(whole.state_rows(), spilling.state_rows(), "rows held");
    assert!(
        got.tables.is_empty() && !got.files.is_empty(),
        "a spilled snapshot streams its tables to files"
    );
    let mut restored = plan.create().expect("an operator");
    restored.restore(got.clone()).expect("restored");
    let mut got = got;
    for spec in plan.state_tables().expect("declared tables") {
        assert_eq!(
            table_lines(&expected.take_table(spec.name()).expect("a table")),
            table_lines(&got.take_table(spec.name()).expect("a table")),
            "table {}",
            spec.name()
        );
    }
    for (input, batch) in &batches[head..] {
        let out = each(
            &mut [&mut whole, &mut spilling, &mut restored],
            *input,
            batch,
        );
        assert_eq!(out[0], out[1], "after the checkpoint");
        assert_eq!(out[0], out[2], "restored");
    }
}

/// `batches` batches of 20 rows ([`timed_rows`]) over `keys` keys
/// (`k0`, ...), values 0-9, batch `i` at times `i * 2` to `i * 2 +
/// spread - 1` (so a window takes rows after it spilled), each followed
/// by a watermark `lag` ms behind `i * 2`, the last by the end of time.
pub fn timed_steps(batches: i64, keys: usize, spread: i64, lag: i64) -> Vec<(RecordBatch, i64)> {
    let mut seed = 7u64;
    (0..batches)
        .map(|i| {
            let (mut ks, mut values, mut times) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..20 {
                let pick = next_pick(&mut seed);
                ks.push(format!("k{}", pick % keys));
                values.push((pick / keys % 10) as i64);
                times.push(i * 2 + (pick / keys / 10) as i64 % spread);
            }
            let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
            let watermark = if i == batches - 1 {
                i64::MAX
            } else {
                i * 2 - lag
            };
            (timed_rows(&ks, &values, &times), watermark)
        })
        .collect()
}

/// Drives a window operator of `plan` and a twin that spills after every
/// third step through `steps` (a batch, then a watermark), and from the
/// checkpoint at step `checkpoint_at` a third, restored from the spilled
/// twin's checkpoint; asserts that spilling changes nothing: the same rows
/// emitted at every step (`lines` of them, sorted: a spilled window comes
/// out a part of its keys at a time), the same checkpoint tables (as
/// sorted rows) and rows held, state read back, and nothing held at the
/// end.
pub fn assert_spilled_windows_change_nothing(
    plan: &dyn crate::operator::OperatorPlan,
    steps: &[(RecordBatch, i64)],
    checkpoint_at: usize,
    lines: fn(&mut Collector) -> Vec<String>,
) {
    use crate::operator::Operator;
    use crate::spill::{SpillConfig, SpillSpace};
    let space = Arc::new(SpillSpace::new(SpillConfig::default()));
    let mut whole = plan.create().expect("an operator");
    let mut spilling = plan.create().expect("an operator");
    let mut restored: Option<Box<dyn Operator>> = None;
    for (i, (batch, watermark)) in steps.iter().enumerate() {
        let mut emitted = Vec::new();
        for op in [Some(&mut whole), Some(&mut spilling), restored.as_mut()]
            .into_iter()
            .flatten()
        {
            let mut out = Collector::default();
            op.on_batch(0, batch.clone(), &mut out).expect("a batch");
            op.on_watermark(*watermark, &mut out).expect("a watermark");
            let mut rows = lines(&mut out);
            rows.sort();
            emitted.push(rows);
        }
        for other in &emitted[1..] {
            assert_eq!(&emitted[0], other, "step {i}");
        }
        if i % 3 == 0 {
            assert!(spilling.spill(&space).expect("a spill"), "step {i}");
            assert_eq!(spilling.state_bytes(), 0, "memory starts afresh");
        }
        if i == checkpoint_at {
            let (mut expected, mut got) = (
                whole.snapshot().expect("a snapshot"),
                spilling.snapshot().expect("a snapshot"),
            );
            assert_eq!(whole.state_rows(), spilling.state_rows(), "rows held");
            let mut fresh = plan.create().expect("an operator");
            fresh.restore(got.clone()).expect("restored");
            restored = Some(fresh);
            for spec in plan.state_tables().expect("declared tables") {
                assert_eq!(
                    table_lines(&expected.take_table(spec.name()).expect("a table")),
                    table_lines(&got.take_table(spec.name()).expect("a table")),
                    "table {}",
                    spec.name()
                );
            }
        }
    }
    let stats = spilling.spill_stats();
    assert!(stats.written_bytes > 0 && stats.read_bytes > 0, "{stats:?}");
    assert_eq!(spilling.state_rows(), 0, "everything came out");
}

/// `batches` changelog batches of 20 rows over `keys` keys (`k0`, ...),
/// values 0-9, a quarter of each retracting a row put in before (every
/// retraction matches a row held).
pub fn kv_churn(batches: usize, keys: usize) -> Vec<RecordBatch> {
    let mut held: Vec<(usize, i64)> = Vec::new();
    let mut seed = 13u64;
    let mut out = Vec::new();
    for _ in 0..batches {
        let (mut ks, mut vs, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..20 {
            let pick = next_pick(&mut seed);
            let (k, v, kind) = if r % 4 == 3 && !held.is_empty() {
                let at = pick % held.len();
                let (k, v) = held.swap_remove(at);
                (k, v, 3)
            } else {
                let (k, v) = (pick % keys, (pick / keys % 10) as i64);
                held.push((k, v));
                (k, v, 0)
            };
            ks.push(format!("k{k}"));
            vs.push(v);
            kinds.push(kind);
        }
        let ks: Vec<&str> = ks.iter().map(String::as_str).collect();
        out.push(keyed(&ks, &vs, Some(&kinds)));
    }
    out
}

/// The next pseudo-random number of a linear congruential sequence at
/// `seed` (test data that is the same every run).
pub fn next_pick(seed: &mut u64) -> usize {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as usize
}
