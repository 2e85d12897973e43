//! A job's Python functions and the workers that run them.
//!
//! In: the functions the job declares ([`PythonRuntime::define`]) and calls
//! from operator threads. Out: reply payloads, per-function counts
//! ([`PythonRuntime::reports`]).
//!
//! Workers start on the first call, not when the job is planned (so
//! `eddy explain` and the server's validation start no Python). Each
//! worker loads every function the job declares; a call takes an idle
//! worker, or starts one while fewer than [`PythonConfig::max_workers`]
//! run, or waits for one. Aggregate state is not kept in workers (eddy
//! holds it, see `aggregate`), so any worker serves any call. A worker
//! that crashed or timed out is dropped (killed); the job fails with that
//! error. Dropping the runtime (the job's plan) kills its workers.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use crate::definition::FunctionDefinition;
use crate::error::{PythonError, Result};
use crate::wire::{Frame, Reply, ERROR, E_DEFINITION, HELLO, OK};
use crate::worker::Worker;

/// How a job's Python functions run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonConfig {
    /// The Python program (`EDDY_PYTHON`, else `python3` on PATH).
    pub executable: PathBuf,
    /// Directories `AS 'module:function'` imports from (`--udf-path`).
    pub paths: Vec<PathBuf>,
    /// When set, modules must be files below this directory (the server's
    /// data root): a submitted job cannot import the standard library's
    /// `os:system` as a function.
    pub root: Option<PathBuf>,
    /// An address-space limit for each worker, in bytes.
    pub memory_limit: Option<u64>,
    /// Workers at most (calls beyond wait for one).
    pub max_workers: usize,
}

impl PythonConfig {
    /// `EDDY_PYTHON` or `python3`, the function path `EDDY_UDF_PATH`
    /// (`:`-separated), one worker per core.
    pub fn from_env() -> Self {
        Self {
            executable: std::env::var_os("EDDY_PYTHON")
                .filter(|v| !v.is_empty())
                .map_or_else(|| PathBuf::from("python3"), PathBuf::from),
            paths: std::env::var_os("EDDY_UDF_PATH")
                .map(|v| std::env::split_paths(&v).collect())
                .unwrap_or_default(),
            root: None,
            memory_limit: None,
            max_workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        }
    }
}

/// What one function did, for the run summary and the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionReport {
    /// The SQL function.
    pub name: String,
    /// Requests sent (batches).
    pub calls: u64,
    /// Rows those requests held.
    pub rows: u64,
    /// Rows whose call raised (`on_error = 'null'`).
    pub raised: u64,
    /// The first such row's Python message.
    pub first_error: Option<String>,
}

#[derive(Debug, Default)]
struct Counts {
    calls: AtomicU64,
    rows: AtomicU64,
    raised: AtomicU64,
    first_error: Mutex<Option<String>>,
}

#[derive(Debug, Default)]
struct Pool {
    idle: Vec<Worker>,
    running: usize,
}

/// A job's Python functions and workers.
#[derive(Debug)]
pub struct PythonRuntime {
    config: PythonConfig,
    functions: RwLock<Vec<(Arc<FunctionDefinition>, Arc<Counts>)>>,
    pool: Mutex<Pool>,
    returned: Condvar,
}

impl PythonRuntime {
    /// A runtime with no functions yet.
    pub fn new(config: PythonConfig) -> Arc<Self> {
        Arc::new(Self {
            config,
            functions: RwLock::new(Vec::new()),
            pool: Mutex::new(Pool::default()),
            returned: Condvar::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PythonConfig {
        &self.config
    }

    /// Adds a function; returns its index for [`crate::wire`] requests.
    pub(crate) fn define(&self, definition: Arc<FunctionDefinition>) -> usize {
        let mut functions = self.functions.write().unwrap_or_else(|e| e.into_inner());
        functions.push((definition, Arc::default()));
        functions.len() - 1
    }

    /// Each function's counts so far.
    pub fn reports(&self) -> Vec<FunctionReport> {
        let functions = self.functions.read().unwrap_or_else(|e| e.into_inner());
        functions
            .iter()
            .map(|(f, c)| FunctionReport {
                name: f.name.clone(),
                calls: c.calls.load(Ordering::Relaxed),
                rows: c.rows.load(Ordering::Relaxed),
                raised: c.raised.load(Ordering::Relaxed),
                first_error: c.first_error.lock().ok().and_then(|e| e.clone()),
            })
            .collect()
    }

    /// Takes a worker (starting one if none is idle) and loads the
    /// functions it has not loaded, reporting what fails: the planner
    /// checks each function this way as it is declared.
    pub fn check(&self) -> Result<()> {
        let worker = self.take_worker()?;
        self.give_back(worker);
        Ok(())
    }

    /// Sends `frame` for function `index` (`rows` rows) and returns the
    /// reply, after the worker's `ERROR` replies are turned into errors.
    /// The call blocks on a worker process, so on a thread of eddy's
    /// worker pool (a tokio multi-thread runtime) it hands the thread's
    /// other tasks to another thread while it waits.
    pub(crate) fn request(&self, index: usize, rows: usize, frame: Vec<u8>) -> Result<Reply> {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime)
                if runtime.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                tokio::task::block_in_place(|| self.request_blocking(index, rows, frame))
            }
            _ => self.request_blocking(index, rows, frame),
        }
    }

