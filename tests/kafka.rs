//! Kafka in and out, against a real Kafka-protocol broker (Tansu, which
//! `scripts/kafka-broker.sh` installs from PyPI) started per test on a free
//! port.
//!
//! - The reference pipeline reading three topics (orders and payments in
//!   three partitions, written one partition after another so that the
//!   partitions' clocks are far apart in the log) prints what it prints
//!   from the same rows as files, with no row late: watermarks and
//!   lateness are per partition.
//! - The record timestamp as event time (`_kafka_timestamp`), the other
//!   metadata columns, `start` at a timestamp, and a bad record reported
//!   as `kafka:<topic>/<partition>@<offset>`.
//! - A job reading a topic and writing a transactional sink topic, killed
//!   with SIGKILL again and again and restarted from its checkpoints,
//!   leaves each output record in the sink topic exactly once.
//! - Group jobs (`eddy run --group`, and `eddy serve` with a group in the
//!   submission): processes and servers of one group share a job's tasks,
//!   take over a dead one's, move rows through exchange topics, and write
//!   what one process writes alone; a group killed at two instances per
//!   task resumes its tasks at three; processes that share no disk run a
//!   group through a bucket (state, leases, output) and take over a
//!   killed one's tasks.
//! - An upsert topic read at a memory limit a tenth of its upsert step's
//!   state, at parallelism 1 and 2: the step spills its current rows and
//!   the changelog it writes replays to the topic's table.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::s3::S3Server;
use eddy_connectors::generator::GeneratedStream;
use eddy_sql::SqlFile;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{ClientConfig, Offset, TopicPartitionList};

/// A broker process on 127.0.0.1, stopped when dropped.
struct Broker {
    child: Child,
    binary: PathBuf,
    address: String,
}

impl Broker {
    fn start() -> Self {
        // Installed once per test process (the tests run concurrently).
        static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let binary = BINARY
            .get_or_init(|| {
                let out = Command::new("bash")
                    .arg(common::repo_root().join("scripts/kafka-broker.sh"))
                    .arg("path")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "installing the broker failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
            })
            .clone();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let address = format!("127.0.0.1:{port}");
        let url = format!("tcp://{address}");
        let child = Command::new(&binary)
            .args([
                "broker",
                "--listener-url",
                &url,
                "--advertised-listener-url",
                &url,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while TcpStream::connect(&address).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "the broker did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            binary,
            address,
        }
    }

    fn create_topic(&self, name: &str, partitions: u32) {
        let out = Command::new(&self.binary)
            .args(["topic", "create", name, "--partitions"])
            .arg(partitions.to_string())
            .arg("--broker")
            .arg(format!("tcp://{}", self.address))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "creating topic {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn producer(&self) -> BaseProducer {
        ClientConfig::new()
            .set("bootstrap.servers", &self.address)
            .set("linger.ms", "5")
            .create()
            .unwrap()
    }

    /// Writes `(partition, timestamp, value)` records in order.
    fn produce(&self, topic: &str, records: &[(i32, i64, Vec<u8>)]) {
        let producer = self.producer();
        for (partition, timestamp, value) in records {
            let mut record = BaseRecord::<(), [u8]>::to(topic)
                .partition(*partition)
                .timestamp(*timestamp)
                .payload(value.as_slice());
            loop {
                match producer.send(record) {
                    Ok(()) => break,
                    Err((KafkaError::MessageProduction(_), back)) => {
                        producer.poll(Duration::from_millis(10));
                        record = back;
                    }
                    Err((e, _)) => panic!("producing to {topic}: {e}"),
                }
            }
        }
        producer.flush(Duration::from_secs(30)).unwrap();
    }

    /// The offsets `group` has committed for `topic`'s partitions.
    fn committed(&self, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.address)
            .set("group.id", group)
            .create()
            .unwrap();
        let mut wanted = TopicPartitionList::new();
        for p in 0..partitions {
            wanted.add_partition(topic, p);
        }
        consumer
            .committed_offsets(wanted, Duration::from_secs(10))
            .unwrap()
            .elements()
            .iter()
            .map(|e| match e.offset() {
                Offset::Offset(o) => o,
                _ => -1,
            })
            .collect()
    }

    /// Every value in `topic` that a read-committed consumer sees.
    fn read_all(&self, topic: &str, partitions: i32) -> Vec<String> {
        self.read_records(topic, partitions)
            .into_iter()
            .map(|(_, _, value)| value)
            .collect()
    }

