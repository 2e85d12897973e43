//! `eddy serve --pg-addr` with real PostgreSQL clients: Debian's `psql`
//! (the simple protocol, `\d`), the `postgres` driver (the extended
//! protocol: prepared statements with parameters, binary results),
//! Python's psycopg (server-side parameters, text and binary, its error
//! classes; scripts/pg-client.py.sh), node-postgres (named prepared
//! statements, the token as password; scripts/pg-client.node.sh) and
//! SQLAlchemy, Superset's layer (scripts/pg-sqlalchemy.py.sh).
//!
//! - a materialized view over a file equals the same SQL run as a
//!   DataFusion batch query, read with psql and by key with parameters;
//! - `SHOW JOBS`, `SHOW VIEWS`, `\d`, `DROP MATERIALIZED VIEW`, `DROP
//!   TABLE`; a join between two views; `INSERT INTO` a declared sink runs
//!   as a job that writes what a batch query selects; TLS with a
//!   certificate (`sslmode=require`);
//! - what BI tools read: `version()`, `SHOW`/`current_setting` of the
//!   usual settings, Grafana's table list and `information_schema`'s
//!   PostgreSQL type names, a cursor; the token in no log line, even at
//!   debug;
//! - errors with SQLSTATE codes: a wrong password (28P01), a source table
//!   queried as if it were a view (42P01), a name taken (42P07), a bad
//!   column in a view's query (its position in the statement);
//! - consistency: a view whose rows always sum to zero at any checkpoint,
//!   queried over and over while it updates at full speed, never sums to
//!   anything else;
//! - a server killed with SIGKILL and restarted answers from its views
//!   again: a finished view's rows the same, a running one's from its
//!   last checkpoint on.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use datafusion::arrow::datatypes::{DataType, Field, Schema};
use postgres::error::SqlState;
use postgres::{Client, NoTls};

/// A running `eddy serve --pg-addr`.
struct Server {
    child: Child,
    pg: SocketAddr,
    /// Every line the server wrote to stderr.
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

use common::{server_dirs as dirs, ServerDirs as Dirs};

impl Server {
    fn start(dirs: &Dirs, token: Option<&str>) -> Self {
        Self::start_with(dirs, token, &[])
    }

    /// [`Server::start`] with more arguments to `eddy serve`.
    fn start_with(dirs: &Dirs, token: Option<&str>, more: &[&str]) -> Self {
        Self::start_logging(dirs, token, more, "warn")
    }

    /// [`Server::start_with`], logging at `EDDY_LOG` level `log`.
    fn start_logging(dirs: &Dirs, token: Option<&str>, more: &[&str], log: &str) -> Self {
        let mut command = common::serve_command(&dirs.data, &dirs.output, &dirs.state, "10s");
        command.env("EDDY_LOG", log);
        command.args(["--pg-addr", "127.0.0.1:0", "--view-refresh", "100ms"]);
        if let Some(token) = token {
            command.args(["--token", token]);
        }
        command.args(more);
        let spawned = common::spawn_server_logged(command, true);
        Server {
            child: spawned.child,
            pg: spawned
                .pg
                .expect("the server says where PostgreSQL listens"),
            log: spawned.log,
        }
    }

    /// What the server has logged so far.
    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    fn client(&self, password: Option<&str>) -> Result<Client, postgres::Error> {
        let mut config = postgres::Config::new();
        config
            .host(&self.pg.ip().to_string())
            .port(self.pg.port())
            .user("eddy")
            .dbname("eddy")
            .connect_timeout(Duration::from_secs(10));
        if let Some(password) = password {
            config.password(password);
        }
        config.connect(NoTls)
    }

    /// `psql -c sql`: its output (unaligned, `|` between fields, no
    /// headers), or its stderr on failure.
    fn psql(&self, sql: &str) -> Result<String, String> {
        self.psql_with(sql, "prefer")
    }

