//! PostgreSQL change capture end to end, against a real PostgreSQL
//! (Debian's, started by `scripts/postgres.sh server`) with logical
//! replication on:
//!
//! - a changelog test: a table's rows and a stream of inserts, updates
//!   (keys moving too) and deletes written while the snapshot is read,
//!   through `postgres-cdc` into a Debezium JSON file; replaying the file
//!   gives the PostgreSQL table, row for row, no change is applied twice
//!   or out of order (balances only grow, and no update lowers one), and
//!   the slot is confirmed;
//! - a kill test: the same stream aggregated by a column the updates
//!   change (rows moving between groups), the job SIGKILLed at random
//!   moments and resumed from its checkpoints; the replayed result equals
//!   the aggregate PostgreSQL computes over the table (a change read twice
//!   or lost would show), in the Debezium file and in PostgreSQL itself:
//!   and so does the `jdbc` sink's table the job upserts into;
//! - an append-only job into a `jdbc` sink, SIGKILLed until it finishes,
//!   leaves the table holding each row once: what a run without
//!   checkpoints writes;
//! - a lookup join enriches a stream from a PostgreSQL table as it stands
//!   when each row is joined (updates and deletes seen);
//! - the API and `/metrics` show the slot's position and lag, and the slot
//!   is confirmed past every change once the job has caught up; and a
//!   jdbc sink's rows written and transactions;
//! - a table without a primary key is refused, naming the fix.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::pg_server::{PgServer, PASSWORD, PASSWORD_VARIABLE};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const OWNERS: [&str; 6] = ["ann", "bob", "cy", "di", "ed", "flo"];

/// How long a job may take to catch up with PostgreSQL.
const CATCH_UP: Duration = Duration::from_secs(90);

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.env_remove("EDDY_PARALLELISM");
    command.env(PASSWORD_VARIABLE, PASSWORD);
    command.current_dir(common::repo_root());
    command
}

/// `accounts` with `rows` rows.
fn make_accounts(pg: &PgServer, rows: i64) {
    pg.client()
        .batch_execute(&format!(
            "CREATE TABLE accounts (id bigint PRIMARY KEY, owner text NOT NULL, balance bigint NOT NULL, \
               amount numeric(12,2), note text);
             INSERT INTO accounts SELECT g, (ARRAY['ann','bob','cy','di','ed','flo'])[1 + g % 6], g * 10, g / 4.0,
               'note ' || g FROM generate_series(1, {rows}) g;"
        ))
        .unwrap();
}

const ACCOUNTS_COLUMNS: &str =
    "id BIGINT, owner STRING NOT NULL, balance BIGINT NOT NULL, amount DOUBLE, note STRING, PRIMARY KEY (id) NOT ENFORCED";

/// Writes `ops` seeded random transactions to `accounts` (ids 1..=rows to
/// start with): balance and owner updates, keys moved, deletes, inserts,
/// NULLs, a few transactions of several statements. Returns once done.
fn write_changes(port: u16, rows: i64, seed: u64, ops: usize, pace: Duration) {
    let mut client = postgres::Config::new()
        .host("127.0.0.1")
        .port(port)
        .user("postgres")
        .password(PASSWORD)
        .dbname("postgres")
        .connect(postgres::NoTls)
        .unwrap();
    let mut rng = SmallRng::seed_from_u64(seed);
    for i in 0..ops as i64 {
        let mut tx = client.transaction().unwrap();
        let statements = if rng.random_ratio(1, 10) { 3 } else { 1 };
        for s in 0..statements {
            let id = rng.random_range(1..=rows);
            let choice = rng.random_range(0..100);
            let owner = OWNERS[rng.random_range(0..OWNERS.len())];
            match choice {
                0..35 => tx
                    .execute(
                        "UPDATE accounts SET balance = balance + $1 WHERE id = $2",
                        // Balances only grow, so a change applied twice or
                        // out of order shows as one going down.
                        &[&rng.random_range(1i64..50), &id],
                    )
                    .unwrap(),
                35..50 => tx
                    .execute(
                        "UPDATE accounts SET owner = $1 WHERE id = $2",
                        &[&owner, &id],
                    )
                    .unwrap(),
                50..60 => tx
                    .execute(
                        "UPDATE accounts SET id = $1, balance = balance + 1 WHERE id = $2",
                        &[&(2_000_000 + i * 4 + s), &id],
                    )
                    .unwrap(),
                60..75 => tx
                    .execute("DELETE FROM accounts WHERE id = $1", &[&id])
                    .unwrap(),
                75..95 => tx
                    .execute(
                        "INSERT INTO accounts VALUES ($1, $2, $3, NULL, 'new')",
                        &[
                            &(3_000_000 + i * 4 + s),
                            &owner,
                            &rng.random_range(0i64..1000),
                        ],
                    )
                    .unwrap(),
                _ => tx
                    .execute(
                        "UPDATE accounts SET amount = NULL, note = note || '!' WHERE id = $1",
                        &[&id],
                    )
                    .unwrap(),
            };
        }
        tx.commit().unwrap();
        std::thread::sleep(pace);
    }
}

