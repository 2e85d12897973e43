//! One side's rows of the updating join, by key: for each encoded key, the
//! encoded rows held under it, each with its copies and partner count.
//!
//! In: keys and rows as the join's row converters encode them, each key
//! with its hash (one hasher for both sides, so a key is hashed once per
//! batch row and that hash finds it on either side). Out: the rows held
//! under a key ([`Bucket`]), for probing, counting partners, checkpoints.
//!
//! The table's slots are small, a key's hash and its boxed entry: growing
//! the table moves 16 bytes a key without reading the key again. (Boxed
//! keys rehashed read every key from memory, about a tenth of the LEFT
//! join benchmark's time; entries held in the slots themselves made each
//! new table 72 bytes a key of fresh memory, whose page faults, the
//! kernel zeroing every page, took half of it.) A key holding one row,
//! the usual case, keeps it inline, without a vector.
//!
//! ```
//! use eddy_engine::operators::updating_join::side::Side;
//! let mut side = Side::default();
//! let (bucket, added) = side.get_or_insert(7, b"key");
//! assert!(added);
//! bucket.entry(b"row").0.copies += 1;
//! assert_eq!(side.get(7, b"key").map(|b| b.rows.len()), Some(1));
//! assert!(side.get(7, b"other").is_none());
//! ```

use hashbrown::HashTable;
use smallvec::SmallVec;

use crate::time::Timestamp;

/// A held row: its copies and how many partner rows (copies counted) it
/// pairs with.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    /// Copies of the row held (a row put in twice is held twice).
    pub copies: u32,
    /// Rows of the other side it pairs with, copies counted.
    pub partners: u64,
}

/// One key's rows on one side: encoded row and what is held of it. A short
/// vector, not a map: most keys hold a row or a few (a map per key cost
/// more than the rows), and a row is found by a short scan.
#[derive(Debug, Default)]
pub struct Bucket {
    /// The rows, in the order they came (a removed row's place is taken
    /// by the last).
    pub rows: SmallVec<[(Box<[u8]>, Held); 1]>,
    /// The watermark when a row of either side with this key last came.
    pub touched_at: Timestamp,
}

impl Bucket {
    /// What is held of `row`.
    pub fn get(&self, row: &[u8]) -> Option<&Held> {
        self.rows
            .iter()
            .find(|(r, _)| r.as_ref() == row)
            .map(|(_, h)| h)
    }

    /// What is held of `row`, to change.
    pub fn get_mut(&mut self, row: &[u8]) -> Option<&mut Held> {
        self.rows
            .iter_mut()
            .find(|(r, _)| r.as_ref() == row)
            .map(|(_, h)| h)
    }

    /// The entry of `row`, added (nothing held) if absent; whether it
    /// was added.
    pub fn entry(&mut self, row: &[u8]) -> (&mut Held, bool) {
        match self.rows.iter().position(|(r, _)| r.as_ref() == row) {
            Some(at) => (&mut self.rows[at].1, false),
            None => {
                self.rows.push((row.into(), Held::default()));
                let last = self.rows.len() - 1;
                (&mut self.rows[last].1, true)
            }
        }
    }

    /// Takes `row` out.
    pub fn remove(&mut self, row: &[u8]) {
        if let Some(at) = self.rows.iter().position(|(r, _)| r.as_ref() == row) {
            self.rows.swap_remove(at);
        }
    }

    /// Whether no row is held.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// Rows held, copies counted.
    pub fn held(&self) -> usize {
        self.rows.iter().map(|(_, h)| h.copies as usize).sum()
    }
}

/// A key with its rows.
#[derive(Debug)]
struct Entry {
    key: Box<[u8]>,
    bucket: Bucket,
}

/// A slot of the table: a key's hash and its entry.
type Slot = (u64, Box<Entry>);

/// Whether a slot holds `key` (whose hash is `hash`): the stored hash is
/// compared first, so another key's entry is not read.
fn holds(hash: u64, key: &[u8]) -> impl Fn(&Slot) -> bool + '_ {
    move |(h, e)| *h == hash && e.key.as_ref() == key
}

/// One side's rows by key; see the module docs.
#[derive(Debug, Default)]
pub struct Side {
    table: HashTable<Slot>,
}

impl Side {
    /// The rows held under `key` (whose hash is `hash`).
    pub fn get(&self, hash: u64, key: &[u8]) -> Option<&Bucket> {
        self.table
            .find(hash, holds(hash, key))
            .map(|(_, e)| &e.bucket)
    }

    /// The rows held under `key`, to change.
    pub fn get_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Bucket> {
        self.table
            .find_mut(hash, holds(hash, key))
            .map(|(_, e)| &mut e.bucket)
    }

    /// The rows held under `key`, an empty bucket added if there is none;
    /// whether it was added.
    pub fn get_or_insert(&mut self, hash: u64, key: &[u8]) -> (&mut Bucket, bool) {
        let entry = self.table.entry(hash, holds(hash, key), |(h, _)| *h);
        match entry {
            hashbrown::hash_table::Entry::Occupied(found) => {
                (&mut found.into_mut().1.bucket, false)
            }
            hashbrown::hash_table::Entry::Vacant(slot) => {
                let entry = Box::new(Entry {
                    key: key.into(),
                    bucket: Bucket::default(),
                });
                (&mut slot.insert((hash, entry)).into_mut().1.bucket, true)
            }
        }
    }

    /// Forgets `key` and its rows.
    pub fn remove(&mut self, hash: u64, key: &[u8]) {
        if let Ok(found) = self.table.find_entry(hash, holds(hash, key)) {
            found.remove();
        }
    }

    /// Every key with its rows.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &Bucket)> {
        self.table.iter().map(|(_, e)| (e.key.as_ref(), &e.bucket))
    }

    /// Keeps the keys `keep` says to.
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &Bucket) -> bool) {
        self.table.retain(|(_, e)| keep(&e.key, &e.bucket));
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        self.table.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sharing_a_hash_stay_apart() {
        let mut side = Side::default();
        for key in [b"a".as_slice(), b"b", b"c"] {
            let (bucket, added) = side.get_or_insert(1, key);
            assert!(added);
            bucket.entry(key).0.copies = 1;
        }
        assert!(!side.get_or_insert(1, b"b").1, "found, not added again");
        side.remove(1, b"b");
        assert!(side.get(1, b"b").is_none());
        let mut keys: Vec<&[u8]> = side.iter().map(|(k, _)| k).collect();
        keys.sort();
        assert_eq!(keys, [b"a".as_slice(), b"c"]);
        side.retain(|key, _| key == b"c");
        assert!(side.get(1, b"a").is_none());
        assert_eq!(side.get_mut(1, b"c").map(|b| b.rows.len()), Some(1));
    }

    #[test]
    fn many_keys_survive_the_table_growing() {
        let mut side = Side::default();
        let hash = |i: u64| i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for i in 0..10_000u64 {
            side.get_or_insert(hash(i), &i.to_le_bytes())
                .0
                .entry(b"row")
                .0
                .copies = 1;
        }
        for i in 0..10_000u64 {
            assert!(side.get(hash(i), &i.to_le_bytes()).is_some(), "key {i}");
        }
    }
}
