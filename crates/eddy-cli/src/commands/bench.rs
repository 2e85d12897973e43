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
        output,
        query,
        against,
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
        rounds,
        clients,
        seconds,
        server,
        protocol,
        pg,
        view,
        key_column,
        keys,
        qps,
    } = args;
    let job = JobConfig {
        checkpoints: state_dir.map(|dir| CheckpointConfig {
            state_dir: dir,
            interval: checkpoint_interval.unwrap_or(DEFAULT_INTERVAL),
            ignore_state: true,
            incremental: !full_checkpoints,
            replica: None,
        }),
        parallelism: chosen_parallelism(parallelism, machine_cores()),
        disable_chaining: no_chaining,
        pool: super::worker_pool(workers)?,
        ..JobConfig::default()
    };
    if name == "views" {
        let load = bench::views::ViewLoad {
            protocol,
            pg,
            server: server.url.clone(),
            token: server.token.clone().filter(|t| !t.is_empty()),
            view,
            key_column,
            keys,
            qps,
            clients,
            seconds,
        };
        println!("{}", bench::views::views(&load)?);
        return Ok(());
    }
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
    let results = match &output {
        Some(path) => bench::Results::Ndjson(path),
        None => bench::Results::Nowhere,
    };
    let line = match (name.as_str(), input, orders, payments) {
        ("compare", _, _, _) => {
            let query = query.as_deref().and_then(bench::Query::named);
            match (query, &output, &against) {
                (Some(query), Some(a), Some(b)) => bench::compare(query, a, b)?,
                _ => {
                    return Err(CliError::Usage(
                        "compare needs --query, --output and --against".into(),
                    ))
                }
            }
        }
        ("decode", Some(input), _, _) => bench::decode(
            &input,
            batch_size.unwrap_or(eddy_connectors::DEFAULT_BATCH_SIZE),
            rounds,
        )?,
        ("window" | "hop" | "over", Some(input), _, _) => bench::run(
            bench::Query::named(&name).unwrap_or(bench::Query::Tumble),
            &engine,
            bench::Inputs::Orders(&input),
            batch_size,
            results,
            &job,
        )?,
        ("join", _, Some(orders), Some(payments)) => bench::run(
            bench::Query::Join,
            &engine,
            bench::Inputs::OrdersAndPayments(&orders, &payments),
            batch_size,
            results,
            &job,
        )?,
        ("pipeline", _, Some(orders), Some(payments)) => {
            if engine != "datafusion" {
                return Err(CliError::Usage(
                    "bench pipeline runs the batch baseline (--engine datafusion); eddy's side is `eddy run queries/`".into(),
                ));
            }
            let devices = devices.ok_or_else(|| {
                CliError::Usage("pipeline needs --devices".into())
            })?;
            bench::pipeline_batch(&orders, &payments, &devices, batch_size, output.as_deref())?
        }
        _ => {
            return Err(CliError::Usage(
                "window, hop, over and decode need --input; join needs --orders and --payments; pipeline also --devices".into(),
            ))
        }
    };
    println!("{line}");
    Ok(())
}
