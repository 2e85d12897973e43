//! The threads object-store requests run on: a small tokio runtime of its
//! own, so that a sink or a checkpoint writer (which run on the engine's
//! worker pool, or on plain threads) waits for a request without needing,
//! or blocking, a runtime of the caller's.
//!
//! In: a request's future. Out: its result, on the calling thread.

use std::future::Future;
use std::sync::OnceLock;

use crate::error::{ConnectorError, Result};

/// Threads serving object-store requests (uploads are I/O bound).
const IO_THREADS: usize = 2;

fn runtime() -> Result<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<std::result::Result<tokio::runtime::Runtime, String>> =
        OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(IO_THREADS)
                .thread_name("eddy-storage")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| ConnectorError::bad_option("path", format!("cannot start storage I/O: {e}")))
}

/// Runs `request` on the storage runtime and waits for its result.
pub(super) fn block<F, T>(request: F) -> Result<T>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    start(request)?.wait()
}

/// A request started on the storage runtime, its result still to come.
pub(crate) struct Started<T>(std::sync::mpsc::Receiver<Result<T>>);

impl<T> Started<T> {
    /// Waits for the result.
    pub fn wait(self) -> Result<T> {
        self.0.recv().unwrap_or_else(|_| {
            Err(ConnectorError::bad_option(
                "path",
                "a storage request ended without an answer",
            ))
        })
    }
}

/// Starts `request` on the storage runtime without waiting for it.
pub(super) fn start<F, T>(request: F) -> Result<Started<T>>
where
    F: Future<Output = Result<T>> + Send + 'static,
    T: Send + 'static,
{
    let (sender, receiver) = std::sync::mpsc::sync_channel(1);
    runtime()?.spawn(async move {
        let _ = sender.send(request.await);
    });
    Ok(Started(receiver))
}
