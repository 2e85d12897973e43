//! The compatibility suite: queries taken from Flink's documentation, the
//! Nexmark benchmark's Flink SQL and Arroyo's planner tests, with only their
//! source tables ported to eddy's file connector (`tests/compat/*.sql`; each
//! file cites its origin in its first line).
//!
//! - A file with `-- expect-error: <text>` is a query eddy does not run yet:
//!   it must be rejected with an error containing `<text>` (the reason).
//! - Every other file runs with batch sizes 1, 4 and 8192; its stdout,
//!   sorted (an updating query's changelog replayed into the table it
//!   describes), must equal `tests/compat/<name>.out` for every batch size
//!   (rewrite with `EDDY_UPDATE_GOLDEN=1`). How each expected output was
//!   established is the file's `-- expected:` line: the result table printed
//!   on the origin page, or a computation from the input in
//!   `tests/compat/check_expected.py`, which the test command runs.
//!
//! The test prints how many queries plan and run right, and which do not.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;

use eddy_sql::SqlFile;

#[test]
fn compatibility_suite() {
    let root = common::repo_root();
    let dir = root.join("tests/compat");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/compat")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    paths.sort();
    assert!(paths.len() >= 30, "the suite holds at least 30 queries");
    let params = BTreeMap::from([("DATA".to_string(), dir.join("data").display().to_string())]);
    let update = common::updating_golden();
    let (mut runs, mut refused, mut failures) = (Vec::new(), Vec::new(), Vec::new());
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            text.starts_with("-- origin: "),
            "{name}: the first line cites the query's origin"
        );
        let files = [SqlFile {
            name: format!("{name}.sql"),
            text: text.clone(),
        }];
        if let Some(reason) = text
            .lines()
            .find_map(|l| l.strip_prefix("-- expect-error: "))
        {
            match eddy_sql::compile(&files, &params) {
                Err(e) if e.to_string().contains(reason) => refused.push((name, e.to_string())),
                Err(e) => failures.push(format!(
                    "{name}: expected an error with '{reason}', got: {e}"
                )),
                Ok(_) => failures.push(format!(
                    "{name}: expected an error with '{reason}', but it planned"
                )),
            }
            continue;
        }
        let golden = dir.join(format!("{name}.out"));
        let mut outputs = Vec::new();
        for batch_size in [1usize, 4, 8192] {
            match common::run_captured(&files, &params, BTreeMap::new(), batch_size) {
                // An updating query's changelog depends on batching; the
                // table it replays to does not.
                Ok(captured) if common::is_changelog(&captured.lines) => {
                    match common::replay_changelog(&captured.lines) {
                        Ok(table) => outputs.push(table),
                        Err(e) => {
                            failures.push(format!("{name} (batch {batch_size}): {e}"));
                            break;
                        }
                    }
                }
                Ok(captured) => outputs.push(common::sorted(captured.lines)),
                Err(e) => {
                    failures.push(format!("{name} (batch {batch_size}): {e}"));
                    break;
                }
            }
        }
        if outputs.len() < 3 {
            continue;
        }
        if outputs.iter().any(|o| *o != outputs[0]) {
            failures.push(format!("{name}: output differs between batch sizes"));
            continue;
        }
        if outputs[0].is_empty() {
            failures.push(format!("{name}: no output"));
            continue;
        }
        if update {
            std::fs::write(&golden, outputs[0].join("\n") + "\n").unwrap();
        }
        let expected = std::fs::read_to_string(&golden).unwrap_or_default();
        let expected: Vec<String> = expected.lines().map(str::to_string).collect();
        if expected != outputs[0] {
            failures.push(format!(
                "{name}: output differs from {name}.out\n  eddy:     {:?}\n  expected: {:?}",
                outputs[0].iter().take(4).collect::<Vec<_>>(),
                expected.iter().take(4).collect::<Vec<_>>()
            ));
            continue;
        }
        runs.push(name);
    }
    println!(
        "compatibility suite: {} of {} queries plan and run right; {} are refused with a reason:",
        runs.len(),
        paths.len(),
        refused.len()
    );
    for (name, reason) in &refused {
        println!("  {name}: {reason}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
