//! Every stateful piece checkpoints and restores exactly: an operator is
//! snapshotted at a random point of its input, the snapshot goes through the
//! state directory (Arrow IPC files and a manifest) and comes back into a
//! freshly created operator, which continues with the rest of the input.
//! Its output then equals an uninterrupted run's, and so does the output of
//! the operator that was snapshotted and simply went on. Swept over batch
//! sizes and cut points, for windows (tumble, hop, cumulate, session,
//! keyless, many aggregates), window Top-N, interval joins (inner, left, full), OVER (running
//! aggregates, lag, row_number, a state TTL), MATCH_RECOGNIZE, updating aggregates (GROUP BY
//! without a window, global, DISTINCT), Top-N over a whole stream, joins
//! without a time bound, the temporal join, the lookup join (waiting for a
//! bounded table or not), union, source runners and source connectors.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use datafusion::arrow::array::BooleanArray;
use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, StringArray};
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use eddy_connectors::json_lines::encode_json_lines;
use eddy_connectors::{ConnectorConfig, Connectors};
use eddy_engine::checkpoint::store::StateDir;
use eddy_engine::checkpoint::{Checkpoint, CheckpointKind, NodeCheckpoint};
use eddy_engine::distribute::instances::Origin;
use eddy_engine::distribute::physical::PhysicalGraph;
use eddy_engine::graph::{ConnectorFactory, JobGraph, NodeId, NodeKind};
use eddy_engine::key_groups::KeyGroups;
use eddy_engine::operator::{Collector, Distribution, Operator};
use eddy_engine::partition::instance_rows;
use eddy_engine::rescale::checkpoint::rescale;
use eddy_engine::source::{SourceContext, SourceRunner};
use eddy_engine::state::StateSnapshot;
use eddy_engine::time::{Timestamp, WATERMARK_MAX, WATERMARK_MIN};
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const TABLES: &str = "
CREATE TABLE a (k VARCHAR, v DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND) WITH (connector = 'stdin');
CREATE TABLE b (k VARCHAR, v DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND) WITH (connector = 'stdin');
CREATE TABLE seconds (k VARCHAR, v DOUBLE, ts BIGINT,
  event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts - ts % 1000)) STORED,
  WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND) WITH (connector = 'stdin');
";

/// Raw rows of a table (k, v, ts): keys from a small set (some NULL),
/// times rising with up to 3 s of disorder (so some rows are late).
fn raw_rows(rng: &mut SmallRng, rows: usize, schema: &SchemaRef) -> RecordBatch {
    let mut t = 1_700_000_000_000i64;
    let (mut keys, mut values, mut times) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rows {
        t += rng.random_range(0..40);
        keys.push((rng.random_range(0..20) > 0).then(|| format!("k{}", rng.random_range(0..12))));
        values.push(
            (rng.random_range(0..30) > 0).then(|| f64::from(rng.random_range(0..10_000)) / 100.0),
        );
        times.push(t - rng.random_range(0..3_000));
    }
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(keys)),
        Arc::new(Float64Array::from(values)),
        Arc::new(Int64Array::from(times)),
    ];
    let columns = columns
        .iter()
        .zip(schema.fields())
        .map(|(c, f)| datafusion::arrow::compute::cast(c, f.data_type()).unwrap())
        .collect();
    RecordBatch::try_new(schema.clone(), columns).unwrap()
}

/// One step of an operator's input.
#[derive(Clone)]
enum Step {
    Batch(RecordBatch),
    Watermark(Timestamp),
}

/// The node of `kind` in a compiled job.
fn find(graph: &JobGraph, kind: &str) -> NodeId {
    graph
        .nodes
        .iter()
        .position(|n| matches!(&n.kind, NodeKind::Operator(p) if p.kind() == kind))
        .unwrap_or_else(|| panic!("no {kind} node in\n{}", graph.explain()))
}

