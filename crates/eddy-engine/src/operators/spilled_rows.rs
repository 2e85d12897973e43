//! Per-key state on disk as (key, row) byte pairs: what an operator
//! keeping one row of state per key moved out of memory when the memory
//! budget refused it more ([`crate::spill`]): the upsert step (each key's
//! current row, as [`crate::state::keyed_rows::KeyedRows`] holds it) and
//! OVER over an append-only input (each key's row of its `keys`
//! checkpoint table, in Arrow's row format).
//!
//! In: (key, row) pairs of bytes. Out: the rows of the keys a batch
//! brings, taken off disk (a key is wholly in memory or wholly on disk),
//! and every stored pair, left there, for checkpoints. An entry is the
//! key's bytes and the row's bytes as they are: nothing is converted.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::operators::spilled_rows::SpilledRows;
//! use eddy_engine::spill::{SpillConfig, SpillSpace};
//!
//! let space = Arc::new(SpillSpace::new(SpillConfig::default()));
//! let mut spilled = SpilledRows::open(&space, "changelog_normalize").unwrap();
//! spilled.write([(&b"a"[..], &b"row a"[..]), (&b"b"[..], &b"row b"[..])]).unwrap();
//! let back = spilled.take(&[&b"b"[..], &b"c"[..]]).unwrap();
//! assert_eq!(back, [(b"b".to_vec(), b"row b".to_vec())]);
//! assert_eq!(spilled.len(), 1);
//! assert!(spilled.take(&[&b"b"[..]]).unwrap().is_empty(), "b left the disk");
//! ```

use std::sync::Arc;

use crate::error::Result;
use crate::spill::{SpillSpace, SpillStats, SpillTable};

/// Keys and their current rows, on disk.
pub struct SpilledRows {
    table: SpillTable,
    /// Keys on disk now.
    count: usize,
}

impl SpilledRows {
    /// A table of `space` for the rows of an operator of kind `kind`.
    pub fn open(space: &Arc<SpillSpace>, kind: &str) -> Result<Self> {
        Ok(Self {
            table: space.table(kind)?,
            count: 0,
        })
    }

    /// Keys on disk.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no key is on disk.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes (key, row) pairs whose keys are not on disk yet.
    pub fn write<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<()> {
        let mut written = 0;
        self.table.write_encoded(
            pairs.into_iter().inspect(|_| written += 1),
            |row: &[u8], out: &mut Vec<u8>| out.extend_from_slice(row),
        )?;
        self.count += written;
        Ok(())
    }

    /// The stored (key, row) pairs among `keys` (each asked once), taken
    /// off disk.
    pub fn take(&mut self, keys: &[&[u8]]) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if self.count == 0 {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for &key in keys {
            if let Some(row) = self.table.read(key)? {
                found.push((key.to_vec(), row.to_vec()));
            }
        }
        self.table.remove(found.iter().map(|(key, _)| &key[..]))?;
        self.count = self.count.saturating_sub(found.len());
        Ok(found)
    }

    /// Every stored pair, left on disk.
    pub fn all(&self) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.table.entries().collect()
    }

    /// Forgets every stored pair.
    pub fn clear(&mut self) -> Result<()> {
        self.table.clear()?;
        self.count = 0;
        Ok(())
    }

    /// What spilling has cost.
    pub fn stats(&self) -> SpillStats {
        self.table.stats()
    }
}