/// A row as text to compare by: its fields by name, NULLs left out,
/// numbers as floats.
fn canonical(row: &serde_json::Map<String, serde_json::Value>) -> String {
    let fields: BTreeMap<&String, String> = row
        .iter()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, v)| {
            let text = match v.as_f64() {
                Some(n) => format!("{n}"),
                None => v.to_string(),
            };
            (k, text)
        })
        .collect();
    format!("{fields:?}")
}

/// The table a Debezium JSON file describes (`before` taken out, `after`
/// put in), as canonical rows with counts; a change to a row the file
/// never created is an error.
fn replay_debezium(path: &Path) -> Result<BTreeMap<String, usize>, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut table: BTreeMap<String, usize> = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let event: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("line {}: {e}", n + 1))?;
        if let Some(before) = event["before"].as_object() {
            let row = canonical(before);
            let held = table
                .get_mut(&row)
                .ok_or_else(|| format!("line {}: a change of a row never created: {row}", n + 1))?;
            *held -= 1;
            if *held == 0 {
                table.remove(&row);
            }
        }
        if let Some(after) = event["after"].as_object() {
            *table.entry(canonical(after)).or_default() += 1;
        }
    }
    Ok(table)
}

/// The updates of a Debezium JSON file (of `accounts` rows) whose
/// balance went down: none, as balances only grow.
fn balances_going_down(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|line| {
            let event: serde_json::Value = serde_json::from_str(line).unwrap();
            let (before, after) = (&event["before"], &event["after"]);
            before["id"] == after["id"]
                && before["balance"].as_i64().unwrap_or(0)
                    > after["balance"].as_i64().unwrap_or(i64::MAX)
        })
        .map(str::to_string)
        .collect()
}

/// Rows of a query, as canonical rows with counts (columns named as the
/// query names them; `numeric` columns cast to float8 by the query).
fn postgres_rows(pg: &PgServer, sql: &str) -> BTreeMap<String, usize> {
    let mut table = BTreeMap::new();
    let rows = pg
        .client()
        .query(&format!("SELECT row_to_json(q)::text FROM ({sql}) q"), &[])
        .unwrap();
    for row in rows {
        let text: String = row.get(0);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        *table
            .entry(canonical(value.as_object().unwrap()))
            .or_default() += 1;
    }
    table
}