fn create(graph: &JobGraph, node: NodeId) -> Box<dyn Operator> {
    match &graph.nodes[node].kind {
        NodeKind::Operator(plan) => plan.create().unwrap(),
        _ => panic!("node {node} is no operator"),
    }
}

/// What arrives on each input of `node`: the raw rows of the source the
/// input reads (through the source's runner, then through every calc node
/// in between), cut into batches of `batch_size`.
fn input_steps(
    graph: &JobGraph,
    node: NodeId,
    raw: &BTreeMap<String, RecordBatch>,
    batch_size: usize,
) -> Vec<Vec<Step>> {
    graph.nodes[node]
        .inputs
        .iter()
        .map(|edge| {
            let mut chain = Vec::new();
            let mut at = edge.from;
            let layout = loop {
                match &graph.nodes[at].kind {
                    NodeKind::Source { layout, .. } => break layout.clone(),
                    NodeKind::Operator(plan) if plan.kind() == "calc" => {
                        chain.push(at);
                        at = graph.nodes[at].inputs[0].from;
                    }
                    _ => panic!("input of {node} is not a source through calc nodes"),
                }
            };
            let table = &graph.nodes[at].name;
            let rows = &raw[table];
            let mut runner = SourceRunner::new(layout);
            let mut calcs: Vec<Box<dyn Operator>> =
                chain.iter().rev().map(|&c| create(graph, c)).collect();
            let mut ctx = SourceContext::new(table.clone());
            let mut steps = Vec::new();
            let mut offset = 0;
            while offset < rows.num_rows() {
                let len = batch_size.min(rows.num_rows() - offset);
                let out = runner
                    .process(&rows.slice(offset, len), None, None, &mut ctx)
                    .unwrap();
                offset += len;
                if let Some(batch) = out.on_time.filter(|b| b.num_rows() > 0) {
                    let mut current = Some(batch);
                    for calc in calcs.iter_mut() {
                        let Some(batch) = current.take() else { break };
                        let mut collector = Collector::default();
                        calc.on_batch(0, batch, &mut collector).unwrap();
                        current = collector.drain().map(|(_, b)| b).next();
                    }
                    if let Some(batch) = current {
                        steps.push(Step::Batch(batch));
                    }
                }
                if let Some(wm) = out.watermark {
                    steps.push(Step::Watermark(wm));
                }
            }
            steps
        })
        .collect()
}

/// Interleaves the inputs' steps in a seeded random order (each input's
/// own order kept).
fn interleave(rng: &mut SmallRng, inputs: Vec<Vec<Step>>) -> Vec<(usize, Step)> {
    let mut cursors = vec![0; inputs.len()];
    let mut out = Vec::new();
    loop {
        let open: Vec<usize> = (0..inputs.len())
            .filter(|&i| cursors[i] < inputs[i].len())
            .collect();
        if open.is_empty() {
            return out;
        }
        let input = open[rng.random_range(0..open.len())];
        out.push((input, inputs[input][cursors[input]].clone()));
        cursors[input] += 1;
    }
}

/// The runtime's view of the inputs: the minimum of their watermarks.
#[derive(Clone)]
struct Clock {
    watermarks: Vec<Timestamp>,
    current: Timestamp,
}

impl Clock {
    fn new(inputs: usize) -> Self {
        Self {
            watermarks: vec![WATERMARK_MIN; inputs],
            current: WATERMARK_MIN,
        }
    }
}

/// Feeds `steps` as the runtime would; returns the JSON lines emitted.
fn drive(op: &mut dyn Operator, clock: &mut Clock, steps: &[(usize, Step)]) -> Vec<String> {
    let mut out = Collector::default();
    for (input, step) in steps {
        match step {
            Step::Batch(batch) => op.on_batch(*input, batch.clone(), &mut out).unwrap(),
            Step::Watermark(wm) => {
                clock.watermarks[*input] = clock.watermarks[*input].max(*wm);
                let min = clock.watermarks.iter().copied().min().unwrap();
                if min > clock.current {
                    clock.current = min;
                    op.on_watermark(min, &mut out).unwrap();
                }
            }
        }
    }
    lines(&mut out)
}

