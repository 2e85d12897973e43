//! Bad input, end to end through the `eddy` binary: a corpus of malformed
//! rows of every kind mixed into good input at seeded positions must leave
//! the good rows' results exactly as a clean run's, land once each in
//! `bad_rows(t)` with its line and reason, and add up (rows read = on time +
//! late + bad). `bad_rows = 'fail'` stops at the first; `'drop'` only
//! counts. The clock-skew guard keeps one far-future row from making every
//! later row late; without it, that documented consequence happens and is
//! counted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Deterministic pseudo-random numbers (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const BASE_MS: i64 = 1_700_000_000_000;
const YEAR_MS: i64 = 365 * 86_400_000;

fn iso(ms: i64) -> String {
    let t = chrono_like(ms);
    format!("{t}Z")
}

/// `YYYY-MM-DDTHH:MM:SS.mmm` for epoch milliseconds (UTC).
fn chrono_like(ms: i64) -> String {
    let dt = datafusion::arrow::temporal_conversions::timestamp_ms_to_datetime(ms).unwrap();
    dt.format("%Y-%m-%dT%H:%M:%S%.3f").to_string()
}

/// Good rows: mostly in order with jitter; every 37th row 6 s behind
/// (late with a 2 s bound). Amounts are multiples of 0.25 so sums are exact.
fn good_rows(rng: &mut Rng, n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let mut ts = BASE_MS + i as i64 * 250 - rng.below(1_500) as i64;
            if i % 37 == 36 {
                ts -= 6_000;
            }
            let amount = rng.below(400) as f64 / 4.0;
            format!(
                r#"{{"id": {i}, "k": "k{}", "amount": {amount}, "ts": "{}"}}"#,
                rng.below(5),
                iso(ts)
            )
            .into_bytes()
        })
        .collect()
}