    /// [`Server::psql`] with a `PGSSLMODE`.
    fn psql_with(&self, sql: &str, ssl_mode: &str) -> Result<String, String> {
        common::psql(self.pg, sql, ssl_mode)
    }
}

const ORDERS: &str = "CREATE TABLE orders (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR) \
     WITH (connector = 'file', path = 'orders.ndjson')";

const PER_CUSTOMER: &str = "SELECT customer_id, count(*) AS orders, min(order_amount) AS smallest, max(order_amount) AS largest \
     FROM orders GROUP BY customer_id";

fn orders_schema() -> Schema {
    Schema::new(vec![
        Field::new("order_id", DataType::Utf8, true),
        Field::new("customer_id", DataType::Utf8, true),
        Field::new("order_amount", DataType::Float64, true),
        Field::new("order_ts", DataType::Int64, true),
        Field::new("country", DataType::Utf8, true),
    ])
}

fn write_orders(data: &Path, count: u64) -> PathBuf {
    let path = data.join("orders.ndjson");
    std::fs::write(
        &path,
        common::generated_ndjson(eddy_connectors::generator::GeneratedStream::Orders, count),
    )
    .unwrap();
    path
}

/// What the server said of an error.
fn said(error: &postgres::Error) -> String {
    match error.as_db_error() {
        Some(db) => format!(
            "{}: {} (hint: {:?})",
            db.code().code(),
            db.message(),
            db.hint()
        ),
        None => error.to_string(),
    }
}

/// One customer's row: id, orders, smallest, largest.
type Row = (String, i64, f64, f64);

/// The view's query as a DataFusion batch query over the whole file.
fn batch_rows(path: &Path) -> Vec<Row> {
    let lines = common::datafusion_json_lines(
        &[("orders", path.to_str().unwrap(), orders_schema())],
        &format!("{PER_CUSTOMER} ORDER BY customer_id"),
    );
    lines
        .iter()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            (
                v["customer_id"].as_str().unwrap().to_string(),
                v["orders"].as_i64().unwrap(),
                v["smallest"].as_f64().unwrap(),
                v["largest"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn psql_rows(text: &str) -> Vec<Row> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let f: Vec<&str> = line.split('|').collect();
            (
                f[0].to_string(),
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
            )
        })
        .collect()
}

/// Declares the orders file and the view `per_customer` over it (psql),
/// and waits until the view's job has read the whole file.
fn per_customer_view(server: &Server) {
    server.psql(ORDERS).unwrap();
    server
        .psql(&format!(
            "CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}"
        ))
        .unwrap();
    wait_for_job(server, "view per_customer", "finished");
}

/// Waits until job `name` (as `SHOW JOBS` lists it) is in `state`.
fn wait_for_job(server: &Server, name: &str, state: &str) {
    let started = Instant::now();
    loop {
        let jobs = server.psql("SHOW JOBS").unwrap();
        let found = jobs
            .lines()
            .find(|l| l.split('|').nth(1) == Some(name))
            .map(|l| l.split('|').nth(2).unwrap_or_default().to_string());
        if found.as_deref() == Some(state) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "job {name} not {state}: {jobs}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn psql_creates_a_view_over_a_file_that_equals_the_batch_query() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 3000);
    let server = Server::start(&dirs, None);
    per_customer_view(&server);

    let expected = batch_rows(&path);
    assert!(expected.len() > 10, "{expected:?}");
    let read = server
        .psql(
            "SELECT customer_id, orders, smallest, largest FROM per_customer ORDER BY customer_id",
        )
        .unwrap();
    assert_eq!(psql_rows(&read), expected);
    // Aggregates and filters over the view run in DataFusion.
    let total = server
        .psql("SELECT sum(orders) FROM per_customer WHERE orders > 0")
        .unwrap();
    assert_eq!(total.trim(), "3000");

    // The catalog: SHOW VIEWS, and psql's \d reading pg_catalog.
    let views = server.psql("SHOW VIEWS").unwrap();
    let row: Vec<&str> = views.lines().next().unwrap().split('|').collect();
    assert_eq!(row[0], "per_customer", "{views}");
    assert_eq!(row[2], "customer_id", "keyed by its GROUP BY: {views}");
    assert_eq!(row[4], expected.len().to_string(), "{views}");
    let described = server.psql("\\d per_customer").unwrap();
    for column in ["customer_id", "orders", "smallest", "largest"] {
        assert!(described.contains(column), "{described}");
    }

    // Errors a client can act on.
    let source = server.psql("SELECT * FROM orders").unwrap_err();
    assert!(source.contains("streaming table"), "{source}");
    assert!(source.contains("CREATE MATERIALIZED VIEW"), "{source}");
    let taken = server
        .psql(&format!(
            "CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}"
        ))
        .unwrap_err();
    assert!(taken.contains("already exists"), "{taken}");
    let unknown = server.psql("SELECT * FROM nowhere").unwrap_err();
    assert!(
        unknown.contains("relation \"nowhere\" does not exist"),
        "{unknown}"
    );
    // A bad column: psql draws its caret under the column, in the statement.
    let statement = "CREATE MATERIALIZED VIEW bad AS SELECT customer_id, nope FROM orders";
    let bad = server.psql(statement).unwrap_err();
    assert!(bad.contains("nope"), "{bad}");
    let caret_line = bad
        .lines()
        .find(|l| l.trim_start().starts_with('^'))
        .unwrap_or_else(|| panic!("no caret: {bad}"));
    let statement_line = bad
        .lines()
        .find(|l| l.contains("LINE 1:"))
        .unwrap_or_else(|| panic!("no statement line: {bad}"));
    let caret = caret_line.find('^').unwrap();
    assert_eq!(&statement_line[caret..caret + 4], "nope", "{bad}");

    server.psql("DROP MATERIALIZED VIEW per_customer").unwrap();
    assert_eq!(server.psql("SHOW VIEWS").unwrap().trim(), "");
    let gone = server.psql("SELECT * FROM per_customer").unwrap_err();
    assert!(gone.contains("does not exist"), "{gone}");
    server
        .psql("DROP MATERIALIZED VIEW IF EXISTS per_customer")
        .unwrap();
}

#[test]
fn a_driver_prepares_statements_with_parameters_and_needs_the_token() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 2000);
    let server = Server::start(&dirs, Some("s3cret"));

