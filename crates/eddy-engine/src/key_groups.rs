//! Key groups: the fixed units keyed state is spread in, so that a job can
//! resume with another number of instances.
//!
//! In: a key's hash, or a batch's key columns. Out: its key group
//! (`0..key_groups`), and the instance of N that owns the group.
//!
//! Every key belongs to one of `key_groups` groups (the job's *maximum
//! parallelism*, 128 unless set, recorded in each checkpoint); instance
//! `i` of N owns a contiguous range of groups, as Flink assigns them:
//!
//! ```text
//!  key ──hash──> group g = hash % G ──> instance ⌊g·N / G⌋
//!  instance i owns groups [⌈i·G/N⌉, ⌈(i+1)·G/N⌉)
//! ```
//!
//! A key's group never changes, so resuming at another N only moves whole
//! groups: going from N to 2N, each new instance's keys all come from one
//! old instance. A job cannot run more instances than it has groups.
//!
//! ```
//! use eddy_engine::key_groups::KeyGroups;
//!
//! let groups = KeyGroups::new(128).unwrap();
//! assert_eq!(groups.instance_of(0, 4), 0);
//! assert_eq!(groups.instance_of(127, 4), 3);
//! assert_eq!(groups.range_of(1, 4), 32..64);
//! // Every group has exactly one owner, at any N.
//! for n in 1..=128 {
//!     for g in 0..128 {
//!         let owner = groups.instance_of(g, n);
//!         assert!(groups.range_of(owner, n).contains(&g));
//!     }
//! }
//! ```

use std::ops::Range;

use serde::{Deserialize, Serialize};

use crate::error::{EngineError, Result};

/// Key groups a job gets unless told otherwise (Flink's default for small
/// jobs), or more for a job started with many instances
/// ([`KeyGroups::for_parallelism`]).
pub const DEFAULT_KEY_GROUPS: u32 = 128;

/// The most key groups a job may have (as Flink: 2^15).
pub const MAX_KEY_GROUPS: u32 = 1 << 15;

/// How many key groups a job's keyed state is spread in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct KeyGroups(u32);

impl Default for KeyGroups {
    fn default() -> Self {
        Self(DEFAULT_KEY_GROUPS)
    }
}

impl std::fmt::Display for KeyGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl KeyGroups {
    /// `count` key groups; an error outside `1..=`[`MAX_KEY_GROUPS`].
    pub fn new(count: u32) -> Result<Self> {
        if !(1..=MAX_KEY_GROUPS).contains(&count) {
            return Err(EngineError::Graph(format!(
                "the maximum parallelism (key groups) must be between 1 and {MAX_KEY_GROUPS}, not {count}"
            )));
        }
        Ok(Self(count))
    }

    /// The key groups of a job started with `parallelism` instances and no
    /// setting: [`DEFAULT_KEY_GROUPS`], or for a larger job 1.5 times its
    /// instances rounded up to a power of two (room to grow), as Flink.
    pub fn for_parallelism(parallelism: usize) -> Self {
        let wanted = (parallelism as u64).saturating_mul(3) / 2;
        let rounded = wanted
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(u64::from(MAX_KEY_GROUPS));
        Self(rounded.clamp(u64::from(DEFAULT_KEY_GROUPS), u64::from(MAX_KEY_GROUPS)) as u32)
    }

    /// The number of groups.
    pub fn count(self) -> u32 {
        self.0
    }

    /// The group of a key whose hash is `hash`.
    #[inline]
    pub fn group_of_hash(self, hash: u64) -> u32 {
        // A power of two (as the default and every derived count is) takes
        // the low bits, the same as `%` without a division per row.
        if self.0.is_power_of_two() {
            (hash & u64::from(self.0 - 1)) as u32
        } else {
            (hash % u64::from(self.0)) as u32
        }
    }

    /// The instance of `instances` that owns `group`.
    #[inline]
    pub fn instance_of(self, group: u32, instances: u32) -> u32 {
        let instances = instances.clamp(1, self.0);
        let scaled = u64::from(group) * u64::from(instances);
        if self.0.is_power_of_two() {
            (scaled >> self.0.trailing_zeros()) as u32
        } else {
            (scaled / u64::from(self.0)) as u32
        }
    }

    /// The groups instance `index` of `instances` owns.
    pub fn range_of(self, index: u32, instances: u32) -> Range<u32> {
        let instances = u64::from(instances.clamp(1, self.0));
        let g = u64::from(self.0);
        let start = (u64::from(index) * g).div_ceil(instances);
        let end = ((u64::from(index) + 1) * g).div_ceil(instances);
        start as u32..end.min(g) as u32
    }

