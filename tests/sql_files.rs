//! File-driven SQL tests: every `tests/sql/*.sql` runs as a job.
//!
//! - A file starting with `-- fail: <text>` must be rejected with an error
//!   containing `<text>`.
//! - Any other file runs with batch sizes 1, 3 and 8192; its stdout, sorted,
//!   must equal `tests/sql/<name>.out` for every batch size (rewrite goldens
//!   with `EDDY_UPDATE_GOLDEN=1`). A changelog (`+I`/`-U`/`+U`/`-D` rows) is
//!   compared as the table it ends as.
//! - `${DATA}` in a file is the `tests/data` directory.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use eddy_sql::SqlFile;

#[test]
fn sql_files() {
    let root = common::repo_root();
    let dir = root.join("tests/sql");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/sql")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 10, "expected the SQL test files");
    let mut failures = Vec::new();
    for path in &paths {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default()
            .to_string();
        let text = std::fs::read_to_string(path).expect("read sql");
        let file = SqlFile {
            name: name.clone(),
            text: text.clone(),
        };
        let mut params = BTreeMap::new();
        if text.contains("${DATA") {
            params.insert(
                "DATA".to_string(),
                root.join("tests/data").display().to_string(),
            );
        }
        let expected_failure = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("-- fail: "))
            .map(str::to_string);
        if let Some(expected) = expected_failure {
            match common::run_captured(&[file], &params, BTreeMap::new(), 8192) {
                Ok(_) => failures.push(format!("{name}: ran, but must fail with '{expected}'")),
                Err(e) if e.to_string().contains(&expected) => {}
                Err(e) => {
                    failures.push(format!("{name}: failed with '{e}', expected '{expected}'"))
                }
            }
            continue;
        }
        let mut outputs = Vec::new();
        for batch_size in [1, 3, 8192] {
            match common::run_captured(
                std::slice::from_ref(&file),
                &params,
                BTreeMap::new(),
                batch_size,
            ) {
                // An updating query's changes depend on batching; the
                // table they end as does not.
                Ok(captured) if common::is_changelog(&captured.lines) => {
                    match common::replay_changelog(&captured.lines) {
                        Ok(table) => outputs.push((batch_size, table)),
                        Err(e) => failures.push(format!("{name} (batch size {batch_size}): {e}")),
                    }
                }
                Ok(captured) => outputs.push((batch_size, common::sorted(captured.lines))),
                Err(e) => failures.push(format!("{name} (batch size {batch_size}): {e}")),
            }
        }
        if let Some((_, first)) = outputs.first() {
            assert!(!first.is_empty(), "{name} printed nothing");
            for (batch_size, other) in &outputs[1..] {
                if other != first {
                    failures.push(format!(
                        "{name}: output with batch size {batch_size} differs from batch size 1"
                    ));
                }
            }
            common::check_golden(&path.with_extension("out"), first);
        }
    }
    assert!(
        failures.is_empty(),
        "SQL test failures:\n{}",
        failures.join("\n")
    );
}
