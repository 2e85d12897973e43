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
use crate::kafka::sink::KafkaSinkState;

/// A file sink's pre-committed state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "format", rename_all = "lowercase")]
pub enum SinkState {
    /// An NDJSON file.
    Ndjson(NdjsonSinkState),
    /// A directory of rolled files (Parquet, partitioned or rolled NDJSON).
    Files(FileSetState),
    /// Kafka records to write in a transaction.
    Kafka(KafkaSinkState),
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
/// Kafka states are committed by the caller ([`crate::kafka::sink::commit`]
/// needs the table's client settings): this returns them.
pub fn commit(snapshot: &StateSnapshot) -> Result<Option<KafkaSinkState>> {
    match SinkState::from_snapshot(snapshot)? {
        None => Ok(None),
        Some(SinkState::Ndjson(state)) => ndjson::commit(&state).map(|_| None),
        Some(SinkState::Files(state)) => rolling::commit(&state).map(|_| None),
        Some(SinkState::Kafka(mut state)) => {
            for epoch in &mut state.epochs {
                let name = crate::kafka::sink::epoch_table(epoch.checkpoint);
                let table = snapshot
                    .tables
                    .iter()
                    .find(|t| t.name == name)
                    .ok_or_else(|| {
                        ConnectorError::bad_option(
                            "checkpoint",
                            format!(
                                "the Kafka sink's records of checkpoint {} are missing",
                                epoch.checkpoint
                            ),
                        )
                    })?;
                epoch.records = crate::kafka::sink::records_from_batch(&table.batch)?;
            }
            Ok(Some(state))
        }
    }
}