    let refused = server.client(Some("wrong")).err().expect("refused");
    assert_eq!(
        refused.code(),
        Some(&SqlState::INVALID_PASSWORD),
        "{}",
        said(&refused)
    );

    let mut client = server.client(Some("s3cret")).unwrap();
    client
        .batch_execute(&format!(
            "{ORDERS}; CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}"
        ))
        .unwrap();
    // Keyed by its GROUP BY from the start, before any checkpoint.
    let key: Option<String> = client
        .query_one(
            "SELECT key FROM eddy.views WHERE name = 'per_customer'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(key.as_deref(), Some("customer_id"));
    // A statement of eddy's own through the extended protocol.
    client.execute("SET eddy.min_epoch = 1", &[]).unwrap();
    let expected = batch_rows(&path);
    let started = Instant::now();
    let by_key = client
        .prepare("SELECT orders, smallest, largest FROM per_customer WHERE customer_id = $1")
        .unwrap();
    loop {
        let count: i64 = client
            .query_one("SELECT count(*) FROM per_customer", &[])
            .unwrap()
            .get(0);
        let total: Option<i64> = client
            .query_one("SELECT sum(orders) FROM per_customer", &[])
            .unwrap()
            .get(0);
        if count as usize == expected.len() && total == Some(2000) {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{count} rows, {total:?} orders"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for (customer, orders, smallest, largest) in &expected {
        let row = client.query_one(&by_key, &[customer]).unwrap();
        assert_eq!(
            (
                row.get::<_, i64>(0),
                row.get::<_, f64>(1),
                row.get::<_, f64>(2)
            ),
            (*orders, *smallest, *largest),
            "{customer}"
        );
    }
    let missing = client.query(&by_key, &[&"nobody"]).unwrap();
    assert!(missing.is_empty());

    let error = client.query("SELECT * FROM orders", &[]).unwrap_err();
    assert_eq!(
        error.code(),
        Some(&SqlState::UNDEFINED_TABLE),
        "{}",
        said(&error)
    );
    let error = client
        .batch_execute(&format!(
            "CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}"
        ))
        .unwrap_err();
    assert_eq!(
        error.code(),
        Some(&SqlState::DUPLICATE_TABLE),
        "{}",
        said(&error)
    );

    client
        .execute("DROP MATERIALIZED VIEW per_customer", &[])
        .unwrap();
    let error = client.query(&by_key, &[&"x"]).unwrap_err();
    assert_eq!(
        error.code(),
        Some(&SqlState::UNDEFINED_TABLE),
        "{}",
        said(&error)
    );
}

#[test]
fn views_join_inserts_start_jobs_and_tls_is_offered_with_a_certificate() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 2000);
    // A self-signed certificate (openssl, as Debian has it).
    let (cert, key) = (dirs.data.join("cert.pem"), dirs.data.join("key.pem"));
    let made = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl runs (scripts/postgres.sh installs it)");
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    let server = Server::start_with(&dirs, None, &["--pg-tls-cert", &cert, "--pg-tls-key", &key]);
    // sslmode=require: psql refuses a server that does not take TLS.
    let secure = server.psql_with("SELECT 41 + 1", "require");
    assert_eq!(
        secure.as_deref().map(str::trim),
        Ok("42"),
        "a TLS connection"
    );

