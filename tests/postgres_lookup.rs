//! Lookup joins against a PostgreSQL table read by key (`connector =
//! 'jdbc'` joined `FOR SYSTEM_TIME AS OF` a `PROCTIME()` column), against a
//! real PostgreSQL (Debian's, started by `scripts/postgres.sh server`):
//!
//! - orders from a file joined LEFT and INNER with customers by a key and
//!   by a two-column key, with a condition on the customer's columns, some
//!   keys missing and some NULL, over batch sizes and 1 and 3 instances,
//!   with and without a cache: the output equals the same join PostgreSQL
//!   computes over the same orders, row for row; with a cache the table is
//!   scanned far fewer times than without;
//! - a cached key is answered from the cache until its `lookup.cache.ttl`
//!   passes, then PostgreSQL's current row is seen; without a cache at
//!   once;
//! - a lookup key that is not a table column, and a table PostgreSQL does
//!   not have, are refused naming why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::pg_server::{PgServer, PASSWORD, PASSWORD_VARIABLE};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn eddy() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.env_remove("EDDY_PARALLELISM");
    command.env(PASSWORD_VARIABLE, PASSWORD);
    command.current_dir(common::repo_root());
    command
}

const CITIES: [(&str, &str); 5] = [
    ("fr", "paris"),
    ("fr", "lyon"),
    ("de", "berlin"),
    ("nl", "delft"),
    ("us", "boston"),
];

/// Customers 1..=300 but every seventh; zones for all cities but Boston.
fn make_tables(pg: &PgServer) {
    let mut client = pg.client();
    client
        .batch_execute(
            "CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, tier text NOT NULL, \
               credit numeric(10, 2), since date);
             CREATE TABLE zones (country text, city text, zone int NOT NULL, PRIMARY KEY (country, city));
             CREATE TABLE orders (id bigint, customer bigint, country text, city text, amount double precision);",
        )
        .unwrap();
    client
        .batch_execute(
            "INSERT INTO customers SELECT id, 'c' || id, (ARRAY['gold', 'silver', 'bronze', 'blocked'])[id % 4 + 1], \
               (id * 3.25)::numeric(10, 2), date '2020-01-01' + id FROM generate_series(1, 300) id WHERE id % 7 <> 0",
        )
        .unwrap();
    for (i, (country, city)) in CITIES.iter().enumerate().take(4) {
        client
            .execute(
                "INSERT INTO zones VALUES ($1, $2, $3)",
                &[country, city, &(i as i32 + 1)],
            )
            .unwrap();
    }
}

/// `n` orders as NDJSON (customers 1..=330 or NULL), also put into
/// PostgreSQL's `orders` for the reference join.
fn make_orders(pg: &PgServer, path: &std::path::Path, n: i64) {
    let mut rng = SmallRng::seed_from_u64(59);
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut client = pg.client();
    let mut tx = client.transaction().unwrap();
    let insert = tx
        .prepare("INSERT INTO orders VALUES ($1, $2, $3, $4, $5)")
        .unwrap();
    for id in 0..n {
        let customer: Option<i64> =
            (rng.random_range(0..50) != 0).then(|| rng.random_range(1..=330));
        let (country, city) = CITIES[rng.random_range(0..CITIES.len())];
        let amount = f64::from(rng.random_range(1..10_000)) / 100.0;
        let row = serde_json::json!({
            "id": id, "customer": customer, "country": country, "city": city, "amount": amount
        });
        writeln!(file, "{row}").unwrap();
        tx.execute(&insert, &[&id, &customer, &country, &city, &amount])
            .unwrap();
    }
    tx.commit().unwrap();
}

/// The job: orders joined with customers (by id, tier not blocked) and
/// zones (by country and city), `join` being LEFT or INNER.
fn job_text(pg: &PgServer, orders: &std::path::Path, join: &str, cache: &str) -> String {
    format!(
        "CREATE TABLE orders (id BIGINT, customer BIGINT, country STRING, city STRING, amount DOUBLE) \
           WITH (connector = 'file', path = '{}');\n\
         CREATE TABLE customers (id BIGINT, name STRING, tier STRING, credit DECIMAL(10, 2), since DATE, \
           PRIMARY KEY (id) NOT ENFORCED) WITH ({}{cache});\n\
         CREATE TABLE zones (country STRING, city STRING, zone INT) WITH ({}{cache});\n\
         CREATE TABLE out (id BIGINT, name STRING, tier STRING, credit DECIMAL(10, 2), since DATE, zone INT) \
           WITH (connector = 'stdout', tag = 'J');\n\
         INSERT INTO out SELECT o.id, c.name, c.tier, c.credit, c.since, z.zone \
           FROM (SELECT *, PROCTIME() AS pt FROM orders) o \
           {join} JOIN customers FOR SYSTEM_TIME AS OF o.pt AS c ON o.customer = c.id AND c.tier <> 'blocked' \
           {join} JOIN zones FOR SYSTEM_TIME AS OF o.pt AS z ON o.country = z.country AND z.city = o.city;\n",
        orders.display(),
        pg.jdbc_options("customers"),
        pg.jdbc_options("zones"),
    )
}

