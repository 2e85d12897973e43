//! The command line's shape: every command and its arguments (clap), as
//! `main` parses them.
//!
//! In: the process's arguments. Out: a [`Cli`] holding one [`Command`].

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use eddy_cli::client::Client;

/// eddy: a streaming SQL engine on DataFusion and Arrow.
#[derive(Parser, Debug)]
#[command(name = "eddy", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
pub(crate) enum Format {
    Ndjson,
    Parquet,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Run SQL files (or directories of them) as one streaming job.
    Run(RunArgs),
    /// Run the job server: an HTTP API and a web console to submit and
    /// watch jobs; jobs checkpoint and survive restarts.
    Serve(ServeArgs),
    /// An interactive SQL shell: define tables and views, watch a SELECT's
    /// result update in place, start and stop INSERT jobs.
    Sql(SqlArgs),
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
        /// Scale out: run the job as a member of this Kafka consumer group
        /// (as `eddy run --group`); the servers (and processes) of a group
        /// share its tasks and must share --group-state-dir.
        #[arg(long, value_name = "NAME")]
        group: Option<String>,
        /// Start from this savepoint of the server (`eddy stop --savepoint`).
        #[arg(long, value_name = "ID")]
        from_savepoint: Option<String>,
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
    /// Copy the newest checkpoint of a state directory into a savepoint:
    /// a self-describing copy of the job's state, kept whatever becomes of
    /// the directory, that `eddy run --from-savepoint` starts a job from
    /// (at any --parallelism up to its key groups). Take it after the job
    /// stopped (Ctrl-C or SIGTERM: a final checkpoint), or from a running
    /// job's last checkpoint.
    Savepoint {
        /// The job's --state-dir.
        #[arg(long, value_name = "DIR")]
        state_dir: PathBuf,
        /// Where to write the savepoint (a new or empty directory).
        dest: PathBuf,
        /// The job's SQL files or directories, recorded in the savepoint.
        #[arg(long = "sql", value_name = "PATH")]
        sql: Vec<PathBuf>,
        /// A name for the job, recorded in the savepoint.
        #[arg(long)]
        name: Option<String>,
    },
    /// Stop a job of a server gracefully (final checkpoint, output committed).
    Stop {
        /// The job's id.
        id: String,
        /// Keep a savepoint of the final checkpoint (the server lists it;
        /// `eddy submit --from-savepoint ID` starts a job from it).
        #[arg(long)]
        savepoint: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Check that a server answers (exit 0 when it does).
    Health {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Print every connector and the options it takes as a source and as
    /// a sink (Markdown; docs/CONNECTORS.md is this output).
    Connectors,
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
    Bench(BenchArgs),
}

/// The arguments of `eddy run`.
#[derive(Args, Debug)]
pub(crate) struct RunArgs {
    /// `.sql` files or directories of `.sql` files.
    #[arg(required = true)]
    pub(crate) paths: Vec<PathBuf>,
    /// Set a `${NAME}` parameter: NAME=VALUE.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub(crate) set: Vec<String>,
    /// Read a source table from an NDJSON file (`-` = stdin): TABLE=PATH.
    #[arg(long = "input", value_name = "TABLE=PATH")]
    pub(crate) input: Vec<String>,
    /// Write every sink to DIR/<sink>.ndjson (or Parquet under DIR/<sink>/).
    #[arg(long, value_name = "DIR")]
    pub(crate) output: Option<PathBuf>,
    /// File format with --output.
    #[arg(long, value_enum, default_value = "ndjson")]
    pub(crate) format: Format,
    /// Rows per source batch.
    #[arg(long, default_value_t = eddy_connectors::DEFAULT_BATCH_SIZE)]
    pub(crate) batch_size: usize,
    /// Print no job summary on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// Checkpoint into DIR and resume from its latest checkpoint: a job
    /// killed at any moment and started again with the same arguments
    /// loses and repeats nothing in its file sinks.
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Time between checkpoints (`100ms`, `5s`; default 10s). Needs --state-dir.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) checkpoint_interval: Option<Duration>,
    /// Discard the checkpoints in --state-dir and start afresh.
    #[arg(long, requires = "state_dir")]
    pub(crate) ignore_state: bool,
    /// Write every state table whole at every checkpoint. By default a
    /// table of rows by key (an updating aggregate's groups, a change
    /// feed's or upsert source's current rows) is written
    /// as the keys that changed since the previous checkpoint, and whole
    /// every 8th checkpoint.
    #[arg(long, requires = "state_dir")]
    pub(crate) full_checkpoints: bool,
    /// Scale out: join this Kafka consumer group and run the tasks (one
    /// per partition number of the job's topics) the group assigns to
    /// this process; every process of the group shares --state-dir (a
    /// bucket prefix, s3://..., where they share no disk).
    #[arg(long, value_name = "NAME", requires = "state_dir")]
    pub(crate) group: Option<String>,
    /// With --group: how long a silent process keeps its partitions
    /// before the group gives them to the others.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "6s", requires = "group")]
    pub(crate) session_timeout: Duration,
    /// Run each keyed operator (windows, joins, OVER, Top-N) as N
    /// instances, each owning the keys that hash to it; the results
    /// are the same for every N. Default: one per core, or, resuming
    /// a checkpoint, the N it was taken with (with --group: one per
    /// task, the tasks being the group's parallel units).
    #[arg(long, value_name = "N", env = "EDDY_PARALLELISM", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) parallelism: Option<u16>,
    /// Start from this savepoint (`eddy savepoint`, or a server's) rather
    /// than afresh. With --state-dir the directory must hold no checkpoints
    /// but those taken since the job started from this savepoint (a
    /// restart then resumes from them).
    #[arg(long, value_name = "DIR")]
    pub(crate) from_savepoint: Option<PathBuf>,
    /// Resume a changed query even when some of the checkpoint's state
    /// has no place in it (a removed query, a changed window), dropping
    /// that state; without it such a resume is refused, naming the
    /// operators. Unchanged operators keep their state either way; new
    /// ones start afresh.
    #[arg(long)]
    pub(crate) allow_dropped_state: bool,
    /// The most instances the job may ever run with: its keyed state is
    /// spread in this many key groups, fixed when it first runs (kept in
    /// its checkpoints), so that it can resume at any --parallelism up to
    /// it. Default: 128, or 1.5 times --parallelism rounded up to a power
    /// of two when that is more.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=32768))]
    pub(crate) max_parallelism: Option<u16>,
    /// Hold the job's operator state in memory to SIZE (`512MiB`, `4GB`):
    /// an operator that reaches it moves state to disk (--spill-dir) and
    /// goes on; one that cannot spill fails the job, naming the operator
    /// holding most, rather than let the process run out of memory. With
    /// --group: a budget per task. Each Python function worker's address
    /// space is held to SIZE too.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) memory_limit: Option<u64>,
    /// Where state past --memory-limit is spilled (a fresh directory under
    /// DIR, removed when the job ends). Default: `spill` under a local
    /// --state-dir, else the system's temporary directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) spill_dir: Option<PathBuf>,
    /// Fail the job when its spilled state takes more than SIZE on disk.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) spill_disk_limit: Option<u64>,
    /// Directories `CREATE FUNCTION ... AS 'module:function'` imports
    /// Python modules from (repeat the flag, or separate with ':').
    #[arg(long, value_name = "DIR", env = "EDDY_UDF_PATH", value_delimiter = ':')]
    pub(crate) udf_path: Vec<PathBuf>,
    /// Run every operator as a task of its own, with a channel on every
    /// edge, instead of chaining operators that need no channel between
    /// them into one task (`eddy explain` lists the tasks). For
    /// comparison, and for seeing which operator of a task is slow.
    #[arg(long)]
    pub(crate) no_chaining: bool,
    /// Worker threads the job's tasks run on (default: one per core).
    #[arg(long, value_name = "N", env = "EDDY_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
}

/// A byte size (`512MiB`, `4GB`).
fn parse_size(text: &str) -> Result<u64, eddy_engine::memory::SizeError> {
    eddy_engine::memory::parse_bytes(text)
}

/// The arguments of `eddy sql`.
#[derive(Args, Debug)]
pub(crate) struct SqlArgs {
    /// Set a `${NAME}` parameter: NAME=VALUE.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub(crate) set: Vec<String>,
    /// Where INSERT jobs' file sinks write.
    #[arg(long, value_name = "DIR", default_value = "eddy-output")]
    pub(crate) output: PathBuf,
    /// Rows a live result table shows (the latest).
    #[arg(long, default_value_t = 20)]
    pub(crate) rows: usize,
    /// The history file (default: ~/.eddy_history).
    #[arg(long, value_name = "FILE")]
    pub(crate) history: Option<PathBuf>,
    /// Run statements on this `eddy serve` instead of in this process:
    /// INSERT submits a job there, SELECT runs there and its rows are
    /// tailed here, SHOW JOBS and STOP JOB are the server's.
    #[arg(long = "server", value_name = "URL")]
    pub(crate) server: Option<String>,
    /// The server's token, if it has one.
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true, requires = "server")]
    pub(crate) token: Option<String>,
}