    server.psql(ORDERS).unwrap();
    server
        .psql(&format!(
            "CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}"
        ))
        .unwrap();
    server
        .psql("CREATE MATERIALIZED VIEW top AS SELECT customer_id, max(order_amount) AS top FROM orders GROUP BY customer_id")
        .unwrap();
    server
        .psql("CREATE TABLE big (order_id VARCHAR, order_amount DOUBLE) WITH (connector = 'file', path = 'big.ndjson')")
        .unwrap();
    server
        .psql("INSERT INTO big SELECT order_id, order_amount FROM orders WHERE order_amount > 50")
        .unwrap();
    wait_for_job(&server, "view per_customer", "finished");
    wait_for_job(&server, "view top", "finished");
    let insert = server.psql("SHOW JOBS").unwrap();
    let insert_job = insert
        .lines()
        .find_map(|l| l.split('|').nth(1).filter(|n| n.starts_with("insert ")))
        .unwrap_or_else(|| panic!("no insert job: {insert}"))
        .to_string();
    wait_for_job(&server, &insert_job, "finished");

    // A join between two views, each as of its own epoch.
    let expected = batch_rows(&path);
    let joined = server
        .psql("SELECT count(*) FROM per_customer p JOIN top t ON p.customer_id = t.customer_id WHERE p.largest = t.top")
        .unwrap();
    assert_eq!(joined.trim(), expected.len().to_string());
    // The INSERT's job wrote what a batch query selects.
    let big = common::datafusion_json_lines(
        &[("orders", path.to_str().unwrap(), orders_schema())],
        "SELECT order_id FROM orders WHERE order_amount > 50",
    );
    let written = std::fs::read_to_string(dirs.output.join("big.ndjson")).unwrap();
    assert_eq!(written.lines().count(), big.len());
    assert!(!big.is_empty());
    // A table dropped is gone from later statements.
    server.psql("DROP TABLE big").unwrap();
    let gone = server
        .psql("INSERT INTO big SELECT order_id, order_amount FROM orders")
        .unwrap_err();
    assert!(gone.contains("big"), "{gone}");
}

#[test]
fn psycopg_reads_a_view_with_server_side_parameters_in_text_and_binary() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 1000);
    let expected = batch_rows(&path);
    let expected_path = expected_json(&dirs, &expected);
    let server = Server::start(&dirs, None);
    let said = client_script(
        "scripts/pg-client.py.sh",
        &[
            &server.pg.ip().to_string(),
            &server.pg.port().to_string(),
            expected_path.to_str().unwrap(),
        ],
    );
    assert!(
        said.contains(&format!("psycopg: ok, {} rows checked", 2 * expected.len())),
        "{said}"
    );
}

/// Writes the batch query's rows where a client script reads them.
fn expected_json(dirs: &Dirs, expected: &[Row]) -> PathBuf {
    let path = dirs.data.join("expected.json");
    std::fs::write(&path, serde_json::to_vec(expected).unwrap()).unwrap();
    path
}

/// Runs one of eddy's client scripts; its stdout.
fn client_script(script: &str, args: &[&str]) -> String {
    let out = Command::new(common::repo_root().join(script))
        .args(args)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script}: {said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    said
}