/// One bad row of each kind, with the reason it must be reported with.
/// `future` is a timestamp far ahead that some bad rows carry: being bad,
/// they must not move the watermark.
fn bad_row(kind: usize, copy: usize, future: &str) -> (Vec<u8>, &'static str) {
    let ts = if copy.is_multiple_of(2) {
        future.to_string()
    } else {
        iso(BASE_MS)
    };
    match kind {
        0 => (b"this is not json".to_vec(), "not valid JSON"),
        1 => (
            br#"{"id": 1, "k": "a", "amount": "#.to_vec(),
            "not valid JSON",
        ),
        2 => (
            [&b"[1, 2, 3]"[..], b"42", b"\"text\""][copy % 3].to_vec(),
            "not a JSON object",
        ),
        3 => (
            format!(r#"{{"id": 1, "k": "a", "amount": "abc", "ts": "{ts}"}}"#).into_bytes(),
            "column 'amount'",
        ),
        4 => (
            format!(r#"{{"id": {{"x": 1}}, "k": "a", "amount": 1, "ts": "{ts}"}}"#).into_bytes(),
            "column 'id'",
        ),
        5 => (
            format!(r#"{{"id": 1, "amount": 1, "ts": "{ts}"}}"#).into_bytes(),
            "column 'k' is NOT NULL",
        ),
        6 => (
            format!(r#"{{"id": 1, "k": null, "amount": 1, "ts": "{ts}"}}"#).into_bytes(),
            "column 'k' is NOT NULL",
        ),
        7 => (
            br#"{"id": 1, "k": "a", "amount": 1, "ts": null}"#.to_vec(),
            "event time 'ts' is NULL",
        ),
        8 => (
            br#"{"id": 1, "k": "a", "amount": 1, "ts": "yesterday"}"#.to_vec(),
            "column 'ts'",
        ),
        9 => {
            let mut line = br#"{"id": 1, "k": ""#.to_vec();
            line.extend_from_slice(&[0xff, 0xfe, 0xc3]);
            line.extend_from_slice(format!(r#"", "amount": 1, "ts": "{ts}"}}"#).as_bytes());
            (line, "non-UTF-8")
        }
        10 => (
            format!(
                r#"{{"id": 1, "k": "a", "amount": {}{}, "ts": "{ts}"}}"#,
                "[".repeat(20_000),
                "]".repeat(20_000)
            )
            .into_bytes(),
            "nested deeper than 64 levels",
        ),
        11 => (
            format!(r#"{{"id": 1, "k": "a", "amount": 1e400, "ts": "{ts}"}}"#).into_bytes(),
            "number out of range",
        ),
        12 => (
            format!(r#"{{"id": 99999999999999999999999, "k": "a", "amount": 1, "ts": "{ts}"}}"#)
                .into_bytes(),
            "column 'id'",
        ),
        13 => (
            format!(
                r#"{{"id": 1, "k": "{}", "amount": 1, "ts": "{ts}"}}"#,
                "x".repeat(200_000)
            )
            .into_bytes(),
            "longer than max_line_bytes",
        ),
        14 => (
            format!(r#"{{"id": 1, "k": "a", "amount": 1, "ts": "{future}"}}"#).into_bytes(),
            "future timestamp",
        ),
        _ => unreachable!(),
    }
}

const KINDS: usize = 15;
const COPIES: usize = 5;

struct Corpus {
    clean: Vec<u8>,
    dirty: Vec<u8>,
    /// Line number (1-based) of each bad row in `dirty`, with its reason.
    bad: BTreeMap<u64, &'static str>,
    lines: u64,
}

fn corpus(seed: u64) -> Corpus {
    let mut rng = Rng(seed);
    let good = good_rows(&mut rng, 600);
    let future = iso(BASE_MS + YEAR_MS);
    let mut bad: Vec<(Vec<u8>, &'static str)> = (0..KINDS)
        .flat_map(|kind| (0..COPIES).map(move |copy| (kind, copy)))
        .map(|(kind, copy)| bad_row(kind, copy, &future))
        .collect();
    // Shuffle the bad rows, then give each a position among the good ones.
    for i in (1..bad.len()).rev() {
        bad.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let mut slots: Vec<usize> = bad
        .iter()
        .map(|_| 1 + rng.below(good.len() as u64) as usize)
        .collect();
    slots.sort_unstable();
    let mut clean = Vec::new();
    let mut dirty = Vec::new();
    let mut expected = BTreeMap::new();
    let mut line = 0u64;
    let mut next_bad = 0;
    for (i, row) in good.iter().enumerate() {
        while next_bad < bad.len() && slots[next_bad] <= i {
            line += 1;
            dirty.extend_from_slice(&bad[next_bad].0);
            dirty.push(b'\n');
            expected.insert(line, bad[next_bad].1);
            next_bad += 1;
        }
        line += 1;
        dirty.extend_from_slice(row);
        dirty.push(b'\n');
        clean.extend_from_slice(row);
        clean.push(b'\n');
    }
    for (row, reason) in &bad[next_bad..] {
        line += 1;
        dirty.extend_from_slice(row);
        dirty.push(b'\n');
        expected.insert(line, reason);
    }
    Corpus {
        clean,
        dirty,
        bad: expected,
        lines: line,
    }
}

const QUERY: &str = r#"
CREATE TABLE events (
  id BIGINT NOT NULL,
  k VARCHAR NOT NULL,
  amount DOUBLE,
  ts TIMESTAMP(3),
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (connector = 'file', path = '${IN}', max_line_bytes = '65536',
        bad_rows = '${MODE:dead_letter}' ${GUARD:});

CREATE TABLE windows (window_start TIMESTAMP(3), k VARCHAR, n BIGINT, total DOUBLE)
  WITH (connector = 'ndjson', path = '${OUT}/windows.ndjson');
CREATE TABLE late (id BIGINT, k VARCHAR) WITH (connector = 'ndjson', path = '${OUT}/late.ndjson');
CREATE TABLE bad (line BIGINT, column_name VARCHAR, reason VARCHAR, raw VARCHAR)
  WITH (connector = 'ndjson', path = '${OUT}/bad.ndjson');
CREATE TABLE bad_per_minute (n BIGINT) WITH (connector = 'ndjson', path = '${OUT}/bad_per_minute.ndjson');

INSERT INTO windows
SELECT w.start, k, n, total FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, k, count(*) AS n, sum(amount) AS total
  FROM events GROUP BY w, k);
INSERT INTO late SELECT id, k FROM late_rows(events);
INSERT INTO bad SELECT line, column_name, reason, raw FROM bad_rows(events);
INSERT INTO bad_per_minute
SELECT n FROM (SELECT tumble(INTERVAL '1' MINUTE) AS w, count(*) AS n FROM bad_rows(events) GROUP BY w);
"#;

struct Run {
    ok: bool,
    stderr: String,
    out: PathBuf,
}

impl Run {
    fn lines(&self, sink: &str) -> Vec<String> {
        let text =
            std::fs::read_to_string(self.out.join(format!("{sink}.ndjson"))).unwrap_or_default();
        common::sorted(text.lines().map(str::to_string).collect())
    }

    fn rows(&self, sink: &str) -> Vec<serde_json::Value> {
        self.lines(sink)
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// (read, on time, late, bad) from the run summary.
    fn accounting(&self) -> (u64, u64, u64, u64) {
        let line = self
            .stderr
            .lines()
            .find(|l| l.starts_with("source events: "))
            .unwrap_or_else(|| panic!("no summary for events:\n{}", self.stderr));
        let numbers: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        assert_eq!(numbers.len(), 4, "{line}");
        (numbers[0], numbers[1], numbers[2], numbers[3])
    }
}

fn run(dir: &Path, name: &str, input: &[u8], batch_size: usize, params: &[(&str, &str)]) -> Run {
    let input_path = dir.join(format!("{name}.ndjson"));
    std::fs::write(&input_path, input).unwrap();
    let out = dir.join(format!("{name}-{batch_size}"));
    std::fs::create_dir_all(&out).unwrap();
    let sql = dir.join("query.sql");
    std::fs::write(&sql, QUERY).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command
        .arg("run")
        .arg(&sql)
        .arg("--batch-size")
        .arg(batch_size.to_string())
        .arg("--set")
        .arg(format!("IN={}", input_path.display()))
        .arg("--set")
        .arg(format!("OUT={}", out.display()));
    for (k, v) in params {
        command.arg("--set").arg(format!("{k}={v}"));
    }
    let output = command.output().unwrap();
    Run {
        ok: output.status.success(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        out,
    }
}

const GUARD: (&str, &str) = ("GUARD", ", max_future_skew = '10 minutes'");

#[test]
fn bad_rows_of_every_kind_leave_the_good_results_exact_and_are_each_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(42);
    assert!(corpus.bad.len() >= KINDS * COPIES);
    for batch_size in [1, 7, 8192] {
        let clean = run(dir.path(), "clean", &corpus.clean, batch_size, &[GUARD]);
        assert!(clean.ok, "{}", clean.stderr);
        let dirty = run(dir.path(), "dirty", &corpus.dirty, batch_size, &[GUARD]);
        assert!(dirty.ok, "{}", dirty.stderr);

        assert!(!clean.lines("windows").is_empty());
        assert!(!clean.lines("late").is_empty(), "the corpus has late rows");
        assert_eq!(
            dirty.lines("windows"),
            clean.lines("windows"),
            "batch size {batch_size}"
        );
        assert_eq!(
            dirty.lines("late"),
            clean.lines("late"),
            "batch size {batch_size}"
        );

        let reported = dirty.rows("bad");
        let lines: Vec<u64> = reported
            .iter()
            .map(|r| r["line"].as_u64().unwrap())
            .collect();
        let unique: BTreeSet<u64> = lines.iter().copied().collect();
        assert_eq!(lines.len(), unique.len(), "each bad row once");
        assert_eq!(
            unique,
            corpus.bad.keys().copied().collect::<BTreeSet<_>>(),
            "batch size {batch_size}"
        );
        for row in &reported {
            let line = row["line"].as_u64().unwrap();
            let reason = row["reason"].as_str().unwrap();
            assert!(
                reason.contains(corpus.bad[&line]),
                "line {line}: '{reason}' should say '{}'",
                corpus.bad[&line]
            );
            assert!(
                !row["raw"].as_str().unwrap().is_empty(),
                "line {line} keeps its text"
            );
        }

        let (read, on_time, late, bad) = dirty.accounting();
        assert_eq!(read, corpus.lines, "every line read");
        assert_eq!(bad, corpus.bad.len() as u64);
        assert_eq!(late, clean.lines("late").len() as u64);
        assert_eq!(
            read,
            on_time + late + bad,
            "rows read = on time + late + bad"
        );
        assert_eq!(clean.accounting().3, 0);
        let per_minute: u64 = dirty
            .rows("bad_per_minute")
            .iter()
            .map(|r| r["n"].as_u64().unwrap())
            .sum();
        assert_eq!(
            per_minute, bad,
            "windows over bad_rows(t) by arrival time count them all"
        );
    }
}

#[test]
fn bad_rows_fail_stops_at_the_first_and_drop_only_counts() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = corpus(7);
    let first = *corpus.bad.keys().next().unwrap();
    let failed = run(
        dir.path(),
        "dirty",
        &corpus.dirty,
        8192,
        &[GUARD, ("MODE", "fail")],
    );
    assert!(!failed.ok);
    assert!(
        failed
            .stderr
            .contains(&format!("dirty.ndjson:{first} (bad_rows = 'fail'): ")),
        "{}",
        failed.stderr
    );
    assert!(
        failed.stderr.contains(corpus.bad[&first]),
        "{}",
        failed.stderr
    );

    let dropped = run(
        dir.path(),
        "dirty",
        &corpus.dirty,
        64,
        &[GUARD, ("MODE", "drop")],
    );
    assert!(dropped.ok, "{}", dropped.stderr);
    assert!(dropped.lines("bad").is_empty(), "drop keeps nothing");
    let (read, on_time, late, bad) = dropped.accounting();
    assert_eq!(bad, corpus.bad.len() as u64, "but counts every bad row");
    assert_eq!(read, on_time + late + bad);
}

#[test]
fn a_far_future_row_changes_nothing_with_the_guard_and_makes_later_rows_late_without() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(3);
    let good = good_rows(&mut rng, 300);
    let far = format!(
        r#"{{"id": 100000, "k": "k0", "amount": 1, "ts": "{}"}}"#,
        iso(BASE_MS + YEAR_MS)
    );
    let join = |rows: &[Vec<u8>]| -> Vec<u8> {
        rows.iter()
            .flat_map(|r| r.iter().copied().chain(std::iter::once(b'\n')))
            .collect()
    };
    let clean = join(&good);
    let mut with_far = good.clone();
    with_far.insert(150, far.into_bytes());
    let with_far = join(&with_far);

    let baseline = run(dir.path(), "clean", &clean, 8192, &[GUARD]);
    assert!(baseline.ok, "{}", baseline.stderr);
    let guarded = run(dir.path(), "far", &with_far, 8192, &[GUARD]);
    assert!(guarded.ok, "{}", guarded.stderr);
    assert_eq!(guarded.lines("windows"), baseline.lines("windows"));
    assert_eq!(guarded.lines("late"), baseline.lines("late"));
    let bad = guarded.rows("bad");
    assert_eq!(bad.len(), 1);
    assert_eq!(bad[0]["line"], 151);
    let reason = bad[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("future timestamp") && reason.contains("more than max_future_skew (10m)"),
        "{reason}"
    );

    // Without the guard: the far row is accepted, every row after it is late.
    let unguarded = run(dir.path(), "far", &with_far, 8192, &[]);
    assert!(unguarded.ok, "{}", unguarded.stderr);
    let late_ids: BTreeSet<u64> = unguarded
        .rows("late")
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    let baseline_late: BTreeSet<u64> = baseline
        .rows("late")
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    let expected: BTreeSet<u64> = baseline_late
        .iter()
        .copied()
        .filter(|&id| id < 150)
        .chain(150..300)
        .collect();
    assert_eq!(late_ids, expected, "every row after the far one is late");
    let (read, on_time, late, bad) = unguarded.accounting();
    assert_eq!((read, late, bad), (301, expected.len() as u64, 0));
    assert_eq!(read, on_time + late + bad);
}
