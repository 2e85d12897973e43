//! The state a file sink (NDJSON, Parquet, rolled; any connector's, or
//! `--output`'s) pre-commits at a checkpoint barrier, and the
//! commit that publishes it.
//!
//! In: a sink's [`StateSnapshot`] from a completed checkpoint. Out: its
//! staged output under the final names. The state names every file it
//! touches, so committing needs nothing but the state itself (a resumed
//! job commits its checkpoint before it opens anything).

use eddy_engine::state::StateSnapshot;
use serde::{Deserialize, Serialize};

use super::ndjson::{self, NdjsonSinkState};
use super::rolling::{self, FileSetState};
use crate::error::{ConnectorError, Result};

/// A file sink's pre-committed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum SinkState {
    /// An NDJSON file.
    Ndjson(NdjsonSinkState),
    /// A directory of rolled files (Parquet, partitioned or rolled NDJSON).
    Files(FileSetState),
}

impl SinkState {
    /// Reads the state out of a snapshot; `None` for a sink without one
    /// (stdout, blackhole), an error for another kind of sink's state.
    pub fn from_snapshot(snapshot: &StateSnapshot) -> Result<Option<Self>> {
        if snapshot.meta.is_null() {
            return Ok(None);
        }
        if !is_file_state(snapshot) {
            return Err(super::another_sinks_state());
        }
        snapshot
            .meta()
            .map(Some)
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))
    }

    /// The snapshot holding this state.
    pub fn to_snapshot(&self) -> Result<StateSnapshot> {
        StateSnapshot::with_meta(self)
            .map_err(|e| ConnectorError::bad_option("checkpoint", e.to_string()))
    }
}

/// Publishes the files `snapshot` lists; `false` when it holds no file
/// sink's state (nothing, or another connector's: see
/// [`crate::Connector::commit_sink`]).
pub fn commit(snapshot: &StateSnapshot) -> Result<bool> {
    if !is_file_state(snapshot) {
        return Ok(false);
    }
    match SinkState::from_snapshot(snapshot)? {
        None => Ok(false),
        Some(SinkState::Ndjson(state)) => ndjson::commit(&state).map(|_| true),
        Some(SinkState::Files(state)) => rolling::commit(&state).map(|_| true),
    }
}

/// Whether `snapshot` holds a file sink's state.
fn is_file_state(snapshot: &StateSnapshot) -> bool {
    let format = snapshot.meta.get("format").and_then(|f| f.as_str());
    matches!(format, Some("ndjson" | "files"))
}
