//! State past the memory limit spills to disk instead of failing the job
//! (`--memory-limit`, `--spill-dir`, `--spill-disk-limit`), with the
//! results of a run without a limit.
//!
//! - Per-key aggregates over 200,000 keys (count, sum, min, max, avg and a
//!   DataFusion accumulator on an append-only input; an aggregate over that
//!   updating result) at a memory limit a tenth of the unlimited run's
//!   state, at --parallelism 1 and 2: the final tables equal the unlimited
//!   run's; the run summary says both per-key aggregates spilled and read
//!   state back (the one over 11 counts has nothing to spill); the spill
//!   directory is left empty.
//! - DISTINCT aggregates over 200,000 keys, over an append-only input
//!   and over an updating one (where they and MIN/MAX keep each group's
//!   values as a multiset, which spills with its group): the same.
//! - A LEFT JOIN of 200,000 orders with 200,000 payments (some orders paid
//!   twice, some never, the files read side by side) at a tenth of the
//!   unlimited run's join state, at --parallelism 1 and 2: the joined
//!   table equals the unlimited run's, and the join spilled and read back.
//! - The same for an interval LEFT JOIN of 200,000 timed orders with
//!   their payments (rows evicted, and orders never paid in time padded,
//!   as the watermark passes them, spilled or not) and for a regular
//!   inner join, which keeps every row.
//! - The same for a Top-N (the two largest values of each of 200,000
//!   keys).
//! - The same for a window Top-N (the two largest values of each key in
//!   each window).
//! - The same for tumbling and hopping windows per key over 200,000 keys
//!   (several windows open at a time, each spilled more than once, hop
//!   slices on disk merged at every firing): both tables equal.
//! - The same for session windows per key over 200,000 keys (sessions
//!   closed by a later row and fired by the watermark, from memory and
//!   from disk).
//! - The same for running aggregates per key (OVER over an append-only
//!   input) over 200,000 keys.
//! - Past --spill-disk-limit the job fails, naming the limit.
//!
//! Kills of a spilling job are in tests/recovery.rs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;
use std::process::Command;

const KEYS: usize = 200_000;

const TOTALS: &str = "
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE totals (k VARCHAR, n BIGINT, total BIGINT, low BIGINT, high BIGINT, mean DOUBLE, bits BIGINT)
  WITH (connector = 'ndjson', path = 'totals.ndjson', format = 'debezium-json');
CREATE TABLE spread (n BIGINT, keys BIGINT)
  WITH (connector = 'ndjson', path = 'spread.ndjson', format = 'debezium-json');
INSERT INTO totals
  SELECT k, count(*), sum(v), min(v), max(v), avg(v), bit_xor(v) FROM events GROUP BY k;
INSERT INTO spread
  SELECT n, count(*) FROM (SELECT k, count(*) AS n FROM events GROUP BY k) GROUP BY n;
";

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.env_remove("EDDY_PARALLELISM");
    command.current_dir(common::repo_root());
    command
}

/// Every key once, then 300,000 events on keys drawn from all of them.
fn events_file(path: &Path) {
    use std::fmt::Write;
    let mut text = String::with_capacity(KEYS * 40);
    for i in 0..KEYS {
        writeln!(text, "{{\"k\":\"key-{i}\",\"v\":{}}}", i % 7).unwrap();
    }
    let mut seed = 5u64;
    for _ in 0..300_000 {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let k = (seed >> 33) as usize % KEYS;
        writeln!(text, "{{\"k\":\"key-{k}\",\"v\":{}}}", (seed >> 20) % 1000).unwrap();
    }
    std::fs::write(path, text).unwrap();
}

/// Runs the job into `output`; its summary.
fn run(dir: &Path, output: &str, args: &[&str]) -> std::process::Output {
    let sql = dir.join("totals.sql");
    std::fs::write(&sql, TOTALS).unwrap();
    eddy()
        .arg("run")
        .arg(&sql)
        .arg("--set")
        .arg(format!("EVENTS={}", dir.join("events.ndjson").display()))
        .arg("--output")
        .arg(dir.join(output))
        .args(args)
        .output()
        .unwrap()
}

