//! Helpers shared by eddy's end-to-end tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

pub mod azurite;
pub mod pg_server;
pub mod s3;
pub mod stdin_job;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use eddy_cli::job;
use eddy_connectors::stdout::StdoutTarget;
use eddy_connectors::ConnectorConfig;
use eddy_engine::runtime::JobReport;
use eddy_sql::SqlFile;

/// The repository root.
/// A Python with pyarrow: the test environment's, made (once per test
/// binary) by `scripts/python-env.sh`.
pub fn python_with_pyarrow() -> &'static std::path::Path {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        let out = std::process::Command::new("bash")
            .current_dir(repo_root())
            .args([
                "-c",
                "source scripts/python-env.sh && python_env pyarrow==26.0.1 >&2 && echo \"$VENV\"",
            ])
            .output()
            .unwrap();
        assert_success(&out, "the test environment's Python");
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("bin/python")
    })
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repo root")
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
    run_captured_in_parallel(files, params, inputs, batch_size, 1)
}

/// Batch sizes and parallelisms the differential tests sweep: results must
/// not depend on how rows are batched nor on how many instances each
/// keyed operator runs as.
#[allow(dead_code)] // not every test binary sweeps
pub const SWEEP: [(usize, usize); 6] = [(1, 1), (7, 1), (1024, 1), (8192, 1), (7, 2), (1024, 4)];

/// [`run_captured`] with each keyed operator run as `parallelism` instances.
pub fn run_captured_in_parallel(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    inputs: BTreeMap<String, String>,
    batch_size: usize,
    parallelism: usize,
) -> Result<Captured, eddy_cli::CliError> {
    let buffer = Arc::new(Mutex::new(Vec::new()));
    let config = ConnectorConfig {
        inputs,
        batch_size,
        settings: eddy_connectors::settings::ConnectorSettings::default()
            .with(StdoutTarget::Buffer(buffer.clone())),
        ..ConnectorConfig::default()
    };
    let report = job::run(
        files,
        params,
        config,
        &eddy_engine::runtime::JobConfig {
            parallelism: eddy_engine::parallel::Parallelism::Fixed(parallelism),
            ..Default::default()
        },
    )?;
    let text = String::from_utf8(buffer.lock().expect("buffer").clone()).expect("utf8 output");
    Ok(Captured {
        lines: text.lines().map(str::to_string).collect(),
        report,
    })
}

/// `count` rows of a generated stream (seed 11, 200 events/s) as NDJSON.
pub fn generated_ndjson(
    stream: eddy_connectors::generator::GeneratedStream,
    count: u64,
) -> Vec<u8> {
    let mut generator =
        eddy_connectors::generator::Generator::new(eddy_connectors::generator::GeneratorConfig {
            stream,
            seed: 11,
            rate: 200,
            count: Some(count),
            batch_size: 8192,
        });
    let mut text = Vec::new();
    while let Some(batch) = generator.next_batch().unwrap() {
        eddy_connectors::json_lines::encode_json_lines(&batch, &mut text).unwrap();
    }
    text
}

/// Replays tagged changelog lines (`TAG> +I {json}`; `+I`/`+U` add a row,
/// `-U`/`-D` take one out) into the table they describe, as `TAG> {json}`
/// lines, sorted. Lines without a row kind are appends. A retraction of a
/// row the table does not hold is an error.
#[allow(dead_code)] // not every test binary replays changelogs
pub fn replay_changelog(lines: &[String]) -> Result<Vec<String>, String> {
    let mut table: std::collections::BTreeMap<String, usize> = Default::default();
    for line in lines {
        let (tag, rest) = line
            .split_once("> ")
            .ok_or_else(|| format!("not a tagged line: {line}"))?;
        let (kind, json) = match rest.split_once(' ') {
            Some((kind @ ("+I" | "-U" | "+U" | "-D"), json)) => (kind, json),
            _ => ("+I", rest),
        };
        let row = format!("{tag}> {json}");
        if kind.starts_with('+') {
            *table.entry(row).or_insert(0) += 1;
        } else {
            let held = table
                .get_mut(&row)
                .ok_or_else(|| format!("{kind} of a row the sink never received: {row}"))?;
            *held -= 1;
            if *held == 0 {
                table.remove(&row);
            }
        }
    }
    Ok(table
        .into_iter()
        .flat_map(|(row, count)| std::iter::repeat_n(row, count))
        .collect())
}