    /// The old instances (of `before`) whose groups overlap those of new
    /// instance `index` (of `after`), each with whether the new instance
    /// carries its counters: the one owning the old instance's first group
    /// does, so every old instance is counted exactly once.
    pub fn handed_over(self, index: u32, after: u32, before: u32) -> Vec<(u32, bool)> {
        let owned = self.range_of(index, after);
        (0..before)
            .filter_map(|old| {
                let held = self.range_of(old, before);
                (held.start < owned.end && owned.start < held.end)
                    .then(|| (old, owned.contains(&held.start)))
            })
            .collect()
    }

    /// An error unless `instances` can run with these groups (each owning
    /// at least one).
    pub fn check_parallelism(self, instances: usize) -> Result<()> {
        if instances > self.0 as usize {
            return Err(EngineError::Graph(format!(
                "{instances} instances of each keyed operator exceed the job's maximum \
                 parallelism of {} (its key groups, fixed when the job first ran); run with \
                 --parallelism {} or fewer, or start afresh (--ignore-state) with a larger \
                 --max-parallelism",
                self.0, self.0
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_and_owners_are_the_division_s_whatever_the_count() {
        let mut hash = 0x2545_f491_4f6c_dd1du64;
        for count in [1u32, 2, 7, 64, 128, 1000, 1024, MAX_KEY_GROUPS] {
            let groups = KeyGroups::new(count).unwrap_or_default();
            for _ in 0..2000 {
                hash ^= hash << 13;
                hash ^= hash >> 7;
                hash ^= hash << 17;
                let group = groups.group_of_hash(hash);
                assert_eq!(u64::from(group), hash % u64::from(count));
                for instances in [1u32, 2, 3, 5, count, count + 1] {
                    let clamped = instances.clamp(1, count);
                    let owner = u64::from(group) * u64::from(clamped) / u64::from(count);
                    assert_eq!(u64::from(groups.instance_of(group, instances)), owner);
                }
            }
        }
    }

    #[test]
    fn ranges_cover_every_group_once_in_order() {
        for count in [1u32, 7, 128, 1000] {
            let groups = KeyGroups::new(count).unwrap_or_default();
            for n in [1u32, 2, 3, 5, 7, count]
                .into_iter()
                .filter(|&n| n <= count)
            {
                let mut next = 0;
                for i in 0..n {
                    let range = groups.range_of(i, n);
                    assert_eq!(range.start, next, "{count} groups, {n} instances");
                    assert!(
                        !range.is_empty(),
                        "{count} groups, {n} instances: {i} owns none"
                    );
                    next = range.end;
                }
                assert_eq!(next, count);
            }
        }
    }

    #[test]
    fn doubling_the_instances_splits_each_range_in_two() {
        let groups = KeyGroups::default();
        for i in 0..4 {
            let old = groups.range_of(i, 4);
            let (a, b) = (groups.range_of(2 * i, 8), groups.range_of(2 * i + 1, 8));
            assert_eq!((a.start, a.end, b.end), (old.start, b.start, old.end));
        }
    }

    #[test]
    fn every_old_instance_is_handed_over_and_counted_once() {
        let groups = KeyGroups::default();
        for (before, after) in [(2, 3), (3, 1), (1, 4), (4, 8)] {
            let mut counted = vec![0; before as usize];
            for index in 0..after {
                for (old, carries) in groups.handed_over(index, after, before) {
                    counted[old as usize] += usize::from(carries);
                }
            }
            assert!(
                counted.iter().all(|&c| c == 1),
                "{before} -> {after}: {counted:?}"
            );
        }
        // Doubling: each new instance takes from exactly one old one.
        assert_eq!(groups.handed_over(3, 8, 4), vec![(1, false)]);
    }

    #[test]
    fn large_jobs_get_room_to_grow() {
        assert_eq!(KeyGroups::for_parallelism(1).count(), 128);
        assert_eq!(KeyGroups::for_parallelism(100).count(), 256);
        assert_eq!(KeyGroups::for_parallelism(1 << 20).count(), MAX_KEY_GROUPS);
        assert!(KeyGroups::new(0).is_err());
        assert!(KeyGroups::default().check_parallelism(129).is_err());
        assert!(KeyGroups::default().check_parallelism(128).is_ok());
    }
}