/// Waits until the replayed file equals `expected()`; fails showing the
/// difference.
fn wait_for_equal(
    path: &Path,
    expected: impl Fn() -> BTreeMap<String, usize>,
    what: &str,
    stderr: impl Fn() -> String,
) {
    let started = Instant::now();
    loop {
        let want = expected();
        let got = replay_debezium(path);
        match &got {
            Ok(got) if *got == want => return,
            Err(e) => panic!("{what}: the changelog does not replay: {e}\n{}", stderr()),
            Ok(got) if started.elapsed() > CATCH_UP => {
                let missing: Vec<&String> = want
                    .keys()
                    .filter(|k| !got.contains_key(*k))
                    .take(5)
                    .collect();
                let extra: Vec<&String> = got
                    .keys()
                    .filter(|k| !want.contains_key(*k))
                    .take(5)
                    .collect();
                panic!(
                    "{what}: {} rows replayed, PostgreSQL has {}; missing {missing:?}; extra {extra:?}\n{}",
                    got.len(),
                    want.len(),
                    stderr()
                );
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

fn spawn_job(job: &Path, state: &Path, log: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    eddy()
        .arg("run")
        .arg(job)
        .arg("--state-dir")
        .arg(state)
        .args(["--checkpoint-interval", "200ms"])
        // Debug logging of eddy's connectors and the replication client,
        // so the test sees that no line carries the password.
        .env(
            "EDDY_LOG",
            "info,eddy_connectors=debug,pgwire_replication=debug",
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap()
}

/// An LSN's text (`16/B374D848`) as a number.
fn lsn(text: &str) -> i64 {
    let (hi, lo) = text.split_once('/').unwrap();
    (i64::from_str_radix(hi, 16).unwrap() << 32) + i64::from_str_radix(lo, 16).unwrap()
}

fn slot_confirmed(pg: &PgServer, slot: &str) -> String {
    pg.client()
        .query_one(
            "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1",
            &[&slot],
        )
        .unwrap()
        .get(0)
}

#[test]
fn a_snapshot_and_the_changes_made_while_it_is_read_replay_to_the_source_table() {
    let pg = PgServer::start();
    // Big enough, in chunks small enough, that the snapshot is still being
    // read when the changes come.
    let rows = 20_000;
    make_accounts(&pg, rows);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("changes.ndjson");
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE accounts ({ACCOUNTS_COLUMNS}) WITH ({});\n\
             CREATE TABLE changes (id BIGINT, owner STRING, balance BIGINT, amount DOUBLE, note STRING) \
               WITH (connector = 'ndjson', path = '{}', format = 'debezium-json');\n\
             INSERT INTO changes SELECT * FROM accounts;",
            pg.cdc_options("accounts", "eddy_changes", ", 'scan.incremental.snapshot.chunk.size' = '53'"),
            out.display()
        ),
    )
    .unwrap();
    let log = dir.path().join("eddy.log");
    let mut child = spawn_job(&job, &dir.path().join("state"), &log);
    // Changes start while the snapshot's chunks are being read.
    write_changes(pg.port, rows, 7, 1_500, Duration::from_micros(300));
    let stderr = || std::fs::read_to_string(&log).unwrap_or_default() + &pg.log();
    wait_for_equal(
        &out,
        || {
            postgres_rows(
                &pg,
                "SELECT id, owner, balance, amount::float8 AS amount, note FROM accounts",
            )
        },
        "changelog",
        stderr,
    );
    // Every change read once and in order: the changes made while the
    // snapshot was read are applied to the rows that did not hold them yet.
    let down = balances_going_down(&out);
    assert!(
        down.is_empty(),
        "balances went down: {:?}",
        &down[..down.len().min(5)]
    );
    // The slot is confirmed as checkpoints holding its changes complete.
    let first = slot_confirmed(&pg, "eddy_changes");
    pg.client()
        .execute(
            "UPDATE accounts SET note = 'last' WHERE id = (SELECT min(id) FROM accounts)",
            &[],
        )
        .unwrap();
    let started = Instant::now();
    while slot_confirmed(&pg, "eddy_changes") == first {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the slot stayed confirmed at {first}\n{}",
            stderr()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains(PASSWORD),
        "the password is in eddy's output:\n{text}"
    );
}

#[test]
fn an_aggregate_over_changes_survives_kills_and_equals_postgresql() {
    let pg = PgServer::start();
    // Kills come while the snapshot is read, too.
    let rows = 20_000;
    make_accounts(&pg, rows);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("totals.ndjson");
    let job = dir.path().join("job.sql");
    pg.client()
        .batch_execute("CREATE TABLE owner_totals (owner text PRIMARY KEY, n bigint, total bigint)")
        .unwrap();
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE accounts ({ACCOUNTS_COLUMNS}) WITH ({});\n\
             CREATE TABLE totals (owner STRING, n BIGINT, total BIGINT) \
               WITH (connector = 'ndjson', path = '{}', format = 'debezium-json');\n\
             CREATE TABLE pg_totals (owner STRING, n BIGINT, total BIGINT, PRIMARY KEY (owner) NOT ENFORCED) \
               WITH ({});\n\
             CREATE VIEW sums AS SELECT owner, COUNT(*) AS n, SUM(balance) AS total FROM accounts GROUP BY owner;\n\
             INSERT INTO totals SELECT * FROM sums;\n\
             INSERT INTO pg_totals SELECT * FROM sums;",
            pg.cdc_options("accounts", "eddy_totals", ", 'scan.incremental.snapshot.chunk.size' = '53'"),
            out.display(),
            pg.jdbc_options("owner_totals")
        ),
    )
    .unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("eddy.log");
    let port = pg.port;
    let writer =
        std::thread::spawn(move || write_changes(port, rows, 11, 3_000, Duration::from_millis(2)));
    let mut rng = SmallRng::seed_from_u64(5);
    let mut kills = 0;
    let mut child = spawn_job(&job, &state, &log);
    while kills < 5 {
        std::thread::sleep(Duration::from_millis(rng.random_range(200..1_500)));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        kills += 1;
        child = spawn_job(&job, &state, &log);
    }
    writer.join().unwrap();
    let stderr = || std::fs::read_to_string(&log).unwrap_or_default() + &pg.log();
    wait_for_equal(
        &out,
        || {
            postgres_rows(
                &pg,
                "SELECT owner, count(*) AS n, sum(balance)::bigint AS total FROM accounts GROUP BY owner",
            )
        },
        &format!("totals after {kills} kills"),
        stderr,
    );
    // The jdbc sink's table holds the same aggregate, in PostgreSQL.
    let aggregate =
        "SELECT owner, count(*) AS n, sum(balance)::bigint AS total FROM accounts GROUP BY owner";
    let started = Instant::now();
    while postgres_rows(&pg, "SELECT owner, n, total FROM owner_totals")
        != postgres_rows(&pg, aggregate)
    {
        assert!(
            started.elapsed() < CATCH_UP,
            "owner_totals differs from PostgreSQL's aggregate: {:?} vs {:?}\n{}",
            postgres_rows(&pg, "SELECT owner, n, total FROM owner_totals"),
            postgres_rows(&pg, aggregate),
            stderr()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(PASSWORD), "the password is in eddy's output");
    assert!(
        text.contains("resuming from checkpoint"),
        "the job never resumed from a checkpoint:\n{}",
        stderr()
    );
}

#[test]
fn a_table_without_a_primary_key_is_refused_naming_the_fix() {
    let pg = PgServer::start();
    pg.client()
        .batch_execute(
            "CREATE TABLE plain (id bigint, note text); INSERT INTO plain VALUES (1, 'a');",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE plain (id BIGINT, note STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ({});\n\
             CREATE TABLE out (id BIGINT, note STRING) WITH (connector = 'blackhole');\n\
             INSERT INTO out SELECT * FROM plain;",
            pg.cdc_options("plain", "eddy_plain", "")
        ),
    )
    .unwrap();
    let output = eddy().arg("run").arg(&job).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("\"public\".\"plain\"")
            && stderr.contains("no primary key")
            && stderr.contains("ADD PRIMARY KEY"),
        "{stderr}"
    );
    // Declaring no key is refused before anything connects.
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE plain (id BIGINT, note STRING) WITH ({});\n\
             CREATE TABLE out (id BIGINT, note STRING) WITH (connector = 'blackhole');\n\
             INSERT INTO out SELECT * FROM plain;",
            pg.cdc_options("plain", "eddy_plain", "")
        ),
    )
    .unwrap();
    let output = eddy().arg("run").arg(&job).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("PRIMARY KEY (...) NOT ENFORCED"),
        "{stderr}"
    );
}