/// Whether output lines form a changelog (their rows carry a row kind).
#[allow(dead_code)]
pub fn is_changelog(lines: &[String]) -> bool {
    lines.iter().any(|l| {
        l.split_once("> ").is_some_and(|(_, rest)| {
            ["+I ", "-U ", "+U ", "-D "]
                .iter()
                .any(|k| rest.starts_with(k))
        })
    })
}

/// A row's sort key for comparing result sets: its fields as text, floats
/// left out (their last bits depend on summation order).
#[allow(dead_code)] // not every test binary sorts rows
pub fn row_key(row: &serde_json::Value) -> String {
    let serde_json::Value::Object(map) = row else {
        return row.to_string();
    };
    map.iter()
        .filter(|(_, v)| !matches!(v, serde_json::Value::Number(n) if n.is_f64()))
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Sorted copy of lines (output order across keys is not defined).
pub fn sorted(mut lines: Vec<String>) -> Vec<String> {
    lines.sort();
    lines
}

/// Whether this run rewrites golden files: only with `EDDY_UPDATE_GOLDEN=1`
/// (any other value, or none, compares).
pub fn updating_golden() -> bool {
    std::env::var("EDDY_UPDATE_GOLDEN").as_deref() == Ok("1")
}

/// Compares `actual` with the golden file at `path`, or rewrites it when
/// `EDDY_UPDATE_GOLDEN=1`.
pub fn check_golden(path: &PathBuf, actual: &[String]) {
    let text = if actual.is_empty() {
        String::new()
    } else {
        format!("{}\n", actual.join("\n"))
    };
    if updating_golden() {
        std::fs::write(path, &text).expect("write golden");
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|_| {
        panic!(
            "missing golden {} (run with EDDY_UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    if expected != text {
        let exp: Vec<&str> = expected.lines().collect();
        let act: Vec<&str> = text.lines().collect();
        let first = exp
            .iter()
            .zip(&act)
            .position(|(a, b)| a != b)
            .unwrap_or(exp.len().min(act.len()));
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

/// Runs `sql` as a DataFusion batch query over NDJSON `tables` (name, path,
/// schema), with eddy's functions registered, and returns the result rows as
/// JSON lines in eddy's output encoding.
pub fn datafusion_json_lines(
    tables: &[(&str, &str, datafusion::arrow::datatypes::Schema)],
    sql: &str,
) -> Vec<String> {
    use datafusion::prelude::{JsonReadOptions, SessionContext};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let ctx = SessionContext::new();
        eddy_sql::functions::register_all(&ctx);
        for (name, path, schema) in tables {
            let options = JsonReadOptions::default().schema(schema).file_extension("");
            ctx.register_json(*name, *path, options)
                .await
                .expect("register");
        }
        let batches = ctx
            .sql(sql)
            .await
            .expect("batch sql")
            .collect()
            .await
            .expect("batch run");
        let mut text = Vec::new();
        for b in &batches {
            eddy_connectors::json_lines::encode_json_lines(b, &mut text).expect("encode");
        }
        String::from_utf8(text)
            .expect("utf8")
            .lines()
            .map(str::to_string)
            .collect()
    })
}

/// Parses output lines (with or without a `TAG> ` prefix) as JSON.
pub fn json_rows<'a>(lines: impl IntoIterator<Item = &'a str>) -> Vec<serde_json::Value> {
    lines
        .into_iter()
        .map(|l| {
            serde_json::from_str(l.split_once("> ").map(|(_, j)| j).unwrap_or(l))
                .expect("output line is JSON")
        })
        .collect()
}

/// Rows judged late anywhere in a run.
#[allow(dead_code)] // not every test binary counts them
pub fn late_rows(report: &eddy_engine::runtime::JobReport) -> u64 {
    report.nodes.iter().map(|n| n.metrics.late_rows).sum()
}

/// Asserts that sorted streaming rows equal sorted batch rows (as
/// [`same_json`]), naming `what` and the first differing pair.
#[allow(dead_code)] // not every test binary compares rows
pub fn assert_same_rows(actual: &[serde_json::Value], expected: &[serde_json::Value], what: &str) {
    assert_eq!(
        actual.len(),
        expected.len(),
        "{what}: row count; first rows eddy {:?} datafusion {:?}",
        actual.first(),
        expected.first()
    );
    for (a, e) in actual.iter().zip(expected) {
        assert!(
            same_json(a, e),
            "{what}:\n  eddy:       {a}\n  datafusion: {e}"
        );
    }
}

/// JSON values equal, floating-point numbers within 1e-9 relative error
/// (their last bits depend on summation order).
pub fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value;
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (
                x.as_f64().unwrap_or(f64::NAN),
                y.as_f64().unwrap_or(f64::NAN),
            );
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Fails the test with the command's stderr unless it exited with 0.
pub fn assert_success(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An `eddy serve` command on a free port with these directories and
/// checkpoint interval, stdout discarded and no token from the
/// environment; more arguments may follow.
/// A server's directories (`data` exists), removed when dropped.
pub struct ServerDirs {
    _root: tempfile::TempDir,
    /// `--data-root`.
    pub data: PathBuf,
    /// `--output-root`.
    pub output: PathBuf,
    /// `--state-dir`.
    pub state: PathBuf,
}

/// Fresh [`ServerDirs`].
pub fn server_dirs() -> ServerDirs {
    let root = tempfile::tempdir().unwrap();
    let (data, output, state) = (
        root.path().join("data"),
        root.path().join("output"),
        root.path().join("state"),
    );
    std::fs::create_dir_all(&data).unwrap();
    ServerDirs {
        _root: root,
        data,
        output,
        state,
    }
}

/// `eddy serve` on a free port with these directories.
pub fn serve_command(
    data: &std::path::Path,
    output: &std::path::Path,
    state: &std::path::Path,
    checkpoint_interval: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_eddy"));
    command
        .current_dir(repo_root())
        .args(["serve", "--addr", "127.0.0.1:0", "--checkpoint-interval"])
        .arg(checkpoint_interval)
        .arg("--data-root")
        .arg(data)
        .arg("--output-root")
        .arg(output)
        .arg("--state-dir")
        .arg(state)
        .env_remove("EDDY_TOKEN")
        .stdout(std::process::Stdio::null());
    command
}

/// Spawns `eddy serve` (stdout not read) and waits until it says where it
/// listens: the HTTP base URL.
pub fn spawn_server(command: std::process::Command) -> (std::process::Child, String) {
    let spawned = spawn_server_logged(command, false);
    (spawned.child, spawned.base)
}

/// A server started by [`spawn_server_logged`].
pub struct SpawnedServer {
    /// Its process.
    pub child: std::process::Child,
    /// Its HTTP base URL.
    pub base: String,
    /// Its PostgreSQL port, when asked for.
    pub pg: Option<std::net::SocketAddr>,
    /// Every line it wrote to stderr so far.
    pub log: std::sync::Arc<std::sync::Mutex<String>>,
}

/// Spawns `eddy serve`, keeping its stderr, and waits until it says where
/// it listens: HTTP, and the PostgreSQL port too when `pg` (the command
/// has `--pg-addr`).
pub fn spawn_server_logged(mut command: std::process::Command, pg: bool) -> SpawnedServer {
    use std::io::BufRead;
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn eddy serve");
    let stderr = child.stderr.take().expect("stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let written = log.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(|l| l.ok())
        {
            {
                let mut all = written.lock().unwrap_or_else(|e| e.into_inner());
                all.push_str(&line);
                all.push('\n');
            }
            let address = |rest: &str| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            };
            if let Some(rest) = line.strip_prefix("eddy serving PostgreSQL on ") {
                let _ = tx.send((true, address(rest)));
            } else if let Some(rest) = line.strip_prefix("eddy serving on ") {
                let _ = tx.send((false, address(rest)));
            }
        }
    });
    let (mut base, mut pg_addr) = (None, None);
    while base.is_none() || (pg && pg_addr.is_none()) {
        let (is_pg, address) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the server says where it listens");
        if is_pg {
            pg_addr = Some(address.parse().expect("an address"));
        } else {
            base = Some(address);
        }
    }
    SpawnedServer {
        child,
        base: base.unwrap_or_default(),
        pg: pg_addr,
        log,
    }
}

/// `psql -c sql` against the PostgreSQL port at `addr` (with
/// `PGSSLMODE=ssl_mode`): its output (unaligned, `|` between fields, no
/// headers), or its stderr on failure.
pub fn psql(addr: std::net::SocketAddr, sql: &str, ssl_mode: &str) -> Result<String, String> {
    let out = std::process::Command::new("psql")
        .args(["-X", "-A", "-t", "-F", "|", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
        .args(["-U", "eddy", "-d", "eddy", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "10")
        .env("PGSSLMODE", ssl_mode)
        .output()
        .expect("psql runs (scripts/postgres.sh installs Debian's client)");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Every Parquet file under `dir` (recursively), with the directory it is
/// in relative to `dir` (`country=US/`, or empty), as record batches. Fails
/// on a hidden in-progress file left behind.
pub fn read_parquet_tree(
    dir: &std::path::Path,
) -> Vec<(String, datafusion::arrow::record_batch::RecordBatch)> {
    fn walk(
        root: &std::path::Path,
        dir: &std::path::Path,
        out: &mut Vec<(String, datafusion::arrow::record_batch::RecordBatch)>,
    ) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(root, &path, out);
                continue;
            }
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                !name.starts_with('.'),
                "an in-progress file is left: {}",
                path.display()
            );
            let relative = path
                .parent()
                .unwrap()
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .to_string();
            let relative = if relative.is_empty() {
                relative
            } else {
                format!("{relative}/")
            };
            let reader =
                datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
                    std::fs::File::open(&path).unwrap(),
                )
                .unwrap()
                .build()
                .unwrap();
            for batch in reader {
                out.push((relative.clone(), batch.unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out
}

/// A free TCP port on 127.0.0.1 (free when asked).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something accepts connections on `127.0.0.1:port`; fails
/// naming `what` after `limit`.
pub fn wait_until_listening(port: u16, limit: std::time::Duration, what: &str) {
    let address = format!("127.0.0.1:{port}");
    let started = std::time::Instant::now();
    while std::net::TcpStream::connect(&address).is_err() {
        assert!(started.elapsed() < limit, "{what} did not start");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The table a file of Debezium change events describes, as sorted JSON
/// rows; panics on an update or delete of a row it does not hold.
#[allow(dead_code)] // not every test binary reads Debezium changelogs
pub fn debezium_table(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut table: std::collections::BTreeMap<String, usize> = Default::default();
    for line in text.lines() {
        let event: serde_json::Value = serde_json::from_str(line).unwrap();
        if !event["before"].is_null() {
            let before = event["before"].to_string();
            let held = table
                .get_mut(&before)
                .unwrap_or_else(|| panic!("{}: {line} takes out a row not held", path.display()));
            *held -= 1;
            if *held == 0 {
                table.remove(&before);
            }
        }
        if !event["after"].is_null() {
            *table.entry(event["after"].to_string()).or_insert(0) += 1;
        }
    }
    table
        .into_iter()
        .flat_map(|(row, n)| std::iter::repeat_n(row, n))
        .collect()
}

/// A LEFT JOIN of orders with their payments into the Debezium table
/// `paid`, over the files [`orders_and_payments`] writes.
#[allow(dead_code)] // not every test binary joins orders and payments
pub const PAID: &str = "
CREATE TABLE orders (id VARCHAR, amount BIGINT) WITH (connector = 'file', path = '${ORDERS}');
CREATE TABLE payments (id VARCHAR, paid BIGINT) WITH (connector = 'file', path = '${PAYMENTS}');
CREATE TABLE paid (id VARCHAR, amount BIGINT, paid BIGINT)
  WITH (connector = 'ndjson', path = 'paid.ndjson', format = 'debezium-json');
INSERT INTO paid SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p ON o.id = p.id;
";

/// `orders.ndjson` and `payments.ndjson` in `dir`: `n` orders (`id`,
/// `amount`), and `n` payments (`id`, `paid`) on orders drawn at random,
/// so some are paid twice or more and about a third never. The `--set`
/// assignments [`PAID`] reads them by (`ORDERS=...`, `PAYMENTS=...`).
#[allow(dead_code)] // not every test binary joins orders and payments
pub fn orders_and_payments(dir: &std::path::Path, n: usize) -> Vec<String> {
    use std::fmt::Write;
    let mut orders = String::with_capacity(n * 40);
    let mut payments = String::with_capacity(n * 40);
    let mut seed = 9u64;
    for i in 0..n {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        writeln!(orders, "{{\"id\":\"order-{i}\",\"amount\":{}}}", i % 1000).unwrap();
        let paid = (seed >> 33) as usize % n;
        writeln!(
            payments,
            "{{\"id\":\"order-{paid}\",\"paid\":{}}}",
            (seed >> 20) % 1000
        )
        .unwrap();
    }
    let mut sets = Vec::new();
    for (name, text) in [("ORDERS", orders), ("PAYMENTS", payments)] {
        let file = dir.join(format!("{}.ndjson", name.to_lowercase()));
        std::fs::write(&file, text).unwrap();
        sets.push(format!("{name}={}", file.display()));
    }
    sets
}

/// A regular (inner) join of orders with their payments, over the files
/// [`orders_and_payments`] writes: every row of both sides stays in state.
#[allow(dead_code)] // not every test binary joins orders and payments
pub const MATCHED: &str = "
CREATE TABLE orders (id VARCHAR, amount BIGINT) WITH (connector = 'file', path = '${ORDERS}');
CREATE TABLE payments (id VARCHAR, paid BIGINT) WITH (connector = 'file', path = '${PAYMENTS}');
CREATE TABLE matched (id VARCHAR, amount BIGINT, paid BIGINT)
  WITH (connector = 'ndjson', path = 'matched.ndjson', format = 'debezium-json');
INSERT INTO matched SELECT o.id, o.amount, p.paid FROM orders o JOIN payments p ON o.id = p.id;
";

/// An interval LEFT JOIN of orders with the payments made from 30 s
/// before to 90 s after them, over the files [`timed_orders_and_payments`]
/// writes: orders without one come out null-padded once the watermark
/// rules a payment out.
#[allow(dead_code)] // not every test binary joins orders and payments
pub const PAID_IN_TIME: &str = "
CREATE TABLE orders (
  id VARCHAR, amount BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${ORDERS}');
CREATE TABLE payments (
  id VARCHAR, paid BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = '${PAYMENTS}');
CREATE TABLE paid_in_time (id VARCHAR, amount BIGINT, paid BIGINT)
  WITH (connector = 'ndjson', path = 'paid_in_time.ndjson', format = 'debezium-json');
INSERT INTO paid_in_time SELECT o.id, o.amount, p.paid FROM orders o LEFT JOIN payments p
  ON o.id = p.id AND p.ts BETWEEN o.ts - INTERVAL '30' SECOND AND o.ts + INTERVAL '90' SECOND;
";

/// `orders.ndjson` and `payments.ndjson` in `dir`: `n` orders (`id`,
/// `amount`, `at_ms`), 2 ms apart, and about as many payments (`id`,
/// `paid`, `at_ms`) in time order, each from 40 s before to 120 s after
/// its order: some orders paid twice, some never, some out of
/// [`PAID_IN_TIME`]'s interval. The `--set` assignments that reads them by.
#[allow(dead_code)] // not every test binary joins orders and payments
pub fn timed_orders_and_payments(dir: &std::path::Path, n: u64) -> Vec<String> {
    use std::fmt::Write;
    const START: u64 = 1_700_000_000_000;
    let mut orders = String::with_capacity(n as usize * 60);
    let mut payments: Vec<(u64, String)> = Vec::new();
    let mut seed = 13u64;
    for i in 0..n {
        let at = START + i * 2;
        writeln!(
            orders,
            "{{\"id\":\"order-{i}\",\"amount\":{},\"at_ms\":{at}}}",
            i % 1000
        )
        .unwrap();
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let pick = seed >> 33;
        for copy in 0..pick % 3 {
            let paid_at = at - 40_000 + copy * 60_000 + (pick >> 4) % 100_000;
            payments.push((
                paid_at,
                format!(
                    "{{\"id\":\"order-{i}\",\"paid\":{},\"at_ms\":{paid_at}}}",
                    (pick >> 8) % 1000
                ),
            ));
        }
    }
    payments.sort();
    let payments: String = payments.into_iter().map(|(_, line)| line + "\n").collect();
    let mut sets = Vec::new();
    for (name, text) in [("ORDERS", orders), ("PAYMENTS", payments)] {
        let file = dir.join(format!("{}.ndjson", name.to_lowercase()));
        std::fs::write(&file, text).unwrap();
        sets.push(format!("{name}={}", file.display()));
    }
    sets
}

/// Tumbling and hopping windows per key, events up to 5 s out of order and a watermark 20 s behind: three tumbling windows
/// open at a time, and hop slices merged at each firing; over the events
/// [`keyed_timed_events`] writes.
#[allow(dead_code)] // not every test binary runs windows past the memory limit
pub const KEYED_WINDOWS: &str = "
CREATE TABLE events (
  k VARCHAR, v BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '20' SECOND
) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE per_window (window_start TIMESTAMP(3), k VARCHAR, n BIGINT, total BIGINT, low BIGINT, high BIGINT, kinds BIGINT)
  WITH (connector = 'ndjson', path = 'per_window.ndjson', format = 'debezium-json');
CREATE TABLE per_hop (window_start TIMESTAMP(3), window_end TIMESTAMP(3), k VARCHAR, n BIGINT, total BIGINT)
  WITH (connector = 'ndjson', path = 'per_hop.ndjson', format = 'debezium-json');
INSERT INTO per_window SELECT w.start, k, n, total, low, high, kinds FROM (
  SELECT tumble(INTERVAL '10' SECOND) AS w, k, count(*) AS n, sum(v) AS total, min(v) AS low,
         max(v) AS high, count(DISTINCT v % 5) AS kinds
  FROM events GROUP BY w, k);
INSERT INTO per_hop SELECT w.start, w.end, k, n, total FROM (
  SELECT hop(INTERVAL '5' SECOND, INTERVAL '15' SECOND) AS w, k, count(*) AS n, sum(v) AS total
  FROM events GROUP BY w, k);
";

/// Sessions of 10 s per key over [`keyed_timed_events`] (a key
/// has a row every 20 s on average, so sessions both close and go on), the
/// watermark 6 s behind (the rows are up to 5 s out of order): few rows
/// wait for it, most of the state is open sessions.
#[allow(dead_code)] // not every test binary runs sessions past the memory limit
pub const KEYED_SESSIONS: &str = "
CREATE TABLE events (
  k VARCHAR, v BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '6' SECOND
) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE per_session (session_start TIMESTAMP(3), session_end TIMESTAMP(3), k VARCHAR, n BIGINT, total BIGINT, low BIGINT, high BIGINT, mean DOUBLE)
  WITH (connector = 'ndjson', path = 'per_session.ndjson', format = 'debezium-json');
INSERT INTO per_session SELECT s.start, s.end, k, n, total, low, high, mean FROM (
  SELECT session(INTERVAL '10' SECOND) AS s, k, count(*) AS n, sum(v) AS total, min(v) AS low,
         max(v) AS high, avg(v) AS mean
  FROM events GROUP BY s, k);
";

/// Running count, sum and mean per key (OVER over an append-only input)
/// over [`keyed_timed_events`], the watermark 6 s behind (the rows are up
/// to 5 s out of order): most of the state is the keys' running values.
#[allow(dead_code)] // not every test binary runs OVER past the memory limit
pub const KEYED_RUNNING: &str = "
CREATE TABLE events (
  k VARCHAR, v BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '6' SECOND
) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE running (k VARCHAR, v BIGINT, at_ms BIGINT, n BIGINT, total BIGINT, mean DOUBLE)
  WITH (connector = 'ndjson', path = 'running.ndjson', format = 'debezium-json');
INSERT INTO running SELECT k, v, at_ms,
  count(*) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
  sum(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
  avg(v) OVER (PARTITION BY k ORDER BY ts ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
FROM events;
";

/// `n` events on `keys` keys (`key-0`, ...) drawn at random, 100 ms of
/// event time per 1,000 events, each up to 5 s out of order, as NDJSON
/// in `dir`; the `--set` assignment [`KEYED_WINDOWS`] reads them by.
#[allow(dead_code)] // not every test binary runs windows past the memory limit
pub fn keyed_timed_events(dir: &std::path::Path, n: u64, keys: usize) -> Vec<String> {
    use std::fmt::Write;
    let mut text = String::with_capacity(n as usize * 50);
    let mut seed = 11u64;
    for i in 0..n {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let k = (seed >> 33) as usize % keys;
        let at = 1_700_000_000_000 + i / 10 + (seed >> 12) % 5_000;
        writeln!(
            text,
            "{{\"k\":\"key-{k}\",\"v\":{},\"at_ms\":{at}}}",
            (seed >> 20) % 1000
        )
        .unwrap();
    }
    let file = dir.join("timed_events.ndjson");
    std::fs::write(&file, text).unwrap();
    vec![format!("EVENTS={}", file.display())]
}

/// The two largest values of each key in each 10 s window (a window
/// Top-N over a window table function's rows), over the events
/// [`keyed_timed_events`] writes.
#[allow(dead_code)] // not every test binary ranks windows past the memory limit
pub const WINDOW_TOP: &str = "
CREATE TABLE events (
  k VARCHAR, v BIGINT, at_ms BIGINT,
  ts TIMESTAMP(3) GENERATED ALWAYS AS (to_timestamp_millis(at_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '20' SECOND
) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE window_top2 (window_start TIMESTAMP(3), k VARCHAR, v BIGINT, rn BIGINT)
  WITH (connector = 'ndjson', path = 'window_top2.ndjson', format = 'debezium-json');
INSERT INTO window_top2 SELECT window_start, k, v, rn FROM (
  SELECT window_start, k, v,
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end, k ORDER BY v DESC) AS rn
  FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' SECOND))
) WHERE rn <= 2;
";

/// DISTINCT over an append-only input (DataFusion's accumulator, its
/// values a list in the group's state) and, with MIN and MAX, over an
/// updating one (a multiset per group and aggregate).
#[allow(dead_code)] // not every test binary runs DISTINCT aggregates
pub const DISTINCT: &str = "
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE seen (k VARCHAR, values_seen BIGINT)
  WITH (connector = 'ndjson', path = 'seen.ndjson', format = 'debezium-json');
CREATE TABLE spreads (k VARCHAR, counts BIGINT, low BIGINT, high BIGINT)
  WITH (connector = 'ndjson', path = 'spreads.ndjson', format = 'debezium-json');
INSERT INTO seen SELECT k, count(DISTINCT v) FROM events GROUP BY k;
INSERT INTO spreads SELECT k, count(DISTINCT n), min(n), max(n)
  FROM (SELECT k, v % 4 AS bucket, count(*) AS n FROM events GROUP BY k, v % 4) GROUP BY k;
";

/// The two largest values of each key (a Top-N over the whole stream) of
/// `k VARCHAR, v BIGINT` events.
#[allow(dead_code)] // not every test binary ranks past the memory limit
pub const TOP: &str = "
CREATE TABLE events (k VARCHAR, v BIGINT) WITH (connector = 'file', path = '${EVENTS}');
CREATE TABLE top2 (k VARCHAR, v BIGINT, rn BIGINT)
  WITH (connector = 'ndjson', path = 'top2.ndjson', format = 'debezium-json');
INSERT INTO top2 SELECT k, v, rn FROM (
  SELECT k, v, ROW_NUMBER() OVER (PARTITION BY k ORDER BY v DESC) AS rn FROM events
) WHERE rn <= 2;
";
