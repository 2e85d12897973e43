//! A PostgreSQL server of the test's own (Debian's, started by
//! `scripts/postgres.sh server`) in a temporary directory on a free
//! loopback port, logical replication on; stopped when dropped.

use std::process::Command;

/// The superuser's password. Jobs read it from [`PASSWORD_VARIABLE`].
pub const PASSWORD: &str = "eddy-pg-secret";

/// The environment variable the tests' tables name (`password =
/// 'env:EDDY_TEST_PG_PASSWORD'`).
pub const PASSWORD_VARIABLE: &str = "EDDY_TEST_PG_PASSWORD";

/// See the module docs.
pub struct PgServer {
    dir: tempfile::TempDir,
    pub port: u16,
}

impl PgServer {
    pub fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let port = super::free_port();
        let out = Command::new("bash")
            .arg(super::repo_root().join("scripts/postgres.sh"))
            .arg("server")
            .arg(dir.path().join("pg"))
            .arg(port.to_string())
            .arg(PASSWORD)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "starting PostgreSQL failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self { dir, port }
    }

    /// A connection as the superuser.
    pub fn client(&self) -> postgres::Client {
        postgres::Config::new()
            .host("127.0.0.1")
            .port(self.port)
            .user("postgres")
            .password(PASSWORD)
            .dbname("postgres")
            .connect(postgres::NoTls)
            .unwrap()
    }

    /// The `WITH (...)` options of a `postgres-cdc` table reading `table`
    /// through `slot`, then `extra` (`, key = 'value'...`).
    pub fn cdc_options(&self, table: &str, slot: &str, extra: &str) -> String {
        format!(
            "connector = 'postgres-cdc', hostname = '127.0.0.1', port = '{}', username = 'postgres', \
             password = 'env:{PASSWORD_VARIABLE}', 'database-name' = 'postgres', 'table-name' = '{table}', \
             'slot.name' = '{slot}'{extra}",
            self.port
        )
    }

    /// The `WITH (...)` options of a `jdbc` sink writing `table`.
    pub fn jdbc_options(&self, table: &str) -> String {
        format!(
            "connector = 'jdbc', url = 'jdbc:postgresql://127.0.0.1:{}/postgres', 'table-name' = '{table}', \
             username = 'postgres', password = 'env:{PASSWORD_VARIABLE}'",
            self.port
        )
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("pg/server.log")).unwrap_or_default()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(super::repo_root().join("scripts/postgres.sh"))
            .arg("stop")
            .arg(self.dir.path().join("pg"))
            .output();
    }
}