    fn request_blocking(&self, index: usize, rows: usize, frame: Vec<u8>) -> Result<Reply> {
        let (definition, counts) = {
            let functions = self.functions.read().unwrap_or_else(|e| e.into_inner());
            functions[index].clone()
        };
        counts.calls.fetch_add(1, Ordering::Relaxed);
        counts.rows.fetch_add(rows as u64, Ordering::Relaxed);
        let mut worker = self.take_worker()?;
        let outcome = worker
            .request(
                &frame,
                definition.timeout,
                &definition.name,
                rows <= SPIN_ROWS,
            )
            .and_then(|payload| {
                let mut reply = Reply::new(payload);
                if reply.op() == ERROR {
                    let kind = reply.u8().unwrap_or(0);
                    let message = reply.rest_text();
                    Err(if kind == E_DEFINITION {
                        PythonError::Definition {
                            function: definition.name.clone(),
                            message,
                        }
                    } else {
                        PythonError::Call {
                            function: definition.name.clone(),
                            message,
                        }
                    })
                } else {
                    Ok(reply)
                }
            });
        match &outcome {
            Err(e) if !e.worker_survives() => self.lose(worker),
            _ => self.give_back(worker),
        }
        outcome
    }

    /// Counts rows that raised (and keeps the first message).
    pub(crate) fn raised(&self, index: usize, errors: &[(u64, String)]) {
        if errors.is_empty() {
            return;
        }
        let (definition, counts) = {
            let functions = self.functions.read().unwrap_or_else(|e| e.into_inner());
            functions[index].clone()
        };
        let before = counts
            .raised
            .fetch_add(errors.len() as u64, Ordering::Relaxed);
        if before == 0 {
            let first = &errors[0].1;
            tracing::warn!(
                "python function {} raised ({first}); the value is NULL, and further rows that raise are counted",
                definition.name
            );
            if let Ok(mut slot) = counts.first_error.lock() {
                slot.get_or_insert_with(|| first.clone());
            }
        }
    }

    /// Stops the idle workers (a job's run ended); a later call starts
    /// new ones.
    pub fn release_workers(&self) {
        let idle = {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            let idle = std::mem::take(&mut pool.idle);
            pool.running = pool.running.saturating_sub(idle.len());
            idle
        };
        drop(idle);
    }

    fn take_worker(&self) -> Result<Worker> {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(worker) = pool.idle.pop() {
                drop(pool);
                return self.load_new_functions(worker);
            }
            if pool.running < self.config.max_workers.max(1) {
                pool.running += 1;
                drop(pool);
                return self.start_worker();
            }
            pool = self
                .returned
                .wait_timeout(pool, Duration::from_millis(200))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    fn start_worker(&self) -> Result<Worker> {
        let started = Worker::start(&self.config.executable)
            .and_then(|worker| self.load_new_functions(worker));
        if started.is_err() {
            let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
            pool.running = pool.running.saturating_sub(1);
            self.returned.notify_one();
        }
        started
    }

    /// Sends the worker the functions declared since it last loaded.
    fn load_new_functions(&self, mut worker: Worker) -> Result<Worker> {
        let new: Vec<Arc<FunctionDefinition>> = {
            let functions = self.functions.read().unwrap_or_else(|e| e.into_inner());
            functions[worker.loaded.min(functions.len())..]
                .iter()
                .map(|(f, _)| Arc::clone(f))
                .collect()
        };
        if new.is_empty() {
            return Ok(worker);
        }
        let mut hello = serde_json::json!({
            "functions": new.iter().map(|f| f.to_json()).collect::<Vec<_>>(),
        });
        if worker.loaded == 0 {
            hello["config"] = serde_json::json!({
                "paths": self.config.paths.iter().map(|p| absolute(p)).collect::<Vec<_>>(),
                "root": self.config.root.as_ref().map(|p| absolute(p)),
                "memory_limit": self.config.memory_limit,
            });
        }
        let mut frame = Frame::new(HELLO);
        frame.raw(hello.to_string().as_bytes());
        let names: Vec<&str> = new.iter().map(|f| f.name.as_str()).collect();
        let what = names.join(", ");
        let payload = match worker.request(&frame.finish(), LOAD_TIMEOUT, &what, false) {
            Ok(payload) => payload,
            Err(e) => {
                self.lose(worker);
                return Err(e);
            }
        };
        let mut reply = Reply::new(payload);
        match reply.op() {
            OK => {
                worker.loaded += new.len();
                Ok(worker)
            }
            _ => {
                let _kind = reply.u8();
                let message = reply.rest_text();
                self.lose(worker);
                let (function, message) = match message.split_once('\0') {
                    Some((function, message)) => (function.to_string(), message.to_string()),
                    None => (what, message),
                };
                Err(PythonError::Definition { function, message })
            }
        }
    }

    fn give_back(&self, worker: Worker) {
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.idle.push(worker);
        self.returned.notify_one();
    }

    fn lose(&self, worker: Worker) {
        drop(worker);
        let mut pool = self.pool.lock().unwrap_or_else(|e| e.into_inner());
        pool.running = pool.running.saturating_sub(1);
        self.returned.notify_one();
    }
}

/// Requests of at most this many rows spin briefly for their reply (see
/// `Worker::request`).
const SPIN_ROWS: usize = 8;

/// How long a worker may take to load the job's functions (imports).
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

fn absolute(path: &std::path::Path) -> String {
    std::fs::canonicalize(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}
