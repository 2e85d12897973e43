//! The error type of Python functions.

use std::time::Duration;

/// Why a Python function could not be defined or called.
#[derive(Debug, thiserror::Error)]
pub enum PythonError {
    /// The declaration is not one eddy can run (an unsupported type, a bad
    /// option); found before anything runs.
    #[error("{0}")]
    Declaration(String),
    /// The Python program could not be started.
    #[error("cannot start {executable} for Python functions ({reason}); install Python 3 or set EDDY_PYTHON to its path")]
    Start {
        /// The program eddy tried.
        executable: String,
        /// What the system said.
        reason: String,
    },
    /// The function's body or module did not load.
    #[error("python function {function}: {message}")]
    Definition {
        /// The SQL function.
        function: String,
        /// Python's account, traceback included.
        message: String,
    },
    /// The function raised (and its policy is to fail), or returned a value
    /// of the wrong type or count.
    #[error("python function {function}: {message}")]
    Call {
        /// The SQL function.
        function: String,
        /// Python's account, traceback included.
        message: String,
    },
    /// The worker process ended while a function ran (a crash, a signal,
    /// `os._exit`).
    #[error("python function {function}: the Python worker ended while it ran ({status}){tail}")]
    WorkerDied {
        /// The SQL function.
        function: String,
        /// How the process ended.
        status: String,
        /// The last lines it wrote to stderr, if any (with a leading newline).
        tail: String,
    },
    /// The function did not return in time; its worker was killed.
    #[error("python function {function} did not return within {timeout:?} (its timeout option); its worker was killed")]
    TimedOut {
        /// The SQL function.
        function: String,
        /// The limit.
        timeout: Duration,
    },
    /// The frames exchanged with the worker did not make sense.
    #[error("python function {function}: {problem}")]
    Protocol {
        /// The SQL function.
        function: String,
        /// What was wrong.
        problem: crate::wire::FrameError,
    },
}

impl PythonError {
    /// Whether the worker that reported this can take another request.
    pub(crate) fn worker_survives(&self) -> bool {
        matches!(
            self,
            PythonError::Call { .. } | PythonError::Definition { .. }
        )
    }
}

/// Result alias of this crate.
pub type Result<T, E = PythonError> = std::result::Result<T, E>;

impl From<PythonError> for datafusion::error::DataFusionError {
    fn from(e: PythonError) -> Self {
        datafusion::error::DataFusionError::Execution(e.to_string())
    }
}