#[test]
fn node_postgres_prepares_named_statements_and_the_token_never_reaches_the_log() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 1000);
    let expected = batch_rows(&path);
    let expected_path = expected_json(&dirs, &expected);
    let token = "pg-token-0c4b9e71";
    // Debug logging of the port, the protocol and the queries, so that a
    // token printed anywhere on the way shows.
    let server = Server::start_logging(
        &dirs,
        Some(token),
        &[],
        "info,eddy_server=debug,pgwire=debug,datafusion_postgres=debug",
    );
    let said = client_script(
        "scripts/pg-client.node.sh",
        &[
            &server.pg.ip().to_string(),
            &server.pg.port().to_string(),
            token,
            expected_path.to_str().unwrap(),
        ],
    );
    assert!(
        said.contains(&format!(
            "node-postgres: ok, {} rows checked",
            expected.len()
        )),
        "{said}"
    );
    let log = server.log();
    assert!(
        log.contains("SELECT orders, smallest, largest FROM per_customer"),
        "the debug log shows the statements: {log}"
    );
    assert!(!log.contains(token), "the token is in the server's log");
}

/// The query Grafana's PostgreSQL data source lists tables with.
const GRAFANA_TABLES: &str = r#"SELECT
    CASE WHEN quote_ident(table_schema) IN (
        SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
        FROM generate_series(
            array_lower(string_to_array(current_setting('search_path'),','),1),
            array_upper(string_to_array(current_setting('search_path'),','),1)
        ) as i,
        string_to_array(current_setting('search_path'),',') s
    )
    THEN quote_ident(table_name)
    ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema', 'pg_catalog',
        '_timescaledb_cache', '_timescaledb_catalog', '_timescaledb_internal',
        '_timescaledb_config', 'timescaledb_information', 'timescaledb_experimental')
    ORDER BY CASE WHEN quote_ident(table_schema) IN (
        SELECT CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
        FROM generate_series(
            array_lower(string_to_array(current_setting('search_path'),','),1),
            array_upper(string_to_array(current_setting('search_path'),','),1)
        ) as i,
        string_to_array(current_setting('search_path'),',') s
    ) THEN 0 ELSE 1 END, 1"#;

#[test]
fn bi_tools_read_postgresql_settings_and_types_and_find_the_views() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 1000);
    let expected = batch_rows(&path);
    let expected_path = expected_json(&dirs, &expected);
    let server = Server::start(&dirs, None);
    per_customer_view(&server);

    // What drivers read at connect.
    let version = server.psql("SELECT version()").unwrap();
    assert!(version.starts_with("PostgreSQL 16.6 "), "{version}");
    assert_eq!(
        server.psql("SHOW standard_conforming_strings").unwrap(),
        "on\n"
    );
    assert_eq!(
        server
            .psql("SELECT current_setting('search_path')")
            .unwrap(),
        "\"$user\", public\n"
    );
    let unknown = server.psql("SHOW no_such_setting").unwrap();
    assert!(!unknown.contains("on"), "{unknown}");

    // Grafana: its table list, then a table's columns with PostgreSQL's
    // type names (it offers the time-like ones as the time column).
    let tables = server.psql(GRAFANA_TABLES).unwrap();
    assert!(
        tables.lines().any(|l| l == "public.per_customer"),
        "{tables}"
    );
    let columns = server
        .psql(
            "SELECT quote_ident(column_name) AS \"column\", data_type AS \"type\" \
             FROM information_schema.columns WHERE quote_ident(table_name) = 'per_customer' \
             ORDER BY ordinal_position",
        )
        .unwrap();
    assert_eq!(
        columns,
        "customer_id|text\norders|bigint\nsmallest|double precision\nlargest|double precision\n"
    );

    // A cursor, as tools page through a large result.
    let mut client = server.client(None).unwrap();
    client
        .batch_execute(
            "BEGIN; DECLARE c CURSOR FOR SELECT customer_id FROM per_customer ORDER BY customer_id",
        )
        .unwrap();
    for page in expected.chunks(3).take(2) {
        let fetched: Vec<String> = client
            .simple_query("FETCH 3 FROM c")
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(row) => Some(row.get(0).unwrap().to_string()),
                _ => None,
            })
            .collect();
        let ids: Vec<String> = page.iter().map(|r| r.0.clone()).collect();
        assert_eq!(fetched, ids);
    }
    client.batch_execute("CLOSE c; COMMIT").unwrap();

    // SQLAlchemy (Superset's layer): connect, list views, bound parameters
    // inside a savepoint, a rollback after an error.
    let said = client_script(
        "scripts/pg-sqlalchemy.py.sh",
        &[
            &server.pg.ip().to_string(),
            &server.pg.port().to_string(),
            "per_customer",
            expected_path.to_str().unwrap(),
        ],
    );
    assert!(
        said.contains(&format!("sqlalchemy: ok, {} rows checked", expected.len())),
        "{said}"
    );
}