    /// Every `(partition, key, value)` in `topic` that a read-committed
    /// consumer sees.
    fn read_records(&self, topic: &str, partitions: i32) -> Vec<(i32, Option<String>, String)> {
        let consumer: BaseConsumer = ClientConfig::new()
            .set("bootstrap.servers", &self.address)
            .set("group.id", "eddy-test-reader")
            .set("enable.auto.commit", "false")
            .set("enable.partition.eof", "true")
            .set("isolation.level", "read_committed")
            .create()
            .unwrap();
        let mut assignment = TopicPartitionList::new();
        for p in 0..partitions {
            assignment
                .add_partition_offset(topic, p, Offset::Beginning)
                .unwrap();
        }
        consumer.assign(&assignment).unwrap();
        let mut open: std::collections::HashSet<i32> = (0..partitions).collect();
        let mut values = Vec::new();
        let started = Instant::now();
        while !open.is_empty() {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "reading {topic} timed out"
            );
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => values.push((
                    m.partition(),
                    m.key().map(|k| String::from_utf8(k.to_vec()).unwrap()),
                    // A tombstone (no value) reads as an empty string.
                    m.payload()
                        .map(|p| String::from_utf8(p.to_vec()).unwrap())
                        .unwrap_or_default(),
                )),
                Some(Err(KafkaError::PartitionEOF(p))) => {
                    open.remove(&p);
                }
                Some(Err(e)) => panic!("reading {topic}: {e}"),
                None => {}
            }
        }
        values
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The NDJSON lines of `count` generated rows of `stream`.
fn generated_lines(stream: GeneratedStream, count: u64) -> Vec<String> {
    String::from_utf8(common::generated_ndjson(stream, count))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// FNV-1a: a stable partition for a key.
fn partition_of(key: &str, partitions: i32) -> i32 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for b in key.bytes() {
        hash ^= b as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    (hash % partitions as u64) as i32
}

/// Records of `lines` spread over `partitions` by `key`, written one
/// partition after another (partition 0's rows first, then 1's, ...): in
/// the log each partition's clock runs through the whole time range on
/// its own.
fn skewed_records(lines: &[String], key: &str, partitions: i32) -> Vec<(i32, i64, Vec<u8>)> {
    let mut by_partition: BTreeMap<i32, Vec<(i32, i64, Vec<u8>)>> = BTreeMap::new();
    for line in lines {
        let row: serde_json::Value = serde_json::from_str(line).unwrap();
        let p = partition_of(row[key].as_str().unwrap(), partitions);
        by_partition
            .entry(p)
            .or_default()
            .push((p, 1_700_000_000_000, line.clone().into_bytes()));
    }
    by_partition.into_values().flatten().collect()
}

fn sql_files(dir: &Path) -> Vec<SqlFile> {
    eddy_cli::job::load_sql(&[dir.to_path_buf()]).unwrap()
}

fn tagged(lines: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in lines {
        let tag = line.split('>').next().unwrap().to_string();
        out.entry(tag).or_default().push(line.clone());
    }
    out.into_iter()
        .map(|(tag, lines)| (tag, common::sorted(lines)))
        .collect()
}

fn source_metric(report: &eddy_engine::runtime::JobReport, table: &str) -> (u64, u64, u64) {
    let node = report
        .nodes
        .iter()
        .find(|n| n.kind == "source" && n.name.contains(table))
        .unwrap_or_else(|| panic!("no source node for {table}"));
    (
        node.metrics.rows_in,
        node.metrics.late_rows,
        node.metrics.bad_rows,
    )
}

#[test]
fn the_reference_pipeline_reads_partitioned_topics_as_it_reads_files() {
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let rows = 4_000;
    let mut file_inputs = BTreeMap::new();
    let mut kafka_inputs = BTreeMap::new();
    for (table, stream, key, partitions) in [
        ("orders", GeneratedStream::Orders, "order_id", 3),
        ("payments", GeneratedStream::Payments, "order_id", 3),
        // Device lateness is judged in the order rows arrive: one partition
        // keeps the file's order.
        ("devices", GeneratedStream::Devices, "device_id", 1),
    ] {
        let lines = generated_lines(stream, rows);
        let path = dir.path().join(format!("{table}.ndjson"));
        std::fs::write(&path, lines.join("\n") + "\n").unwrap();
        file_inputs.insert(table.to_string(), path.display().to_string());
        broker.create_topic(table, partitions as u32);
        broker.produce(table, &skewed_records(&lines, key, partitions));
        kafka_inputs.insert(
            table.to_string(),
            format!("kafka://{}/{table}?stop=latest", broker.address),
        );
    }
    let files = sql_files(&common::repo_root().join("queries"));
    let params = BTreeMap::new();
    let from_files = common::run_captured(&files, &params, file_inputs, 512).unwrap();
    let from_kafka = common::run_captured(&files, &params, kafka_inputs, 512).unwrap();
    for table in ["orders", "payments", "devices"] {
        let (files_in, files_late, files_bad) = source_metric(&from_files.report, table);
        let (kafka_in, kafka_late, kafka_bad) = source_metric(&from_kafka.report, table);
        assert_eq!(kafka_in, files_in, "{table}: rows read");
        assert_eq!(kafka_late, files_late, "{table}: late rows");
        assert_eq!(kafka_bad, files_bad, "{table}: bad rows");
    }
    assert_eq!(source_metric(&from_kafka.report, "orders").1, 0);
    assert_eq!(source_metric(&from_kafka.report, "payments").1, 0);
    let expected = tagged(&from_files.lines);
    let actual = tagged(&from_kafka.lines);
    assert!(expected.len() >= 4, "tags: {:?}", expected.keys());
    for (tag, lines) in &expected {
        let got = actual.get(tag).cloned().unwrap_or_default();
        assert_eq!(got.len(), lines.len(), "{tag}: line count");
        assert_eq!(&got, lines, "{tag}");
    }
    assert_eq!(actual.len(), expected.len());
}

#[test]
fn record_timestamps_metadata_start_and_bad_records() {
    let broker = Broker::start();
    broker.create_topic("clicks", 2);
    let base = 1_700_000_000_000i64;
    let mut records = Vec::new();
    // Partition 0: seconds 0..20; partition 1 written after it, seconds
    // 0..20 again; one bad record at partition 1, offset 3.
    for p in 0..2 {
        for i in 0..20i64 {
            let value = if p == 1 && i == 3 {
                b"{\"user\": ".to_vec()
            } else {
                format!("{{\"user\": \"u{}\"}}", i % 3).into_bytes()
            };
            records.push((p, base + i * 1_000, value));
        }
    }
    broker.produce("clicks", &records);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("job.sql"),
        format!(
            "CREATE TABLE clicks (
               \"user\" VARCHAR,
               _kafka_timestamp TIMESTAMP(3),
               _kafka_partition INT,
               _kafka_offset BIGINT,
               WATERMARK FOR _kafka_timestamp AS _kafka_timestamp - INTERVAL '1' SECOND
             ) WITH (connector = 'kafka', bootstrap_servers = '{}', topic = 'clicks',
                     stop = 'latest', start = '{}');
             CREATE TABLE counts (window_start_ms BIGINT, clicks BIGINT, partitions BIGINT, max_offset BIGINT)
               WITH (connector = 'stdout', tag = 'COUNTS');
             INSERT INTO counts
             SELECT CAST(window_start AS BIGINT), count(*), count(DISTINCT _kafka_partition), max(_kafka_offset)
             FROM TABLE(TUMBLE(TABLE clicks, DESCRIPTOR(_kafka_timestamp), INTERVAL '5' SECOND))
             GROUP BY window_start, window_end;",
            broker.address,
            base + 5_000
        ),
    )
    .unwrap();
    let run =
        common::run_captured(&sql_files(dir.path()), &BTreeMap::new(), BTreeMap::new(), 7).unwrap();
    let (rows_in, late, bad) = source_metric(&run.report, "clicks");
    // 15 records at or after the start instant per partition; the bad one
    // (second 3) is before it, so nothing is bad and nothing is late even
    // though partition 1 starts again at second 5 after partition 0 ended.
    assert_eq!((rows_in, late, bad), (30, 0, 0), "{:?}", run.lines);
    let lines = common::sorted(run.lines.clone());
    assert_eq!(
        lines,
        vec![
            format!("COUNTS> {{\"window_start_ms\": {}, \"clicks\": 10, \"partitions\": 2, \"max_offset\": 9}}", base + 5_000),
            format!("COUNTS> {{\"window_start_ms\": {}, \"clicks\": 10, \"partitions\": 2, \"max_offset\": 14}}", base + 10_000),
            format!("COUNTS> {{\"window_start_ms\": {}, \"clicks\": 10, \"partitions\": 2, \"max_offset\": 19}}", base + 15_000),
        ]
    );
    // From the beginning the bad record is read and reported where it is.
    let from_start = std::fs::read_to_string(dir.path().join("job.sql"))
        .unwrap()
        .replace(&format!("start = '{}'", base + 5_000), "start = 'earliest'")
        .replace("stop = 'latest',", "stop = 'latest', bad_rows = 'fail',");
    std::fs::write(dir.path().join("job.sql"), from_start).unwrap();
    let err = common::run_captured(&sql_files(dir.path()), &BTreeMap::new(), BTreeMap::new(), 7)
        .err()
        .expect("a bad record fails the job with bad_rows = 'fail'")
        .to_string();
    assert!(err.contains("kafka:clicks/1@3"), "{err}");
}

/// The payments table on topic `payments`, read to its end, with `extra`
/// options.
fn payments_table(address: &str, extra: &str) -> String {
    format!(
        "CREATE TABLE payments (
           payment_id VARCHAR NOT NULL, order_id VARCHAR, paid_amount DOUBLE,
           payment_ts BIGINT NOT NULL, method VARCHAR,
           event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(payment_ts)) STORED,
           WATERMARK FOR event_time AS event_time - INTERVAL '2' SECOND
         ) WITH (connector = 'kafka', bootstrap_servers = '{address}', topic = 'payments',
                 stop = 'latest', {extra});"
    )
}

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.current_dir(common::repo_root());
    command
}

#[test]
fn a_killed_job_writes_each_record_once_to_a_transactional_sink() {
    let broker = Broker::start();
    broker.create_topic("payments", 3);
    broker.create_topic("totals", 2);
    let lines = generated_lines(GeneratedStream::Payments, 150_000);
    broker.produce("payments", &skewed_records(&lines, "order_id", 3));
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let sql = |sink: &str| {
        format!(
            "{}
             CREATE TABLE totals (method VARCHAR, window_start_ms BIGINT, payments BIGINT, amount DOUBLE)
               WITH ({sink});
             INSERT INTO totals
             SELECT method, CAST(window_start AS BIGINT), count(*), round(sum(paid_amount), 2)
             FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
             GROUP BY method, window_start, window_end;",
            payments_table(&broker.address, "batch_size = '500'")
        )
    };
    // The expected rows: the same job, uninterrupted, into a file.
    let expected_path = dir.path().join("expected.ndjson");
    std::fs::write(
        &job,
        sql(&format!(
            "connector = 'ndjson', path = '{}'",
            expected_path.display()
        )),
    )
    .unwrap();
    let started = Instant::now();
    let out = eddy().arg("run").arg(&job).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let baseline = started.elapsed().as_millis() as u64;
    let expected = common::sorted(
        std::fs::read_to_string(&expected_path)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect(),
    );
    assert!(expected.len() > 500, "{} rows", expected.len());

    // Rounds until the kills add up: each round writes a topic of its own
    // from a state directory of its own, and is checked on its own.
    let mut rng = SmallRng::seed_from_u64(3);
    let mut kills = 0;
    let mut resumed = 0;
    let mut round = 0;
    // Kills land at random times, some before the first checkpoint (the
    // next run then starts afresh): go on until two runs have resumed.
    while kills < 3 || resumed < 2 {
        round += 1;
        assert!(round <= 20, "only {resumed} resumed runs in {kills} kills");
        let topic = format!("totals-{round}");
        broker.create_topic(&topic, 2);
        std::fs::write(
            &job,
            sql(&format!(
                "connector = 'kafka', bootstrap_servers = '{}', topic = '{topic}', key_column = 'method'",
                broker.address
            )),
        )
        .unwrap();
        let state = dir.path().join(format!("state-{round}"));
        let run = || {
            let mut command = eddy();
            command
                .arg("run")
                .arg(&job)
                .arg("--state-dir")
                .arg(&state)
                .args(["--checkpoint-interval", "50ms"])
                .env("EDDY_LOG", "info")
                .stdout(Stdio::null())
                .stderr(Stdio::piped());
            command
        };
        loop {
            let mut child = run().spawn().unwrap();
            // Killed after a fifth to two thirds of an uninterrupted run's time.
            let deadline = Instant::now()
                + Duration::from_millis(
                    rng.random_range((baseline / 5).max(250)..(baseline * 2 / 3).max(600)),
                );
            while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
                std::thread::sleep(Duration::from_millis(5));
            }
            let finished = child.try_wait().unwrap().is_some();
            if !finished {
                child.kill().unwrap(); // SIGKILL
                kills += 1;
            }
            let out = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr).to_string();
            if stderr.contains("resuming from checkpoint") {
                resumed += 1;
            }
            if finished {
                assert!(out.status.success(), "{stderr}");
                break;
            }
            assert!(kills < 150, "the job never finished");
        }
        let actual = common::sorted(broker.read_all(&topic, 2));
        assert_eq!(
            actual.len(),
            expected.len(),
            "records in the sink topic (round {round}, kills so far: {kills})"
        );
        assert_eq!(actual, expected);
    }
    eprintln!(
        "{kills} kills, {resumed} resumed runs in {round} rounds (uninterrupted: {baseline} ms)"
    );
    assert!(resumed >= 2, "resumed {resumed} times in {kills} kills");
    // Completed checkpoints' offsets are committed to the source's group,
    // so Kafka's tools see the job's progress: here, everything.
    let committed = broker.committed("eddy-payments", "payments", 3);
    assert_eq!(
        committed.iter().sum::<i64>(),
        lines.len() as i64,
        "{committed:?}"
    );
}

