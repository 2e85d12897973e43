//! The interval join's key index: a key's hash to the buffered rows holding
//! that key.
//!
//! In: rows to index (hash, time, stored batch id, row number) and hashes to
//! look up; a [`Liveness`] oracle (the side's stored batches) saying whether
//! an indexed row is still buffered. Out: the rows indexed under a hash,
//! one inline or a set ordered by time.
//!
//! An open-addressing table of 16-byte slots (hash, entry) with linear
//! probing and a power-of-two capacity; a hash has at most one slot. The
//! entry is one row (its batch id and row number packed in a `u64`) or
//! the number of a set of rows ordered by time (a key several buffered
//! rows share, so a probe visits only the rows in its time range).
//!
//! Eviction does not touch the index: an evicted row's slot stays until an
//! insert that passes it takes it over (once the row's whole batch is
//! gone), or a sweep empties it when the table fills; lookups skip it
//! because the oracle says its row is gone. A sweep is one pass over the
//! table in place (linear probing lets each kept entry move back towards
//! its home slot), so it costs sequential reads rather than a cache miss
//! per entry.
//!
//! The table outgrows the L2 cache at some ten thousand keys, and probing
//! a batch's keys one by one waits on a cache miss per key: the CPU
//! cannot run far enough ahead through a probe's work to start the next
//! key's load. [`KeyIndex::touch`] loads every key's first slot in one
//! tight pass first, loads independent of each other that the CPU
//! overlaps, so the probes and inserts that follow find their slots cached.
//!
//! ```
//! use eddy_engine::operators::join_state::key_index::{Found, KeyIndex, Liveness, RowAt};
//!
//! struct AllLive;
//! impl Liveness for AllLive {
//!     fn live(&self, _: RowAt) -> bool { true }
//!     fn gone(&self, _: RowAt) -> bool { false }
//!     fn time(&self, _: RowAt) -> Option<i64> { Some(0) }
//! }
//! let mut index = KeyIndex::default();
//! index.insert(42, 1_000, RowAt { batch: 0, row: 3 }, &AllLive).unwrap();
//! assert!(matches!(index.get(42), Some(Found::One(RowAt { batch: 0, row: 3 }))));
//! assert!(index.get(7).is_none());
//! ```

use std::collections::BTreeSet;

use crate::error::{EngineError, Result};
use crate::time::Timestamp;

use super::RowRef;

/// Bits of a packed entry holding the row number: a stored batch has
/// fewer rows than 2^22 (the join cuts larger ones).
pub const ROW_BITS: u32 = 22;
/// Rows a stored batch may hold.
pub const MAX_BATCH_ROWS: usize = 1 << ROW_BITS;
/// Batch ids below this fit an entry (2^41: 70 years at 1,000 batches a
/// second).
const BATCH_LIMIT: u64 = 1 << (63 - ROW_BITS);
/// An entry naming a set of rows rather than one row.
const SET_BIT: u64 = 1 << 63;
/// The entry of an empty slot.
const EMPTY: u64 = u64::MAX;
/// Capacity of a table's first allocation.
const MIN_CAPACITY: usize = 1024;

/// A buffered row: stored batch id and row within it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowAt {
    /// Id of the stored batch.
    pub batch: u64,
    /// Row within the batch.
    pub row: u32,
}

/// What the index knows of its rows' fate: whether a row is still buffered
/// (not evicted), and its event time.
pub trait Liveness {
    /// Whether the row is buffered and not evicted.
    fn live(&self, at: RowAt) -> bool;
    /// Whether the row's whole batch is gone: a test cheaper than
    /// [`Liveness::live`] (no read of the batch's rows) that sees most
    /// evicted rows.
    fn gone(&self, at: RowAt) -> bool;
    /// The row's event time, while its batch is stored.
    fn time(&self, at: RowAt) -> Option<Timestamp>;
}

/// The rows under one hash.
#[derive(Debug)]
pub enum Found<'a> {
    /// One row.
    One(RowAt),
    /// Several, ordered by time.
    Many(&'a BTreeSet<RowRef>),
}

