//! `eddy-fuzz`: bounded-time mutation fuzzing of eddy's user-input paths.
//!
//! ```text
//! eddy-fuzz ndjson --seconds 30 --corpus tests/data --out DIR
//! eddy-fuzz sql    --seconds 30 --corpus queries --corpus tests/sql --out DIR
//! ```
//!
//! In: seed files (every line of `.ndjson` files, every `.sql` file) and a
//! seed for the mutator. Out: a line with executions and failures; each
//! failing input is written to `DIR/failure-<target>-<n>` and the exit code
//! is 1. A panic, a broken invariant, or an input taking longer than
//! `--hang-seconds` is a failure. The input being tried is kept in
//! `DIR/current-<target>`, so that an input that kills the process (a stack
//! overflow aborts it) is left behind for `scripts/fuzz.sh` to report.
//! Inputs run on a thread with `--stack-kib` of stack (2 MiB: what eddy
//! serve's planning threads get).

mod mutate;
mod ndjson;
mod sql;

use std::io::{Seek, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};

use mutate::{Mutator, Rng};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Target {
    /// NDJSON decoding and source judging.
    Ndjson,
    /// The SQL front end (parse and plan).
    Sql,
}

#[derive(Debug, Parser)]
#[command(name = "eddy-fuzz", about = "Mutation fuzzing of eddy's input paths")]
struct Args {
    /// What to fuzz.
    target: Target,
    /// How long to run.
    #[arg(long, default_value_t = 30)]
    seconds: u64,
    /// Seed of the mutator (a run is reproduced by its seed).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Files or directories of seed inputs.
    #[arg(long)]
    corpus: Vec<PathBuf>,
    /// Where failing inputs are written.
    #[arg(long, default_value = "target/fuzz")]
    out: PathBuf,
    /// An input running longer than this is a hang.
    #[arg(long, default_value_t = 10)]
    hang_seconds: u64,
    /// Stack of the thread inputs run on.
    #[arg(long, default_value_t = 2048)]
    stack_kib: usize,
}

/// Where the last panic happened.
static LAST_PANIC: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

fn seeds(paths: &[PathBuf], target: Target) -> Vec<Vec<u8>> {
    let mut files = Vec::new();
    for path in paths {
        match std::fs::read_dir(path) {
            Ok(entries) => files.extend(entries.filter_map(|e| e.ok().map(|e| e.path()))),
            Err(_) => files.push(path.clone()),
        }
    }
    files.sort();
    let mut seeds = Vec::new();
    for file in files {
        let Ok(bytes) = std::fs::read(&file) else {
            continue;
        };
        match target {
            Target::Ndjson if file.extension().is_some_and(|e| e == "ndjson") => {
                // A few lines at a time: a seed is a small file.
                for lines in bytes.split(|&b| b == b'\n').collect::<Vec<_>>().chunks(3) {
                    seeds.push(lines.join(&b'\n'));
                }
            }
            Target::Sql if file.extension().is_some_and(|e| e == "sql") => seeds.push(bytes),
            _ => {}
        }
    }
    if let Target::Ndjson = target {
        seeds.extend(ndjson::SEEDS.iter().map(|s| s.as_bytes().to_vec()));
    }
    seeds
}

fn main() {
    let args = Args::parse();
    if let Err(e) = std::fs::create_dir_all(&args.out) {
        eprintln!("eddy-fuzz: {}: {e}", args.out.display());
        std::process::exit(2);
    }
    let name = match args.target {
        Target::Ndjson => "ndjson",
        Target::Sql => "sql",
    };
    let seeds = seeds(&args.corpus, args.target);
    let mutator = match args.target {
        Target::Ndjson => Mutator::new(seeds.clone(), ndjson::DICTIONARY, 1 << 20),
        Target::Sql => Mutator::new(seeds.clone(), sql::DICTIONARY, 256 << 10),
    };
    // Watchdog: the iteration counter must move.
    let progress = Arc::new(AtomicU64::new(0));
    let started = Arc::new(AtomicU64::new(0));
    {
        let (progress, started) = (progress.clone(), started.clone());
        let hang = Duration::from_secs(args.hang_seconds);
        let current = args.out.join(format!("current-{name}"));
        std::thread::spawn(move || {
            let mut last = (u64::MAX, Instant::now());
            loop {
                std::thread::sleep(Duration::from_millis(200));
                let now = progress.load(Ordering::Relaxed);
                if now != last.0 {
                    last = (now, Instant::now());
                } else if started.load(Ordering::Relaxed) > now && last.1.elapsed() > hang {
                    eprintln!(
                        "eddy-fuzz {name}: HANG: input {} ran over {hang:?}; it is in {}",
                        now + 1,
                        current.display()
                    );
                    std::process::exit(3);
                }
            }
        });
    }
    // Panics are caught per input; remember where each happened.
    std::panic::set_hook(Box::new(|info| {
        if let (Ok(mut last), Some(at)) = (LAST_PANIC.lock(), info.location()) {
            *last = at.to_string();
        }
    }));
    let out = args.out.clone();
    let seconds = args.seconds;
    let seed = args.seed;
    let target = args.target;
    let worker = std::thread::Builder::new()
        .name("fuzz".into())
        .stack_size(args.stack_kib * 1024)
        .spawn(move || {
            let tables = match target {
                Target::Ndjson => ndjson::tables(),
                Target::Sql => Vec::new(),
            };
            let mut current = std::fs::File::create(out.join(format!("current-{name}"))).ok();
            let mut rng = Rng::new(seed);
            let deadline = Instant::now() + Duration::from_secs(seconds);
            let (mut executions, mut failures) = (0u64, 0u64);
            // Seeds first, as they are; then mutations.
            let mut pending: Vec<Vec<u8>> = seeds;
            while Instant::now() < deadline {
                let input = pending.pop().unwrap_or_else(|| mutator.input(&mut rng));
                if let Some(file) = current.as_mut() {
                    let _ = file.rewind();
                    let _ = file.set_len(0);
                    let _ = file.write_all(&input);
                }
                started.fetch_add(1, Ordering::Relaxed);
                let mut check_rng = Rng::new(rng.next_u64());
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match target {
                        Target::Ndjson => ndjson::check(&tables, &input, &mut check_rng),
                        Target::Sql => sql::check(&input),
                    }));
                let failure = match result {
                    Ok(Ok(())) => None,
                    Ok(Err(broken)) => Some(broken),
                    Err(panic) => Some(format!(
                        "panic at {}: {}",
                        LAST_PANIC.lock().map(|l| l.clone()).unwrap_or_default(),
                        panic
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default()
                    )),
                };
                executions += 1;
                progress.store(executions, Ordering::Relaxed);
                if let Some(failure) = failure {
                    failures += 1;
                    let path = out.join(format!("failure-{name}-{failures}"));
                    let _ = std::fs::write(&path, &input);
                    eprintln!("eddy-fuzz {name}: FAILURE ({}): {failure}", path.display());
                }
            }
            (executions, failures)
        });
    let (executions, failures) = match worker.map(|w| w.join()) {
        Ok(Ok(result)) => result,
        _ => {
            eprintln!("eddy-fuzz {name}: the fuzzing thread died");
            std::process::exit(2);
        }
    };
    println!(
        "eddy-fuzz {name}: {executions} executions in {seconds} s (seed {seed}), {failures} failures"
    );
    if failures > 0 {
        std::process::exit(1);
    }
}