/// Runs `eddy run job` with stdout piped; returns the child and a channel
/// of its stdout lines.
fn spawn_job(job: &Path) -> (Child, std::sync::mpsc::Receiver<String>) {
    let mut child = eddy()
        .arg("run")
        .arg(job)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    (child, rx)
}

#[test]
fn an_idle_partition_stops_holding_the_watermark_back() {
    let broker = Broker::start();
    broker.create_topic("events", 2);
    let base = 1_700_000_000_000i64;
    // Partition 0 has 30 seconds of events; partition 1 has none.
    let records: Vec<(i32, i64, Vec<u8>)> = (0..30)
        .map(|i| {
            let ts = base + i * 1_000;
            (
                0,
                ts,
                format!("{{\"k\": \"a\", \"ts\": {ts}}}").into_bytes(),
            )
        })
        .collect();
    broker.produce("events", &records);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let sql = |extra: &str| {
        format!(
            "CREATE TABLE events (k VARCHAR, ts BIGINT,
               event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR event_time AS event_time - INTERVAL '1' SECOND
             ) WITH (connector = 'kafka', bootstrap_servers = '{}', topic = 'events'{extra});
             CREATE TABLE counts (window_start_ms BIGINT, n BIGINT) WITH (connector = 'stdout', tag = 'COUNTS');
             INSERT INTO counts
             SELECT CAST(window_start AS BIGINT), count(*)
             FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(event_time), INTERVAL '10' SECOND))
             GROUP BY window_start, window_end;",
            broker.address
        )
    };
    // The empty partition holds the watermark back: no window closes.
    std::fs::write(&job, sql("")).unwrap();
    let (mut child, lines) = spawn_job(&job);
    let held = lines.recv_timeout(Duration::from_secs(3));
    child.kill().unwrap();
    let _ = child.wait();
    assert!(
        held.is_err(),
        "a window closed while a partition was silent: {held:?}"
    );
    // With idle_timeout it stops doing so once idle: windows up to the
    // watermark (29 s - 1 s) close.
    std::fs::write(&job, sql(", idle_timeout = '500ms'")).unwrap();
    let (mut child, lines) = spawn_job(&job);
    let mut got = Vec::new();
    while got.len() < 2 {
        match lines.recv_timeout(Duration::from_secs(20)) {
            Ok(line) => got.push(line),
            Err(_) => break,
        }
    }
    child.kill().unwrap();
    let _ = child.wait();
    assert_eq!(
        got,
        vec![
            format!("COUNTS> {{\"window_start_ms\": {base}, \"n\": 10}}"),
            format!(
                "COUNTS> {{\"window_start_ms\": {}, \"n\": 10}}",
                base + 10_000
            ),
        ]
    );
}

/// The sorted lines of every `*.ndjson` file in `dir`.
fn ndjson_lines(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "ndjson") {
            lines.extend(
                std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
    }
    common::sorted(lines)
}

/// The sorted lines of every `*.ndjson` file under `dir`, at any depth
/// (a sink on a bucket writes a set of files).
fn ndjson_lines_under(dir: &Path) -> Vec<String> {
    let mut lines = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "ndjson") {
                let text = std::fs::read_to_string(&path).unwrap();
                lines.extend(text.lines().map(str::to_string));
            }
        }
    }
    common::sorted(lines)
}

/// How `written` rows differ from `expected`: counts and a few of each.
fn difference(written: &[String], expected: &[String]) -> String {
    let missing: Vec<&String> = expected
        .iter()
        .filter(|l| !written.contains(l))
        .take(5)
        .collect();
    let extra: Vec<&String> = written
        .iter()
        .filter(|l| !expected.contains(l))
        .take(5)
        .collect();
    format!(
        "{} rows written, {} expected; missing {missing:?}; extra {extra:?}",
        written.len(),
        expected.len()
    )
}

/// The partition sets a group member's log says it was assigned, in order.
fn assignments_in(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|l| l.split("assigned partitions ").nth(1))
        .map(str::to_string)
        .collect()
}

#[test]
fn processes_of_one_group_share_the_partitions_and_take_over_from_a_dead_one() {
    // Keyed by order_id, the query's key: each key's rows in one partition.
    let broker = payments_by_order_in(4, 200_000);
    let dir = tempfile::tempdir().unwrap();
    let runs = GroupRuns {
        dir: dir.path(),
        group: "totals",
        all: "{0, 1, 2, 3}",
        min_rows: 10_000,
        kill_after: Duration::ZERO,
    }
    .check(|out| totals_per_order(&broker.address, out));
    let files = std::fs::read_dir(&runs.together).unwrap().count();
    assert_eq!(files, 4, "one file per task");
    // A share while the other lived, all four after it died.
    let assignments = assignments_in(&runs.survivor_log);
    eprintln!("survivor's assignments: {assignments:?}");
    assert!(
        assignments.iter().any(|a| !a.starts_with("{0, 1, 2, 3}")),
        "the survivor never shared: {}",
        runs.survivor_log
    );
    assert!(
        assignments
            .last()
            .is_some_and(|a| a.starts_with("{0, 1, 2, 3}")),
        "the survivor never got every partition back: {}",
        runs.survivor_log
    );
}

#[test]
fn a_sink_writes_json_records_keyed_by_a_column() {
    let broker = Broker::start();
    broker.create_topic("alerts", 3);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.ndjson");
    let rows: Vec<String> = (0..50)
        .map(|i| format!("{{\"user\": \"u{}\", \"n\": {i}, \"note\": null}}", i % 7))
        .collect();
    std::fs::write(&input, rows.join("\n") + "\n").unwrap();
    std::fs::write(
        dir.path().join("job.sql"),
        format!(
            "CREATE TABLE input (\"user\" VARCHAR, n BIGINT, note VARCHAR) WITH (connector = 'file', path = '{}');
             CREATE TABLE alerts (\"user\" VARCHAR, n BIGINT, note VARCHAR)
               WITH (connector = 'kafka', bootstrap_servers = '{}', topic = 'alerts', key_column = 'user');
             INSERT INTO alerts SELECT * FROM input;",
            input.display(),
            broker.address
        ),
    )
    .unwrap();
    // Without checkpoints the sink writes as rows come (at least once).
    let run =
        common::run_captured(&sql_files(dir.path()), &BTreeMap::new(), BTreeMap::new(), 8).unwrap();
    assert_eq!(
        run.report
            .nodes
            .iter()
            .find(|n| n.kind == "sink")
            .unwrap()
            .metrics
            .rows_out,
        50
    );
    let records = broker.read_records("alerts", 3);
    assert_eq!(records.len(), 50);
    let mut partition_of_user: BTreeMap<String, i32> = BTreeMap::new();
    let mut values = Vec::new();
    for (partition, key, value) in records {
        let row: serde_json::Value = serde_json::from_str(&value).unwrap();
        let key = key.expect("every record has a key");
        assert_eq!(row["user"].as_str(), Some(key.as_str()), "{value}");
        assert!(
            row.get("note").is_some_and(|n| n.is_null()),
            "NULLs are written: {value}"
        );
        // One key, one partition.
        assert_eq!(
            *partition_of_user.entry(key).or_insert(partition),
            partition
        );
        values.push(row["n"].as_i64().unwrap());
    }
    values.sort_unstable();
    assert_eq!(values, (0..50).collect::<Vec<i64>>());
    assert!(
        partition_of_user
            .values()
            .collect::<std::collections::BTreeSet<_>>()
            .len()
            > 1
    );
}

/// Payments per order_id (the topic's key) and 1 s window, into
/// `out/totals.ndjson`.
fn totals_per_order(address: &str, out: &Path) -> String {
    format!(
        "{}
         CREATE TABLE totals (order_id VARCHAR, window_start_ms BIGINT, payments BIGINT, amount DOUBLE)
           WITH (connector = 'ndjson', path = '{}');
         INSERT INTO totals
         SELECT order_id, CAST(window_start AS BIGINT), count(*), round(sum(paid_amount), 2)
         FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
         GROUP BY order_id, window_start, window_end;",
        payments_table(address, "key_column = 'order_id'"),
        out.join("totals.ndjson").display()
    )
}

/// A job run alone, then by two processes of a group, then by two of
/// which one is killed once it holds a share: each group run's NDJSON
/// output must equal the lone run's.
struct GroupRuns<'a> {
    dir: &'a Path,
    /// Group names are this plus `-together` and `-takeover`.
    group: &'a str,
    /// How the log writes an assignment of every partition.
    all: &'a str,
    /// The lone run writes at least this many rows.
    min_rows: usize,
    /// How long the killed process runs on after it got its share.
    kill_after: Duration,
}

