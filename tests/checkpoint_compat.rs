//! A savepoint written before checkpoints recorded node shapes
//! (`eddy_engine::shape`; its fingerprints and identities are `eddy
//! explain`'s text of the time) still starts a job, whose output then
//! equals an uninterrupted run's.
//!
//! The fixture (`tests/fixtures/savepoint_before_shapes/`) is real: the job
//! `job.sql` (hopping and tumbling windows, a LEFT interval join, session
//! windows, at two instances) ran over the first 60,000 rows of the
//! generator's orders and payments, was stopped with SIGTERM after a few
//! checkpoints, and `eddy savepoint` copied its final checkpoint; `stopped/`
//! is the output it had committed. The test regenerates the same input
//! with `eddy generate`, resumes from the savepoint at one and at two
//! instances, and compares the whole output with a fresh run's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

fn eddy(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command
        .current_dir(dir)
        .env_remove("EDDY_PARALLELISM")
        .arg("run")
        .arg("job.sql")
        .args(["--batch-size", "16"]);
    command
}

/// Each output file's lines, sorted.
fn outputs(dir: &Path) -> BTreeMap<String, Vec<String>> {
    std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "ndjson"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap();
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            lines.sort();
            (p.file_name().unwrap().to_string_lossy().into_owned(), lines)
        })
        .collect()
}

/// A directory holding `job.sql` and the input it reads.
fn job_dir(fixture: &Path, at: &Path) {
    std::fs::create_dir_all(at.join("out")).unwrap();
    std::fs::copy(fixture.join("job.sql"), at.join("job.sql")).unwrap();
    for stream in ["orders", "payments"] {
        let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
            .args(["generate", "--stream", stream, "--count", "60000"])
            .output()
            .unwrap();
        common::assert_success(&out, "eddy generate");
        std::fs::write(at.join(format!("{stream}.ndjson")), out.stdout).unwrap();
    }
}

#[test]
fn a_savepoint_written_before_shapes_resumes_to_the_uninterrupted_output() {
    let fixture = common::repo_root().join("tests/fixtures/savepoint_before_shapes");
    let manifest = std::fs::read_to_string(fixture.join("savepoint/MANIFEST")).unwrap();
    assert!(
        manifest.contains("\"planned\":[\"source payments [connector=file")
            && !manifest.contains(eddy_engine::shape::SHAPE_MARK),
        "the fixture is a savepoint of the format before shapes"
    );
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh");
    job_dir(&fixture, &fresh);
    let out = eddy(&fresh).args(["--parallelism", "2"]).output().unwrap();
    common::assert_success(&out, "the uninterrupted run");
    let expected = outputs(&fresh);
    assert!(expected.values().map(Vec::len).sum::<usize>() > 300);
    let stopped: usize = std::fs::read_dir(fixture.join("stopped"))
        .unwrap()
        .map(|e| {
            std::fs::read_to_string(e.unwrap().path())
                .unwrap()
                .lines()
                .count()
        })
        .sum();
    assert!(
        stopped > 0 && stopped < 300,
        "the savepoint was taken mid-run"
    );

    for parallelism in ["1", "2"] {
        let resumed = dir.path().join(format!("resumed-{parallelism}"));
        job_dir(&fixture, &resumed);
        for entry in std::fs::read_dir(fixture.join("stopped")).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, resumed.join("out").join(path.file_name().unwrap())).unwrap();
        }
        let out = eddy(&resumed)
            .args(["--parallelism", parallelism, "--state-dir", "state"])
            .arg("--from-savepoint")
            .arg(fixture.join("savepoint"))
            .output()
            .unwrap();
        common::assert_success(&out, "the run from the savepoint");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("resumed from checkpoint 4"), "{stderr}");
        assert_eq!(
            outputs(&resumed),
            expected,
            "resumed at {parallelism} instance(s) from the savepoint written before shapes"
        );
        // What it checkpoints now records shapes.
        let newest = std::fs::read_dir(resumed.join("state"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join("MANIFEST").exists())
            .max()
            .unwrap();
        let manifest = std::fs::read_to_string(newest.join("MANIFEST")).unwrap();
        assert!(manifest.contains(eddy_engine::shape::SHAPE_MARK));
    }
}