fn finish(op: &mut dyn Operator) -> Vec<String> {
    let mut out = Collector::default();
    op.on_watermark(WATERMARK_MAX, &mut out).unwrap();
    op.on_end(&mut out).unwrap();
    lines(&mut out)
}

fn lines(out: &mut Collector) -> Vec<String> {
    let mut text = Vec::new();
    for (_, batch) in out.drain() {
        encode_json_lines(&batch, &mut text).unwrap();
    }
    String::from_utf8(text)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Writes `snapshot` as node `node`'s state through a real state directory
/// and reads it back.
fn through_the_store(graph: &JobGraph, node: NodeId, snapshot: StateSnapshot) -> StateSnapshot {
    // Only declared tables, each of its declared layout, on the way in and
    // on the way out (what the runtime checks at a checkpoint and a restore).
    let NodeKind::Operator(plan) = &graph.nodes[node].kind else {
        panic!("node {node} is not an operator");
    };
    let declared = eddy_engine::state::declared::of_plan(plan.as_ref()).unwrap();
    eddy_engine::state::declared::check_snapshot(&declared, &snapshot).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = StateDir::open(dir.path()).unwrap();
    let mut nodes = vec![NodeCheckpoint::default(); graph.nodes.len()];
    nodes[node].state = snapshot;
    // At one instance the nodes run are the planned ones.
    let physical = PhysicalGraph::for_parallelism(std::sync::Arc::new(graph.clone()), 1);
    store
        .write(
            &physical,
            &Checkpoint {
                id: 1,
                kind: CheckpointKind::Running,
                nodes,
            },
        )
        .unwrap();
    let mut loaded = store
        .load_latest(graph)
        .unwrap()
        .expect("the checkpoint just written");
    let state = std::mem::take(&mut loaded.nodes[node].state);
    eddy_engine::state::declared::check_restored(&declared, &state).unwrap();
    state
}

/// Runs the checkpoint round trip for the `kind` node of `sql` over seeded
/// inputs, for several batch sizes and cut points.
fn check(sql: &str, kind: &str) {
    let files = [SqlFile {
        name: "test.sql".into(),
        text: format!("{TABLES}{sql}"),
    }];
    let graph = eddy_sql::compile(&files, &BTreeMap::new()).unwrap().graph;
    let node = find(&graph, kind);
    for seed in [1u64, 2] {
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut raw = BTreeMap::new();
        for node in &graph.nodes {
            if let NodeKind::Source { spec, layout } = &node.kind {
                raw.insert(
                    spec.table.clone(),
                    raw_rows(&mut rng, 1_500, &layout.physical_schema),
                );
            }
        }
        for batch_size in [1, 7, 100, 1_000] {
            let steps = interleave(&mut rng, input_steps(&graph, node, &raw, batch_size));
            let inputs = graph.nodes[node].inputs.len();
            let mut whole = create(&graph, node);
            let mut clock = Clock::new(inputs);
            let mut expected = drive(whole.as_mut(), &mut clock, &steps);
            expected.extend(finish(whole.as_mut()));
            assert!(!expected.is_empty(), "{kind}: no output to compare");
            let expected = common::sorted(expected);
            for _ in 0..3 {
                let cut = rng.random_range(0..=steps.len());
                let mut first = create(&graph, node);
                let mut clock = Clock::new(inputs);
                let before = drive(first.as_mut(), &mut clock, &steps[..cut]);
                let snapshot = first.snapshot().unwrap();

                // The snapshotted operator goes on as if nothing happened.
                let mut went_on = before.clone();
                went_on.extend(drive(first.as_mut(), &mut clock.clone(), &steps[cut..]));
                went_on.extend(finish(first.as_mut()));
                assert_eq!(
                    common::sorted(went_on),
                    expected,
                    "{kind}: snapshot changed the operator (batch size {batch_size}, cut {cut})"
                );

                // A fresh operator restored from the stored snapshot continues exactly.
                let mut second = create(&graph, node);
                second
                    .restore(through_the_store(&graph, node, snapshot))
                    .unwrap();
                let mut resumed = before;
                resumed.extend(drive(second.as_mut(), &mut clock, &steps[cut..]));
                resumed.extend(finish(second.as_mut()));
                assert_eq!(
                    common::sorted(resumed),
                    expected,
                    "{kind}: restored operator differs (batch size {batch_size}, cut {cut})"
                );
            }
            if keyed(&graph, node) {
                for (before, after) in [(2, 3), (3, 1), (1, 2)] {
                    let cut = rng.random_range(0..=steps.len());
                    let (got, late) = rescaled_run(&graph, node, &steps, cut, before, after);
                    // Rows routed apart reach an accumulator in other
                    // batches: sums may differ in the last bits.
                    let got = common::sorted(got.iter().map(|l| rounded(l)).collect());
                    let expected: Vec<String> =
                        common::sorted(expected.iter().map(|l| rounded(l)).collect());
                    if got != expected {
                        let (want, have): (BTreeSet<&String>, BTreeSet<&String>) =
                            (expected.iter().collect(), got.iter().collect());
                        panic!(
                            "{kind}: rescaled from {before} to {after} instances, {} rows where {} expected (batch size {batch_size}, cut {cut} of {})\n missing {:#?}\n extra {:#?}",
                            got.len(),
                            expected.len(),
                            steps.len(),
                            want.difference(&have).take(3).collect::<Vec<_>>(),
                            have.difference(&want).take(3).collect::<Vec<_>>(),
                        );
                    }
                    assert_eq!(
                        late,
                        whole.late_rows(),
                        "{kind}: rescaled from {before} to {after} instances, late rows differ"
                    );
                }
            }
        }
    }
}

/// `line` (a JSON object) with its floating-point numbers to 9 digits.
fn rounded(line: &str) -> String {
    fn round(value: serde_json::Value) -> serde_json::Value {
        match value {
            serde_json::Value::Number(n) if n.is_f64() => {
                serde_json::json!(format!("{:.9e}", n.as_f64().unwrap()))
            }
            serde_json::Value::Object(map) => {
                serde_json::Value::Object(map.into_iter().map(|(k, v)| (k, round(v))).collect())
            }
            other => other,
        }
    }
    round(serde_json::from_str(line).unwrap()).to_string()
}

/// Whether `node` runs as parallel instances (keyed, every input hashed).
fn keyed(graph: &JobGraph, node: NodeId) -> bool {
    PhysicalGraph::new(std::sync::Arc::new(graph.clone()), 2, KeyGroups::default())
        .origins()
        .iter()
        .any(|o| matches!(o, Origin::Instance { of, .. } if *of == node))
}

/// `steps` for `instances` instances of `node`: each batch's rows to the
/// instance owning their key group (as the key split routes them), every
/// watermark to all.
fn routed(
    graph: &JobGraph,
    node: NodeId,
    steps: &[(usize, Step)],
    instances: u32,
) -> Vec<Vec<(usize, Step)>> {
    let mut out = vec![Vec::new(); instances as usize];
    for (input, step) in steps {
        match step {
            Step::Batch(batch) => {
                let Distribution::Hash(exprs) = graph.input_distribution(node, *input) else {
                    panic!("input {input} of a keyed node is not hashed");
                };
                let keys: Vec<ArrayRef> = exprs
                    .iter()
                    .map(|e| {
                        e.evaluate(batch)
                            .unwrap()
                            .into_array(batch.num_rows())
                            .unwrap()
                    })
                    .collect();
                let owners =
                    instance_rows(&keys, batch.num_rows(), instances, KeyGroups::default())
                        .unwrap();
                for (i, steps) in out.iter_mut().enumerate() {
                    let mask: BooleanArray =
                        owners.iter().map(|&o| Some(o as usize == i)).collect();
                    let part = filter_record_batch(batch, &mask).unwrap();
                    if part.num_rows() > 0 {
                        steps.push((*input, Step::Batch(part)));
                    }
                }
            }
            Step::Watermark(_) => out.iter_mut().for_each(|s| s.push((*input, step.clone()))),
        }
    }
    out
}

/// Runs `node` as `before` instances up to `cut`, checkpoints them, moves
/// their state to `after` instances through the job's own rescaling (the
/// expanded graphs and [`rescale`]), and runs the rest there. Returns every
/// instance's output and the late rows the new instances count in all.
fn rescaled_run(
    graph: &JobGraph,
    node: NodeId,
    steps: &[(usize, Step)],
    cut: usize,
    before: u32,
    after: u32,
) -> (Vec<String>, u64) {
    let groups = KeyGroups::default();
    let inputs = graph.nodes[node].inputs.len();
    let planned = std::sync::Arc::new(graph.clone());
    let (old, new) = (
        PhysicalGraph::new(planned.clone(), before as usize, groups),
        PhysicalGraph::new(planned, after as usize, groups),
    );
    let instance = |g: &PhysicalGraph, index: u32| {
        g.origins()
            .iter()
            .position(|o| *o == Origin::Instance { of: node, index })
            .or_else(|| (g.parallelism() == 1).then_some(node))
            .unwrap()
    };
    let mut out = Vec::new();
    let mut clock = Clock::new(inputs);
    let mut checkpoint = vec![Some(NodeCheckpoint::default()); old.nodes.len()];
    for (i, steps) in routed(graph, node, &steps[..cut], before)
        .iter()
        .enumerate()
    {
        let mut op = create(graph, node);
        clock = Clock::new(inputs);
        out.extend(drive(op.as_mut(), &mut clock, steps));
        checkpoint[instance(&old, i as u32)] = Some(NodeCheckpoint {
            state: op.snapshot().unwrap(),
            ..NodeCheckpoint::default()
        });
    }
    let mut moved = rescale(&old, &new, checkpoint).unwrap();
    let mut late = 0;
    for (i, steps) in routed(graph, node, &steps[cut..], after).iter().enumerate() {
        let mut op = create(graph, node);
        let state = moved[instance(&new, i as u32)].take().unwrap().state;
        op.restore(state).unwrap();
        out.extend(drive(op.as_mut(), &mut clock.clone(), steps));
        out.extend(finish(op.as_mut()));
        late += op.late_rows();
    }
    (out, late)
}

#[test]
fn tumbling_windows_with_many_aggregates() {
    check(
        "SELECT w.start, k, n, total, mean, low, high, keys, mid, spread, firm FROM (
           SELECT tumble(INTERVAL '5' SECOND) AS w, k, count(*) AS n, sum(v) AS total, avg(v) AS mean,
                  min(v) AS low, max(v) AS high, count(DISTINCT v) AS keys, median(v) AS mid,
                  welford_stddev_pop(v) AS spread, count(*) FILTER (WHERE v > 50) AS firm
           FROM a GROUP BY w, k)",
        "window_aggregate",
    );
}

