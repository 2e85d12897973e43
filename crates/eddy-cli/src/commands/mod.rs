//! The commands: [`execute`] runs the one parsed from the command line.
//! `run`, `serve` and `bench` have a module each; the server's clients
//! (`submit`, `jobs`, `job`, `stop`, `health`), `connectors`, `explain` and
//! `generate`
//! are a call each, here.
//!
//! In: a parsed [`Command`]. Out: what the command prints; an error for
//! `main` to report.

mod bench;
mod run;
mod serve;

use eddy_cli::client;
use eddy_cli::{generate, job, Result};
use eddy_engine::parallel::machine_cores;

use crate::args::Command;

/// Runs `command`.
pub(crate) fn execute(command: Command) -> Result<()> {
    match command {
        Command::Run(args) => run::run(args),
        Command::Serve(args) => serve::serve(args),
        Command::Bench(args) => bench::bench(args),
        Command::Submit {
            paths,
            set,
            name,
            parallelism,
            group,
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
                    }
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