/// What [`GroupRuns::check`] leaves to look at.
struct GroupRunsSeen {
    /// The output directory of the run without a kill.
    together: PathBuf,
    /// The log of that run's first process.
    first_log: String,
    /// The log of the process that survived the kill.
    survivor_log: String,
}

impl GroupRuns<'_> {
    /// Runs the job `sql(out)` writes (its NDJSON sinks in `out`).
    fn check(&self, sql: impl Fn(&Path) -> String) -> GroupRunsSeen {
        let job = self.dir.join("job.sql");
        let write_job = |out: &Path| {
            std::fs::create_dir_all(out).unwrap();
            std::fs::write(&job, sql(out)).unwrap();
        };
        let alone = self.dir.join("alone");
        write_job(&alone);
        let expected = run_alone(&job, &alone);
        assert!(expected.len() >= self.min_rows, "{} rows", expected.len());
        let mut logs = Vec::new();
        for run in ["together", "takeover"] {
            let out = self.dir.join(run);
            write_job(&out);
            let state = self.dir.join(format!("state-{run}"));
            let group = format!("{}-{run}", self.group);
            let (log_a, log_b) = (
                self.dir.join(format!("{run}-a.log")),
                self.dir.join(format!("{run}-b.log")),
            );
            let mut a = group_member(&job, &group, &state, &log_a);
            let mut b = group_member(&job, &group, &state, &log_b);
            if run == "takeover" {
                kill_once_it_holds_a_share(&mut b, &log_b, self.all, self.kill_after);
            } else {
                assert!(
                    b.wait().unwrap().success(),
                    "{}",
                    std::fs::read_to_string(&log_b).unwrap()
                );
            }
            assert!(
                a.wait().unwrap().success(),
                "{}",
                std::fs::read_to_string(&log_a).unwrap()
            );
            let written = ndjson_lines(&out);
            if written != expected {
                // What each process did, to tell a lost commit from a
                // task run twice or a record read twice.
                let story = |log: &Path| -> String {
                    std::fs::read_to_string(log)
                        .unwrap_or_default()
                        .lines()
                        .filter(|l| {
                            [
                                "assigned", "resuming", "already", "WARN", "ERROR", "exchange",
                            ]
                            .iter()
                            .any(|w| l.contains(w))
                        })
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                panic!(
                    "{run}: {} rows written, {} expected; missing {:?}; extra {:?}\n--- a:\n{}\n--- b:\n{}",
                    written.len(),
                    expected.len(),
                    expected.iter().filter(|l| !written.contains(l)).take(5).collect::<Vec<_>>(),
                    written.iter().filter(|l| !expected.contains(l)).take(5).collect::<Vec<_>>(),
                    story(&log_a),
                    story(&log_b)
                );
            }
            logs.push(std::fs::read_to_string(&log_a).unwrap());
        }
        GroupRunsSeen {
            together: self.dir.join("together"),
            survivor_log: logs.pop().unwrap(),
            first_log: logs.pop().unwrap(),
        }
    }
}

/// Runs `job` as one process (no group) and returns the sorted lines of
/// the NDJSON files it wrote in `out`.
fn run_alone(job: &Path, out: &Path) -> Vec<String> {
    common::assert_success(&eddy().arg("run").arg(job).output().unwrap(), "eddy run");
    ndjson_lines(out)
}