/// The most MiB of state the summary says each operator of `kind` held
/// at once, summed.
fn state_mib(stderr: &str, kind: &str) -> f64 {
    stderr
        .lines()
        .filter(|l| l.starts_with(&format!("{kind}#")))
        .map(|l| {
            let held = l.split("in state (at most ").nth(1).unwrap();
            let peak = held.split(" MiB, at most ").nth(1).unwrap();
            peak.split(' ').next().unwrap().parse::<f64>().unwrap()
        })
        .sum()
}

#[test]
fn aggregates_past_the_memory_limit_spill_and_give_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    events_file(&dir.path().join("events.ndjson"));
    let out = run(dir.path(), "unlimited", &["--parallelism", "1"]);
    common::assert_success(&out, "the unlimited run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let state = state_mib(&stderr, "updating_aggregate");
    assert!(state > 5.0, "{state} MiB of state:\n{stderr}");
    let table = |output: &str, name: &str| {
        common::debezium_table(&dir.path().join(output).join(format!("{name}.ndjson")))
    };
    let (totals, spread) = (table("unlimited", "totals"), table("unlimited", "spread"));
    assert_eq!(totals.len(), KEYS);

    let limit = format!("{}KiB", (state * 1024.0 / 10.0) as u64);
    let spill_dir = dir.path().join("spill");
    for parallelism in ["1", "2"] {
        let output = format!("limited-{parallelism}");
        let out = run(
            dir.path(),
            &output,
            &[
                "--parallelism",
                parallelism,
                "--memory-limit",
                &limit,
                "--spill-dir",
                spill_dir.to_str().unwrap(),
            ],
        );
        common::assert_success(&out, &output);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr
                .lines()
                .filter(|l| l.starts_with("updating_aggregate#"))
                .filter(|l| l.contains(", spilled ") && !l.contains("read 0.0 MiB back"))
                .count()
                >= 2,
            "both per-key aggregates spilled and read back at --parallelism {parallelism} under {limit}:\n{stderr}"
        );
        assert!(
            table(&output, "totals") == totals,
            "the totals differ from the unlimited run's at --parallelism {parallelism}"
        );
        assert!(
            table(&output, "spread") == spread,
            "the spread differs from the unlimited run's at --parallelism {parallelism}"
        );
        assert_eq!(
            std::fs::read_dir(&spill_dir).unwrap().count(),
            0,
            "the job's spill store is removed when it ends"
        );
        eprintln!("--parallelism {parallelism}, --memory-limit {limit} (unlimited: {state:.1} MiB): equal\n{stderr}");
    }
}

const ORDERS: usize = 200_000;

/// Runs `sql` (with `--set` assignments `sets`) without a limit, then at
/// a tenth of the state its `kind` operators held, at --parallelism 1 and
/// 2: every instance of `kind` spilled and read back, and each Debezium
/// table of `tables` equals the unlimited run's. The unlimited tables'
/// rows.
fn equal_at_a_tenth(
    dir: &Path,
    sql: &str,
    sets: &[String],
    kind: &str,
    tables: &[&str],
) -> Vec<usize> {
    let path = dir.join("job.sql");
    std::fs::write(&path, sql).unwrap();
    let run = |output: &str, args: &[&str]| {
        let mut command = eddy();
        command.arg("run").arg(&path);
        for set in sets {
            command.arg("--set").arg(set);
        }
        command
            .arg("--output")
            .arg(dir.join(output))
            .args(args)
            .output()
            .unwrap()
    };
    let out = run("unlimited", &["--parallelism", "1"]);
    common::assert_success(&out, "the unlimited run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let state = state_mib(&stderr, kind);
    assert!(state > 5.0, "{state} MiB of state:\n{stderr}");
    let rows = |output: &str, table: &str| {
        common::debezium_table(&dir.join(output).join(format!("{table}.ndjson")))
    };
    let expected: Vec<Vec<String>> = tables.iter().map(|t| rows("unlimited", t)).collect();

    let limit = format!("{}KiB", (state * 1024.0 / 10.0) as u64);
    for parallelism in ["1", "2"] {
        let output = format!("limited-{parallelism}");
        let out = run(
            &output,
            &["--parallelism", parallelism, "--memory-limit", &limit],
        );
        common::assert_success(&out, &output);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let instances: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with(&format!("{kind}#")) && !l.contains("/split"))
            .collect();
        assert!(
            !instances.is_empty()
                && instances
                    .iter()
                    .all(|l| l.contains(", spilled ") && !l.contains("read 0.0 MiB back")),
            "every {kind} instance spilled and read back at --parallelism {parallelism} under {limit}:\n{stderr}"
        );
        for (table, expected) in tables.iter().zip(&expected) {
            assert!(
                rows(&output, table) == *expected,
                "{table} differs from the unlimited run's at --parallelism {parallelism}"
            );
        }
        eprintln!("{kind}: --parallelism {parallelism}, --memory-limit {limit} (unlimited: {state:.1} MiB): equal\n{stderr}");
    }
    expected.iter().map(Vec::len).collect()
}