#[test]
fn an_append_only_jdbc_sink_holds_each_row_once_after_kills() {
    let pg = PgServer::start();
    pg.client()
        .batch_execute(
            "CREATE TABLE orders_once (order_id text, customer_id text, order_amount float8, order_ts bigint);
             CREATE TABLE orders_killed (LIKE orders_once);",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = |sink: &str| {
        format!(
            "CREATE TABLE orders (order_id VARCHAR NOT NULL, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT NOT NULL, \
               country VARCHAR) WITH (connector = 'generator', stream = 'orders', count = '1000000', batch_size = '2000');\n\
             CREATE TABLE out (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT) WITH ({});\n\
             INSERT INTO out SELECT order_id, customer_id, order_amount, order_ts FROM orders;",
            pg.jdbc_options(sink)
        )
    };
    let once = dir.path().join("once.sql");
    std::fs::write(&once, job("orders_once")).unwrap();
    let output = eddy().arg("run").arg(&once).output().unwrap();
    let summary = String::from_utf8_lossy(&output.stderr).to_string();
    assert!(output.status.success(), "{summary}");
    let killed = dir.path().join("killed.sql");
    std::fs::write(&killed, job("orders_killed")).unwrap();
    let state = dir.path().join("state");
    let log = dir.path().join("eddy.log");
    let mut rng = SmallRng::seed_from_u64(3);
    let mut kills = 0;
    loop {
        let mut child = spawn_job(&killed, &state, &log);
        let deadline = Instant::now() + Duration::from_millis(rng.random_range(700..1_500));
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        match status {
            Some(status) => {
                assert!(
                    status.success(),
                    "{}",
                    std::fs::read_to_string(&log).unwrap()
                );
                break;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                kills += 1;
                assert!(kills < 60, "the job never finished");
            }
        }
    }
    let count = |table: &str| -> i64 {
        pg.client()
            .query_one(&format!("SELECT count(*) FROM {table}"), &[])
            .unwrap()
            .get(0)
    };
    let expected = count("orders_once");
    assert!(expected > 1_000, "the generator wrote {expected} orders");
    // The run summary says what the sink wrote.
    assert!(
        summary.contains(&format!(
            "jdbc sink out -> \"public\".\"orders_once\": {expected} rows in "
        )),
        "{summary}"
    );
    let differ: i64 = pg
        .client()
        .query_one(
            "SELECT count(*) FROM ((SELECT * FROM orders_once EXCEPT ALL SELECT * FROM orders_killed) \
               UNION ALL (SELECT * FROM orders_killed EXCEPT ALL SELECT * FROM orders_once)) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        (count("orders_killed"), differ),
        (expected, 0),
        "after {kills} kills the killed job's table differs from the uninterrupted run's"
    );
    assert!(kills > 0, "the job finished before any kill");
    // A resumed job publishes its checkpoint again; the progress table
    // makes that a no-op.
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("resuming from checkpoint"),
        "no kill came after a checkpoint"
    );
    eprintln!("append-only jdbc sink: {expected} rows, exact after {kills} kills");
}