/// Kills `member` with SIGKILL `after` its log (`log`) shows it holding
/// a share of the partitions (an assignment other than `all`).
fn kill_once_it_holds_a_share(member: &mut Child, log: &Path, all: &str, after: Duration) {
    let started = Instant::now();
    while !assignments_in(&std::fs::read_to_string(log).unwrap_or_default())
        .iter()
        .any(|a| !a.starts_with(all))
    {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the second process never got a share: {}",
            std::fs::read_to_string(log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(after);
    member.kill().unwrap(); // SIGKILL
    let _ = member.wait();
}

/// Runs `job` as a member of `group` (state in `state`, log in `log`).
fn group_member(job: &Path, group: &str, state: &Path, log: &Path) -> Child {
    group_member_with(job, group, state, log, &[])
}

/// [`group_member`] with `extra` arguments.
fn group_member_with(job: &Path, group: &str, state: &Path, log: &Path, extra: &[&str]) -> Child {
    eddy()
        .arg("run")
        .arg(job)
        .args(["--group", group, "--session-timeout", "2s"])
        .arg("--state-dir")
        .arg(state)
        .args(["--checkpoint-interval", "100ms"])
        .args(extra)
        .env("EDDY_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// Runs a group member until it exits, which must be successfully; its log.
fn member_to_the_end(job: &Path, group: &str, state: &Path, log: &Path, extra: &[&str]) -> String {
    let status = group_member_with(job, group, state, log, extra)
        .wait()
        .unwrap();
    let text = std::fs::read_to_string(log).unwrap();
    assert!(status.success(), "{text}");
    text
}

/// Whether some task under a group's state directory has completed a
/// checkpoint (a `MANIFEST` in it).
fn a_task_checkpointed(state: &Path) -> bool {
    let Ok(tasks) = std::fs::read_dir(state) else {
        return false;
    };
    tasks.flatten().any(|task| {
        std::fs::read_dir(task.path()).is_ok_and(|checkpoints| {
            checkpoints
                .flatten()
                .any(|c| c.path().join("MANIFEST").exists())
        })
    })
}

#[test]
fn a_group_killed_at_two_instances_per_task_resumes_its_tasks_at_three() {
    // Each task's windows (keyed by order_id, the topic's key) run as two
    // instances; the process is killed after its tasks checkpointed, and a
    // process with three instances per task takes the tasks over: each
    // task's state is spread over three by key group, and the output is
    // the lone run's.
    let broker = payments_by_order_in(4, 200_000);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let write_job = |out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        std::fs::write(&job, totals_per_order(&broker.address, out)).unwrap();
    };
    let alone = dir.path().join("alone");
    write_job(&alone);
    let expected = run_alone(&job, &alone);
    assert!(expected.len() >= 10_000, "{} rows", expected.len());

    let out = dir.path().join("rescaled");
    write_job(&out);
    let state = dir.path().join("state");
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let mut a = group_member_with(&job, "rescaled", &state, &log_a, &["--parallelism", "2"]);
    let started = Instant::now();
    while !a_task_checkpointed(&state) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no task checkpointed: {}",
            std::fs::read_to_string(&log_a).unwrap_or_default()
        );
        assert!(
            a.try_wait().unwrap().is_none(),
            "the job ended before a kill"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Killed at once: on a fast machine the job can finish its input
    // within a fraction of a second of its first checkpoint, and a
    // process that finds every task done has nothing to resume.
    assert!(
        a.try_wait().unwrap().is_none(),
        "the job ended before the kill"
    );
    a.kill().unwrap(); // SIGKILL
    let _ = a.wait();
    let log = member_to_the_end(&job, "rescaled", &state, &log_b, &["--parallelism", "3"]);
    assert!(
        log.contains("running 3 instance(s) of each keyed operator over 128 key groups (the checkpoint's state spread from 2)"),
        "a task resumed at three instances: {log}"
    );
    let written = ndjson_lines(&out);
    assert!(written == expected, "{}", difference(&written, &expected));
    // A member that comes after finds every task done: it says so, runs
    // nothing and writes nothing more.
    let log_c = dir.path().join("c.log");
    let log = member_to_the_end(&job, "rescaled", &state, &log_c, &["--quiet"]);
    assert!(
        log.contains("group rescaled: every task of the job is already done"),
        "{log}"
    );
    assert!(ndjson_lines(&out) == written, "nothing written again");
}

#[test]
fn processes_sharing_no_disk_run_a_group_through_a_bucket_and_take_over_a_killed_one() {
    // Each process has a directory of its own (its copy of the job, its
    // working copies through TMPDIR) and shares only the broker and the
    // bucket, which holds the tasks' state, their leases and the output.
    // One is killed with SIGKILL while it holds tasks; the other takes
    // them over once their leases run out, and the bucket holds the lone
    // run's rows.
    let broker = payments_by_order_in(4, 800_000);
    let s3 = S3Server::start();
    let dir = tempfile::tempdir().unwrap();
    let alone = dir.path().join("alone");
    std::fs::create_dir_all(&alone).unwrap();
    let alone_job = dir.path().join("alone.sql");
    std::fs::write(&alone_job, totals_per_order(&broker.address, &alone)).unwrap();
    let expected = run_alone(&alone_job, &alone);
    assert!(expected.len() >= 10_000, "{} rows", expected.len());

    let member = |name: &str| -> (Child, PathBuf) {
        let home = dir.path().join(name);
        std::fs::create_dir_all(home.join("tmp")).unwrap();
        let job = home.join("job.sql");
        let sql = totals_per_order(&broker.address, Path::new("s3://lake/out"));
        std::fs::write(&job, sql).unwrap();
        let log = home.join("eddy.log");
        let child = eddy()
            .current_dir(&home)
            .arg("run")
            .arg(&job)
            .args(["--group", "lake", "--session-timeout", "2s"])
            .args([
                "--state-dir",
                "s3://lake/state",
                "--checkpoint-interval",
                "100ms",
            ])
            .envs(s3.env())
            .env("TMPDIR", home.join("tmp"))
            .env("EDDY_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        (child, log)
    };
    let read = |log: &Path| std::fs::read_to_string(log).unwrap_or_default();
    let (mut a, log_a) = member("a");
    let (mut b, log_b) = member("b");
    // Killed once it holds a task's lease and has run it a while.
    let started = Instant::now();
    while !read(&log_b).contains("running here, held by") {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the second process never held a task: {}",
            read(&log_b)
        );
        assert!(b.try_wait().unwrap().is_none(), "{}", read(&log_b));
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(400));
    assert!(
        b.try_wait().unwrap().is_none(),
        "it ended before the kill: {}",
        read(&log_b)
    );
    b.kill().unwrap(); // SIGKILL
    let _ = b.wait();
    assert!(a.wait().unwrap().success(), "{}", read(&log_a));

    let out = dir.path().join("out");
    s3.download("out", &out);
    let written = ndjson_lines_under(&out);
    assert!(
        written == expected,
        "{}\n--- a:\n{}\n--- b:\n{}",
        difference(&written, &expected),
        read(&log_a),
        read(&log_b)
    );
    let staged: Vec<String> = s3
        .bucket("out")
        .list()
        .unwrap()
        .into_iter()
        .map(|o| o.name)
        .filter(|name| name.contains("inprogress"))
        .collect();
    assert!(staged.is_empty(), "staged objects left: {staged:?}");
    let survivor = read(&log_a);
    assert!(
        survivor.contains("has not renewed it for"),
        "the killed process's tasks were taken over once their leases ran out: {survivor}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path().join("a/tmp"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the survivor's working copies removed: {left:?}"
    );
    // A process that comes after finds every task done in the bucket.
    let (mut c, log_c) = member("c");
    assert!(c.wait().unwrap().success(), "{}", read(&log_c));
    assert!(
        read(&log_c).contains("group lake: every task of the job is already done"),
        "{}",
        read(&log_c)
    );
    s3.download("out", &dir.path().join("out-after"));
    assert!(
        ndjson_lines_under(&dir.path().join("out-after")) == written,
        "nothing written again"
    );
}

#[test]
fn operators_keyed_otherwise_than_the_topics_get_their_rows_through_exchange_topics() {
    // Keyed by order_id; the job's windows are per method (an expression
    // of it) and over everything (no key). Two processes write together
    // what one writes alone, the rows of each method (and all rows, for
    // the overall count) in one task, with nothing late; with one of them
    // killed, the survivor resumes its tasks, exchange sinks and sources
    // included, and nothing is lost or written twice.
    let broker = payments_by_order(60_000);
    let dir = tempfile::tempdir().unwrap();
    let runs = GroupRuns {
        dir: dir.path(),
        group: "spread",
        all: "{0, 1, 2}",
        min_rows: 100,
        kill_after: Duration::from_millis(300),
    }
    .check(|out| {
        format!(
            "{}
             CREATE TABLE by_method (method VARCHAR, window_start_ms BIGINT, payments BIGINT, amount DOUBLE)
               WITH (connector = 'ndjson', path = '{}');
             CREATE TABLE overall (window_start_ms BIGINT, payments BIGINT, methods BIGINT)
               WITH (connector = 'ndjson', path = '{}');
             INSERT INTO by_method
             SELECT upper(method), CAST(window_start AS BIGINT), count(*), round(sum(paid_amount), 2)
             FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
             GROUP BY upper(method), window_start, window_end;
             INSERT INTO overall
             SELECT CAST(window_start AS BIGINT), count(*), count(DISTINCT method)
             FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '5' SECOND))
             GROUP BY window_start, window_end;",
            payments_table(&broker.address, "key_column = 'order_id'"),
            out.join("by_method.ndjson").display(),
            out.join("overall.ndjson").display()
        )
    });
    assert!(
        runs.first_log
            .contains("through topic 'spread-together.exchange.window_aggregate-"),
        "{}",
        runs.first_log
    );
}

#[test]
fn two_processes_of_a_group_run_the_reference_pipeline_as_one_process_does() {
    let broker = Broker::start();
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for (table, stream, key) in [
        ("orders", GeneratedStream::Orders, "order_id"),
        ("payments", GeneratedStream::Payments, "order_id"),
        ("devices", GeneratedStream::Devices, "device_id"),
    ] {
        let lines = generated_lines(stream, 4_000);
        broker.create_topic(table, 3);
        broker.produce(table, &skewed_records(&lines, key, 3));
        inputs.push(format!(
            "{table}=kafka://{}/{table}?stop=latest&key_column={key}",
            broker.address
        ));
    }
    let run = |extra: &[&str], stdout: &Path, log: &Path| {
        let mut command = eddy();
        command.arg("run").arg("queries");
        for input in &inputs {
            command.arg("--input").arg(input);
        }
        command
            .args(extra)
            .env("EDDY_LOG", "info")
            .stdout(std::fs::File::create(stdout).unwrap())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let lines_of = |paths: &[&Path]| -> BTreeMap<String, Vec<String>> {
        let mut lines = Vec::new();
        for path in paths {
            lines.extend(
                std::fs::read_to_string(path)
                    .unwrap()
                    .lines()
                    .map(str::to_string),
            );
        }
        tagged(&lines)
    };
    let (alone_out, alone_log) = (dir.path().join("alone.out"), dir.path().join("alone.log"));
    let status = run(&[], &alone_out, &alone_log).wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(&alone_log).unwrap()
    );
    let expected = lines_of(&[&alone_out]);
    assert!(expected.len() >= 4, "tags: {:?}", expected.keys());

    let state = dir.path().join("state");
    let state_arg = state.display().to_string();
    let group = [
        "--group",
        "reference",
        "--state-dir",
        &state_arg,
        "--checkpoint-interval",
        "200ms",
    ];
    let (out_a, log_a) = (dir.path().join("a.out"), dir.path().join("a.log"));
    let (out_b, log_b) = (dir.path().join("b.out"), dir.path().join("b.log"));
    let mut a = run(&group, &out_a, &log_a);
    let mut b = run(&group, &out_b, &log_b);
    for (child, log) in [(&mut a, &log_a), (&mut b, &log_b)] {
        assert!(
            child.wait().unwrap().success(),
            "{}",
            std::fs::read_to_string(log).unwrap()
        );
    }
    let actual = lines_of(&[&out_a, &out_b]);
    for (tag, lines) in &expected {
        let got = actual.get(tag).cloned().unwrap_or_default();
        assert_eq!(got.len(), lines.len(), "{tag}: line count");
        assert_eq!(&got, lines, "{tag}");
    }
    assert_eq!(actual.len(), expected.len());
}

/// Debezium events for accounts 0..30 keyed (partitioned) by id, as a
/// connector writes a table's changes, with one malformed event; the
/// table they leave (id -> owner, balance).
/// `(partition, timestamp, value)` records to produce.
type Records = Vec<(i32, i64, Vec<u8>)>;

fn account_changes(events: usize) -> (Records, BTreeMap<i64, (String, i64)>) {
    let mut rng = SmallRng::seed_from_u64(17);
    let mut table: BTreeMap<i64, (String, i64)> = BTreeMap::new();
    let mut records = Vec::new();
    let image = |id: i64, (owner, balance): &(String, i64)| {
        format!("{{\"id\":{id},\"owner\":\"{owner}\",\"balance\":{balance}}}")
    };
    for i in 0..events {
        let id = rng.random_range(0..30i64);
        let new = (
            format!("o{}", rng.random_range(0..20)),
            rng.random_range(0..100i64),
        );
        let value = match table.get(&id).cloned() {
            _ if i == 50 => "{\"before\":null,\"after\":null,\"op\":\"c\"}".to_string(),
            None => {
                table.insert(id, new.clone());
                format!(
                    "{{\"before\":null,\"after\":{},\"op\":\"c\",\"ts_ms\":{i}}}",
                    image(id, &new)
                )
            }
            Some(old) if rng.random_range(0..5) == 0 => {
                table.remove(&id);
                format!(
                    "{{\"before\":{},\"after\":null,\"op\":\"d\"}}",
                    image(id, &old)
                )
            }
            Some(old) => {
                table.insert(id, new.clone());
                format!(
                    "{{\"before\":{},\"after\":{},\"op\":\"u\"}}",
                    image(id, &old),
                    image(id, &new)
                )
            }
        };
        records.push((
            (id % 3) as i32,
            1_700_000_000_000 + i as i64,
            value.into_bytes(),
        ));
    }
    (records, table)
}

#[test]
fn a_debezium_topic_in_and_a_debezium_changelog_topic_out() {
    let broker = Broker::start();
    broker.create_topic("accounts", 3);
    broker.create_topic("per_owner", 2);
    broker.create_topic("per_owner_now", 2);
    let (records, table) = account_changes(400);
    broker.produce("accounts", &records);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("job.sql"),
        format!(
            "CREATE TABLE accounts (id BIGINT NOT NULL, owner VARCHAR, balance BIGINT, PRIMARY KEY (id) NOT ENFORCED)
               WITH (connector = 'kafka', bootstrap_servers = '{0}', topic = 'accounts', stop = 'latest',
                     format = 'debezium-json');
             CREATE TABLE per_owner (owner VARCHAR, accounts BIGINT, total BIGINT)
               WITH (connector = 'kafka', bootstrap_servers = '{0}', topic = 'per_owner', key_column = 'owner',
                     format = 'debezium-json');
             CREATE TABLE per_owner_now (owner VARCHAR, accounts BIGINT, total BIGINT)
               WITH (connector = 'kafka', bootstrap_servers = '{0}', topic = 'per_owner_now', key_column = 'owner',
                     format = 'upsert-json');
             CREATE VIEW totals AS SELECT owner, count(*) AS accounts, sum(balance) AS total FROM accounts GROUP BY owner;
             INSERT INTO per_owner SELECT * FROM totals;
             INSERT INTO per_owner_now SELECT * FROM totals;",
            broker.address
        ),
    )
    .unwrap();
    let run = common::run_captured(
        &sql_files(dir.path()),
        &BTreeMap::new(),
        BTreeMap::new(),
        16,
    )
    .unwrap();
    let (_, _, bad) = source_metric(&run.report, "accounts");
    assert_eq!(bad, 1, "the malformed event is a bad row");
    // Replay the sink topic's change events, in each key's partition order.
    let mut replayed: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (_, key, value) in broker.read_records("per_owner", 2) {
        let event: serde_json::Value = serde_json::from_str(&value).unwrap();
        let key = key.expect("keyed by owner");
        let image = |side: &str| {
            let row = &event[side];
            (!row.is_null()).then(|| {
                assert_eq!(row["owner"].as_str(), Some(key.as_str()), "{value}");
                (
                    row["accounts"].as_i64().unwrap(),
                    row["total"].as_i64().unwrap(),
                )
            })
        };
        if let Some(before) = image("before") {
            assert_eq!(
                replayed.remove(&key),
                Some(before),
                "{value} takes out what was there"
            );
        }
        if let Some(after) = image("after") {
            assert_eq!(replayed.insert(key.clone(), after), None, "{value}");
        }
    }
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (owner, balance) in table.values() {
        let entry = expected.entry(owner.clone()).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += balance;
    }
    assert_eq!(replayed, expected);
    // The upsert topic: each key's last record is its current row (a
    // tombstone: none), what a compacted topic keeps.
    let mut current: BTreeMap<String, Option<(i64, i64)>> = BTreeMap::new();
    let records = broker.read_records("per_owner_now", 2);
    assert!(
        records.iter().any(|(_, _, value)| value.is_empty()),
        "an owner left without accounts is a tombstone"
    );
    for (_, key, value) in records {
        let key = key.expect("keyed by owner");
        let row = (!value.is_empty()).then(|| {
            let row: serde_json::Value = serde_json::from_str(&value).unwrap();
            (
                row["accounts"].as_i64().unwrap(),
                row["total"].as_i64().unwrap(),
            )
        });
        current.insert(key, row);
    }
    let current: BTreeMap<String, (i64, i64)> = current
        .into_iter()
        .filter_map(|(k, row)| row.map(|r| (k, r)))
        .collect();
    assert_eq!(current, expected);
}