#[test]
fn hopping_windows_without_keys() {
    check(
        "SELECT w.start, w.end, n, total FROM (
           SELECT hop(INTERVAL '1' SECOND, INTERVAL '4' SECOND) AS w, count(*) AS n, sum(v) AS total FROM a GROUP BY w)",
        "window_aggregate",
    );
}

#[test]
fn cumulating_windows_per_key() {
    check(
        "SELECT w.start, w.end, k, n, total FROM (
           SELECT cumulate(INTERVAL '1' SECOND, INTERVAL '4' SECOND) AS w, k, count(*) AS n, sum(v) AS total
           FROM a GROUP BY w, k)",
        "window_aggregate",
    );
}

#[test]
fn session_windows_per_key() {
    check(
        "SELECT w.start, w.end, k, n, total, high FROM (
           SELECT session(INTERVAL '300' MILLISECOND) AS w, k, count(*) AS n, sum(v) AS total, max(v) AS high
           FROM a GROUP BY w, k)",
        "session_aggregate",
    );
}

#[test]
fn window_rank_keeps_each_windows_rows_until_complete() {
    // `seconds` has one event time per second: every second's rows are a
    // window's results to rank.
    check(
        "SELECT * FROM (
           SELECT k, v, event_time, ROW_NUMBER() OVER (PARTITION BY event_time ORDER BY v DESC, k) AS rn,
                  DENSE_RANK() OVER (PARTITION BY event_time ORDER BY v DESC, k) AS dr
           FROM seconds) WHERE rn <= 3",
        "window_rank",
    );
}

