//! The commands: [`execute`] runs the one parsed from the command line.
//! `run`, `serve`, `bench` and `sql` (the shell) have a module each; the server's clients
//! (`submit`, `jobs`, `job`, `stop`, `health`), `savepoint`, `connectors`,
//! `explain` and `generate` are a call each, here.
//!
//! In: a parsed [`Command`]. Out: what the command prints; an error for
//! `main` to report.

mod bench;
mod run;
mod serve;
mod sql_shell;
mod state_location;

use eddy_cli::client;
use eddy_cli::{generate, job, Result};
use eddy_engine::parallel::machine_cores;

use crate::args::Command;

/// Runs `command`.
pub(crate) fn execute(command: Command) -> Result<()> {
    match command {
        Command::Run(args) => run::run(args),
        Command::Serve(args) => serve::serve(args),
        Command::Sql(args) => sql_shell::shell(args),
        Command::Bench(args) => bench::bench(args),
        Command::Submit {
            paths,
            set,
            name,
            parallelism,
            group,
            from_savepoint,
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
                    client::Submission {
                        name,
                        sql,
                        params: job::parse_pairs(&set, "--set")?,
                        parallelism,
                        group,
                        from_savepoint,
                    }
                )?
            );
            Ok(())
        }
        Command::Savepoint {
            state_dir,
            dest,
            sql,
            name,
        } => {
            let files = if sql.is_empty() {
                Vec::new()
            } else {
                job::load_sql(&sql)?
            };
            if eddy_connectors::storage::is_bucket(&state_dir.to_string_lossy()) {
                return Err(eddy_cli::CliError::Usage(
                    "eddy savepoint reads a local --state-dir so far; a bucket's checkpoints are resumed by `eddy run --state-dir` itself".into(),
                ));
            }
            let store = eddy_engine::checkpoint::store::StateDir::open(&state_dir)?;
            let savepoint = store.savepoint(
                &dest,
                name.as_deref(),
                files
                    .into_iter()
                    .map(|f| eddy_engine::checkpoint::savepoint::SavepointSql {
                        name: f.name,
                        text: f.text,
                    })
                    .collect(),
            )?;
            let info = savepoint.info();
            println!(
                "savepoint {}: checkpoint {} ({:?}) of {} instance(s), {} key groups, {} bytes",
                dest.display(),
                info.checkpoint,
                info.kind,
                info.parallelism,
                info.key_groups,
                info.bytes
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
        Command::Stop {
            id,
            savepoint,
            server,
        } => {
            println!("{}", client::stop(&server.client(), &id, savepoint)?);
            Ok(())
        }
        Command::Health { server } => {
            server.client().get("/healthz")?;
            println!("ok");
            Ok(())
        }
        Command::Connectors => {
            print!("{}", eddy_connectors::Registry::standard().reference());
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
            let graph = eddy_engine::distribute::instances::expand(
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
    }
}

/// The worker pool `--workers N` asks for; `None` (no flag): the engine's
/// shared pool of one worker per core.
fn worker_pool(
    workers: Option<u16>,
) -> Result<Option<std::sync::Arc<eddy_engine::runtime::WorkerPool>>> {
    Ok(match workers {
        Some(n) => Some(eddy_engine::runtime::WorkerPool::new(usize::from(n))?),
        None => None,
    })
}