/// The table the Debezium change events of every `*.ndjson` file in `dir`
/// describe (each file replayed alone: a key's changes are all in one
/// task's file), as sorted JSON rows.
fn debezium_tables(dir: &Path) -> Vec<String> {
    let mut rows = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "ndjson") {
            continue;
        }
        let mut table: BTreeMap<String, usize> = BTreeMap::new();
        for line in std::fs::read_to_string(&path).unwrap().lines() {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            if !event["before"].is_null() {
                let before = event["before"].to_string();
                let held = table.get_mut(&before).unwrap_or_else(|| {
                    panic!("{}: {line} takes out a row not held", path.display())
                });
                *held -= 1;
                if *held == 0 {
                    table.remove(&before);
                }
            }
            if !event["after"].is_null() {
                *table.entry(event["after"].to_string()).or_insert(0) += 1;
            }
        }
        rows.extend(
            table
                .into_iter()
                .flat_map(|(row, n)| std::iter::repeat_n(row, n)),
        );
    }
    common::sorted(rows)
}

#[test]
fn an_updating_aggregate_keyed_otherwise_runs_in_a_group_through_an_exchange() {
    let broker = payments_by_order(30_000);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let write_job = |out: &Path| {
        std::fs::create_dir_all(out).unwrap();
        std::fs::write(
            &job,
            format!(
                "{}
                 CREATE TABLE per_method (method VARCHAR, payments BIGINT, cents BIGINT)
                   WITH (connector = 'ndjson', path = '{}', format = 'debezium-json');
                 INSERT INTO per_method
                 SELECT method, count(*), sum(CAST(round(paid_amount * 100) AS BIGINT)) FROM payments GROUP BY method;",
                payments_table(&broker.address, "key_column = 'order_id'"),
                out.join("per_method.ndjson").display()
            ),
        )
        .unwrap();
    };
    let alone = dir.path().join("alone");
    write_job(&alone);
    let out = eddy().arg("run").arg(&job).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = debezium_tables(&alone);
    assert!(expected.len() >= 3, "{expected:?}");
    let together = dir.path().join("together");
    write_job(&together);
    let state = dir.path().join("state");
    let (log_a, log_b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    let mut a = group_member(&job, "updating", &state, &log_a);
    let mut b = group_member(&job, "updating", &state, &log_b);
    for (member, log) in [(&mut a, &log_a), (&mut b, &log_b)] {
        assert!(
            member.wait().unwrap().success(),
            "{}",
            std::fs::read_to_string(log).unwrap()
        );
    }
    let log = std::fs::read_to_string(&log_a).unwrap();
    assert!(
        log.contains("through topic 'updating.exchange.updating_aggregate-"),
        "the aggregate is keyed by method, the topic by order_id: {log}"
    );
    assert_eq!(debezium_tables(&together), expected);
}

#[test]
fn an_upsert_topic_reads_as_its_current_table() {
    let broker = Broker::start();
    broker.create_topic("accounts_now", 3);
    let mut rng = SmallRng::seed_from_u64(23);
    let mut table: BTreeMap<i64, (String, i64)> = BTreeMap::new();
    let producer = broker.producer();
    for _ in 0..300 {
        let id = rng.random_range(0..25i64);
        let key = id.to_string();
        let value = if table.contains_key(&id) && rng.random_range(0..4) == 0 {
            table.remove(&id);
            None // a tombstone
        } else {
            let row = (
                format!("o{}", rng.random_range(0..6)),
                rng.random_range(0..100i64),
            );
            let json = format!(
                "{{\"id\":{id},\"owner\":\"{}\",\"balance\":{}}}",
                row.0, row.1
            );
            table.insert(id, row);
            Some(json)
        };
        let mut record = BaseRecord::<str, str>::to("accounts_now")
            .key(key.as_str())
            .partition((id % 3) as i32);
        if let Some(value) = &value {
            record = record.payload(value.as_str());
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("job.sql"),
        format!(
            "CREATE TABLE accounts (id BIGINT NOT NULL, owner VARCHAR, balance BIGINT, PRIMARY KEY (id) NOT ENFORCED)
               WITH (connector = 'kafka', bootstrap_servers = '{}', topic = 'accounts_now', stop = 'latest',
                     format = 'upsert-json', key_column = 'id');
             CREATE TABLE per_owner (owner VARCHAR, accounts BIGINT, total BIGINT) WITH (connector = 'stdout', tag = 'OWNER');
             INSERT INTO per_owner SELECT owner, count(*), sum(balance) FROM accounts GROUP BY owner;",
            broker.address
        ),
    )
    .unwrap();
    let run =
        common::run_captured(&sql_files(dir.path()), &BTreeMap::new(), BTreeMap::new(), 8).unwrap();
    let replayed = common::replay_changelog(&run.lines).unwrap();
    let mut expected: BTreeMap<String, (i64, i64)> = BTreeMap::new();
    for (owner, balance) in table.values() {
        let entry = expected.entry(owner.clone()).or_insert((0, 0));
        entry.0 += 1;
        entry.1 += balance;
    }
    let expected: Vec<String> = expected
        .into_iter()
        .map(|(owner, (n, total))| {
            format!("OWNER> {{\"owner\": \"{owner}\", \"accounts\": {n}, \"total\": {total}}}")
        })
        .collect();
    assert_eq!(common::sorted(replayed), expected);
}

/// An upsert topic of 120,000 records over 40,000 ids (a fifth of them
/// tombstones) read at a memory limit a tenth of its upsert step's state,
/// at --parallelism 1 and 2: the step spills its current rows and reads
/// them back, and the changelog it writes replays to the table the topic
/// leaves, as the unlimited run's does.
#[test]
fn an_upsert_topic_past_the_memory_limit_spills_its_current_rows() {
    let broker = Broker::start();
    broker.create_topic("accounts_many", 2);
    let mut rng = SmallRng::seed_from_u64(29);
    let mut table: BTreeMap<i64, String> = BTreeMap::new();
    let producer = broker.producer();
    for _ in 0..120_000 {
        let id = rng.random_range(0..40_000i64);
        let key = id.to_string();
        let value = if table.contains_key(&id) && rng.random_range(0..5) == 0 {
            table.remove(&id);
            None
        } else {
            let json = format!(
                "{{\"id\":{id},\"owner\":\"o{}\",\"balance\":{}}}",
                rng.random_range(0..50),
                rng.random_range(0..1000i64)
            );
            table.insert(id, json.clone());
            Some(json)
        };
        let mut record = BaseRecord::<str, str>::to("accounts_many")
            .key(key.as_str())
            .partition((id % 2) as i32);
        if let Some(value) = &value {
            record = record.payload(value.as_str());
        }
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((e, back))
                    if e.rdkafka_error_code()
                        == Some(rdkafka::types::RDKafkaErrorCode::QueueFull) =>
                {
                    producer.poll(Duration::from_millis(10));
                    record = back;
                }
                Err((e, _)) => panic!("{e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE accounts (id BIGINT NOT NULL, owner VARCHAR, balance BIGINT, PRIMARY KEY (id) NOT ENFORCED)
               WITH (connector = 'kafka', bootstrap_servers = '{}', topic = 'accounts_many', stop = 'latest',
                     format = 'upsert-json', key_column = 'id');
             CREATE TABLE accounts_now (id BIGINT, owner VARCHAR, balance BIGINT)
               WITH (connector = 'ndjson', path = 'accounts_now.ndjson', format = 'debezium-json');
             INSERT INTO accounts_now SELECT * FROM accounts;",
            broker.address
        ),
    )
    .unwrap();
    let run = |output: &str, args: &[&str]| {
        let out = eddy()
            .arg("run")
            .arg(&job)
            .arg("--output")
            .arg(dir.path().join(output))
            .args(args)
            .output()
            .unwrap();
        common::assert_success(&out, output);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let rows = common::debezium_table(&dir.path().join(output).join("accounts_now.ndjson"));
        (rows, stderr)
    };
    let (expected, stderr) = run("unlimited", &["--parallelism", "1"]);
    let mut want: Vec<String> = table
        .values()
        .map(|json| {
            let row: serde_json::Value = serde_json::from_str(json).unwrap();
            row.to_string()
        })
        .collect();
    want.sort();
    let mut got: Vec<String> = expected
        .iter()
        .map(|row| {
            serde_json::from_str::<serde_json::Value>(row)
                .unwrap()
                .to_string()
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "the unlimited run holds the topic's table");
    let state: f64 = stderr
        .lines()
        .find(|l| l.starts_with("changelog_normalize#"))
        .and_then(|l| l.split(" MiB, at most ").nth(1))
        .and_then(|rest| rest.split(' ').next())
        .and_then(|mib| mib.parse().ok())
        .unwrap_or_else(|| panic!("the upsert step's state:\n{stderr}"));
    let limit = format!("{}KiB", (state * 1024.0 / 10.0) as u64);
    for parallelism in ["1", "2"] {
        let output = format!("limited-{parallelism}");
        let (rows, stderr) = run(
            &output,
            &["--parallelism", parallelism, "--memory-limit", &limit],
        );
        let steps: Vec<&str> = stderr
            .lines()
            .filter(|l| l.starts_with("changelog_normalize#") && !l.contains("/split"))
            .collect();
        assert!(
            !steps.is_empty()
                && steps
                    .iter()
                    .all(|l| l.contains(", spilled ") && !l.contains("read 0.0 MiB back")),
            "every upsert step spilled and read back at --parallelism {parallelism} under {limit}:\n{stderr}"
        );
        assert!(
            rows == expected,
            "--parallelism {parallelism} under {limit}"
        );
        eprintln!("upsert step: --parallelism {parallelism}, --memory-limit {limit} (unlimited: {state:.1} MiB): equal\n{stderr}");
    }
}

#[test]
fn a_debezium_topic_is_a_versioned_table_for_a_temporal_join() {
    let broker = Broker::start();
    broker.create_topic("rates", 1);
    // EUR: 2 from 1000 ms, 3 from 2000 ms, deleted at 3000 ms, 5 from
    // 4000 ms (the database's times, source.ts_ms); GBP: 7 from 1500 ms.
    let change = |before: &str, after: &str, op: &str, t: i64| {
        format!(
            "{{\"before\":{before},\"after\":{after},\"op\":\"{op}\",\"source\":{{\"ts_ms\":{t},\"db\":\"fx\"}},\"ts_ms\":{}}}",
            t + 40
        )
    };
    let rows = [
        change("null", "{\"cur\":\"EUR\",\"rate\":2}", "c", 1000),
        change("null", "{\"cur\":\"GBP\",\"rate\":7}", "c", 1500),
        change(
            "{\"cur\":\"EUR\",\"rate\":2}",
            "{\"cur\":\"EUR\",\"rate\":3}",
            "u",
            2000,
        ),
        change("{\"cur\":\"EUR\"}", "null", "d", 3000),
        change("null", "{\"cur\":\"EUR\",\"rate\":5}", "c", 4000),
    ];
    let records: Vec<(i32, i64, Vec<u8>)> = rows
        .iter()
        .enumerate()
        .map(|(i, v)| (0, 1_700_000_000_000 + i as i64, v.clone().into_bytes()))
        .collect();
    broker.produce("rates", &records);
    let dir = tempfile::tempdir().unwrap();
    let orders: String = [
        ("o1", "EUR", 500),
        ("o2", "EUR", 1000),
        ("o3", "EUR", 2500),
        ("o4", "EUR", 3500),
        ("o5", "GBP", 3500),
        ("o6", "EUR", 4200),
    ]
    .iter()
    .map(|(id, cur, ts)| format!("{{\"id\":\"{id}\",\"cur\":\"{cur}\",\"ts\":{ts}}}\n"))
    .collect();
    std::fs::write(dir.path().join("orders.ndjson"), orders).unwrap();
    std::fs::write(
        dir.path().join("job.sql"),
        format!(
            "CREATE TABLE rates (cur VARCHAR NOT NULL, rate BIGINT,
               changed TIMESTAMP(3) METADATA FROM 'value.source.timestamp' VIRTUAL,
               WATERMARK FOR changed AS changed,
               PRIMARY KEY (cur) NOT ENFORCED)
               WITH (connector = 'kafka', bootstrap_servers = '{0}', topic = 'rates', stop = 'latest',
                     format = 'debezium-json');
             CREATE TABLE orders (id VARCHAR, cur VARCHAR, ts BIGINT,
               event_time TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts)) STORED,
               WATERMARK FOR event_time AS event_time)
               WITH (connector = 'file', path = '{1}');
             SELECT o.id, r.rate FROM orders o LEFT JOIN rates FOR SYSTEM_TIME AS OF o.event_time AS r
               ON o.cur = r.cur;",
            broker.address,
            dir.path().join("orders.ndjson").display()
        ),
    )
    .unwrap();
    let run =
        common::run_captured(&sql_files(dir.path()), &BTreeMap::new(), BTreeMap::new(), 2).unwrap();
    let mut rows = common::json_rows(run.lines.iter().map(String::as_str));
    rows.sort_by_key(|r| r["id"].as_str().unwrap_or_default().to_string());
    let rates: Vec<(String, serde_json::Value)> = rows
        .iter()
        .map(|r| (r["id"].as_str().unwrap().to_string(), r["rate"].clone()))
        .collect();
    let expected = [
        ("o1", serde_json::Value::Null),
        ("o2", 2.into()),
        ("o3", 3.into()),
        ("o4", serde_json::Value::Null),
        ("o5", 7.into()),
        ("o6", 5.into()),
    ]
    .map(|(id, rate)| (id.to_string(), rate));
    assert_eq!(rates, expected, "{:?}", run.lines);
}

