//! The updating join's keys on disk: the buckets it moved out of memory
//! when the memory budget refused it more ([`crate::spill`]).
//!
//! In: a side's buckets by encoded join key ([`Side`]). Out: the bucket a
//! key held when it left, read back (and taken off disk) the first time a
//! row brings the key again; every stored bucket, for checkpoints. A key
//! is wholly in memory (both sides) or wholly on disk: a spill moves every
//! key, and a read back brings both sides' buckets of a key.
//!
//! An entry is the encoded key and its bucket, little-endian:
//! `touched_at: i64`, then per row `len: u32`, the row's bytes,
//! `copies: u32`, `partners: u64`.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::operators::updating_join::side::Side;
//! use eddy_engine::operators::updating_join::spilled::SpilledSides;
//! use eddy_engine::spill::{SpillConfig, SpillSpace};
//!
//! let space = Arc::new(SpillSpace::new(SpillConfig::default()));
//! let mut spilled = SpilledSides::open(&space).unwrap();
//! let mut left = Side::default();
//! let (bucket, _) = left.get_or_insert(7, b"key");
//! bucket.touched_at = 42;
//! bucket.entry(b"row").0.copies = 2;
//! spilled.write(0, &left).unwrap();
//! let back = spilled.read(0, b"key").unwrap().unwrap();
//! assert_eq!((back.touched_at, back.rows[0].1.copies), (42, 2));
//! assert!(spilled.read(1, b"key").unwrap().is_none());
//! ```

use std::sync::Arc;

use super::side::{Bucket, Held, Side};
use crate::error::Result;
use crate::spill::{put_bytes, EntryReader, SpillSpace, SpillStats, SpillTable};

/// Both sides' buckets written to disk, by encoded key.
pub struct SpilledSides {
    tables: [SpillTable; 2],
}

impl SpilledSides {
    /// A table of `space` for each side.
    pub fn open(space: &Arc<SpillSpace>) -> Result<Self> {
        Ok(Self {
            tables: [
                space.table("updating_join_left")?,
                space.table("updating_join_right")?,
            ],
        })
    }

    /// Writes every key of `rows` (side `side`'s buckets) with its bucket.
    pub fn write(&mut self, side: usize, rows: &Side) -> Result<()> {
        self.tables[side].write_encoded(rows.iter(), encode)
    }

    /// The bucket side `side` stored under `key`, if any (still on disk:
    /// [`SpilledSides::forget`] takes it off).
    pub fn read(&mut self, side: usize, key: &[u8]) -> Result<Option<Bucket>> {
        self.tables[side]
            .read(key)?
            .map(|value| decode(&value))
            .transpose()
    }

    /// Takes these keys of side `side` off disk.
    pub fn forget<'a>(
        &mut self,
        side: usize,
        keys: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<()> {
        self.tables[side].remove(keys)
    }

    /// A file for the snapshot table `name` beside the store.
    pub fn snapshot_file(
        &self,
        name: &str,
        schema: &datafusion::arrow::datatypes::SchemaRef,
    ) -> Result<crate::state::table_file::TableFileWriter> {
        self.tables[0].snapshot_file(name, schema)
    }

    /// Every key side `side` stores, with its bucket, in key order.
    pub fn entries(&self, side: usize) -> impl Iterator<Item = Result<(Vec<u8>, Bucket)>> + '_ {
        self.tables[side]
            .entries()
            .map(|entry| entry.and_then(|(key, value)| Ok((key, decode(&value)?))))
    }

    /// Forgets everything stored.
    pub fn clear(&mut self) -> Result<()> {
        for table in &mut self.tables {
            table.clear()?;
        }
        Ok(())
    }

    /// What spilling has cost, both sides together.
    pub fn stats(&self) -> SpillStats {
        let [left, right] = [self.tables[0].stats(), self.tables[1].stats()];
        SpillStats {
            written_bytes: left.written_bytes + right.written_bytes,
            read_bytes: left.read_bytes + right.read_bytes,
            disk_bytes: left.disk_bytes + right.disk_bytes,
        }
    }
}

/// Appends `bucket`'s entry value to `out`.
fn encode(bucket: &Bucket, out: &mut Vec<u8>) {
    out.extend_from_slice(&bucket.touched_at.to_le_bytes());
    for (row, held) in &bucket.rows {
        put_bytes(out, row);
        out.extend_from_slice(&held.copies.to_le_bytes());
        out.extend_from_slice(&held.partners.to_le_bytes());
    }
}

/// The bucket an entry value holds.
fn decode(value: &[u8]) -> Result<Bucket> {
    let mut value = EntryReader::new(value, "updating_join");
    let mut bucket = Bucket {
        touched_at: value.i64()?,
        ..Bucket::default()
    };
    while !value.is_empty() {
        let row = value.bytes()?;
        let held = Held {
            copies: value.u32()?,
            partners: value.u64()?,
        };
        bucket.rows.push((row.into(), held));
    }
    Ok(bucket)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_come_back_as_they_left_and_forgotten_keys_do_not() {
        let space = Arc::new(SpillSpace::new(crate::spill::SpillConfig::default()));
        let mut spilled = SpilledSides::open(&space).unwrap();
        let mut right = Side::default();
        for (hash, key) in [(1, b"a"), (2, b"b")] {
            let (bucket, _) = right.get_or_insert(hash, key);
            bucket.touched_at = -5;
            for (row, copies) in [(&b""[..], 1), (b"long row", 3)] {
                *bucket.entry(row).0 = Held {
                    copies,
                    partners: u64::MAX,
                };
            }
        }
        spilled.write(1, &right).unwrap();
        let back = spilled.read(1, b"a").unwrap().unwrap();
        assert_eq!(back.touched_at, -5);
        let rows: Vec<(&[u8], u32, u64)> = back
            .rows
            .iter()
            .map(|(r, h)| (r.as_ref(), h.copies, h.partners))
            .collect();
        assert_eq!(rows, [(&b""[..], 1, u64::MAX), (b"long row", 3, u64::MAX)]);
        spilled.forget(1, [&b"a"[..]]).unwrap();
        assert!(spilled.read(1, b"a").unwrap().is_none());
        let keys: Vec<Vec<u8>> = spilled.entries(1).map(|e| e.unwrap().0).collect();
        assert_eq!(keys, [b"b".to_vec()]);
        assert!(spilled.stats().read_bytes > 0);
        assert!(decode(&[1, 2, 3]).is_err(), "a cut entry is an error");
    }
}
