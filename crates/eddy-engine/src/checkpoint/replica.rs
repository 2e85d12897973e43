//! A copy of the state directory kept off this machine (a bucket), so that
//! a job resumes wherever it is started again.
//!
//! In: the local state directory a job writes its checkpoints into. Out:
//! the same files in the replica, a checkpoint's files before its
//! `MANIFEST` (a checkpoint exists in the replica only once its manifest
//! does, as on the local disk), and before the checkpoint's sinks commit:
//!
//! ```text
//!  start:      replica ──restore──> empty local directory ──> StateDir::open, resume as usual
//!  checkpoint: local files + MANIFEST ──sync: new files, then MANIFESTs, then stale ones removed──> replica
//!              ──> sinks commit
//! ```
//!
//! Local files are never rewritten in place, so a sync uploads only what
//! a checkpoint added (incremental checkpoints stay incremental) and
//! removes what retention removed locally.
//!
//! ```
//! use std::path::Path;
//! use eddy_engine::checkpoint::replica::StateReplica;
//!
//! /// A replica that keeps nothing (what a local state directory has).
//! #[derive(Debug)]
//! struct Nowhere;
//!
//! impl StateReplica for Nowhere {
//!     fn describe(&self) -> String { "nowhere".into() }
//!     fn restore(&self, _local: &Path) -> eddy_engine::Result<()> { Ok(()) }
//!     fn clear(&self) -> eddy_engine::Result<()> { Ok(()) }
//!     fn sync(&self, _local: &Path) -> eddy_engine::Result<()> { Ok(()) }
//! }
//! ```

use std::fmt::Debug;
use std::path::Path;

use crate::error::Result;

/// See the module docs.
pub trait StateReplica: Send + Sync + Debug {
    /// Where the replica is, for messages (`s3://lake/state`).
    fn describe(&self) -> String;

    /// Copies the replica's files into `local`, an empty directory, before
    /// the job opens it.
    fn restore(&self, local: &Path) -> Result<()>;

    /// Removes every file of the replica (`--ignore-state`).
    fn clear(&self) -> Result<()>;

    /// Makes the replica hold `local`'s files: new ones uploaded, each
    /// checkpoint's `MANIFEST` and `COMMITTED` after the rest, files gone
    /// from `local` removed last. Returns once all of it is durable.
    fn sync(&self, local: &Path) -> Result<()>;
}
