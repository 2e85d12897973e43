//! Every SQL example in the docs, checked as `eddy explain` checks a job:
//! each ```` ```sql ```` block of `README.md` and `docs/*.md` is written to
//! a file beside the tables it reads but does not declare (the reference
//! pipeline's `orders`, `payments` and `devices`, Nexmark's `bid`, and the
//! few sinks examples write to) and must plan, its connectors' options
//! valid; one that only declares tables is planned with a `SELECT *` of
//! each. A block that is not a `.sql` file says so in its fence: ```` ```sql
//! psql ```` (statements typed into `psql` against `eddy serve`, which
//! `tests/pg_wire.rs` drives) or ```` ```sql fragment ````; the test counts
//! them, so a block cannot drift into being unchecked unnoticed. Python
//! module functions (`AS 'fraud.rules:score'`) import from a `fraud/rules.py`
//! the test writes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Tables examples read without declaring them, by name.
const PRELUDE: &[(&str, &str)] = &[
    (
        "bid",
        "CREATE TABLE bid (auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price BIGINT NOT NULL,
           channel VARCHAR, url VARCHAR, date_time TIMESTAMP NOT NULL, extra VARCHAR,
           WATERMARK FOR date_time AS date_time - INTERVAL '4' SECOND)
         WITH (connector = 'nexmark', stream = 'bid', events = '1000');",
    ),
    (
        "dead_letters",
        "CREATE TABLE dead_letters (source VARCHAR, path VARCHAR, line BIGINT,
           column_name VARCHAR, reason VARCHAR, raw VARCHAR, arrival_time TIMESTAMP)
         WITH (connector = 'ndjson', path = 'dead_letters.ndjson');",
    ),
    (
        "device_metrics",
        "CREATE TABLE device_metrics (site_id VARCHAR, window_start TIMESTAMP, n BIGINT)
         WITH (connector = 'stdout', tag = 'DEVICE_METRICS');",
    ),
];

/// One fenced SQL block: where it is, its fence's words, its text.
struct Example {
    place: String,
    fence: String,
    sql: String,
}

fn examples() -> Vec<Example> {
    let root = common::repo_root();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    files.push(root.join("README.md"));
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(&root).unwrap().display().to_string();
        // The open block: its line, fence words, indentation, text so far.
        let mut open: Option<(usize, String, usize, String)> = None;
        for (number, line) in text.lines().enumerate() {
            let trimmed = line.trim_start();
            match (&mut open, trimmed.strip_prefix("```")) {
                (None, Some(fence)) if fence.starts_with("sql") => {
                    let indent = line.len() - trimmed.len();
                    open = Some((number + 1, fence.trim().to_string(), indent, String::new()));
                }
                (None, _) => {}
                (Some(_), Some(_)) => {
                    let (line, fence, _, sql) = open.take().unwrap();
                    out.push(Example {
                        place: format!("{name}:{line}"),
                        fence,
                        sql,
                    });
                }
                (Some((_, _, indent, sql)), None) => {
                    // The block's own indentation stays (Python bodies).
                    let cut = line.len() - line.trim_start_matches(' ').len();
                    sql.push_str(&line[cut.min(*indent)..]);
                    sql.push('\n');
                }
            }
        }
    }
    out
}

/// The reference pipeline's source tables, each statement by its table.
fn reference_sources() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(common::repo_root().join("queries/00_sources.sql")).unwrap();
    text.split(';')
        .filter_map(|statement| {
            let at = statement.find("CREATE TABLE ")?;
            let statement = &statement[at..];
            let name = statement["CREATE TABLE ".len()..]
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()?
                .to_string();
            Some((name, format!("{statement};")))
        })
        .collect()
}

/// Whether `sql` names `table` as a word.
fn names(sql: &str, table: &str) -> bool {
    sql.to_lowercase()
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|word| word == table)
}

fn declares(sql: &str, table: &str) -> bool {
    let lower = sql.to_lowercase();
    [
        "create table ",
        "create view ",
        "create materialized view ",
        "create temporary view ",
    ]
    .iter()
    .any(|create| {
        lower.match_indices(create).any(|(at, _)| {
            lower[at + create.len()..]
                .trim_start()
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                == Some(table)
        })
    })
}

fn explain(dir: &Path, python: &Path, sql: &str) -> std::process::Output {
    let file = dir.join("example.sql");
    std::fs::write(&file, sql).unwrap();
    Command::new(env!("CARGO_BIN_EXE_eddy"))
        .current_dir(dir)
        .env_remove("EDDY_PARALLELISM")
        .env("EDDY_PYTHON", python)
        .env("EDDY_UDF_PATH", dir)
        // What examples name with `env:` (a bucket's credentials).
        .env("ARCHIVE_KEY_ID", "example-key")
        .env("ARCHIVE_SECRET", "example-secret")
        .arg("explain")
        .arg(&file)
        .output()
        .unwrap()
}

/// The tables `sql` declares, in order.
fn declared_tables(sql: &str) -> Vec<String> {
    let lower = sql.to_lowercase();
    lower
        .match_indices("create table ")
        .filter_map(|(at, create)| {
            lower[at + create.len()..]
                .trim_start()
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .next()
                .map(str::to_string)
        })
        .collect()
}

#[test]
fn every_sql_example_in_the_docs_plans() {
    let python = common::python_with_pyarrow();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("fraud")).unwrap();
    std::fs::write(dir.path().join("fraud/__init__.py"), "").unwrap();
    std::fs::write(
        dir.path().join("fraud/rules.py"),
        "def score(amount):\n    return (amount or 0) / 100\n",
    )
    .unwrap();
    let mut prelude: Vec<(String, String)> = reference_sources();
    prelude.extend(PRELUDE.iter().map(|(n, s)| (n.to_string(), s.to_string())));
    let (mut checked, mut fragments, mut failures) = (0, Vec::new(), Vec::new());
    for example in examples() {
        if example
            .fence
            .split_whitespace()
            .any(|w| w == "fragment" || w == "psql")
        {
            fragments.push(example.place);
            continue;
        }
        let mut sql = String::new();
        for (table, statement) in &prelude {
            if names(&example.sql, table) && !declares(&example.sql, table) {
                sql.push_str(statement);
                sql.push('\n');
            }
        }
        sql.push_str(&example.sql);
        let mut out = explain(dir.path(), python, &sql);
        if String::from_utf8_lossy(&out.stderr).contains("nothing to run") {
            for table in declared_tables(&example.sql) {
                sql.push_str(&format!("\nSELECT * FROM {table};"));
            }
            out = explain(dir.path(), python, &sql);
        }
        checked += 1;
        if !out.status.success() {
            failures.push(format!(
                "{}: {}\n{}",
                example.place,
                String::from_utf8_lossy(&out.stderr).trim(),
                example.sql
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(checked >= 15, "{checked} examples checked");
    // Blocks left out are few and deliberate.
    assert!(fragments.len() <= 2, "left out: {fragments:?}");
}
