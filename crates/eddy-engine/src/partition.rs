//! Which of N parallel instances (or exchange partitions) a row belongs to:
//! one hash of the row's key.
//!
//! In: the key columns of a batch and the instance count. Out: each row's
//! instance. Two hashes, for two lifetimes:
//!
//! - [`instance_rows`], what [`crate::operators::key_split`] routes by
//!   inside one process: a word-at-a-time multiply hash over the key
//!   columns themselves, column by column (no row encoding), taken to a
//!   key group ([`key_group_rows`], [`crate::key_groups`]) and to the
//!   instance owning that group. Checkpointed keyed state is spread by the
//!   same groups when a job resumes at another N, so the key split names
//!   the hash's version ([`INSTANCE_HASH`]) and the groups in its plan,
//!   and a checkpoint taken with another routing is refused rather than
//!   resumed with keys in the wrong instance.
//! - [`partition_rows`], what Kafka exchanges partition by: FNV-1a over the
//!   key's Arrow row encoding, the same in every process of a group and
//!   every eddy version, since the topics outlive the processes that wrote
//!   them.
//!
//! Both are fixed (not seeded), so a restart routes as before. Without key
//! columns every row belongs to instance 0.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, StringArray};
//! use eddy_engine::partition::{instance_rows, partition_rows};
//!
//! let keys: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec!["a", "b", "a"]))];
//! let parts = partition_rows(&keys, 3, 4).unwrap();
//! assert_eq!(parts[0], parts[2]); // one key, one partition
//! assert!(parts.iter().all(|&p| p < 4));
//! let groups = eddy_engine::key_groups::KeyGroups::default();
//! let instances = instance_rows(&keys, 3, 4, groups).unwrap();
//! assert_eq!(instances[0], instances[2]);
//! ```

use datafusion::arrow::array::{downcast_primitive_array, Array, ArrayRef, AsArray};
use datafusion::arrow::buffer::NullBuffer;
use datafusion::arrow::datatypes::{DataType, ToByteSlice};
use datafusion::arrow::row::{RowConverter, SortField};

use crate::error::Result;
use crate::key_groups::KeyGroups;

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The exchange partition (`0..partitions`) of each of `rows` rows with
/// key columns `keys`: stable across processes and versions (see the
/// module docs).
pub fn partition_rows(keys: &[ArrayRef], rows: usize, partitions: u32) -> Result<Vec<u32>> {
    if keys.is_empty() || partitions <= 1 {
        return Ok(vec![0; rows]);
    }
    let fields = keys
        .iter()
        .map(|k| SortField::new(k.data_type().clone()))
        .collect();
    let converter = RowConverter::new(fields)?;
    let encoded = converter.convert_columns(keys)?;
    Ok(encoded
        .iter()
        .map(|row| (fnv1a(row.as_ref()) % u64::from(partitions)) as u32)
        .collect())
}

/// The version of [`instance_rows`]' routing, named in key split plans (and
/// so in checkpoint fingerprints). Change it with the hash.
pub const INSTANCE_HASH: &str = "mix64";

const SEED: u64 = 0x243f_6a88_85a3_08d3;
const MULTIPLIER: u64 = 0x9e37_79b9_7f4a_7c15;
/// What a null key column contributes.
const NULL_WORD: u64 = 0x5bd1_e995_5bd1_e995;

#[inline]
fn mix(hash: u64, word: u64) -> u64 {
    (hash.rotate_left(26) ^ word).wrapping_mul(MULTIPLIER)
}

/// Folds `bytes` into `hash` eight bytes (little-endian) at a time, then
/// their length, so that "ab" + "c" and "a" + "bc" differ.
#[inline]
fn mix_bytes(mut hash: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for chunk in &mut words {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    let rest = words.remainder();
    if !rest.is_empty() {
        let mut word = [0u8; 8];
        word[..rest.len()].copy_from_slice(rest);
        hash = mix(hash, u64::from_le_bytes(word));
    }
    mix(hash, bytes.len() as u64)
}

/// Murmur3's finaliser: every input bit reaches the low bits taken by `%`.
#[inline]
fn finish(mut hash: u64) -> u64 {
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    hash ^ (hash >> 33)
}

/// Folds each row's value of fixed-width values (`width` bytes each, laid
/// out in `bytes`) into its hash.
fn mix_fixed(hashes: &mut [u64], bytes: &[u8], width: usize, nulls: Option<&NullBuffer>) {
    if width == 0 {
        return;
    }
    for (row, (hash, value)) in hashes.iter_mut().zip(bytes.chunks_exact(width)).enumerate() {
        *hash = if nulls.is_some_and(|n| n.is_null(row)) {
            mix(*hash, NULL_WORD)
        } else if width <= 8 {
            let mut word = [0u8; 8];
            word[..width].copy_from_slice(value);
            mix(*hash, u64::from_le_bytes(word))
        } else {
            mix_bytes(*hash, value)
        };
    }
}

/// Folds each row's value of a variable-width column into its hash.
fn mix_variable<'a>(hashes: &mut [u64], values: impl Iterator<Item = Option<&'a [u8]>>) {
    for (hash, value) in hashes.iter_mut().zip(values) {
        *hash = match value {
            Some(bytes) => mix_bytes(*hash, bytes),
            None => mix(*hash, NULL_WORD),
        };
    }
}

