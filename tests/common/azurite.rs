//! Azurite, the Azure Storage emulator (`scripts/azurite.sh` installs it
//! from npm as its lockfile pins it), on a free loopback port over a
//! temporary directory with a container `lake`, for the tests of `az://`
//! paths: eddy reaches it through the emulator's standard variables, the
//! tests through a client of their own.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use eddy_connectors::storage::Bucket;

use super::s3::StoreServer;

/// The emulator's well-known account and key.
const ACCOUNT: &str = "devstoreaccount1";
const ACCOUNT_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// See the module docs; stopped when dropped.
pub struct Azurite {
    child: Child,
    url: String,
    _root: tempfile::TempDir,
}

impl Azurite {
    pub fn start() -> Self {
        let root = tempfile::tempdir().unwrap();
        let port = super::free_port();
        let script = super::repo_root().join("scripts/azurite.sh");
        let child = Command::new("bash")
            .arg(&script)
            .args(["start", &port.to_string()])
            .arg(root.path())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        // The first start installs Azurite from npm.
        super::wait_until_listening(port, Duration::from_secs(300), "Azurite");
        let made = Command::new("bash")
            .arg(&script)
            .args(["container", &port.to_string(), "lake"])
            .output()
            .unwrap();
        super::assert_success(&made, "creating the container lake");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _root: root,
        }
    }
}

impl StoreServer for Azurite {
    fn scheme(&self) -> &'static str {
        "az"
    }

    fn eddy(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
        command
            .env_remove("EDDY_PARALLELISM")
            .current_dir(super::repo_root())
            .env("AZURE_STORAGE_USE_EMULATOR", "true")
            .env("AZURITE_BLOB_STORAGE_URL", &self.url);
        command
    }

    fn bucket(&self, prefix: &str) -> Bucket {
        let endpoint = format!("{}/{ACCOUNT}", self.url);
        Bucket::with_options(
            &format!("az://lake/{prefix}"),
            [
                ("azure_storage_account_name", ACCOUNT),
                ("azure_storage_account_key", ACCOUNT_KEY),
                ("azure_endpoint", endpoint.as_str()),
                ("azure_allow_http", "true"),
            ],
        )
        .unwrap()
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        // `bash` exec'd into node: the child is Azurite itself.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
