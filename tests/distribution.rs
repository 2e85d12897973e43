//! The distribution pass (`eddy_engine::distribute`) on compiled SQL:
//! where a job scaled out over tasks needs exchanges (the Kafka
//! connector's topics), and where `--parallelism` splits keys, both read
//! from what each operator declares.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::collections::BTreeMap;

use eddy_connectors::kafka::exchange::KafkaExchanges;
use eddy_engine::distribute::exchanges::{plan, PartitionedSource};
use eddy_engine::distribute::physical::PhysicalGraph;
use eddy_engine::graph::{JobGraph, NodeKind};
use eddy_engine::operator::Distribution;
use eddy_sql::SqlFile;

const PAYMENTS: &str = "CREATE TABLE payments (
       order_id VARCHAR, method VARCHAR, paid_amount DOUBLE, payment_ts BIGINT NOT NULL,
       event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
       WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
     ) WITH (connector = 'kafka', bootstrap_servers = 'localhost:9092', topic = 'payments');
     CREATE TABLE out (k VARCHAR, n BIGINT) WITH (connector = 'blackhole');";

fn graph(query: &str) -> JobGraph {
    let files = [SqlFile {
        name: "job.sql".into(),
        text: format!("{PAYMENTS}\n{query}"),
    }];
    eddy_sql::compile(&files, &BTreeMap::new()).unwrap().graph
}

fn payments_keyed_by(key: &str) -> Vec<PartitionedSource> {
    vec![PartitionedSource {
        table: "payments".into(),
        key_column: Some(key.into()),
    }]
}

fn topics(group: &str) -> KafkaExchanges {
    KafkaExchanges {
        servers: "b:1".into(),
        group: group.into(),
    }
}

const BY_METHOD: &str = "INSERT INTO out SELECT method, count(*)
     FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
     GROUP BY method, window_start, window_end;";

#[test]
fn an_operator_keyed_by_the_topics_key_needs_no_exchange() {
    let plan = plan(
        &graph(BY_METHOD),
        &payments_keyed_by("method"),
        &topics("g"),
        4,
    )
    .unwrap();
    assert!(plan.exchanges.is_empty());
    assert_eq!(plan.graph.nodes.len(), graph(BY_METHOD).nodes.len());
}

#[test]
fn an_operator_keyed_otherwise_reads_an_exchange_its_input_writes() {
    let original = graph(BY_METHOD);
    let plan = plan(
        &original,
        &payments_keyed_by("order_id"),
        &topics("my group"),
        4,
    )
    .unwrap();
    assert_eq!(plan.exchanges.len(), 1);
    let exchange = &plan.exchanges[0];
    assert_eq!(exchange.keys, vec!["method".to_string()]);
    assert!(
        exchange
            .topic
            .starts_with("my-group.exchange.window_aggregate-"),
        "{}",
        exchange.topic
    );
    // A source put first, a sink added: two nodes more.
    let nodes = &plan.graph.nodes;
    assert_eq!(nodes.len(), original.nodes.len() + 2);
    let NodeKind::Source { spec, layout } = &nodes[0].kind else {
        panic!("the exchange source is not first");
    };
    assert_eq!(spec.options["producers"], "4");
    assert!(
        layout.event_time.is_none(),
        "its watermark comes from markers"
    );
    let NodeKind::Sink { spec } = &nodes[nodes.len() - 1].kind else {
        panic!("the exchange sink is not last");
    };
    assert_eq!(spec.options["partition_columns"], "method");
    assert_eq!(spec.options["topic"], exchange.topic);
    // The window now reads the exchange source, still hashed by method.
    let window = nodes
        .iter()
        .find(|n| n.name.starts_with("window_aggregate"))
        .unwrap();
    assert_eq!(window.inputs[0].from, 0);
    assert!(window.kind.input_distribution(0).is_hash());
    // Edges still point backwards.
    for (id, node) in nodes.iter().enumerate() {
        assert!(node.inputs.iter().all(|e| e.from < id), "{}", node.name);
    }
}

#[test]
fn a_table_not_read_from_kafka_is_refused_with_the_fix() {
    let err = plan(&graph(BY_METHOD), &[], &topics("g"), 4)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("table payments is not read from Kafka"),
        "{err}"
    );
}

/// A global aggregate declares it needs every row in one place: it is
/// never split into instances, and over tasks its rows go to one task.
#[test]
fn a_global_aggregate_runs_as_one_instance_and_reads_one_exchange_partition() {
    let global = "INSERT INTO out SELECT 'all', count(*)
         FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
         GROUP BY window_start, window_end;";
    let g = graph(global);
    let window = g
        .nodes
        .iter()
        .find(|n| n.name.starts_with("window_aggregate"))
        .unwrap();
    let NodeKind::Operator(op) = &window.kind else {
        panic!("not an operator")
    };
    assert_eq!(op.distribution(), Distribution::Single);
    let expanded = PhysicalGraph::for_parallelism(std::sync::Arc::new(g.clone()), 4);
    assert_eq!(
        expanded
            .nodes
            .iter()
            .filter(|n| n.name.starts_with("window_aggregate"))
            .count(),
        1
    );
    let tasks = plan(&g, &payments_keyed_by("method"), &topics("g"), 4).unwrap();
    assert_eq!(tasks.exchanges.len(), 1);
    assert!(tasks.exchanges[0].keys.is_empty(), "every row to one task");
}