/// Folds each row's value of a view column (strings or binaries) into its
/// hash, as [`mix_bytes`] folds the value's bytes: a value of at most 12
/// bytes is read from its view itself (the bytes after it masked off), a
/// longer one through `value`.
fn mix_views<'a>(
    hashes: &mut [u64],
    views: &[u128],
    nulls: Option<&NullBuffer>,
    value: impl Fn(usize) -> &'a [u8],
) {
    // The low `len` bytes of a word (`len` 1 to 8).
    let low = |word: u64, len: u32| word & (u64::MAX >> (64 - 8 * len));
    for (row, (hash, &view)) in hashes.iter_mut().zip(views).enumerate() {
        let len = view as u32;
        *hash = if nulls.is_some_and(|n| n.is_null(row)) {
            mix(*hash, NULL_WORD)
        } else if len == 0 {
            mix(*hash, 0)
        } else if len <= 8 {
            mix(mix(*hash, low((view >> 32) as u64, len)), u64::from(len))
        } else if len <= 12 {
            let first = mix(*hash, (view >> 32) as u64);
            mix(
                mix(first, low((view >> 96) as u64, len - 8)),
                u64::from(len),
            )
        } else {
            mix_bytes(*hash, value(row))
        };
    }
}

/// Folds one key column into the rows' hashes. Strings hash as their bytes
/// whichever of the three string layouts holds them (and binaries
/// likewise), so two join sides agree when one has views; other nested or
/// rare types go through the row encoding.
fn mix_column(hashes: &mut [u64], column: &ArrayRef) -> Result<()> {
    downcast_primitive_array!(
        column => {
            let bytes = column.values().as_ref().to_byte_slice();
            let width = column.data_type().primitive_width().unwrap_or(0);
            mix_fixed(hashes, bytes, width, column.nulls());
        }
        DataType::Utf8 => mix_variable(hashes, column.as_string::<i32>().iter().map(|v| v.map(str::as_bytes))),
        DataType::LargeUtf8 => mix_variable(hashes, column.as_string::<i64>().iter().map(|v| v.map(str::as_bytes))),
        DataType::Utf8View => {
            let strings = column.as_string_view();
            mix_views(hashes, strings.views(), strings.nulls(), |row| strings.value(row).as_bytes());
        }
        DataType::Binary => mix_variable(hashes, column.as_binary::<i32>().iter()),
        DataType::LargeBinary => mix_variable(hashes, column.as_binary::<i64>().iter()),
        DataType::BinaryView => {
            let binaries = column.as_binary_view();
            mix_views(hashes, binaries.views(), binaries.nulls(), |row| binaries.value(row));
        }
        DataType::Boolean => {
            let column = column.as_boolean();
            for (row, hash) in hashes.iter_mut().enumerate() {
                let word = if column.is_null(row) { NULL_WORD } else { u64::from(column.value(row)) };
                *hash = mix(*hash, word);
            }
        }
        DataType::Dictionary(_, values) => {
            // As the values it stands for, so a dictionary side of a join
            // meets a plain one.
            let plain = datafusion::arrow::compute::cast(column, values)?;
            mix_column(hashes, &plain)?;
        }
        other => {
            let converter = RowConverter::new(vec![SortField::new(other.clone())])?;
            let encoded = converter.convert_columns(std::slice::from_ref(column))?;
            for (hash, row) in hashes.iter_mut().zip(encoded.iter()) {
                *hash = mix_bytes(*hash, row.as_ref());
            }
        }
    );
    Ok(())
}

/// Each row's hash over its key columns `keys` (before the finaliser).
fn key_hashes(keys: &[ArrayRef], rows: usize) -> Result<Vec<u64>> {
    let mut hashes = vec![SEED; rows];
    for key in keys {
        mix_column(&mut hashes, key)?;
    }
    Ok(hashes)
}

/// The key group ([`crate::key_groups`]) of each of `rows` rows with key
/// columns `keys`: what keyed state is spread in (group 0 without keys).
pub fn key_group_rows(keys: &[ArrayRef], rows: usize, groups: KeyGroups) -> Result<Vec<u32>> {
    if keys.is_empty() {
        return Ok(vec![0; rows]);
    }
    Ok(key_hashes(keys, rows)?
        .into_iter()
        .map(|h| groups.group_of_hash(finish(h)))
        .collect())
}

