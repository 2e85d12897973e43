//! An S3-compatible server (s3s-fs, which `scripts/s3-server.sh` builds
//! from crates.io) on a free loopback port over a temporary directory,
//! for the tests of buckets: reached by eddy through the standard AWS
//! environment variables, and by the tests through a client of their own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use eddy_connectors::storage::Bucket;

pub const ACCESS_KEY: &str = "eddy";
pub const SECRET_KEY: &str = "eddy-secret";

/// An S3-compatible server on 127.0.0.1 over a temporary directory, with a
/// bucket `lake`; stopped when dropped.
pub struct S3Server {
    child: Child,
    binary: PathBuf,
    port: u16,
    endpoint: String,
    root: tempfile::TempDir,
}

impl S3Server {
    pub fn start() -> Self {
        static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
        let binary = BINARY
            .get_or_init(|| {
                let out = Command::new("bash")
                    .arg(super::repo_root().join("scripts/s3-server.sh"))
                    .arg("path")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "installing the S3 server failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
            })
            .clone();
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("lake")).unwrap();
        let port = super::free_port();
        let child = Self::spawn(&binary, port, root.path());
        Self {
            child,
            binary,
            port,
            endpoint: format!("http://127.0.0.1:{port}"),
            root,
        }
    }

    /// The server process on `port` over `root`, once it accepts connections.
    fn spawn(binary: &Path, port: u16, root: &Path) -> Child {
        let child = Command::new(binary)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--access-key", ACCESS_KEY, "--secret-key", SECRET_KEY])
            .arg(root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        super::wait_until_listening(port, Duration::from_secs(20), "the S3 server");
        child
    }

    /// Stops the server for `outage` (requests are refused meanwhile),
    /// then starts it again over the same objects.
    pub fn outage(&mut self, outage: Duration) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        std::thread::sleep(outage);
        self.child = Self::spawn(&self.binary, self.port, self.root.path());
    }

    /// Its URL (`http://127.0.0.1:PORT`).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The environment a client of this server runs with.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", ACCESS_KEY.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET_KEY.into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    pub fn eddy(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
        command.env_remove("EDDY_PARALLELISM");
        command.current_dir(super::repo_root());
        command.envs(self.env());
        command
    }

    /// The prefix `s3://lake/<prefix>`, through a client of the test's own.
    pub fn bucket(&self, prefix: &str) -> Bucket {
        Bucket::with_options(
            &format!("s3://lake/{prefix}"),
            [
                ("aws_endpoint", self.endpoint.as_str()),
                ("aws_allow_http", "true"),
                ("aws_access_key_id", ACCESS_KEY),
                ("aws_secret_access_key", SECRET_KEY),
                ("aws_region", "us-east-1"),
            ],
        )
        .unwrap()
    }

    /// Every object under `s3://lake/<prefix>`, downloaded into `to`.
    pub fn download(&self, prefix: &str, to: &Path) {
        StoreServer::download(self, prefix, to)
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A store server the bucket tests run against, with a bucket (or
/// container) `lake`: the S3 server here, or Azurite ([`super::azurite`]).
pub trait StoreServer {
    /// Its scheme (`s3`, `az`).
    fn scheme(&self) -> &'static str;
    /// eddy, with the environment that reaches the store.
    fn eddy(&self) -> Command;
    /// `SCHEME://lake/<prefix>`, through a client of the test's own.
    fn bucket(&self, prefix: &str) -> Bucket;
    /// The names of the objects under `SCHEME://lake/<prefix>`, sorted.
    fn names(&self, prefix: &str) -> Vec<String> {
        self.bucket(prefix)
            .list()
            .unwrap()
            .into_iter()
            .map(|o| o.name)
            .collect()
    }

    /// Every object under `SCHEME://lake/<prefix>`, downloaded into `to`.
    fn download(&self, prefix: &str, to: &Path) {
        let bucket = self.bucket(prefix);
        for object in bucket.list().unwrap() {
            let path = to.join(&object.name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bucket.get(&object.name).unwrap().unwrap()).unwrap();
        }
    }
}

impl StoreServer for S3Server {
    fn scheme(&self) -> &'static str {
        "s3"
    }

    fn eddy(&self) -> Command {
        S3Server::eddy(self)
    }

    fn bucket(&self, prefix: &str) -> Bucket {
        S3Server::bucket(self, prefix)
    }
}