/// The arguments of `eddy serve`.
#[derive(Args, Debug)]
pub(crate) struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub(crate) addr: std::net::SocketAddr,
    /// Jobs' sources read files below this directory only.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub(crate) data_root: PathBuf,
    /// Jobs' sinks write below this directory only.
    #[arg(long, value_name = "DIR", default_value = "eddy-output")]
    pub(crate) output_root: PathBuf,
    /// Job definitions, checkpoints and savepoints: a directory, or a
    /// bucket prefix (s3://...) that a server started elsewhere resumes
    /// the jobs from.
    #[arg(long, value_name = "DIR", default_value = "eddy-state")]
    pub(crate) state_dir: PathBuf,
    /// The checkpoints of group jobs (submitted with a group), one
    /// directory per group, shared by every server of the group: a bucket
    /// prefix (s3://...) for servers that share no disk (default:
    /// STATE_DIR/groups).
    #[arg(long, value_name = "DIR")]
    pub(crate) group_state_dir: Option<PathBuf>,
    /// Require `Authorization: Bearer TOKEN` on every route but /metrics and /healthz.
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
    /// Time between checkpoints of every job.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "10s")]
    pub(crate) checkpoint_interval: Duration,
    /// A budget for the operator state of all jobs together (`8GiB`): the
    /// job whose state passes it fails, naming its operator holding most.
    /// A job may also have its own (`memory_limit` when submitted).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) memory_limit: Option<u64>,
    /// Let submitted jobs declare Python functions (CREATE FUNCTION ...
    /// LANGUAGE PYTHON). Their code runs in worker processes as this
    /// server's user: modules only from below --data-root, each worker
    /// held to its job's memory_limit.
    #[arg(long)]
    pub(crate) allow_python_udfs: bool,
    /// Run every operator of every job as a task of its own instead of
    /// chaining operators into tasks (as `eddy run --no-chaining`).
    #[arg(long)]
    pub(crate) no_chaining: bool,
    /// Worker threads the tasks of every job run on, shared by all jobs
    /// (default: one per core).
    #[arg(long, value_name = "N", env = "EDDY_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
    /// How the workers are split: `job` (each busy job gets an equal
    /// share, however many tasks it has) or `task` (every task takes
    /// turns, so a job of many tasks gets more).
    #[arg(long, value_name = "job|task", default_value = "job")]
    pub(crate) pool_share: eddy_engine::runtime::Fairness,
    /// The most jobs running at once; a submission beyond is refused
    /// (HTTP 429) until one ends. Default: no cap.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_jobs: Option<u32>,
    /// The memory budget of each job submitted without a memory_limit of
    /// its own (`512MiB`, `4GB`): its operator state past SIZE fails it,
    /// naming the operator holding most. Default: none (only
    /// --memory-limit, the server's, holds it).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) job_memory_limit: Option<u64>,
    /// Where jobs spill operator state past their memory budgets (each
    /// job a fresh directory under DIR, removed when it ends). Default:
    /// `spill` under --state-dir.
    #[arg(long, value_name = "DIR")]
    pub(crate) spill_dir: Option<PathBuf>,
    /// Fail a job when its spilled state takes more than SIZE on disk.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub(crate) spill_disk_limit: Option<u64>,
    /// Also speak the PostgreSQL wire protocol here (`127.0.0.1:5432`):
    /// psql, drivers and BI tools create materialized views and query
    /// them, with the --token as password.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) pg_addr: Option<std::net::SocketAddr>,
    /// A PEM certificate chain for TLS on --pg-addr (with --pg-tls-key).
    #[arg(long, value_name = "FILE", requires_all = ["pg_addr", "pg_tls_key"])]
    pub(crate) pg_tls_cert: Option<PathBuf>,
    /// The certificate's PKCS#8 PEM key.
    #[arg(long, value_name = "FILE", requires = "pg_tls_cert")]
    pub(crate) pg_tls_key: Option<PathBuf>,
    /// How fresh materialized views are: their jobs checkpoint this often
    /// (a view is read as of its latest completed checkpoint).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    pub(crate) view_refresh: Duration,
}