/// A broker whose topic `payments` (three partitions) holds `rows`
/// generated payments keyed by `order_id`.
fn payments_by_order(rows: u64) -> Broker {
    payments_by_order_in(3, rows)
}

/// A broker with `rows` generated payments in a topic of `partitions`,
/// keyed by order_id (each key's rows in one partition).
fn payments_by_order_in(partitions: u32, rows: u64) -> Broker {
    let broker = Broker::start();
    broker.create_topic("payments", partitions);
    let lines = generated_lines(GeneratedStream::Payments, rows);
    let count = i32::try_from(partitions).unwrap();
    broker.produce("payments", &skewed_records(&lines, "order_id", count));
    broker
}

/// A JSON request to an `eddy serve` (`GET` without a body, `POST` with).
fn api(base: &str, path: &str, body: Option<serde_json::Value>) -> (u16, serde_json::Value) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let url = format!("{base}{path}");
    let mut response = match body {
        None => agent.get(&url).call(),
        Some(body) => agent.post(&url).send_json(body),
    }
    .unwrap();
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text)),
    )
}

/// What the servers of a group share besides the broker.
#[derive(Clone, Copy)]
enum SharedBy<'a> {
    /// A directory: the data, output and group-state directories.
    Disk,
    /// A bucket: `--group-state-dir s3://lake/groups` and `--output-root
    /// s3://lake/out`; each server's directories are its own.
    Bucket(&'a S3Server),
}

