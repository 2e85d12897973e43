//! The `eddy` command line: `run`, `serve` and its clients (`submit`,
//! `jobs`, `job`, `stop`, `health`), `explain`, `generate`, `bench`.

use std::path::PathBuf;
use std::process::ExitCode;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use eddy_cli::client::{self, Client};
use eddy_cli::{bench, generate, job, CliError, Result};
use eddy_connectors::{ConnectorConfig, OutputFormat};
use eddy_engine::checkpoint::{CheckpointConfig, DEFAULT_INTERVAL};
use eddy_engine::parallel::{machine_cores, Parallelism};
use eddy_engine::runtime::{JobConfig, JobHandle};
use eddy_engine::EngineError;
use tracing_subscriber::EnvFilter;

/// mimalloc: operator state is many small rows that come and go (a join
/// side, a multiset), where the system allocator spent as long as the
/// operators themselves.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

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
        #[arg(long, default_value_t = eddy_connectors::DEFAULT_BATCH_SIZE)]
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
        /// Scale out: join this Kafka consumer group and run the tasks (one
        /// per partition number of the job's topics) the group assigns to
        /// this process; every process of the group shares --state-dir.
        #[arg(long, value_name = "NAME", requires = "state_dir")]
        group: Option<String>,
        /// With --group: how long a silent process keeps its partitions
        /// before the group gives them to the others.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "6s", requires = "group")]
        session_timeout: Duration,
        /// Run each keyed operator (windows, joins, OVER, Top-N) as N
        /// instances, each owning the keys that hash to it; the results
        /// are the same for every N. Default: one per core, or, resuming
        /// a checkpoint, the N it was taken with (with --group: one per
        /// task, the tasks being the group's parallel units).
        #[arg(long, value_name = "N", env = "EDDY_PARALLELISM", value_parser = clap::value_parser!(u16).range(1..=256))]
        parallelism: Option<u16>,
    },
    /// Run the job server: an HTTP API (and, later, a web page) to submit
    /// and watch jobs; jobs checkpoint and survive restarts.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: std::net::SocketAddr,
        /// Jobs' sources read files below this directory only.
        #[arg(long, value_name = "DIR", default_value = ".")]
        data_root: PathBuf,
        /// Jobs' sinks write below this directory only.
        #[arg(long, value_name = "DIR", default_value = "eddy-output")]
        output_root: PathBuf,
        /// Job definitions and checkpoints.
        #[arg(long, value_name = "DIR", default_value = "eddy-state")]
        state_dir: PathBuf,
        /// Require `Authorization: Bearer TOKEN` on every route but /metrics and /healthz.
        #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
        token: Option<String>,
        /// Time between checkpoints of every job.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
        checkpoint_interval: Duration,
    },
    /// Submit SQL files (or directories of them) to a server as one job.
    Submit {
        /// `.sql` files or directories of `.sql` files.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Set a `${NAME}` parameter: NAME=VALUE.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// The job's name.
        #[arg(long)]
        name: Option<String>,
        /// Instances of each keyed operator (as `eddy run --parallelism`).
        #[arg(long, value_name = "N")]
        parallelism: Option<usize>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List a server's jobs.
    Jobs {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show one job of a server: state, checkpoints, per-node counters.
    Job {
        /// The job's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop a job of a server gracefully (final checkpoint, output committed).
    Stop {
        /// The job's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Check that a server answers (exit 0 when it does).
    Health {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Print the operator graph SQL compiles to.
    Explain {
        /// `.sql` files, directories, or SQL text.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Set a `${NAME}` parameter: NAME=VALUE.
        #[arg(long = "set", value_name = "NAME=VALUE")]
        set: Vec<String>,
        /// Show the graph `eddy run --parallelism N` runs: each keyed
        /// operator's instances, their key splits and union (default: one
        /// per core, as `eddy run`).
        #[arg(long, value_name = "N", env = "EDDY_PARALLELISM", value_parser = clap::value_parser!(u16).range(1..=256))]
        parallelism: Option<u16>,
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
        /// Which benchmark: window, hop, join, pipeline (DataFusion's batch
        /// form of the reference pipeline's stages 10-30; eddy's side is
        /// `eddy run queries/`), or api (load on a running server).
        #[arg(value_parser = ["window", "hop", "join", "pipeline", "api"])]
        name: String,
        /// eddy or datafusion (window, join).
        #[arg(long, default_value = "eddy")]
        engine: String,
        /// NDJSON input file (window, hop).
        #[arg(long, required_if_eq_any([("name", "window"), ("name", "hop")]))]
        input: Option<PathBuf>,
        /// NDJSON orders file (join, pipeline).
        #[arg(long, required_if_eq_any([("name", "join"), ("name", "pipeline")]))]
        orders: Option<PathBuf>,
        /// NDJSON payments file (join, pipeline).
        #[arg(long, required_if_eq_any([("name", "join"), ("name", "pipeline")]))]
        payments: Option<PathBuf>,
        /// NDJSON device events file (pipeline).
        #[arg(long, required_if_eq("name", "pipeline"))]
        devices: Option<PathBuf>,
        /// Rows per batch (default: each engine's own, eddy 2048,
        /// DataFusion 8192).
        #[arg(long)]
        batch_size: Option<usize>,
        /// eddy: instances of each keyed operator (default: one per core,
        /// as `eddy run`).
        #[arg(long, value_name = "N", env = "EDDY_PARALLELISM", value_parser = clap::value_parser!(u16).range(1..=256))]
        parallelism: Option<u16>,
        /// Checkpoint into DIR (a fresh directory each run).
        #[arg(long, value_name = "DIR")]
        state_dir: Option<PathBuf>,
        /// Time between checkpoints.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "state_dir")]
        checkpoint_interval: Option<Duration>,
        /// api: concurrent clients.
        #[arg(long, default_value_t = 20)]
        clients: usize,
        /// api: how long to load the server.
        #[arg(long, default_value_t = 60)]
        seconds: u64,
        /// api: the server.
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Which server a client command talks to.
#[derive(Args, Debug)]
struct ServerArgs {
    /// The server's URL.
    #[arg(
        long = "server",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    url: String,
    /// Its token, if it has one.
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

impl ServerArgs {
    fn client(&self) -> Client {
        Client::new(&self.url, self.token.clone().filter(|t| !t.is_empty()))
    }
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
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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

/// `--parallelism N` when given (or `EDDY_PARALLELISM`), else the
/// checkpoint's N when resuming and `fresh` instances when not.
fn chosen_parallelism(given: Option<u16>, fresh: usize) -> Parallelism {
    match given {
        Some(n) => Parallelism::Fixed(n.into()),
        None => Parallelism::Resumed { fresh },
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
            group,
            session_timeout,
            parallelism,
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
            if let (Some(group), Some(checkpoints)) = (group, checkpoints.clone()) {
                let stop = Arc::new(AtomicBool::new(false));
                let flag = stop.clone();
                if let Err(e) = ctrlc::set_handler(move || {
                    eprintln!("stopping: the tasks take a final checkpoint and the group hands their partitions on");
                    flag.store(true, Ordering::SeqCst);
                }) {
                    tracing::warn!("cannot handle Ctrl-C: {e}");
                }
                let report = eddy_cli::group::run_group(
                    &files,
                    &params,
                    config,
                    &eddy_cli::group::GroupConfig {
                        group,
                        checkpoints,
                        session_timeout,
                        parallelism: chosen_parallelism(parallelism, 1),
                    },
                    stop,
                )?;
                if !quiet {
                    for (task, report) in &report.tasks {
                        eprintln!("task-{task}:\n{}", job::summary(report));
                    }
                }
                return Ok(());
            }
            let handle = job::start(
                &files,
                &params,
                config,
                &JobConfig {
                    checkpoints,
                    parallelism: chosen_parallelism(parallelism, machine_cores()),
                },
            )?;
            stop_on_signals(&handle);
            let report = handle.wait()?;
            if !quiet || report.already_finished.is_some() {
                eprintln!("{}", job::summary(&report));
            }
            Ok(())
        }
        Command::Serve {
            addr,
            data_root,
            output_root,
            state_dir,
            token,
            checkpoint_interval,
        } => {
            for dir in [&output_root, &state_dir] {
                std::fs::create_dir_all(dir).map_err(|source| CliError::Io {
                    path: dir.display().to_string(),
                    source,
                })?;
            }
            if !data_root.is_dir() {
                return Err(CliError::Usage(format!(
                    "--data-root {}: no such directory",
                    data_root.display()
                )));
            }
            let config = eddy_server::ServerConfig {
                addr,
                token: token.filter(|t| !t.is_empty()),
                checkpoint_interval,
                ..eddy_server::ServerConfig::new(data_root, output_root, state_dir)
            };
            let (data, output, state) = (
                config.data_root.display().to_string(),
                config.output_root.display().to_string(),
                config.state_dir.display().to_string(),
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
                eprintln!("eddy serving on http://{bound} (data root {data}, output root {output}, state in {state})");
            }, shutdown))?;
            Ok(())
        }
        Command::Submit {
            paths,
            set,
            name,
            parallelism,
            server,
        } => {
            let files = job::load_sql(&paths)?;
            let sql = files
                .iter()
                .map(|f| f.text.as_str())
                .collect::<Vec<_>>()
                .join("\n;\n");
            println!(
                "{}",
                client::submit(
                    &server.client(),
                    name,
                    sql,
                    job::parse_pairs(&set, "--set")?,
                    parallelism
                )?
            );
            Ok(())
        }
        Command::Jobs { server } => {
            println!("{}", client::jobs(&server.client())?);
            Ok(())
        }
        Command::Job { id, server } => {
            println!("{}", client::job(&server.client(), &id)?);
            Ok(())
        }
        Command::Stop { id, server } => {
            println!("{}", client::stop(&server.client(), &id)?);
            Ok(())
        }
        Command::Health { server } => {
            server.client().get("/healthz")?;
            println!("ok");
            Ok(())
        }
        Command::Explain {
            paths,
            set,
            parallelism,
        } => {
            let files = job::load_sql(&paths)?;
            let params = job::parse_pairs(&set, "--set")?;
            let compiled = job::compile_files(&files, &params)?;
            let graph = eddy_engine::parallel::expand(
                &compiled.graph,
                parallelism.map_or_else(machine_cores, usize::from),
            );
            print!("{}", graph.explain());
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
            devices,
            batch_size,
            parallelism,
            state_dir,
            checkpoint_interval,
            clients,
            seconds,
            server,
        } => {
            let job = JobConfig {
                checkpoints: state_dir.map(|dir| CheckpointConfig {
                    state_dir: dir,
                    interval: checkpoint_interval.unwrap_or(DEFAULT_INTERVAL),
                    ignore_state: true,
                }),
                parallelism: chosen_parallelism(parallelism, machine_cores()),
            };
            if name == "api" {
                println!(
                    "{}",
                    bench::api(
                        &server.url,
                        server.token.clone().filter(|t| !t.is_empty()),
                        clients,
                        seconds
                    )?
                );
                return Ok(());
            }
            let line = match (name.as_str(), input, orders, payments) {
                ("window", Some(input), _, _) => bench::window(
                    bench::WindowQuery::Tumble,
                    &engine,
                    &input,
                    batch_size,
                    &job,
                )?,
                ("hop", Some(input), _, _) => {
                    bench::window(bench::WindowQuery::Hop, &engine, &input, batch_size, &job)?
                }
                ("join", _, Some(orders), Some(payments)) => {
                    bench::join(&engine, &orders, &payments, batch_size, &job)?
                }
                ("pipeline", _, Some(orders), Some(payments)) => {
                    if engine != "datafusion" {
                        return Err(CliError::Usage(
                            "bench pipeline runs the batch baseline (--engine datafusion); eddy's side is `eddy run queries/`".into(),
                        ));
                    }
                    let devices = devices.ok_or_else(|| {
                        CliError::Usage("pipeline needs --devices".into())
                    })?;
                    bench::pipeline_batch(&orders, &payments, &devices, batch_size)?
                }
                _ => {
                    return Err(CliError::Usage(
                        "window and hop need --input; join needs --orders and --payments; pipeline also --devices".into(),
                    ))
                }
            };
            println!("{line}");
            Ok(())
        }
    }
}