/// The arguments of `eddy bench`.
#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// Which benchmark: window, hop, join, over (running statistics per
    /// customer), pipeline (DataFusion's batch
    /// form of the reference pipeline's stages 10-30; eddy's side is
    /// `eddy run queries/`), api (load on a running server), views (point
    /// queries on a server's materialized view), or compare
    /// (two engines' results of --query, in --output and --against, by
    /// value), or decode (eddy's NDJSON source alone on one thread, over
    /// --input, a file of `eddy generate`).
    #[arg(value_parser = ["window", "hop", "join", "over", "pipeline", "api", "compare", "decode", "views"])]
    pub(crate) name: String,
    /// eddy or datafusion (window, hop, join, over), or datafusion-slices (hop:
    /// per-second slices added into windows).
    #[arg(long, default_value = "eddy")]
    pub(crate) engine: String,
    /// Write the results as NDJSON to PATH (window, hop, join; pipeline:
    /// a directory, one file per stage; without it they go nowhere:
    /// eddy's blackhole sink, DataFusion's stream drained).
    #[arg(long, value_name = "PATH")]
    pub(crate) output: Option<PathBuf>,
    /// compare: the query whose results --output and --against hold.
    #[arg(long, value_parser = ["window", "hop", "join", "over"], required_if_eq("name", "compare"))]
    pub(crate) query: Option<String>,
    /// compare: the other engine's results.
    #[arg(
        long,
        value_name = "PATH",
        required_if_eq("name", "compare"),
        requires = "output"
    )]
    pub(crate) against: Option<PathBuf>,
    /// NDJSON input file (window, hop, over, decode).
    #[arg(long, required_if_eq_any([("name", "window"), ("name", "hop"), ("name", "over"), ("name", "decode")]))]
    pub(crate) input: Option<PathBuf>,
    /// NDJSON orders file (join, pipeline).
    #[arg(long, required_if_eq_any([("name", "join"), ("name", "pipeline")]))]
    pub(crate) orders: Option<PathBuf>,
    /// NDJSON payments file (join, pipeline).
    #[arg(long, required_if_eq_any([("name", "join"), ("name", "pipeline")]))]
    pub(crate) payments: Option<PathBuf>,
    /// NDJSON device events file (pipeline).
    #[arg(long, required_if_eq("name", "pipeline"))]
    pub(crate) devices: Option<PathBuf>,
    /// Rows per batch (default: each engine's own, eddy 2048,
    /// DataFusion 8192).
    #[arg(long)]
    pub(crate) batch_size: Option<usize>,
    /// eddy: instances of each keyed operator (default: one per core,
    /// as `eddy run`).
    #[arg(long, value_name = "N", env = "EDDY_PARALLELISM", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(crate) parallelism: Option<u16>,
    /// Checkpoint into DIR (a fresh directory each run).
    #[arg(long, value_name = "DIR")]
    pub(crate) state_dir: Option<PathBuf>,
    /// Time between checkpoints.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, requires = "state_dir")]
    pub(crate) checkpoint_interval: Option<Duration>,
    /// Write every state table whole at every checkpoint (as `eddy run
    /// --full-checkpoints`).
    #[arg(long, requires = "state_dir")]
    pub(crate) full_checkpoints: bool,
    /// eddy: every operator a task of its own (as `eddy run
    /// --no-chaining`).
    #[arg(long)]
    pub(crate) no_chaining: bool,
    /// eddy: worker threads (as `eddy run --workers`).
    #[arg(long, value_name = "N", env = "EDDY_WORKERS", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(crate) workers: Option<u16>,
    /// decode: passes over the input; the fastest is reported.
    #[arg(long, default_value_t = 5)]
    pub(crate) rounds: usize,
    /// api, views: concurrent clients.
    #[arg(long, default_value_t = 20)]
    pub(crate) clients: usize,
    /// api, views: how long to load the server.
    #[arg(long, default_value_t = 60)]
    pub(crate) seconds: u64,
    /// views: ask over `pg` (a prepared statement on --pg) or `http`
    /// (`GET /api/v1/views/{name}?key=` on --server).
    #[arg(long, default_value = "pg")]
    pub(crate) protocol: String,
    /// views: the server's PostgreSQL port.
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) pg: Option<std::net::SocketAddr>,
    /// views: the materialized view queried.
    #[arg(long, default_value = "hot")]
    pub(crate) view: String,
    /// views: its key column (an integer).
    #[arg(long, default_value = "k")]
    pub(crate) key_column: String,
    /// views: keys are drawn at random from 0 to N.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub(crate) keys: u64,
    /// views: queries a second in all, each client its share on a
    /// schedule (0: each client asks again as soon as answered).
    #[arg(long, value_name = "N", default_value_t = 1000)]
    pub(crate) qps: u64,
    /// api: the server.
    #[command(flatten)]
    pub(crate) server: ServerArgs,
}

/// Which server a client command talks to.
#[derive(Args, Debug)]
pub(crate) struct ServerArgs {
    /// The server's URL.
    #[arg(
        long = "server",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    pub(crate) url: String,
    /// Its token, if it has one.
    #[arg(long, env = "EDDY_TOKEN", hide_env_values = true)]
    pub(crate) token: Option<String>,
}

impl ServerArgs {
    pub(crate) fn client(&self) -> Client {
        Client::new(&self.url, self.token.clone().filter(|t| !t.is_empty()))
    }
}

fn parse_duration(text: &str) -> std::result::Result<Duration, eddy_engine::time::DurationError> {
    eddy_engine::time::parse_duration(text)
}