#[test]
fn distinct_aggregates_past_the_memory_limit_spill_and_give_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    events_file(&events);
    let sets = [format!("EVENTS={}", events.display())];
    let rows = equal_at_a_tenth(
        dir.path(),
        common::DISTINCT,
        &sets,
        "updating_aggregate",
        &["seen", "spreads"],
    );
    assert_eq!(rows, [KEYS, KEYS], "a row per key in each table");
}

#[test]
fn a_join_past_the_memory_limit_spills_and_gives_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::orders_and_payments(dir.path(), ORDERS);
    let rows = equal_at_a_tenth(dir.path(), common::PAID, &sets, "updating_join", &["paid"]);
    assert!(rows[0] > ORDERS, "{rows:?} rows");
}

#[test]
fn a_top_n_past_the_memory_limit_spills_and_gives_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.ndjson");
    events_file(&events);
    let sets = [format!("EVENTS={}", events.display())];
    let rows = equal_at_a_tenth(dir.path(), common::TOP, &sets, "updating_rank", &["top2"]);
    assert!(rows[0] > KEYS, "{rows:?} rows");
}

#[test]
fn windows_past_the_memory_limit_spill_and_give_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 400_000, KEYS);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::KEYED_WINDOWS,
        &sets,
        "window_aggregate",
        &["per_window", "per_hop"],
    );
    assert!(rows[0] > KEYS && rows[1] > rows[0], "{rows:?} rows");
}

#[test]
fn a_window_top_n_past_the_memory_limit_spills_and_gives_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 400_000, KEYS);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::WINDOW_TOP,
        &sets,
        "window_rank",
        &["window_top2"],
    );
    assert!(rows[0] > KEYS, "{rows:?} rows");
}

#[test]
fn spilled_state_past_the_disk_limit_fails_the_job_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    events_file(&dir.path().join("events.ndjson"));
    let out = run(
        dir.path(),
        "out",
        &[
            "--parallelism",
            "1",
            "--memory-limit",
            "256KiB",
            "--spill-disk-limit",
            "64KiB",
        ],
    );
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("past the job's spill disk limit of 64.0 KiB"),
        "{stderr}"
    );
    assert!(stderr.contains("--spill-disk-limit"), "{stderr}");
}

#[test]
fn an_interval_join_past_the_memory_limit_spills_and_gives_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::timed_orders_and_payments(dir.path(), ORDERS as u64);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::PAID_IN_TIME,
        &sets,
        "interval_join",
        &["paid_in_time"],
    );
    assert!(rows[0] > ORDERS, "{rows:?} rows");
}

#[test]
fn a_regular_join_past_the_memory_limit_spills_and_gives_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::orders_and_payments(dir.path(), ORDERS);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::MATCHED,
        &sets,
        "regular_join",
        &["matched"],
    );
    assert!(rows[0] > ORDERS / 2, "{rows:?} rows");
}

#[test]
fn session_windows_past_the_memory_limit_spill_and_give_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 400_000, KEYS);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::KEYED_SESSIONS,
        &sets,
        "session_aggregate",
        &["per_session"],
    );
    assert!(rows[0] > KEYS, "{rows:?} rows");
}

#[test]
fn running_aggregates_past_the_memory_limit_spill_and_give_the_unlimited_results() {
    let dir = tempfile::tempdir().unwrap();
    let sets = common::keyed_timed_events(dir.path(), 400_000, KEYS);
    let rows = equal_at_a_tenth(
        dir.path(),
        common::KEYED_RUNNING,
        &sets,
        "over",
        &["running"],
    );
    assert_eq!(rows[0], 400_000, "a row per event");
}