#[test]
fn interval_joins_inner_left_and_full() {
    for join in ["JOIN", "LEFT JOIN", "FULL JOIN"] {
        check(
            &format!(
                "SELECT a.k, a.v, b.v AS bv, a.ts, b.ts AS bts FROM a {join} b
                   ON a.k = b.k AND b.event_time BETWEEN a.event_time - INTERVAL '2' SECOND AND a.event_time + INTERVAL '1' SECOND"
            ),
            "interval_join",
        );
    }
}

#[test]
fn match_recognize_keeps_partial_matches_across_a_restore() {
    // Rows of partial matches (a greedy end waits for the row after it,
    // WITHIN decides others) and pending rows are in the snapshot.
    check(
        "SELECT * FROM a MATCH_RECOGNIZE (
           PARTITION BY k ORDER BY event_time
           MEASURES FIRST(S.ts) AS s_ts, COUNT(S.*) AS n, LAST(L.v) AS top, AVG(L.v) AS mean
           PATTERN (S{1,3} L+) WITHIN INTERVAL '4' SECOND
           DEFINE S AS S.v < 50, L AS L.v > LAST(S.v) + 10)",
        "match_recognize",
    );
    check(
        "SELECT * FROM a MATCH_RECOGNIZE (
           ORDER BY event_time
           MEASURES FIRST(ts) AS t0, LAST(ts) AS t1, CLASSIFIER() AS c
           AFTER MATCH SKIP TO NEXT ROW
           PATTERN (X (Y | Z)+? W)
           DEFINE X AS X.v > 90, Y AS Y.v < 30, Z AS Z.v < 60, W AS W.v > PREV(W.v))",
        "match_recognize",
    );
}