/// Rows that sum to zero at every checkpoint: each order counts +1 for its
/// customer and -1 for `all`.
const BALANCE: &str = "CREATE TABLE stream (order_id VARCHAR, customer_id VARCHAR, order_amount DOUBLE, order_ts BIGINT, country VARCHAR) \
     WITH (connector = 'generator', stream = 'orders', batch_size = '200');
     CREATE MATERIALIZED VIEW balance AS SELECT k, sum(d) AS s FROM (\
       SELECT customer_id AS k, CAST(1 AS BIGINT) AS d FROM stream \
       UNION ALL SELECT 'all' AS k, CAST(-1 AS BIGINT) AS d FROM stream) GROUP BY k";

fn balance(client: &mut Client) -> (i64, i64, i64) {
    let row = client
        .query_one(
            "SELECT coalesce(sum(s), 0), count(*), coalesce(max(CASE WHEN k = 'all' THEN -s END), 0) FROM balance",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1), row.get(2))
}

#[test]
fn queries_see_whole_checkpoints_and_views_answer_again_after_a_kill() {
    let dirs = dirs();
    let path = write_orders(&dirs.data, 1500);
    let mut server = Server::start(&dirs, None);
    let mut client = server.client(None).unwrap();
    client
        .batch_execute(&format!(
            "{ORDERS}; CREATE MATERIALIZED VIEW per_customer AS {PER_CUSTOMER}; {BALANCE}"
        ))
        .unwrap();
    wait_for_job(&server, "view per_customer", "finished");
    let finished = server
        .psql("SELECT * FROM per_customer ORDER BY customer_id")
        .unwrap();
    assert_eq!(psql_rows(&finished), batch_rows(&path));

    // The view updates at full speed; every read sums to zero, and the
    // orders seen only grow.
    let started = Instant::now();
    let (mut reads, mut last_orders) = (0, 0);
    while started.elapsed() < Duration::from_secs(3) || last_orders == 0 {
        let (sum, _, orders) = balance(&mut client);
        assert_eq!(sum, 0, "a read saw a half-applied checkpoint");
        assert!(orders >= last_orders, "{orders} after {last_orders}");
        last_orders = orders;
        reads += 1;
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the view never filled"
        );
    }
    assert!(reads > 20, "only {reads} reads");
    let duplicates = client
        .query("SELECT k FROM balance GROUP BY k HAVING count(*) > 1", &[])
        .unwrap();
    assert!(duplicates.is_empty());
    let epoch: i64 = client
        .query_one(
            "SELECT CAST(epoch AS BIGINT) FROM eddy.views WHERE name = 'balance'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(epoch > 0);

    // SIGKILL, restart: both views answer again.
    drop(client);
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    server = Server::start(&dirs, None);
    let mut client = server.client(None).unwrap();
    assert_eq!(
        server
            .psql("SELECT * FROM per_customer ORDER BY customer_id")
            .unwrap(),
        finished,
        "the finished view's rows after the restart"
    );
    let (sum, _, orders) = balance(&mut client);
    assert_eq!(sum, 0);
    assert!(
        orders > 0,
        "the running view resumed from its last checkpoint"
    );
    let resumed: i64 = client
        .query_one(
            "SELECT CAST(epoch AS BIGINT) FROM eddy.views WHERE name = 'balance'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(resumed >= epoch, "epoch {resumed} after {epoch}");
}
