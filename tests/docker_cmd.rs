//! The container's command line, as written in `docker/Dockerfile`, runs
//! against the binary built here: its `ENTRYPOINT` + `CMD` start a server
//! (volume paths and the port swapped for temporary ones) and its
//! `HEALTHCHECK` command reports it healthy. So the image and the binary
//! cannot drift apart unnoticed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::process::Command;

/// The JSON array after `instruction` in the Dockerfile.
fn exec_form(dockerfile: &str, instruction: &str) -> Vec<String> {
    let line = dockerfile
        .lines()
        .find(|l| l.starts_with(instruction))
        .unwrap_or_else(|| panic!("no {instruction} in the Dockerfile"));
    let array = &line[line.find('[').unwrap()..];
    serde_json::from_str(array).unwrap_or_else(|e| panic!("{instruction} is not in exec form: {e}"))
}

#[test]
fn the_images_command_line_serves_and_passes_its_healthcheck() {
    let dockerfile =
        std::fs::read_to_string(common::repo_root().join("docker/Dockerfile")).unwrap();
    let mut command = exec_form(&dockerfile, "ENTRYPOINT");
    command.extend(exec_form(&dockerfile, "CMD"));
    let health = exec_form(&dockerfile, "HEALTHCHECK");
    assert_eq!(command[0], "eddy");
    assert_eq!(health[0], "eddy");

    let dir = tempfile::tempdir().unwrap();
    for volume in ["data", "output", "state"] {
        std::fs::create_dir_all(dir.path().join(volume)).unwrap();
    }
    let args: Vec<String> = command[1..]
        .iter()
        .map(|arg| match arg.as_str() {
            "0.0.0.0:8080" => "127.0.0.1:0".to_string(),
            "/data" | "/output" | "/state" => dir.path().join(&arg[1..]).display().to_string(),
            other => other.to_string(),
        })
        .collect();
    assert!(
        args.contains(&"127.0.0.1:0".to_string()),
        "the image listens on 0.0.0.0:8080: {command:?}"
    );
    let mut command = Command::new(env!("CARGO_BIN_EXE_eddy"));
    command.args(&args);
    let (mut server, base) = common::spawn_server(command);

    let health_args: Vec<String> = health[1..]
        .iter()
        .map(|arg| {
            if arg.starts_with("http://127.0.0.1:8080") {
                base.clone()
            } else {
                arg.clone()
            }
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_eddy"))
        .args(&health_args)
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    assert!(
        out.status.success(),
        "healthcheck failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}