/// Enriching a stream from a PostgreSQL table: the table read by
/// `postgres-cdc` as a lookup join's table (`FOR SYSTEM_TIME AS OF` a
/// processing-time column) meets each row as the table stands when the row
/// is joined: an update made in PostgreSQL is what later rows meet, and a
/// deleted key meets no row.
#[test]
fn a_lookup_join_meets_each_row_with_the_postgresql_table_as_it_stands() {
    let pg = PgServer::start();
    pg.client()
        .batch_execute(
            "CREATE TABLE owners (name text PRIMARY KEY, tier text NOT NULL);
             INSERT INTO owners VALUES ('ann', 'gold'), ('bob', 'silver');",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE owners (name STRING, tier STRING, PRIMARY KEY (name) NOT ENFORCED) WITH ({});\n\
             CREATE TABLE probes (name STRING) WITH (connector = 'stdin');\n\
             CREATE TABLE out (name STRING, tier STRING) WITH (connector = 'stdout', tag = 'J');\n\
             INSERT INTO out SELECT p.name, o.tier FROM (SELECT *, PROCTIME() AS pt FROM probes) p \
               LEFT JOIN owners FOR SYSTEM_TIME AS OF p.pt AS o ON p.name = o.name;",
            pg.cdc_options("owners", "eddy_owners", "")
        ),
    )
    .unwrap();
    let mut command = eddy();
    command.arg("run").arg(&job).args(["--batch-size", "1"]);
    let mut job = common::stdin_job::StdinJob::spawn(command);
    // Probes `name` until one meets `tier`; the lines seen on the way.
    let mut probe_until = |name: &str, tier: serde_json::Value| -> Vec<String> {
        let started = Instant::now();
        let mut seen = Vec::new();
        loop {
            assert!(
                started.elapsed() < CATCH_UP,
                "{name} never met {tier}: {seen:?}"
            );
            job.send(&format!("{{\"name\":\"{name}\"}}"));
            let Some(line) = job.next_line(Duration::from_secs(5)) else {
                continue;
            };
            let row: serde_json::Value =
                serde_json::from_str(line.trim_start_matches("J> ")).unwrap();
            seen.push(line);
            if row["tier"] == tier {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    probe_until("ann", "gold".into());
    pg.client()
        .batch_execute("BEGIN; UPDATE owners SET tier = 'platinum' WHERE name = 'ann'; DELETE FROM owners WHERE name = 'bob'; COMMIT;")
        .unwrap();
    let seen = probe_until("ann", "platinum".into());
    assert!(
        seen.iter()
            .all(|l| l.contains("gold") || l.contains("platinum")),
        "a probe of ann met something else: {seen:?}"
    );
    // The delete came in the update's transaction: bob is gone.
    let seen = probe_until("bob", serde_json::Value::Null);
    assert_eq!(seen.len(), 1, "bob met a deleted row: {seen:?}");
}

/// The wall clock, epoch milliseconds (PostgreSQL's commit times are on
/// the same clock).
fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Flink CDC's metadata columns: a snapshot row's `op_ts` is 0 (the
/// epoch), a change's the commit time of its transaction; the names are
/// the table's.
#[test]
fn metadata_columns_carry_the_commit_time_and_the_tables_names() {
    let pg = PgServer::start();
    make_accounts(&pg, 3);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE accounts (id BIGINT, owner STRING NOT NULL, \
               op_ts TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL, table_name STRING METADATA VIRTUAL, \
               db STRING METADATA FROM 'database_name' VIRTUAL, at_ms BIGINT METADATA FROM 'op_ts', \
               balance BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) WITH ({});\n\
             CREATE TABLE out (id BIGINT, owner STRING, op_ts TIMESTAMP(3), table_name STRING, db STRING, at_ms BIGINT, balance BIGINT) \
               WITH (connector = 'stdout', tag = 'M');\n\
             INSERT INTO out SELECT id, owner, op_ts, table_name, db, at_ms, balance FROM accounts;",
            pg.cdc_options("accounts", "eddy_metadata", "")
        ),
    )
    .unwrap();
    let mut command = eddy();
    command.arg("run").arg(&job).args(["--batch-size", "1"]);
    let job = common::stdin_job::StdinJob::spawn(command);
    let next_row = || -> serde_json::Value {
        let line = job.next_line(CATCH_UP).expect("a row from the CDC source");
        let json = line
            .split_once('{')
            .map(|(_, rest)| format!("{{{rest}"))
            .unwrap();
        serde_json::from_str(&json).unwrap()
    };
    for _ in 0..3 {
        let row = next_row();
        assert_eq!(row["at_ms"], 0, "a snapshot row: {row}");
        assert!(
            row["op_ts"]
                .as_str()
                .is_some_and(|t| t.starts_with("1970-01-01T00:00:00")),
            "{row}"
        );
        assert_eq!(
            (&row["table_name"], &row["db"]),
            (&"accounts".into(), &"postgres".into())
        );
    }
    let mut client = pg.client();
    let committed_before = now_ms();
    client
        .batch_execute("UPDATE accounts SET balance = 99 WHERE id = 2")
        .unwrap();
    let committed_after = now_ms();
    // The update: -U, the row as it was (read by the snapshot: time 0,
    // as Flink's upsert changelog gives the old row as it stood), and +U
    // with the update's commit time.
    let old = next_row();
    assert_eq!(
        (&old["balance"], &old["at_ms"]),
        (&20.into(), &0.into()),
        "{old}"
    );
    let new = next_row();
    let at = new["at_ms"].as_i64().unwrap();
    assert!(
        (committed_before - 1..=committed_after + 1).contains(&at),
        "committed between {committed_before} and {committed_after}: {new}"
    );
    assert_eq!(
        (&new["balance"], &new["table_name"]),
        (&99.into(), &"accounts".into())
    );
}

/// A `postgres-cdc` table with a WATERMARK on its `op_ts` is a versioned
/// table: an event-time temporal join meets each order with the rate that
/// stood at the order's time (a change's version starts when it
/// committed; the snapshot's rows stand from the epoch).
#[test]
fn a_watermarked_cdc_table_is_a_versioned_table_for_temporal_joins() {
    let pg = PgServer::start();
    pg.client()
        .batch_execute(
            "CREATE TABLE rates (currency text PRIMARY KEY, rate bigint NOT NULL);
             INSERT INTO rates VALUES ('EUR', 1), ('USD', 5);",
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE rates (currency STRING, rate BIGINT NOT NULL, \
               op_ts TIMESTAMP_LTZ(3) METADATA FROM 'op_ts' VIRTUAL, \
               PRIMARY KEY (currency) NOT ENFORCED, WATERMARK FOR op_ts AS op_ts) WITH ({});\n\
             CREATE TABLE orders (id BIGINT, currency STRING, ts_ms BIGINT, ts AS TO_TIMESTAMP_LTZ(ts_ms, 3), \
               WATERMARK FOR ts AS ts) WITH (connector = 'stdin');\n\
             CREATE TABLE out (id BIGINT, rate BIGINT) WITH (connector = 'stdout', tag = 'R');\n\
             INSERT INTO out SELECT o.id, r.rate FROM orders o \
               JOIN rates FOR SYSTEM_TIME AS OF o.ts AS r ON o.currency = r.currency;",
            pg.cdc_options("rates", "eddy_rates", "")
        ),
    )
    .unwrap();
    let mut command = eddy();
    command.arg("run").arg(&job).args(["--batch-size", "1"]);
    let mut job = common::stdin_job::StdinJob::spawn(command);
    // Let the snapshot be read first.
    std::thread::sleep(Duration::from_millis(500));
    let before = now_ms();
    pg.client()
        .batch_execute("UPDATE rates SET rate = 2 WHERE currency = 'EUR'")
        .unwrap();
    let after = now_ms();
    std::thread::sleep(Duration::from_millis(1500));
    // Another change moves the table's watermark past the orders' times.
    pg.client()
        .batch_execute("UPDATE rates SET rate = 6 WHERE currency = 'USD'")
        .unwrap();
    for (id, currency, ts) in [
        (1, "EUR", before - 500),
        (2, "EUR", after + 500),
        (3, "USD", after + 500),
        (4, "GBP", after + 1000),
    ] {
        job.send(&format!(
            "{{\"id\":{id},\"currency\":\"{currency}\",\"ts_ms\":{ts}}}"
        ));
    }
    let mut rates = BTreeMap::new();
    while rates.len() < 3 {
        let line = job
            .next_line(CATCH_UP)
            .unwrap_or_else(|| panic!("3 joined orders, got {rates:?}"));
        let row: serde_json::Value = serde_json::from_str(line.trim_start_matches("R> ")).unwrap();
        rates.insert(row["id"].as_i64().unwrap(), row["rate"].as_i64().unwrap());
    }
    assert_eq!(rates, BTreeMap::from([(1, 1), (2, 2), (3, 5)]));
}