/// The same join by PostgreSQL, each row as eddy prints it.
fn reference(pg: &PgServer, join: &str) -> BTreeMap<String, usize> {
    let sql = format!(
        "SELECT o.id, c.name, c.tier, c.credit::text, c.since::text, z.zone FROM orders o \
         {join} JOIN customers c ON o.customer = c.id AND c.tier <> 'blocked' \
         {join} JOIN zones z ON o.country = z.country AND z.city = o.city"
    );
    let mut rows = BTreeMap::new();
    for row in pg.client().query(sql.as_str(), &[]).unwrap() {
        let line = serde_json::json!({
            "id": row.get::<_, i64>(0),
            "name": row.get::<_, Option<String>>(1),
            "tier": row.get::<_, Option<String>>(2),
            "credit": row.get::<_, Option<String>>(3),
            "since": row.get::<_, Option<String>>(4),
            "zone": row.get::<_, Option<i32>>(5),
        });
        *rows.entry(line.to_string()).or_insert(0) += 1;
    }
    rows
}

/// eddy's output rows, with values as PostgreSQL prints them.
fn output_rows(stdout: &str) -> BTreeMap<String, usize> {
    let mut rows = BTreeMap::new();
    for line in stdout.lines().filter_map(|l| l.strip_prefix("J> ")) {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let credit = match &v["credit"] {
            serde_json::Value::Null => serde_json::Value::Null,
            serde_json::Value::String(s) => s.clone().into(),
            n => format!("{:.2}", n.as_f64().unwrap()).into(),
        };
        let line = serde_json::json!({
            "id": v["id"], "name": v["name"], "tier": v["tier"], "credit": credit,
            "since": v["since"], "zone": v["zone"],
        });
        *rows.entry(line.to_string()).or_insert(0) += 1;
    }
    rows
}

/// Scans PostgreSQL made of `customers` so far.
fn customer_scans(pg: &PgServer) -> i64 {
    // Statistics reach the view within the stats interval: ask fresh.
    let mut client = pg.client();
    client
        .batch_execute("SELECT pg_stat_clear_snapshot()")
        .unwrap();
    client
        .query_one(
            "SELECT coalesce(seq_scan, 0) + coalesce(idx_scan, 0) FROM pg_stat_user_tables WHERE relname = 'customers'",
            &[],
        )
        .unwrap()
        .get(0)
}