#[derive(Clone, Copy)]
struct Slot {
    hash: u64,
    entry: u64,
}

const EMPTY_SLOT: Slot = Slot {
    hash: 0,
    entry: EMPTY,
};

fn pack(at: RowAt) -> u64 {
    (at.batch << ROW_BITS) | u64::from(at.row)
}

fn unpack(entry: u64) -> RowAt {
    RowAt {
        batch: entry >> ROW_BITS,
        row: (entry & ((1 << ROW_BITS) - 1)) as u32,
    }
}

/// The key index of one side of an interval join.
#[derive(Default)]
pub struct KeyIndex {
    slots: Vec<Slot>,
    /// Slots not empty (live, or holding rows since evicted).
    occupied: usize,
    /// Sets of rows sharing a hash; `None` where free.
    sets: Vec<Option<BTreeSet<RowRef>>>,
    free_sets: Vec<usize>,
    /// Rows in all sets, counted as they come and go.
    set_rows: usize,
}

impl KeyIndex {
    /// Slots allocated.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Slots in use (including those of rows since evicted).
    pub fn occupied(&self) -> usize {
        self.occupied
    }

    /// Approximate bytes held.
    pub fn size_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.set_rows * 32
    }

    /// Whether the count of rows in sets is what walking them finds.
    #[cfg(test)]
    pub fn set_rows_are_counted(&self) -> bool {
        self.set_rows == self.sets.iter().flatten().map(BTreeSet::len).sum::<usize>()
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// Loads the first slot of each of `hashes`, so that lookups and inserts
    /// of them that follow find it cached (see the module doc).
    pub fn touch(&self, hashes: impl Iterator<Item = u64>) {
        if self.slots.is_empty() {
            return;
        }
        let mask = self.mask();
        let mut seen = 0u64;
        for hash in hashes {
            seen ^= self.slots[hash as usize & mask].entry;
        }
        std::hint::black_box(seen);
    }

    /// The rows indexed under `hash` (some may have been evicted since).
    pub fn get(&self, hash: u64) -> Option<Found<'_>> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.mask();
        let mut pos = hash as usize & mask;
        loop {
            let slot = self.slots[pos];
            if slot.entry == EMPTY {
                return None;
            }
            if slot.hash == hash {
                return Some(self.found(slot.entry));
            }
            pos = (pos + 1) & mask;
        }
    }

    fn found(&self, entry: u64) -> Found<'_> {
        if entry & SET_BIT == 0 {
            Found::One(unpack(entry))
        } else {
            match &self.sets[(entry & !SET_BIT) as usize] {
                Some(set) => Found::Many(set),
                None => unreachable!("a slot names a freed set"),
            }
        }
    }

    /// Indexes row `at` (event time `time`) under `hash`. Its batch must be
    /// stored already, so that `rows` knows it.
    pub fn insert(
        &mut self,
        hash: u64,
        time: Timestamp,
        at: RowAt,
        rows: &impl Liveness,
    ) -> Result<()> {
        if at.batch >= BATCH_LIMIT || at.row as usize >= MAX_BATCH_ROWS {
            return Err(EngineError::State(format!(
                "interval join: row {} of batch {} does not fit the key index",
                at.row, at.batch
            )));
        }
        if (self.occupied + 1) * 4 > self.slots.len() * 3 {
            self.sweep(rows);
        }
        let mask = self.mask();
        let mut pos = hash as usize & mask;
        // The first slot of an evicted row on the way: taken over if the
        // hash has no slot of its own.
        let mut reusable = None;
        loop {
            let slot = self.slots[pos];
            if slot.entry == EMPTY {
                break;
            }
            if slot.hash == hash {
                self.add_to(pos, time, at, rows);
                return Ok(());
            }
            if reusable.is_none() && slot.entry & SET_BIT == 0 && rows.gone(unpack(slot.entry)) {
                reusable = Some(pos);
            }
            pos = (pos + 1) & mask;
        }
        let entry = pack(at);
        match reusable {
            Some(old) => self.slots[old] = Slot { hash, entry },
            None => {
                self.slots[pos] = Slot { hash, entry };
                self.occupied += 1;
            }
        }
        Ok(())
    }

    /// Adds a row to the slot at `pos`, which holds its hash.
    fn add_to(&mut self, pos: usize, time: Timestamp, at: RowAt, rows: &impl Liveness) {
        let entry = self.slots[pos].entry;
        let new = RowRef {
            time,
            batch: at.batch,
            row: at.row,
        };
        if entry & SET_BIT != 0 {
            if let Some(set) = &mut self.sets[(entry & !SET_BIT) as usize] {
                self.set_rows += usize::from(set.insert(new));
                // Drop evicted rows from the front (the oldest): each goes
                // once, so a hot key's set holds about its live rows.
                while let Some(&first) = set.first() {
                    if first == new || rows.live(first.at()) {
                        break;
                    }
                    set.pop_first();
                    self.set_rows -= 1;
                }
            }
            return;
        }
        let old = unpack(entry);
        let old_time = rows.time(old).filter(|_| rows.live(old));
        let Some(old_time) = old_time else {
            // The slot's row was evicted: the new row takes its place.
            self.slots[pos].entry = pack(at);
            return;
        };
        let set = BTreeSet::from([
            RowRef {
                time: old_time,
                batch: old.batch,
                row: old.row,
            },
            new,
        ]);
        self.set_rows += set.len();
        let number = match self.free_sets.pop() {
            Some(number) => {
                self.sets[number] = Some(set);
                number
            }
            None => {
                self.sets.push(Some(set));
                self.sets.len() - 1
            }
        };
        self.slots[pos].entry = SET_BIT | number as u64;
    }

    /// Drops the slots and set members of evicted rows, then sizes the
    /// table for the rows left: at most half full (so that a quarter of it
    /// is inserted before it is 3/4 full and swept again), and at least an
    /// eighth full unless at `MIN_CAPACITY`. (A sparser table, swept at 5/8
    /// full, made runs shorter but the table larger, and the join slower.)
    pub fn sweep(&mut self, rows: &impl Liveness) {
        if self.slots.is_empty() {
            self.resize(MIN_CAPACITY);
            return;
        }
        self.drop_evicted(rows);
        let capacity = self.slots.len();
        if self.occupied * 2 > capacity {
            self.resize(capacity * 2);
        } else if capacity > MIN_CAPACITY && self.occupied * 8 < capacity {
            self.resize((self.occupied * 4).next_power_of_two().max(MIN_CAPACITY));
        }
    }

    /// Empties the slots of evicted rows in place, in one pass over the
    /// table: walking from an empty slot, each kept entry moves to the
    /// first free slot from its home on, which is never past where it was.
    fn drop_evicted(&mut self, rows: &impl Liveness) {
        let mask = self.mask();
        let Some(start) = self.slots.iter().position(|s| s.entry == EMPTY) else {
            return;
        };
        let mut occupied = 0;
        for step in 1..=self.slots.len() {
            let pos = (start + step) & mask;
            let slot = std::mem::replace(&mut self.slots[pos], EMPTY_SLOT);
            if slot.entry == EMPTY {
                continue;
            }
            let Some(slot) = self.kept(slot, rows) else {
                continue;
            };
            self.place(slot);
            occupied += 1;
        }
        self.occupied = occupied;
        if self.free_sets.len() == self.sets.len() {
            self.sets.clear();
            self.free_sets.clear();
        }
    }

    /// `slot` with its evicted rows dropped: `None` when none are left, a
    /// set of one row turned into that row.
    fn kept(&mut self, slot: Slot, rows: &impl Liveness) -> Option<Slot> {
        if slot.entry & SET_BIT == 0 {
            return rows.live(unpack(slot.entry)).then_some(slot);
        }
        let number = (slot.entry & !SET_BIT) as usize;
        let set = self.sets[number].as_mut()?;
        let before = set.len();
        set.retain(|r| rows.live(r.at()));
        self.set_rows -= before - set.len();
        if set.len() > 1 {
            return Some(slot);
        }
        self.set_rows -= set.len();
        let only = set.first().map(|only| Slot {
            hash: slot.hash,
            entry: pack(only.at()),
        });
        self.sets[number] = None;
        self.free_sets.push(number);
        only
    }

    /// Moves every entry into a table of `capacity` slots.
    fn resize(&mut self, capacity: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY_SLOT; capacity]);
        for slot in old.into_iter().filter(|s| s.entry != EMPTY) {
            self.place(slot);
        }
    }

    /// Puts `slot` in the first empty slot from its home on (its hash has
    /// no slot in the table).
    fn place(&mut self, slot: Slot) {
        let mask = self.mask();
        let mut to = slot.hash as usize & mask;
        while self.slots[to].entry != EMPTY {
            to = (to + 1) & mask;
        }
        self.slots[to] = slot;
    }

    /// Forgets every row, keeping the table's allocation.
    pub fn clear(&mut self) {
        self.slots.fill(EMPTY_SLOT);
        self.occupied = 0;
        self.sets.clear();
        self.free_sets.clear();
        self.set_rows = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// Rows by (batch, row) with their times; evicted ones marked.
    #[derive(Default)]
    struct Rows {
        times: HashMap<(u64, u32), Timestamp>,
        evicted: std::collections::HashSet<(u64, u32)>,
    }

    impl Liveness for Rows {
        fn live(&self, at: RowAt) -> bool {
            self.times.contains_key(&(at.batch, at.row))
                && !self.evicted.contains(&(at.batch, at.row))
        }
        fn gone(&self, at: RowAt) -> bool {
            !self.live(at)
        }
        fn time(&self, at: RowAt) -> Option<Timestamp> {
            self.times.get(&(at.batch, at.row)).copied()
        }
    }

    fn rows_of(index: &KeyIndex, hash: u64, oracle: &Rows) -> Vec<(u64, u32)> {
        match index.get(hash) {
            None => Vec::new(),
            Some(Found::One(at)) => {
                if oracle.live(at) {
                    vec![(at.batch, at.row)]
                } else {
                    Vec::new()
                }
            }
            Some(Found::Many(set)) => set
                .iter()
                .filter(|r| oracle.live(r.at()))
                .map(|r| (r.batch, r.row))
                .collect(),
        }
    }

    /// Hash of key `h`: the keys differ mostly above the table's mask, so
    /// they share few home slots and chains are long.
    fn colliding(h: u64) -> u64 {
        (h << 32) | (h % 7)
    }

    #[test]
    fn colliding_hashes_and_shared_keys_grow_and_shrink_with_their_rows() {
        let mut index = KeyIndex::default();
        let mut oracle = Rows::default();
        // 10,000 rows over 2,500 hashes, all landing in few home slots
        // (hashes differ only above the table's mask) so chains are long.
        for i in 0..10_000u32 {
            let at = RowAt {
                batch: u64::from(i / 100),
                row: i % 100,
            };
            oracle.times.insert((at.batch, at.row), Timestamp::from(i));
            let hash = colliding(u64::from(i % 2_500));
            index.insert(hash, Timestamp::from(i), at, &oracle).unwrap();
        }
        for h in 0..2_500u64 {
            let found = rows_of(&index, colliding(h), &oracle);
            assert_eq!(found.len(), 4, "hash {h}");
        }
        // Evict all but the last 100 rows: the sets shrink to their live
        // rows at a sweep, single rows go inline, the table shrinks.
        for i in 0..9_900u32 {
            oracle.evicted.insert((u64::from(i / 100), i % 100));
        }
        index.sweep(&oracle);
        assert_eq!(index.occupied(), 100);
        assert_eq!(index.capacity(), MIN_CAPACITY);
        assert!(index.sets.iter().flatten().count() == 0);
        assert_eq!(index.set_rows, 0, "set rows counted as they go");
        for i in 9_900..10_000u32 {
            assert_eq!(
                rows_of(&index, colliding(u64::from(i % 2_500)), &oracle),
                vec![(u64::from(i / 100), i % 100)]
            );
        }
        assert!(rows_of(&index, colliding(5), &oracle).is_empty());
    }

    #[test]
    fn an_evicted_rows_slot_is_taken_over_and_the_table_stays_bounded() {
        let mut index = KeyIndex::default();
        let mut oracle = Rows::default();
        // A sliding window of 500 live rows over 100,000 unique keys.
        for i in 0..100_000u32 {
            let at = RowAt {
                batch: u64::from(i),
                row: 0,
            };
            oracle.times.insert((at.batch, 0), Timestamp::from(i));
            index
                .insert(
                    u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15),
                    Timestamp::from(i),
                    at,
                    &oracle,
                )
                .unwrap();
            if i >= 500 {
                oracle.evicted.insert((u64::from(i - 500), 0));
            }
            assert!(
                index.capacity() <= 4 * MIN_CAPACITY,
                "{} slots",
                index.capacity()
            );
        }
        for i in 99_000..100_000u32 {
            let hash = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let expected = if i >= 99_500 {
                vec![(u64::from(i), 0)]
            } else {
                vec![]
            };
            assert_eq!(rows_of(&index, hash, &oracle), expected);
        }
    }

    #[test]
    fn a_hot_keys_set_drops_its_evicted_rows_as_it_grows() {
        let mut index = KeyIndex::default();
        let mut oracle = Rows::default();
        for i in 0..10_000u32 {
            let at = RowAt { batch: 0, row: i };
            oracle.times.insert((0, i), Timestamp::from(i));
            index.insert(7, Timestamp::from(i), at, &oracle).unwrap();
            if i >= 10 {
                oracle.evicted.insert((0, i - 10));
            }
        }
        let Some(Found::Many(set)) = index.get(7) else {
            panic!("a hot key has a set");
        };
        assert!(set.len() <= 11, "{} rows held", set.len());
        assert_eq!(rows_of(&index, 7, &oracle).len(), 10);
    }

    #[test]
    fn random_inserts_evictions_and_sweeps_agree_with_a_plain_map() {
        let mut index = KeyIndex::default();
        let mut oracle = Rows::default();
        let mut model: HashMap<u64, Vec<(u64, u32)>> = HashMap::new();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut row = 0u32;
        for step in 0..60_000u32 {
            let at = RowAt {
                batch: u64::from(row / 50),
                row: row % 50,
            };
            row += 1;
            // 3,000 keys whose hashes share few home slots.
            let key = next() % 3_000;
            let hash = (key << 40) | (key % 13);
            oracle
                .times
                .insert((at.batch, at.row), Timestamp::from(step));
            index
                .insert(hash, Timestamp::from(step), at, &oracle)
                .unwrap();
            model.entry(hash).or_default().push((at.batch, at.row));
            // Evict a random older row now and then, and sweep.
            if next() % 3 == 0 && row > 10 {
                let victim = (next() % u64::from(row)) as u32;
                oracle.evicted.insert((u64::from(victim / 50), victim % 50));
            }
            if next() % 5_000 == 0 {
                index.sweep(&oracle);
            }
            if step % 7_919 == 0 || step == 59_999 {
                for (&hash, rows) in &model {
                    let mut expected: Vec<(u64, u32)> = rows
                        .iter()
                        .copied()
                        .filter(|&(b, r)| oracle.live(RowAt { batch: b, row: r }))
                        .collect();
                    expected.sort_unstable();
                    let mut found = rows_of(&index, hash, &oracle);
                    found.sort_unstable();
                    assert_eq!(found, expected, "hash {hash:x} at step {step}");
                }
            }
        }
    }

    #[test]
    fn rows_beyond_the_packing_are_refused() {
        let mut index = KeyIndex::default();
        let oracle = Rows::default();
        let too_far = RowAt {
            batch: BATCH_LIMIT,
            row: 0,
        };
        assert!(index.insert(1, 0, too_far, &oracle).is_err());
        let too_long = RowAt {
            batch: 0,
            row: MAX_BATCH_ROWS as u32,
        };
        assert!(index.insert(1, 0, too_long, &oracle).is_err());
    }
}