/// `scan.startup.mode = 'snapshot'`: the table's rows, then the job
/// ends; no slot is made, and the table reads as a plain one (inserts
/// only: no changelog step behind it).
#[test]
fn a_snapshot_only_source_reads_the_table_and_ends() {
    let pg = PgServer::start();
    make_accounts(&pg, 2500);
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    std::fs::write(
        &job,
        format!(
            "CREATE TABLE accounts ({ACCOUNTS_COLUMNS}) WITH ({});\n\
             CREATE TABLE out (owner STRING, n BIGINT, total BIGINT) WITH (connector = 'stdout', tag = 'S');\n\
             INSERT INTO out SELECT owner, COUNT(*), SUM(balance) FROM accounts GROUP BY owner;",
            pg.cdc_options(
                "accounts",
                "eddy_unused",
                ", 'scan.startup.mode' = 'snapshot', 'scan.incremental.snapshot.chunk.size' = '300'"
            )
        ),
    )
    .unwrap();
    let explained = eddy().arg("explain").arg(&job).output().unwrap();
    common::assert_success(&explained, "explaining a snapshot-only job");
    let plan = String::from_utf8_lossy(&explained.stdout);
    assert!(!plan.contains("changelog_normalize"), "{plan}");
    let out = eddy().arg("run").arg(&job).output().unwrap();
    common::assert_success(&out, "a snapshot-only job");
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.starts_with("S> "))
        .map(str::to_string)
        .collect();
    let replayed = common::replay_changelog(&lines).unwrap();
    let mut got: BTreeMap<String, usize> = BTreeMap::new();
    for line in &replayed {
        let row: serde_json::Value = serde_json::from_str(line.trim_start_matches("S> ")).unwrap();
        *got.entry(canonical(row.as_object().unwrap())).or_default() += 1;
    }
    let expected = postgres_rows(
        &pg,
        "SELECT owner, count(*) AS n, sum(balance)::bigint AS total FROM accounts GROUP BY owner",
    );
    assert_eq!(got, expected);
    let slots: i64 = pg
        .client()
        .query_one("SELECT count(*) FROM pg_replication_slots", &[])
        .unwrap()
        .get(0);
    assert_eq!(slots, 0, "a snapshot-only source makes no slot");
}