fn run(job: &std::path::Path, batch_size: usize, parallelism: usize) -> String {
    let out = eddy()
        .arg("run")
        .arg(job)
        .args(["--batch-size", &batch_size.to_string()])
        .args(["--parallelism", &parallelism.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "eddy failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Waits until PostgreSQL's statistics count `at_least` scans (they are
/// sent by each backend as it goes idle).
fn scans_after(pg: &PgServer, at_least: i64) -> i64 {
    let started = Instant::now();
    loop {
        let scans = customer_scans(pg);
        if scans >= at_least || started.elapsed() > Duration::from_secs(5) {
            return scans;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn lookup_joins_against_postgresql_equal_postgresqls_own_join_and_the_cache_saves_queries() {
    let pg = PgServer::start();
    make_tables(&pg);
    let dir = tempfile::tempdir().unwrap();
    let orders = dir.path().join("orders.ndjson");
    make_orders(&pg, &orders, 6000);
    let cached = ", 'lookup.cache.max-rows' = '1000', 'lookup.cache.ttl' = '10 min'";
    for join in ["LEFT", "INNER"] {
        let expected = reference(&pg, join);
        assert!(expected.len() > 1000, "{join}: {} rows", expected.len());
        for (cache, batch_size, parallelism) in [
            ("", 1000, 1),
            ("", 64, 3),
            (cached, 7, 1),
            (cached, 8192, 3),
        ] {
            let job = dir.path().join("job.sql");
            std::fs::write(&job, job_text(&pg, &orders, join, cache)).unwrap();
            let got = output_rows(&run(&job, batch_size, parallelism));
            assert!(
                got == expected,
                "{join} join, cache '{cache}', batch size {batch_size}, {parallelism} instance(s): \
                 {} rows, PostgreSQL {}; first difference: {:?}",
                got.values().sum::<usize>(),
                expected.values().sum::<usize>(),
                got.iter()
                    .zip(&expected)
                    .find(|(a, b)| a != b)
            );
        }
    }
    // The cache: batches of 7 ask PostgreSQL about 860 times without
    // one; with one, only until each of the 330 keys was seen.
    let job = dir.path().join("job.sql");
    let before = customer_scans(&pg);
    std::fs::write(&job, job_text(&pg, &orders, "LEFT", "")).unwrap();
    run(&job, 7, 1);
    let uncached = scans_after(&pg, before + 800) - before;
    let before = customer_scans(&pg);
    std::fs::write(&job, job_text(&pg, &orders, "LEFT", cached)).unwrap();
    run(&job, 7, 1);
    std::thread::sleep(Duration::from_millis(700));
    let with_cache = customer_scans(&pg) - before;
    eprintln!("scans of customers: {uncached} without a cache, {with_cache} with one");
    assert!(uncached >= 800, "without a cache: {uncached} scans");
    assert!(
        with_cache * 2 < uncached,
        "with a cache {with_cache} scans, without {uncached}"
    );
}

#[test]
fn a_cached_key_is_read_again_once_its_ttl_passes_and_an_uncached_one_at_once() {
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
            "CREATE TABLE owners (name STRING, tier STRING) WITH ({}, 'lookup.cache.max-rows' = '10', 'lookup.cache.ttl' = '4s');\n\
             CREATE TABLE fresh (name STRING, tier STRING) WITH ({});\n\
             CREATE TABLE probes (name STRING) WITH (connector = 'stdin');\n\
             CREATE TABLE out (name STRING, cached STRING, fresh STRING) WITH (connector = 'stdout', tag = 'J');\n\
             INSERT INTO out SELECT p.name, o.tier, f.tier FROM (SELECT *, PROCTIME() AS pt FROM probes) p \
               LEFT JOIN owners FOR SYSTEM_TIME AS OF p.pt AS o ON p.name = o.name \
               LEFT JOIN fresh FOR SYSTEM_TIME AS OF p.pt AS f ON p.name = f.name;",
            pg.jdbc_options("owners"),
            pg.jdbc_options("owners"),
        ),
    )
    .unwrap();
    let mut command = eddy();
    command.arg("run").arg(&job).args(["--batch-size", "1"]);
    let mut job = common::stdin_job::StdinJob::spawn(command);
    let mut probe = |name: &str| -> serde_json::Value {
        job.send(&format!("{{\"name\":\"{name}\"}}"));
        let line = job
            .next_line(Duration::from_secs(30))
            .expect("a joined row");
        serde_json::from_str(line.trim_start_matches("J> ")).unwrap()
    };
    let first = probe("ann");
    assert_eq!(
        (&first["cached"], &first["fresh"]),
        (&"gold".into(), &"gold".into())
    );
    let cached_at = Instant::now();
    pg.client()
        .batch_execute("UPDATE owners SET tier = 'platinum' WHERE name = 'ann'")
        .unwrap();
    let after = probe("ann");
    assert_eq!(
        (&after["cached"], &after["fresh"]),
        (&"gold".into(), &"platinum".into()),
        "the cache answers until its ttl; no cache reads the table"
    );
    loop {
        let row = probe("ann");
        if row["cached"] == "platinum" {
            assert!(
                cached_at.elapsed() >= Duration::from_secs(3),
                "the cached row went after {:?}, before its 4 s ttl",
                cached_at.elapsed()
            );
            break;
        }
        assert!(
            cached_at.elapsed() < Duration::from_secs(30),
            "the cached row never expired"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn lookups_by_an_expression_or_of_a_missing_table_are_refused_naming_why() {
    let pg = PgServer::start();
    pg.client()
        .batch_execute("CREATE TABLE owners (name text PRIMARY KEY, tier text NOT NULL);")
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("job.sql");
    let text = |table: &str, on: &str| {
        format!(
            "CREATE TABLE owners (name STRING, tier STRING) WITH ({});\n\
             CREATE TABLE probes (name STRING) WITH (connector = 'stdin');\n\
             CREATE TABLE out (name STRING, tier STRING) WITH (connector = 'stdout');\n\
             INSERT INTO out SELECT p.name, o.tier FROM (SELECT *, PROCTIME() AS pt FROM probes) p \
               JOIN owners FOR SYSTEM_TIME AS OF p.pt AS o ON {on};",
            pg.jdbc_options(table),
        )
    };
    std::fs::write(&job, text("owners", "p.name = upper(o.name)")).unwrap();
    let out = eddy().arg("explain").arg(&job).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("by its columns"), "{err}");

    std::fs::write(&job, text("no_such_table", "p.name = o.name")).unwrap();
    let explained = eddy().arg("explain").arg(&job).output().unwrap();
    let plan = String::from_utf8_lossy(&explained.stdout);
    assert!(
        explained.status.success(),
        "{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    assert!(plan.contains("key_lookup_join"), "{plan}");
    assert!(!plan.contains(PASSWORD), "{plan}");
    let out = eddy()
        .arg("run")
        .arg(&job)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("no_such_table") && err.contains("no such table"),
        "{err}"
    );
    assert!(!err.contains(PASSWORD), "{err}");
}
