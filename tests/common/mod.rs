//! Helpers shared by eddy's end-to-end tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code


use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use eddy_cli::job;
use eddy_connectors::sinks::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::runtime::JobReport;
use eddy_sql::SqlFile;

/// The repository root.
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// What a job printed (stdout sinks) and its report.
pub struct Captured {
    pub lines: Vec<String>,
    pub report: JobReport,
}

/// Runs SQL files with stdout captured.
pub fn run_captured(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    inputs: BTreeMap<String, String>,
    batch_size: usize,
) -> Result<Captured, eddy_cli::CliError> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let config = ConnectorConfig {
        inputs,
        batch_size,
        stdout: StdoutTarget::Buffer(buffer.clone()),
        ..ConnectorConfig::default()
    };
    let report = job::run(files, params, config)?;
    let text = String::from_utf8(buffer.lock().expect("buffer").clone()).expect("utf8 output");
    Ok(Captured { lines: text.lines().map(str::to_string).collect(), report })
}

/// Sorted copy of lines (output order across keys is not defined).
pub fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

/// Compares `actual` with the golden file at `path`, or rewrites it when
/// `EDDY_UPDATE_GOLDEN=1`.
pub fn check_golden(path: &PathBuf, actual: &[String]) {
    let text = if actual.is_empty() { String::new() } else { format!("{}\n", actual.join("\n")) };
    if std::env::var("EDDY_UPDATE_GOLDEN").as_deref() == Ok("1") {
        std::fs::write(path, &text).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(path)
        .unwrap_or_else(|_| panic!("missing golden {} (run with EDDY_UPDATE_GOLDEN=1 to create it)", path.display()));
    if expected != text {
        let exp: Vec<&str> = expected.lines().collect();
        let act: Vec<&str> = text.lines().collect();
        let first = exp.iter().zip(&act).position(|(a, b)| a != b).unwrap_or(exp.len().min(act.len()));
        panic!(
            "{} differs (expected {} lines, got {}); first difference at line {}:\n  expected: {}\n  actual:   {}",
            path.display(),
            exp.len(),
            act.len(),
            first + 1,
            exp.get(first).unwrap_or(&"<none>"),
            act.get(first).unwrap_or(&"<none>")
        );
    }
}
