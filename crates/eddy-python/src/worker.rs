//! One Python worker process.
//!
//! In: frames to send (see [`crate::wire`]). Out: the worker's reply
//! payloads, or why none came (the process ended, or a call passed its
//! timeout and the process was killed).
//!
//! The worker is `python3 -c <loader> <n>`; the loader reads the worker
//! program (`worker.py`, compiled into eddy) from the first `n` bytes of
//! stdin, so nothing is written to disk and no Python headers or packages
//! are needed to build eddy. A thread reads the worker's stdout into whole
//! replies, so a call can wait with a timeout; another keeps the last lines
//! of its stderr (tracebacks, what functions print) for error messages and
//! passes them on to eddy's log. Dropping a `Worker` kills the process.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::{PythonError, Result};

/// The worker program.
const WORKER_PROGRAM: &str = include_str!("worker.py");

/// Reads the program from stdin and runs it.
const LOADER: &str = "import sys; n = int(sys.argv[1]); exec(compile(sys.stdin.buffer.read(n), 'eddy-python-worker', 'exec'))";

/// How long a call spins for its reply before it blocks.
const SPIN: Duration = Duration::from_micros(200);

/// Lines of stderr kept for error messages.
const STDERR_LINES: usize = 30;

/// A running worker.
#[derive(Debug)]
pub(crate) struct Worker {
    child: Child,
    stdin: ChildStdin,
    replies: Receiver<Option<Vec<u8>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// How many of the runtime's functions this worker has loaded.
    pub(crate) loaded: usize,
}

impl Worker {
    /// Starts `executable` as a worker.
    pub(crate) fn start(executable: &PathBuf) -> Result<Self> {
        let start_error = |reason: String| PythonError::Start {
            executable: executable.display().to_string(),
            reason,
        };
        let mut child = Command::new(executable)
            .arg("-c")
            .arg(LOADER)
            .arg(WORKER_PROGRAM.len().to_string())
            .env("PYTHONUNBUFFERED", "1")
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| start_error(e.to_string()))?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(start_error("its pipes could not be opened".into()));
        };
        stdin
            .write_all(WORKER_PROGRAM.as_bytes())
            .map_err(|e| start_error(format!("it did not take its program: {e}")))?;

        let (send, replies) = mpsc::channel();
        std::thread::Builder::new()
            .name("eddy-python-out".into())
            .spawn(move || read_replies(stdout, send))
            .map_err(|e| start_error(format!("no thread to read it: {e}")))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let kept = Arc::clone(&tail);
        std::thread::Builder::new()
            .name("eddy-python-err".into())
            .spawn(move || keep_stderr(stderr, kept))
            .map_err(|e| start_error(format!("no thread to read it: {e}")))?;
        Ok(Self {
            child,
            stdin,
            replies,
            stderr: tail,
            loaded: 0,
        })
    }

    /// Sends `frame` and waits up to `timeout` for the reply payload
    /// (spinning briefly first when `spin`). `function` names the function
    /// in errors.
    pub(crate) fn request(
        &mut self,
        frame: &[u8],
        timeout: Duration,
        function: &str,
        spin: bool,
    ) -> Result<Vec<u8>> {
        if self
            .stdin
            .write_all(frame)
            .and_then(|_| self.stdin.flush())
            .is_err()
        {
            return Err(self.died(function));
        }
        // A short spin first for a request of a few rows (OVER reads a
        // value after every row): its reply comes back in tens of
        // microseconds, sooner than a blocked thread is woken. A batch's
        // request blocks at once, leaving the core to the job's threads.
        let spun = Instant::now();
        let mut early = None;
        while spin && spun.elapsed() < SPIN {
            match self.replies.try_recv() {
                Ok(reply) => {
                    early = Some(reply);
                    break;
                }
                Err(mpsc::TryRecvError::Empty) => std::hint::spin_loop(),
                Err(mpsc::TryRecvError::Disconnected) => break,
            }
        }
        let received = match early {
            Some(reply) => Ok(reply),
            None => self.replies.recv_timeout(timeout),
        };
        match received {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) | Err(RecvTimeoutError::Disconnected) => Err(self.died(function)),
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(PythonError::TimedOut {
                    function: function.to_string(),
                    timeout,
                })
            }
        }
    }

    /// The error for a worker that went away.
    fn died(&mut self, function: &str) -> PythonError {
        let deadline = Instant::now() + Duration::from_secs(2);
        let status = loop {
            match self.child.try_wait() {
                Ok(Some(status)) => break describe_status(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) => {
                    let _ = self.child.kill();
                    break "it stopped answering".to_string();
                }
                Err(e) => break format!("its status is unknown: {e}"),
            }
        };
        // The stderr thread may still be reading the last lines.
        std::thread::sleep(Duration::from_millis(50));
        let tail: Vec<String> = self
            .stderr
            .lock()
            .map(|t| t.iter().cloned().collect())
            .unwrap_or_default();
        PythonError::WorkerDied {
            function: function.to_string(),
            status,
            tail: if tail.is_empty() {
                String::new()
            } else {
                format!("; its last words:\n{}", tail.join("\n"))
            },
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn read_replies(mut stdout: impl Read, send: mpsc::Sender<Option<Vec<u8>>>) {
    loop {
        let mut len = [0u8; 8];
        if stdout.read_exact(&mut len).is_err() {
            let _ = send.send(None);
            return;
        }
        let Ok(len) = usize::try_from(u64::from_le_bytes(len)) else {
            let _ = send.send(None);
            return;
        };
        let mut payload = vec![0u8; len];
        if stdout.read_exact(&mut payload).is_err() {
            let _ = send.send(None);
            return;
        }
        if send.send(Some(payload)).is_err() {
            return;
        }
    }
}

fn keep_stderr(stderr: impl Read, tail: Arc<Mutex<VecDeque<String>>>) {
    for line in BufReader::new(stderr).lines() {
        let Ok(line) = line else { return };
        // What functions print, and tracebacks, belong in eddy's log.
        eprintln!("python: {line}");
        if let Ok(mut tail) = tail.lock() {
            if tail.len() == STDERR_LINES {
                tail.pop_front();
            }
            tail.push_back(line);
        }
    }
}

fn describe_status(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => {
            let name = match signal {
                6 => " (SIGABRT)",
                9 => " (SIGKILL: killed, perhaps for memory)",
                11 => " (SIGSEGV: a crash)",
                _ => "",
            };
            format!("signal {signal}{name}")
        }
        _ => status.to_string(),
    }
}