/// Job `id` as the API shows it, and its node `name`'s metrics.
fn node_metrics(
    agent: &ureq::Agent,
    base: &str,
    id: &str,
    name: &str,
) -> (serde_json::Value, serde_json::Value) {
    let mut response = agent
        .get(&format!("{base}/api/v1/jobs/{id}"))
        .call()
        .unwrap();
    let job: serde_json::Value = response.body_mut().read_json().unwrap();
    let node = job["metrics"]
        .as_array()
        .and_then(|nodes| nodes.iter().find(|n| n["name"] == name))
        .cloned()
        .unwrap_or_default();
    (job, node)
}

/// A CDC source's slot figures in the API and `/metrics`: where the job
/// has read to and what it confirmed, and a lag that drops to zero once it
/// has caught up (a quiet table included: the slot moves on with the
/// server's position).
#[test]
fn the_api_and_metrics_show_the_slots_position_and_lag() {
    let pg = PgServer::start();
    make_accounts(&pg, 500);
    pg.client()
        .batch_execute("CREATE TABLE owner_counts (owner text PRIMARY KEY, n bigint NOT NULL)")
        .unwrap();
    let dirs = common::server_dirs();
    let mut command = common::serve_command(&dirs.data, &dirs.output, &dirs.state, "200ms");
    command.env(PASSWORD_VARIABLE, PASSWORD);
    let (mut server, base) = common::spawn_server(command);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let sql = format!(
        "CREATE TABLE accounts ({ACCOUNTS_COLUMNS}) WITH ({});\n\
         CREATE TABLE sink (owner STRING, n BIGINT, PRIMARY KEY (owner) NOT ENFORCED) WITH ({});\n\
         INSERT INTO sink SELECT owner, COUNT(*) AS n FROM accounts GROUP BY owner;",
        pg.cdc_options("accounts", "eddy_api", ""),
        pg.jdbc_options("owner_counts"),
    );
    let mut response = agent
        .post(&format!("{base}/api/v1/jobs"))
        .send_json(serde_json::json!({ "name": "cdc", "sql": sql }))
        .unwrap();
    let job: serde_json::Value = response.body_mut().read_json().unwrap();
    let id = job["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{job}"))
        .to_string();
    write_changes(pg.port, 500, 3, 200, Duration::ZERO);
    let written: String = pg
        .client()
        .query_one("SELECT pg_current_wal_lsn()::text", &[])
        .unwrap()
        .get(0);
    let written = lsn(&written);
    let started = Instant::now();
    let figures = loop {
        let (job, source) = node_metrics(&agent, &base, &id, "accounts");
        let figures = source["connector"].clone();
        let caught_up = figures["snapshot_done"] == 1
            && figures["lag_bytes"] == 0
            && figures["slot_confirmed_lsn"].as_i64().unwrap_or(0) >= written;
        if caught_up {
            break figures;
        }
        assert!(
            started.elapsed() < CATCH_UP,
            "the source never showed a caught-up slot: {job}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(
        figures["read_lsn"].as_i64().unwrap() >= written,
        "{figures}"
    );
    assert_eq!(figures["lag_ms"], 0, "{figures}");
    // PostgreSQL agrees: the slot is confirmed past every change written.
    let started = Instant::now();
    let mut confirmed = lsn(&slot_confirmed(&pg, "eddy_api"));
    while confirmed < written && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(200));
        confirmed = lsn(&slot_confirmed(&pg, "eddy_api"));
    }
    assert!(
        confirmed >= written,
        "PostgreSQL's slot stayed at {confirmed} < {written}"
    );
    let mut response = agent.get(&format!("{base}/metrics")).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("eddy_connector_value{")
            && l.contains("node=\"accounts\"")
            && l.contains("metric=\"lag_bytes\"")),
        "{text}"
    );
    // The jdbc sink's figures: what it committed, as PostgreSQL has it.
    let started = Instant::now();
    loop {
        let (job, sink) = node_metrics(&agent, &base, &id, "sink");
        let figures = &sink["connector"];
        let owners = pg
            .client()
            .query_one("SELECT count(*) FROM owner_counts", &[])
            .unwrap()
            .get::<_, i64>(0);
        if figures["transactions"].as_i64().unwrap_or(0) >= 1
            && figures["rows_written"].as_i64().unwrap_or(0) >= owners
            && owners == OWNERS.len() as i64
        {
            break;
        }
        assert!(
            started.elapsed() < CATCH_UP,
            "the sink never showed its writes ({owners} owners in PostgreSQL): {job}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut response = agent.get(&format!("{base}/metrics")).call().unwrap();
    let text = response.body_mut().read_to_string().unwrap();
    assert!(
        text.lines().any(|l| l.starts_with("eddy_connector_value{")
            && l.contains("node=\"sink\"")
            && l.contains("metric=\"transactions\"")),
        "{text}"
    );
    assert!(!text.contains(PASSWORD));
    server.kill().unwrap();
    server.wait().unwrap();
}