/// Starts `eddy serve` with its own state directory and the data, output
/// and group-state directories `shared` says.
fn group_server(dir: &Path, name: &str, shared: SharedBy) -> (Child, String) {
    let mut command = match shared {
        SharedBy::Disk => {
            let mut command = common::serve_command(
                &dir.join("data"),
                &dir.join("out"),
                &dir.join(format!("state-{name}")),
                "100ms",
            );
            command.arg("--group-state-dir").arg(dir.join("groups"));
            command
        }
        SharedBy::Bucket(s3) => {
            let data = dir.join(format!("data-{name}"));
            std::fs::create_dir_all(&data).unwrap();
            let mut command = common::serve_command(
                &data,
                Path::new("s3://lake/out"),
                &dir.join(format!("state-{name}")),
                "100ms",
            );
            command
                .args(["--group-state-dir", "s3://lake/groups"])
                .envs(s3.env());
            command
        }
    };
    command.env("EDDY_LOG", "info");
    common::spawn_server(command)
}

#[test]
fn two_servers_run_a_group_job_as_one_process_does() {
    two_servers_run_a_group_job(SharedBy::Disk);
}

#[test]
fn two_servers_sharing_no_disk_run_a_group_job_through_a_bucket() {
    let s3 = S3Server::start();
    two_servers_run_a_group_job(SharedBy::Bucket(&s3));
}

/// A group job submitted to two servers (sharing what `shared` says)
/// writes what one process writes alone, each server running a share.
fn two_servers_run_a_group_job(shared: SharedBy) {
    let broker = payments_by_order(60_000);
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    std::fs::create_dir_all(dir.join("data")).unwrap();
    // Per method: keyed otherwise than the topic, so through an exchange.
    let sql = |out: &str| {
        format!(
            "{}
             CREATE TABLE by_method (method VARCHAR, window_start_ms BIGINT, payments BIGINT, amount DOUBLE)
               WITH (connector = 'ndjson', path = '{}');
             INSERT INTO by_method
             SELECT upper(method), CAST(window_start AS BIGINT), count(*), round(sum(paid_amount), 2)
             FROM TABLE(TUMBLE(TABLE payments, DESCRIPTOR(event_time), INTERVAL '1' SECOND))
             GROUP BY upper(method), window_start, window_end;",
            payments_table(&broker.address, "key_column = 'order_id'"),
            out
        )
    };
    let alone = dir.join("out/alone");
    std::fs::create_dir_all(&alone).unwrap();
    let job = dir.join("job.sql");
    std::fs::write(
        &job,
        sql(&alone.join("by_method.ndjson").display().to_string()),
    )
    .unwrap();
    let expected = run_alone(&job, &alone);
    assert!(expected.len() >= 100, "{} rows", expected.len());

    let (mut a, base_a) = group_server(dir, "a", shared);
    let (mut b, base_b) = group_server(dir, "b", shared);
    let together = dir.join("out/together");
    let sink_path = match shared {
        SharedBy::Disk => {
            std::fs::create_dir_all(&together).unwrap();
            together.join("by_method.ndjson").display().to_string()
        }
        // Relative to the bucket output root.
        SharedBy::Bucket(_) => "together/by_method.ndjson".to_string(),
    };
    let submission = serde_json::json!({
        "name": "by-method",
        "sql": sql(&sink_path),
        "group": "served",
        "session_timeout_ms": 2000,
        "parallelism": 1,
    });
    // A group's name is a directory: one that is not a plain name is refused.
    let (status, refused) = api(
        &base_a,
        "/api/v1/jobs",
        Some(serde_json::json!({ "sql": sql(&sink_path), "group": "../x" })),
    );
    assert_eq!(status, 400, "{refused}");
    let mut ids = Vec::new();
    for base in [&base_a, &base_b] {
        let (status, view) = api(base, "/api/v1/jobs", Some(submission.clone()));
        assert_eq!(status, 201, "{view}");
        assert_eq!(view["group"]["name"], "served", "{view}");
        assert_eq!(view["group"]["tasks"], 3, "{view}");
        assert!(
            view["graph"].to_string().contains("exchange"),
            "the graph shown is the tasks' graph, exchanges cut in: {view}"
        );
        ids.push(view["id"].as_str().unwrap().to_string());
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut views = Vec::new();
    for (base, id) in [(&base_a, &ids[0]), (&base_b, &ids[1])] {
        loop {
            let (status, view) = api(base, &format!("/api/v1/jobs/{id}"), None);
            assert_eq!(status, 200, "{view}");
            if view["state"] != "running" {
                views.push(view);
                break;
            }
            assert!(Instant::now() < deadline, "still running: {view}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    for view in &views {
        assert_eq!(view["state"], "finished", "{view}");
    }
    let written = match shared {
        SharedBy::Disk => ndjson_lines(&together),
        SharedBy::Bucket(s3) => {
            s3.download("out/together", &together);
            ndjson_lines_under(&together)
        }
    };
    assert_eq!(written, expected);
    // What the servers read adds up to the topic at least (a task that
    // moved is counted by both).
    let read: u64 = views
        .iter()
        .flat_map(|v| v["metrics"].as_array().cloned().unwrap_or_default())
        .filter(|m| m["kind"] == "source" && m["name"] == "payments")
        .map(|m| m["rows_in"].as_u64().unwrap_or(0))
        .sum();
    assert!(read >= 60_000, "{read} rows read: {views:?}");
    // Both servers joined before the first rebalance was over: each ran
    // a share of the tasks.
    for view in &views {
        let payments: u64 = view["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["kind"] == "source" && m["name"] == "payments")
            .map(|m| m["rows_in"].as_u64().unwrap_or(0))
            .sum();
        assert!(payments > 0, "a server ran no task: {view}");
    }
    let _ = a.kill();
    let _ = b.kill();
    let _ = a.wait();
    let _ = b.wait();
}
