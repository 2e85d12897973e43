//! The state a file sink pre-commits at a checkpoint barrier, and the
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
    /// (stdout, blackhole).
    pub fn from_snapshot(snapshot: &StateSnapshot) -> Result<Option<Self>> {
        if snapshot.meta.is_null() {
            return Ok(None);
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

/// Publishes what `snapshot` lists; nothing for a sink without state.
pub fn commit(snapshot: &StateSnapshot) -> Result<()> {
    match SinkState::from_snapshot(snapshot)? {
        None => Ok(()),
        Some(SinkState::Ndjson(state)) => ndjson::commit(&state),
        Some(SinkState::Files(state)) => rolling::commit(&state),
    }
}
