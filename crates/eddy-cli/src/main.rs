//! The `eddy` command line: `run`, `explain`, `generate`, `bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};
use eddy_cli::{bench, generate, job, CliError, Result};
use eddy_connectors::{ConnectorConfig, OutputFormat};
use eddy_engine::checkpoint::{CheckpointConfig, DEFAULT_INTERVAL};
use eddy_engine::runtime::{JobConfig, JobHandle};
use eddy_engine::EngineError;
use tracing_subscriber::EnvFilter;

/// eddy: a streaming SQL engine on DataFusion and Arrow.
#[derive(Parser, Debug)]
#[command(name = "eddy", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum Format {
    Ndjson,
    Parquet,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run SQL files (or directories of them) as one streaming job.
    Run {
        /// `.sql` files or directories of `.sql` files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Set a `${NAME}` parameter: NAME=VALUE.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Read a source table from an NDJSON file (`-` = stdin): TABLE=PATH.
        #[arg(long = "input", value_name = "TABLE=PATH")]
        input: Vec<String>,
        /// Write every sink to DIR/<sink>.ndjson (or Parquet under DIR/<sink>/).
        #[arg(long, value_name = "DIR")]
        output: Option<PathBuf>,
        /// File format with --output.
        #[arg(long, value_enum, default_value = "ndjson")]
        format: Format,
        /// Rows per source batch.
        #[arg(long, default_value_t = 8192)]
        batch_size: usize,
        /// Print no job summary on stderr.
        #[arg(long, short)]
        quiet: bool,
        /// Checkpoint into DIR and resume from its latest checkpoint: a job
        /// killed at any moment and started again with the same arguments
        /// loses and repeats nothing in its file sinks.
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Time between checkpoints (`100ms`, `5s`; default 10s). Needs --state-dir.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        checkpoint_interval: Option<Duration>,
        /// Discard the checkpoints in --state-dir and start afresh.
        #[arg(long, requires = "state_dir")]
        ignore_state: bool,
    },
    /// Print the operator graph SQL compiles to.
    Explain {
        /// `.sql` files, directories, or SQL text.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Set a `${NAME}` parameter: NAME=VALUE.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
    },
    /// Print a built-in generator stream as NDJSON.
    Generate {
        /// orders, payments or devices.
        #[arg(long)]
        stream: String,
        /// Background events per second of event time.
        #[arg(long, default_value_t = 2)]
        rate: u32,
        /// Random seed; the same seed gives the same bytes.
        #[arg(long, default_value_t = 7)]
        seed: u64,
        /// Rows to print (default: the 60-second reference scenario).
        #[arg(long)]
        count: Option<u64>,
        /// Pace the output so that event time advances with the wall clock.
        #[arg(long)]
        realtime: bool,
    },
    /// Benchmark drivers (see bench/).
    Bench {
        /// Which benchmark: window or join.
        #[arg(value_parser = ["window", "join"])]
        name: String,
        /// eddy or datafusion.
        #[arg(long)]
        engine: String,
        /// NDJSON input file (window).
        #[arg(long, required_if_eq("name", "window"))]
        input: Option<PathBuf>,
        /// NDJSON orders file (join).
        #[arg(long, required_if_eq("name", "join"))]
        orders: Option<PathBuf>,
        /// NDJSON payments file (join).
        #[arg(long, required_if_eq("name", "join"))]
        payments: Option<PathBuf>,
        /// Rows per batch.
        #[arg(long, default_value_t = 8192)]
        batch_size: usize,
        /// Checkpoint into DIR (a fresh directory each run).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Time between checkpoints.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "state_dir")]
        checkpoint_interval: Option<Duration>,
    },
}

fn parse_duration(text: &str) -> std::result::Result<Duration, String> {
    eddy_engine::time::parse_duration(text)
}

/// Ctrl-C (or SIGTERM) once stops the job gracefully: a final checkpoint,
/// sinks committed. A second Ctrl-C cancels it.
fn stop_on_signals(handle: &JobHandle) {
    static SIGNALS: AtomicU32 = AtomicU32::new(0);
    let handle = handle.clone();
    let installed = ctrlc::set_handler(move || {
        if SIGNALS.fetch_add(1, Ordering::SeqCst) == 0 {
            eprintln!("stopping: committing output (and taking a final checkpoint with --state-dir); interrupt again to cancel");
            handle.stop();
        } else {
            eprintln!("cancelling");
            handle.cancel();
        }
    });
    if let Err(e) = installed {
        tracing::warn!("cannot handle Ctrl-C: {e}");
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_env("EDDY_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
    match execute(Cli::parse().command) {
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

fn execute(command: Command) -> Result<()> {
    match command {
        Command::Run {
            paths,
            set,
            input,
            output,
            format,
            batch_size,
            quiet,
            state_dir,
            checkpoint_interval,
            ignore_state,
        } => {
            if batch_size == 0 {
                return Err(CliError::Usage("--batch-size must be at least 1".into()));
            }
            let checkpoints = match (state_dir, checkpoint_interval) {
                (None, Some(_)) => {
                    return Err(CliError::Usage(
                        "--checkpoint-interval needs --state-dir".into(),
                    ))
                }
                (None, None) => None,
                (Some(dir), interval) => Some(CheckpointConfig {
                    state_dir: dir,
                    interval: interval.unwrap_or(DEFAULT_INTERVAL),
                    ignore_state,
                }),
            };
            let files = job::load_sql(&paths)?;
            let params = job::parse_pairs(&set, "--set")?;
            let config = ConnectorConfig {
                inputs: job::parse_pairs(&input, "--input")?,
                output_dir: output,
                output_format: match format {
                    Format::Ndjson => OutputFormat::Ndjson,
                    Format::Parquet => OutputFormat::Parquet,
                },
                batch_size,
                ..ConnectorConfig::default()
            };
            let handle = job::start(&files, &params, config, &JobConfig { checkpoints })?;
            stop_on_signals(&handle);
            let report = handle.wait()?;
            if !quiet || report.already_finished.is_some() {
                eprintln!("{}", job::summary(&report));
            }
            Ok(())
        }
        Command::Explain { paths, set } => {
            let files = job::load_sql(&paths)?;
            let params = job::parse_pairs(&set, "--set")?;
            let compiled = job::compile_files(&files, &params)?;
            print!("{}", compiled.graph.explain());
            Ok(())
        }
        Command::Generate {
            stream,
            rate,
            seed,
            count,
            realtime,
        } => {
            let stdout = std::io::stdout();
            let mut out = std::io::BufWriter::new(stdout.lock());
            generate::generate(&stream, seed, rate, count, realtime, &mut out)
        }
        Command::Bench {
            name,
            engine,
            input,
            orders,
            payments,
            batch_size,
            state_dir,
            checkpoint_interval,
        } => {
            let job = JobConfig {
                checkpoints: state_dir.map(|dir| CheckpointConfig {
                    state_dir: dir,
                    interval: checkpoint_interval.unwrap_or(DEFAULT_INTERVAL),
                    ignore_state: true,
                }),
            };
            let line = match (name.as_str(), input, orders, payments) {
                ("window", Some(input), _, _) => bench::window(&engine, &input, batch_size, &job)?,
                ("join", _, Some(orders), Some(payments)) => {
                    bench::join(&engine, &orders, &payments, batch_size)?
                }
                _ => {
                    return Err(CliError::Usage(
                        "window needs --input; join needs --orders and --payments".into(),
                    ))
                }
            };
            println!("{line}");
            Ok(())
        }
    }
}
