//! `eddy bench`: the benchmark drivers of `bench/` (window, hop, join,
//! the pipeline's batch baseline, the API under load).
//!
//! In: the command's arguments. Out: one JSON line of figures on stdout.

use eddy_cli::{bench, CliError, Result};
use eddy_engine::checkpoint::{CheckpointConfig, DEFAULT_INTERVAL};
use eddy_engine::parallel::machine_cores;
use eddy_engine::runtime::JobConfig;

use super::run::chosen_parallelism;
use crate::args::BenchArgs;

/// Runs one benchmark and prints its figures.
pub(crate) fn bench(args: BenchArgs) -> Result<()> {
    let BenchArgs {
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
        full_checkpoints,
        no_chaining,
        workers,
        clients,
        seconds,
        server,
    } = args;
    let job = JobConfig {
        checkpoints: state_dir.map(|dir| CheckpointConfig {
            state_dir: dir,
            interval: checkpoint_interval.unwrap_or(DEFAULT_INTERVAL),
            ignore_state: true,
            incremental: !full_checkpoints,
        }),
        parallelism: chosen_parallelism(parallelism, machine_cores()),
        disable_chaining: no_chaining,
        pool: super::worker_pool(workers)?,
        ..JobConfig::default()
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