/// A part (`0..parts`) of each of `rows` rows with key columns `keys`,
/// for splitting one instance's keyed state (spilled windows fire a part
/// at a time): independent of the key group, so the keys of one
/// instance's groups still spread over every part.
pub fn key_part_rows(keys: &[ArrayRef], rows: usize, parts: u32) -> Result<Vec<u32>> {
    if keys.is_empty() || parts <= 1 {
        return Ok(vec![0; rows]);
    }
    Ok(key_hashes(keys, rows)?
        .into_iter()
        .map(|h| (finish(h ^ PART_SALT) % u64::from(parts)) as u32)
        .collect())
}

/// Mixed into a key's hash before it picks a part.
const PART_SALT: u64 = 0x9e37_79b9_7f4a_7c15;

/// The instance (`0..instances`) of each of `rows` rows with key columns
/// `keys`, for routing inside one process: the instance that owns the
/// row's key group (see the module docs).
pub fn instance_rows(
    keys: &[ArrayRef],
    rows: usize,
    instances: u32,
    groups: KeyGroups,
) -> Result<Vec<u32>> {
    if keys.is_empty() || instances <= 1 {
        return Ok(vec![0; rows]);
    }
    Ok(key_hashes(keys, rows)?
        .into_iter()
        .map(|h| groups.instance_of(groups.group_of_hash(finish(h)), instances))
        .collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // test code

    use std::sync::Arc;

    use datafusion::arrow::array::{
        BinaryViewArray, DictionaryArray, Int32Array, Int64Array, LargeStringArray, StringArray,
        StringViewArray,
    };
    use datafusion::arrow::datatypes::Int32Type;

    use super::*;

    fn instances(keys: Vec<ArrayRef>, n: u32) -> Vec<u32> {
        let rows = keys[0].len();
        instance_rows(&keys, rows, n, KeyGroups::default()).unwrap()
    }

    #[test]
    fn a_key_has_one_instance_whatever_its_string_layout() {
        // Lengths 0 to 29: empty, within one word, inline in a view past
        // one word, and longer than a view holds.
        let words: Vec<Option<String>> = (0..500)
            .map(|i| (i % 7 != 0).then(|| format!("customer-{}", i * 37 % 101)))
            .chain((0..30).map(|n| Some("xyz0123456789".repeat(3)[..n].to_string())))
            .collect();
        let plain = instances(vec![Arc::new(StringArray::from(words.clone()))], 4);
        let large = instances(vec![Arc::new(LargeStringArray::from(words.clone()))], 4);
        let views = instances(vec![Arc::new(StringViewArray::from(words.clone()))], 4);
        let binary_views: BinaryViewArray = words
            .iter()
            .map(|w| w.as_deref().map(str::as_bytes))
            .collect();
        let binary_views = instances(vec![Arc::new(binary_views)], 4);
        let dictionary: DictionaryArray<Int32Type> = words.iter().map(|w| w.as_deref()).collect();
        let dictionary = instances(vec![Arc::new(dictionary)], 4);
        assert_eq!(plain, large);
        assert_eq!(plain, views);
        assert_eq!(plain, binary_views);
        assert_eq!(plain, dictionary);
        for (row, word) in words.iter().enumerate() {
            let same = words.iter().position(|w| w == word).unwrap();
            assert_eq!(plain[row], plain[same], "{word:?}");
        }
    }

    #[test]
    fn a_sliced_column_routes_its_rows_as_the_whole_column_does() {
        let ints: ArrayRef = Arc::new(Int64Array::from_iter(
            (0..1000).map(|i| (i % 3 != 0).then_some(i * 7919)),
        ));
        let names: ArrayRef = Arc::new(StringArray::from_iter_values(
            (0..1000).map(|i| format!("k{}", i % 97)),
        ));
        let whole = instances(vec![ints.clone(), names.clone()], 5);
        let part = instances(vec![ints.slice(300, 400), names.slice(300, 400)], 5);
        assert_eq!(part, whole[300..700]);
    }

    #[test]
    fn keys_spread_over_every_instance() {
        let keys: ArrayRef = Arc::new(Int32Array::from_iter_values(0..40_000));
        let routed = instances(vec![keys], 8);
        let mut counts = [0usize; 8];
        for i in routed {
            counts[i as usize] += 1;
        }
        // 5,000 each on average; a fair hash stays within a few percent.
        assert!(
            counts.iter().all(|&c| (4_600..5_400).contains(&c)),
            "{counts:?}"
        );
    }

    #[test]
    fn nulls_and_column_order_count() {
        let a: ArrayRef = Arc::new(StringArray::from(vec![Some("x"), None, Some("")]));
        let b: ArrayRef = Arc::new(StringArray::from(vec![Some("y"), Some("y"), Some("y")]));
        let mut rows = vec![SEED; 3];
        mix_column(&mut rows, &a).unwrap();
        assert_ne!(rows[1], rows[2], "null and empty differ");
        let most = KeyGroups::new(crate::key_groups::MAX_KEY_GROUPS).unwrap();
        let ab = key_group_rows(&[a.clone(), b.clone()], 3, most).unwrap();
        let ba = key_group_rows(&[b, a], 3, most).unwrap();
        assert_ne!(ab, ba);
    }
}
