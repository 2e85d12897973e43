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
pub(crate) mod state_location;

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
                    &eddy_server::views::SubmitRequest {
                        name,
                        sql,
                        params: job::parse_pairs(&set, "--set")?,
                        parallelism,
                        group,
                        from_savepoint,
                        ..Default::default()
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
            // A bucket state directory is read from a working copy, and a
            // bucket destination written locally first, then uploaded.
            let state = state_location::StateLocation::parse(&state_dir)?;
            let store = match &state.replica {
                Some(replica) => eddy_engine::checkpoint::store::StateDir::open_replicated(
                    &state.dir,
                    replica.clone(),
                    false,
                )?,
                None => eddy_engine::checkpoint::store::StateDir::open(&state.dir)?,
            };
            let staging = state_location::WorkingCopy::new("savepoint");
            let to_bucket = eddy_connectors::storage::is_bucket(&dest.to_string_lossy());
            let local_dest = if to_bucket {
                staging.path().join("savepoint")
            } else {
                dest.clone()
            };
            let savepoint = store.savepoint(
                &local_dest,
                name.as_deref(),
                files
                    .into_iter()
                    .map(|f| eddy_engine::checkpoint::savepoint::SavepointSql {
                        name: f.name,
                        text: f.text,
                    })
                    .collect(),
            )?;
            if to_bucket {
                state_location::upload_savepoint(&local_dest, &dest)?;
            }
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
            // The checks `eddy run` makes before it starts: an unknown
            // connector or option is refused here too.
            eddy_engine::graph::ConnectorFactory::check(
                &eddy_connectors::Connectors::new(eddy_connectors::ConnectorConfig::default()),
                &compiled.graph,
            )?;
            let graph = eddy_engine::distribute::physical::PhysicalGraph::for_parallelism(
                std::sync::Arc::new(compiled.graph),
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
