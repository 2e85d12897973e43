//! What can be wrong with a checkpoint on disk: a file missing or cut
//! short, a checksum that does not match, a manifest from a newer eddy, a
//! keyed table's changes that do not fit the table. The store skips such
//! a checkpoint for the one before it, naming why; a savepoint so damaged
//! is refused.
//!
//! In: what reading a checkpoint found. Out: a [`Damage`] that says it.

use std::path::PathBuf;

use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::error::ArrowError;

/// Why a checkpoint (or one of its files) cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Damage {
    /// A file cannot be read.
    #[error("{}: {source}", path.display())]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A file holds another number of bytes than were written.
    #[error("{} has {found} bytes, {written} were written", path.display())]
    Size {
        path: PathBuf,
        found: u64,
        written: u64,
    },
    /// A file's bytes are not those written.
    #[error("{}: checksum does not match", path.display())]
    Checksum { path: PathBuf },
    /// A table file is not Arrow IPC as written.
    #[error("{}: {source}", path.display())]
    Table { path: PathBuf, source: ArrowError },
    /// A table file holds another number of rows than were written.
    #[error("{} holds {found} rows, {written} were written", path.display())]
    Rows {
        path: PathBuf,
        found: usize,
        written: u64,
    },
    /// The manifest's header line is missing or damaged.
    #[error("{}: the manifest header is missing or damaged", path.display())]
    ManifestHeader { path: PathBuf },
    /// The manifest's text is not what its header's checksum says.
    #[error("{}: the manifest's checksum does not match", path.display())]
    ManifestChecksum { path: PathBuf },
    /// The manifest is not a manifest.
    #[error("{}: the manifest cannot be read: {source}", path.display())]
    ManifestText {
        path: PathBuf,
        source: serde_json::Error,
    },
    /// A newer eddy wrote the checkpoint.
    #[error("{}: manifest format {format} (this eddy reads up to {readable})", path.display())]
    NewerFormat {
        path: PathBuf,
        format: u32,
        readable: u32,
    },
    /// A keyed table's changes do not fit the table.
    #[error("table {table} of {}: {why}", dir.display())]
    Changes {
        table: String,
        dir: PathBuf,
        why: ChangesMismatch,
    },
}

/// Why a keyed table's changes cannot be applied to it
/// ([`super::changes::apply`]).
#[derive(Debug, thiserror::Error)]
pub enum ChangesMismatch {
    /// The key is wider than the table (or empty).
    #[error("a keyed table of {columns} columns cannot have {key_columns} key columns")]
    KeyWidth { columns: usize, key_columns: usize },
    /// A change's key columns are of other types than the table's.
    #[error("{what} has key columns of types {found:?}, the table {table:?}")]
    KeyTypes {
        what: String,
        found: Vec<DataType>,
        table: Vec<DataType>,
    },
    /// A change has other columns than the table.
    #[error("change {change} of the table has other columns than the table")]
    Columns { change: usize },
    /// Arrow refused the rows.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}