/// An operator that describes itself in other words.
#[derive(Debug)]
struct Reworded(std::sync::Arc<dyn eddy_engine::operator::OperatorPlan>);

impl eddy_engine::operator::OperatorPlan for Reworded {
    fn kind(&self) -> &'static str {
        self.0.kind()
    }
    fn describe(&self) -> String {
        format!("in other words: {}", self.0.describe().to_uppercase())
    }
    fn parameters(&self) -> eddy_engine::shape::Parameters {
        self.0.parameters()
    }
    fn output_schema(&self) -> datafusion::arrow::datatypes::SchemaRef {
        self.0.output_schema()
    }
    fn required_input_distribution(&self, input: usize) -> eddy_engine::operator::Distribution {
        self.0.required_input_distribution(input)
    }
    fn state_tables(&self) -> eddy_engine::Result<Vec<eddy_engine::state::declared::TableSpec>> {
        self.0.state_tables()
    }
    fn create(&self) -> eddy_engine::Result<Box<dyn eddy_engine::operator::Operator>> {
        self.0.create()
    }
}

fn fixture_graph(replace: &str, with: &str) -> eddy_engine::graph::JobGraph {
    let fixture = common::repo_root().join("tests/fixtures/savepoint_before_shapes");
    let text = std::fs::read_to_string(fixture.join("job.sql")).unwrap();
    assert!(text.contains(replace));
    let files = [eddy_sql::SqlFile {
        name: "job.sql".into(),
        text: text.replace(replace, with),
    }];
    eddy_sql::compile(&files, &BTreeMap::new()).unwrap().graph
}

/// A checkpoint's fingerprint is the node's shape: rewording an operator's
/// explain line changes none, changing what its state means (a window's
/// size) changes that operator's.
#[test]
fn a_fingerprint_is_the_nodes_shape_not_its_explain_text() {
    use eddy_engine::graph::NodeKind;
    let graph = fixture_graph("", "");
    let mut reworded = graph.clone();
    let mut operators = 0;
    for node in &mut reworded.nodes {
        if let NodeKind::Operator(plan) = &node.kind {
            node.kind = NodeKind::Operator(std::sync::Arc::new(Reworded(plan.clone())));
            operators += 1;
        }
    }
    assert!(operators >= 8);
    for id in 0..graph.nodes.len() {
        assert_eq!(
            graph.fingerprint(id),
            reworded.fingerprint(id),
            "{}",
            graph.nodes[id].name
        );
        if matches!(graph.nodes[id].kind, NodeKind::Operator(_)) {
            assert_ne!(graph.describe_node(id), reworded.describe_node(id));
            assert_ne!(
                graph.legacy_fingerprint(id),
                reworded.legacy_fingerprint(id)
            );
        }
    }
    assert_eq!(graph.identities(), reworded.identities());
    // A tumbling window of 20 minutes instead of 10: that window and what
    // reads it change, the hopping window over payments does not.
    let wider = fixture_graph(
        "TUMBLE(TABLE joined, DESCRIPTOR(event_time), INTERVAL '10' MINUTE)",
        "TUMBLE(TABLE joined, DESCRIPTOR(event_time), INTERVAL '20' MINUTE)",
    );
    let window = |g: &eddy_engine::graph::JobGraph, kind: &str| {
        g.nodes
            .iter()
            .position(|n| n.name.starts_with(kind))
            .unwrap()
    };
    let (tumble, hop) = (
        window(&graph, "window_aggregate#6"),
        window(&graph, "window_aggregate#1"),
    );
    assert_ne!(graph.fingerprint(tumble), wider.fingerprint(tumble));
    assert_eq!(graph.fingerprint(hop), wider.fingerprint(hop));
}