#[test]
fn order_by_event_time_keeps_waiting_rows_across_a_restore() {
    check(
        "SELECT k, v, ts FROM a ORDER BY event_time, v DESC",
        "event_time_sort",
    );
}

#[test]
fn regular_join_keeps_every_row_across_a_restore() {
    check(
        "SELECT a.k, a.v, b.v AS bv, a.ts, b.ts AS bts FROM a JOIN b ON a.k = b.k",
        "regular_join",
    );
}

#[test]
fn over_running_aggregates_lag_and_row_number() {
    check(
        "SELECT k, v, ts,
           sum(v) OVER (PARTITION BY k ORDER BY event_time) AS running,
           dynamic_threshold(v, 3.0, 100.0, 3) OVER (PARTITION BY k ORDER BY event_time
             ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS threshold,
           count(*) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS n,
           lag(v, 2) OVER (PARTITION BY k ORDER BY event_time) AS back,
           row_number() OVER (PARTITION BY k ORDER BY event_time) AS rn
         FROM a",
        "over",
    );
}

#[test]
fn over_sliding_frames() {
    check(
        "SELECT k, ts,
           sum(v) OVER (PARTITION BY k ORDER BY event_time RANGE BETWEEN INTERVAL '1' SECOND PRECEDING AND CURRENT ROW) AS s,
           max(v) OVER (PARTITION BY k ORDER BY event_time ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS hi
         FROM a",
        "over",
    );
}

#[test]
fn over_with_a_state_time_to_live() {
    check(
        "SET 'table.exec.state.ttl' = '300ms';
         SELECT k, v, ts, count(*) OVER (PARTITION BY k ORDER BY event_time) AS n FROM a",
        "over",
    );
}

#[test]
fn updating_aggregates_keyed_global_and_distinct() {
    check(
        "SELECT k, count(*) AS n, sum(v) AS total, min(v) AS low, max(v) AS high,
                count(DISTINCT v) AS values, avg(v) AS mean, count(*) FILTER (WHERE v > 50) AS firm
         FROM a GROUP BY k",
        "updating_aggregate",
    );
    check(
        "SELECT count(*) AS n, max(v) AS high, median(v) AS mid FROM a",
        "updating_aggregate",
    );
    check("SELECT DISTINCT k FROM a", "updating_aggregate");
}

#[test]
fn top_n_over_a_whole_stream() {
    check(
        "SELECT k, v, rn FROM (SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM a) WHERE rn <= 3",
        "updating_rank",
    );
}

#[test]
fn temporal_join_keeps_waiting_rows_and_versions_across_a_restore() {
    check(
        "SELECT a.k, a.v, r.v AS w FROM a LEFT JOIN b FOR SYSTEM_TIME AS OF a.event_time AS r ON a.k = r.k",
        "temporal_join",
    );
}

#[test]
fn lookup_join_keeps_its_table_across_a_restore() {
    // The table from Kafka-like stdin: probe rows meet it as it stands.
    check(
        "SELECT x.k, x.v, r.v AS w FROM (SELECT *, PROCTIME() AS p FROM a) x
           LEFT JOIN b FOR SYSTEM_TIME AS OF x.p AS r ON x.k = r.k",
        "lookup_join",
    );
}

#[test]
fn lookup_join_keeps_rows_waiting_for_a_bounded_table_across_a_restore() {
    // A table from a bounded connector: probe rows wait until it is whole.
    check(
        "CREATE TABLE side (k VARCHAR, v DOUBLE, ts BIGINT) WITH (connector = 'values', rows = '{\"k\": \"k1\", \"v\": 1.0, \"ts\": 0}');
         SELECT x.k, x.v, r.v AS w FROM (SELECT *, PROCTIME() AS p FROM a) x
           JOIN side FOR SYSTEM_TIME AS OF x.p AS r ON x.k = r.k",
        "lookup_join",
    );
}

#[test]
fn joins_without_a_time_bound_left_and_full() {
    check(
        "SELECT a.k, a.v, b.v AS w FROM a LEFT JOIN b ON a.k = b.k AND a.ts % 50 = b.ts % 50 AND b.v > a.v",
        "updating_join",
    );
    check(
        "SELECT a.k, a.v, b.k AS k2, b.v AS w FROM a FULL JOIN b ON a.k = b.k AND a.ts % 50 = b.ts % 50",
        "updating_join",
    );
}

#[test]
fn union_of_two_sources() {
    check(
        "SELECT w.start, n FROM (
           SELECT tumble(INTERVAL '3' SECOND) AS w, count(*) AS n FROM (
             SELECT k, event_time FROM a UNION ALL SELECT k, event_time FROM b) GROUP BY w)",
        "union",
    );
}

#[test]
fn a_source_runner_resumes_judging_lateness_where_it_stood() {
    let files = [SqlFile {
        name: "test.sql".into(),
        text: format!("{TABLES}SELECT k FROM a"),
    }];
    let graph = eddy_sql::compile(&files, &BTreeMap::new()).unwrap().graph;
    let NodeKind::Source { layout, .. } = &graph.nodes[0].kind else {
        panic!("node 0 is the source")
    };
    let mut rng = SmallRng::seed_from_u64(9);
    let raw = raw_rows(&mut rng, 2_000, &layout.physical_schema);
    let run = |runner: &mut SourceRunner, from: usize, to: usize, batch: usize| {
        let mut ctx = SourceContext::new("a");
        let mut out = Vec::new();
        let mut at = from;
        while at < to {
            let len = batch.min(to - at);
            let o = runner
                .process(&raw.slice(at, len), None, None, &mut ctx)
                .unwrap();
            at += len;
            out.push((
                o.on_time.map(|b| b.num_rows()),
                o.late.map(|b| b.num_rows()),
                o.watermark,
                o.late_watermark,
            ));
        }
        out
    };
    for batch in [1, 13, 500] {
        let mut whole = SourceRunner::new(layout.clone());
        let expected = run(&mut whole, 0, 2_000, batch);
        let cut = batch * rng.random_range(0..(2_000 / batch));
        let mut first = SourceRunner::new(layout.clone());
        let mut got = run(&mut first, 0, cut, batch);
        let mut second = SourceRunner::new(layout.clone());
        second.restore(&first.state());
        got.extend(run(&mut second, cut, 2_000, batch));
        assert_eq!(got, expected, "batch size {batch}, cut {cut}");
    }
}

#[test]
fn source_connectors_resume_at_their_position() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("a.ndjson");
    let mut text = String::new();
    for i in 0..5_000 {
        text.push_str(&if i % 97 == 5 {
            "not json\n".to_string()
        } else {
            format!("{{\"k\":\"k{i}\",\"v\":{i}.5,\"ts\":{i}}}\n")
        });
    }
    std::fs::write(&input, text).unwrap();
    let sql = format!(
        "{TABLES}CREATE TABLE g (order_id VARCHAR, order_ts BIGINT) WITH (connector = 'generator', stream = 'orders', count = '20000');
         SELECT k FROM a; SELECT order_id FROM g;"
    );
    let graph = eddy_sql::compile(
        &[SqlFile {
            name: "t.sql".into(),
            text: sql,
        }],
        &BTreeMap::new(),
    )
    .unwrap()
    .graph;
    for batch_size in [1, 64, 1_000] {
        let config = ConnectorConfig {
            inputs: BTreeMap::from([("a".to_string(), input.display().to_string())]),
            batch_size,
            ..ConnectorConfig::default()
        };
        let connectors = Connectors::new(config);
        for table in ["a", "g"] {
            let spec = graph
                .nodes
                .iter()
                .find_map(|n| match &n.kind {
                    NodeKind::Source { spec, .. } if spec.table == table => Some(spec.clone()),
                    _ => None,
                })
                .unwrap();
            let read = |reader: &mut Box<dyn eddy_engine::source::SourceReader>, limit: usize| {
                let mut ctx = SourceContext::new(table);
                let mut batches = Vec::new();
                while batches.len() < limit {
                    match reader.next_batch(&mut ctx).unwrap() {
                        Some(b) => batches.push(b),
                        None => break,
                    }
                }
                (batches, ctx.take_bad_rows().len())
            };
            let (all, all_bad) = read(
                &mut connectors.open_source(&spec, None).unwrap(),
                usize::MAX,
            );
            let expected = datafusion::arrow::compute::concat_batches(&spec.schema, &all).unwrap();
            for stop_after in [0, 1, 3] {
                let mut first = connectors.open_source(&spec, None).unwrap();
                let (mut batches, bad_before) = read(&mut first, stop_after);
                let position = first.position();
                assert!(!position.is_null(), "{table} has a position");
                let mut second = connectors.open_source(&spec, Some(&position)).unwrap();
                let (rest, bad_after) = read(&mut second, usize::MAX);
                batches.extend(rest);
                let got =
                    datafusion::arrow::compute::concat_batches(&spec.schema, &batches).unwrap();
                assert_eq!(
                    got, expected,
                    "{table}: batch size {batch_size}, resumed after {stop_after} batches"
                );
                assert_eq!(
                    bad_before + bad_after,
                    all_bad,
                    "{table}: every bad row counted once"
                );
            }
        }
    }
}
