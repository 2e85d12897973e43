//! `eddy serve`: the job server (HTTP API and web console) until Ctrl-C or
//! SIGTERM, which stops every job with a final checkpoint.
//!
//! In: the command's arguments. Out: the address it serves on (stderr).

use eddy_cli::{CliError, Result};
use eddy_connectors::storage::Bucket;

use super::state_location::WorkingCopy;
use crate::args::ServeArgs;

/// Serves until a signal.
pub(crate) fn serve(args: ServeArgs) -> Result<()> {
    let ServeArgs {
        addr,
        data_root,
        output_root,
        state_dir,
        group_state_dir,
        token,
        checkpoint_interval,
        memory_limit,
        allow_python_udfs,
        no_chaining,
        workers,
        pool_share,
        max_jobs,
        job_memory_limit,
        spill_dir,
        spill_disk_limit,
        pg_addr,
        pg_tls_cert,
        pg_tls_key,
        view_refresh,
    } = args;
    let is_bucket =
        |dir: &std::path::PathBuf| eddy_connectors::storage::is_bucket(&dir.to_string_lossy());
    // A bucket prefix for state must not be where jobs write.
    let own_bucket = |flag: &str, dir: &std::path::Path| -> Result<Bucket> {
        let text = dir.to_string_lossy();
        let output = output_root.to_string_lossy();
        let output = output.trim_end_matches('/');
        if text == output || text.starts_with(&format!("{output}/")) {
            return Err(CliError::Usage(format!(
                "{flag} {text}: inside --output-root, where jobs write; give it a prefix of its own"
            )));
        }
        Ok(Bucket::open(&text)?)
    };
    // A bucket --state-dir: the jobs, their checkpoints and savepoints
    // live there, and this server's working copy of them in a private
    // directory (removed when it exits).
    let (state_bucket, working_copy) = if is_bucket(&state_dir) {
        let copy = WorkingCopy::new("serve");
        (Some(own_bucket("--state-dir", &state_dir)?), Some(copy))
    } else {
        (None, None)
    };
    // A bucket --group-state-dir (by default, `groups` beside a bucket
    // --state-dir): group jobs' checkpoints live there, and this server's
    // working copies of its tasks under STATE_DIR.
    let group_state_bucket = match (group_state_dir.as_ref(), &state_bucket) {
        (Some(dir), _) if is_bucket(dir) => Some(own_bucket("--group-state-dir", dir)?),
        (None, Some(state)) => Some(state.join("groups")),
        _ => None,
    };
    let state_dir = match &working_copy {
        Some(copy) => copy.path().to_path_buf(),
        None => state_dir,
    };
    let group_state_dir = match group_state_bucket {
        Some(_) => Some(state_dir.join("group-work")),
        None => group_state_dir,
    };
    for dir in [&output_root, &state_dir]
        .into_iter()
        .filter(|d| !is_bucket(d))
    {
        std::fs::create_dir_all(dir).map_err(|source| CliError::Io {
            path: dir.display().to_string(),
            source,
        })?;
    }
    if !is_bucket(&data_root) && !data_root.is_dir() {
        return Err(CliError::Usage(format!(
            "--data-root {}: no such directory",
            data_root.display()
        )));
    }
    let defaults = eddy_server::ServerConfig::new(data_root, output_root, state_dir);
    let config = eddy_server::ServerConfig {
        addr,
        group_state_dir: group_state_dir.unwrap_or_else(|| defaults.group_state_dir.clone()),
        group_state_bucket,
        state_bucket,
        token: token.filter(|t| !t.is_empty()),
        checkpoint_interval,
        memory_limit,
        allow_python_udfs,
        disable_chaining: no_chaining,
        workers: workers.map(usize::from),
        pool_share,
        max_jobs: max_jobs.map(|n| n as usize),
        job_memory_limit,
        spill: eddy_engine::spill::SpillConfig {
            dir: spill_dir.or_else(|| defaults.spill.dir.clone()),
            disk_limit: spill_disk_limit,
        },
        pg: pg_addr.map(|addr| eddy_server::pg::PgConfig {
            addr,
            tls: pg_tls_cert.zip(pg_tls_key),
        }),
        view_refresh,
        ..defaults
    };
    let (data, output, state) = (
        config.data_root.display().to_string(),
        config.output_root.display().to_string(),
        match &config.state_bucket {
            Some(bucket) => bucket.to_string(),
            None => config.state_dir.display().to_string(),
        },
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| CliError::Io {
            path: "tokio runtime".into(),
            source,
        })?;
    // Ctrl-C or SIGTERM: stop serving, stop every job with a final
    // checkpoint (the next start resumes them), exit.
    let signalled = std::sync::Arc::new(tokio::sync::Notify::new());
    let notify = signalled.clone();
    if let Err(e) = ctrlc::set_handler(move || {
        eprintln!("shutting down: stopping jobs with a final checkpoint");
        notify.notify_one();
    }) {
        tracing::warn!("cannot handle Ctrl-C: {e}");
    }
    let shutdown = async move { signalled.notified().await };
    runtime.block_on(eddy_server::serve(config, |bound| {
        eprintln!("eddy serving on http://{} (data root {data}, output root {output}, state in {state})", bound.http);
        if let Some(pg) = bound.pg {
            eprintln!("eddy serving PostgreSQL on {pg} (psql -h {} -p {})", pg.ip(), pg.port());
        }
    }, shutdown))?;
    Ok(())
}