/// A keyed operator becomes N instances; the calc before it (stateless,
/// `Distribution::Any`) stays one, whatever its input.
#[test]
fn keyed_operators_become_instances_and_stateless_ones_stay_whole() {
    let g = graph(BY_METHOD);
    let expanded = PhysicalGraph::for_parallelism(std::sync::Arc::new(g.clone()), 3);
    let names: Vec<&str> = expanded.nodes.iter().map(|n| n.name.as_str()).collect();
    for instance in 0..3 {
        assert!(
            names
                .iter()
                .any(|n| n.starts_with("window_aggregate") && n.ends_with(&format!("/{instance}"))),
            "{names:?}"
        );
    }
    let calcs = |g: &JobGraph| {
        g.nodes
            .iter()
            .filter(|n| matches!(&n.kind, NodeKind::Operator(op) if op.kind() == "calc"))
            .count()
    };
    assert!(calcs(&g) > 0);
    assert_eq!(calcs(&expanded), calcs(&g), "{names:?}");
    assert_eq!(expanded.parallelism(), 3);
}

/// Every hashed input names its own input's columns: the keys an operator
/// declares for an input (`required_input_distribution`) are expressions
/// over that input's rows, even where the operator keeps fewer columns
/// than it reads (an interval join drops the columns nothing uses, and its
/// state's keys refer to the columns it keeps). Checked over the reference
/// pipeline and joins whose sides are pruned.
#[test]
fn every_hashed_input_is_keyed_by_its_own_input_columns() {
    use datafusion::common::tree_node::TreeNode;
    use datafusion::physical_expr::expressions::Column;
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut reference: Vec<SqlFile> = std::fs::read_dir(root.join("queries"))
        .unwrap()
        .map(|entry| {
            let path = entry.unwrap().path();
            SqlFile {
                name: path.file_name().unwrap().to_string_lossy().into_owned(),
                text: std::fs::read_to_string(&path).unwrap(),
            }
        })
        .collect();
    reference.sort_by(|a, b| a.name.cmp(&b.name));
    let pipeline = eddy_sql::compile(&reference, &BTreeMap::new())
        .unwrap()
        .graph;
    // A LEFT join's condition on the right side alone filters the right
    // rows inside the join, which then keeps only the columns it still
    // uses: not `amount`, so the key `method` is column 0 of what the join
    // keeps and column 1 of its input.
    let pruned = graph(
        "CREATE TABLE pays (amount DOUBLE, method VARCHAR, ts BIGINT NOT NULL,
            event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
            WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
         ) WITH (connector = 'kafka', bootstrap_servers = 'localhost:9092', topic = 'pays');
         INSERT INTO out SELECT p.method, q.ts FROM payments p LEFT JOIN pays q
           ON upper(q.method) = upper(p.method) AND q.amount > 10
           AND q.event_time BETWEEN p.event_time - INTERVAL '1' SECOND AND p.event_time;",
    );
    let mut hashed = 0;
    for g in [&pipeline, &pruned] {
        for (id, node) in g.nodes.iter().enumerate() {
            for (input, edge) in node.inputs.iter().enumerate() {
                let schema = g.port_schema(edge.from, edge.port);
                for key in g.input_distribution(id, input).keys() {
                    hashed += 1;
                    assert!(key.data_type(&schema).is_ok(), "{}: {key}", node.name);
                    key.apply(|e| {
                        if let Some(c) = e.downcast_ref::<Column>() {
                            assert_eq!(
                                schema.field(c.index()).name(),
                                c.name(),
                                "{} input {input}: {key} over {schema:?}",
                                node.name
                            );
                        }
                        Ok(datafusion::common::tree_node::TreeNodeRecursion::Continue)
                    })
                    .unwrap();
                }
            }
        }
    }
    assert!(hashed >= 8, "{hashed} keys checked");
    let join = pruned
        .nodes
        .iter()
        .position(|n| n.name.starts_with("interval_join"))
        .unwrap();
    let NodeKind::Operator(plan) = &pruned.nodes[join].kind else {
        panic!("not an operator")
    };
    assert!(plan.describe().contains("columns["), "{}", plan.describe());
    let keys: Vec<String> = pruned
        .input_distribution(join, 1)
        .keys()
        .iter()
        .map(|k| k.to_string())
        .collect();
    assert_eq!(keys, ["upper(method@1)"]);
}

/// A streaming `NOT IN` (a null-aware anti join) needs every row in one
/// place: a NULL on the right answers for every key. It declares both
/// inputs single, so `--parallelism` leaves it whole and over tasks both
/// sides go to one task, although the join has keys.
#[test]
fn a_not_in_join_runs_as_one_and_its_inputs_go_to_one_task() {
    let g = graph(
        "CREATE TABLE blocked (method VARCHAR) WITH (connector = 'kafka',
            bootstrap_servers = 'localhost:9092', topic = 'blocked');
         INSERT INTO out SELECT order_id, 1 FROM payments
           WHERE method NOT IN (SELECT method FROM blocked);",
    );
    let join = g
        .nodes
        .iter()
        .position(|n| n.name.starts_with("updating_join"))
        .unwrap();
    for input in 0..2 {
        assert_eq!(g.input_distribution(join, input), Distribution::Single);
    }
    assert!(!g.explain().contains("hash("), "{}", g.explain());
    let expanded = PhysicalGraph::for_parallelism(std::sync::Arc::new(g.clone()), 4);
    assert_eq!(
        expanded
            .nodes
            .iter()
            .filter(|n| n.name.starts_with("updating_join"))
            .count(),
        1
    );
    let sources = vec![
        PartitionedSource {
            table: "payments".into(),
            key_column: Some("method".into()),
        },
        PartitionedSource {
            table: "blocked".into(),
            key_column: Some("method".into()),
        },
    ];
    let tasks = plan(&g, &sources, &topics("g"), 4).unwrap();
    assert_eq!(tasks.exchanges.len(), 2, "{:?}", tasks.exchanges);
    assert!(tasks.exchanges.iter().all(|e| e.keys.is_empty()));
}
