//! The `eddy` command line: `run`, `serve` and its clients (`submit`,
//! `jobs`, `job`, `stop`, `health`), `explain`, `generate`, `bench`.
//!
//! In: the process's arguments (see [`args`]). Out: the command's output
//! (see [`commands`]) and its exit status: 0, 1 on an error, 130 when a job
//! was cancelled.

mod args;
mod commands;

use std::process::ExitCode;

use clap::Parser;
use eddy_cli::CliError;
use eddy_engine::EngineError;
use tracing_subscriber::EnvFilter;

/// mimalloc: operator state is many small rows that come and go (a join
/// side, a multiset), where the system allocator spent as long as the
/// operators themselves.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
    match commands::execute(args::Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError::Engine(EngineError::Cancelled)) => {
            eprintln!("error: the job was cancelled");
            ExitCode::from(130)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
