//! Spilling: where operator state goes when the memory budget refuses it
//! more ([`crate::memory`]), so a job whose state outgrows memory slows
//! down instead of failing.
//!
//! In: a job's [`SpillConfig`] (`--spill-dir`, `--spill-disk-limit`); an
//! operator's spilled entries (key bytes, value bytes) written to its own
//! [`SpillTable`] and read back by key. Out: the entries as they were last
//! written; [`SpillStats`] per table (bytes written, read back, and the
//! table's size on disk) for the run summary, the API and `/metrics`; an
//! [`EngineError::SpillDiskLimit`] once the job's spilled state passes its
//! disk limit.
//!
//! The store is fjall, an LSM tree in safe Rust (see ARCHITECTURE.md,
//! "State beyond memory"): one database per job, opened the first time a
//! node spills, in a fresh directory under the spill directory that is
//! removed when the job ends; one keyspace per node. Spilled state is a
//! cache of the job's state, not its record: checkpoints still carry the
//! whole state, so nothing is journaled or synced and a restarted job
//! starts with an empty store.
//!
//! ```
//! use std::sync::Arc;
//! use eddy_engine::spill::{SpillConfig, SpillSpace};
//!
//! let space = Arc::new(SpillSpace::new(SpillConfig::default()));
//! let mut table = space.table("updating_aggregate").unwrap();
//! table.write([(&b"alice"[..], &b"3 rows"[..])]).unwrap();
//! assert_eq!(table.read(b"alice").unwrap().as_deref(), Some(&b"3 rows"[..]));
//! assert_eq!(table.read(b"bob").unwrap(), None);
//! assert_eq!(table.stats().written_bytes, 11);
//! ```

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use datafusion::arrow::datatypes::SchemaRef;

use crate::error::{EngineError, Result};
use crate::state::table_file::TableFileWriter;

/// Where and how much a job may spill.
#[derive(Debug, Clone, Default)]
pub struct SpillConfig {
    /// The directory spilled state goes under (`--spill-dir`); `None`:
    /// the system's temporary directory.
    pub dir: Option<PathBuf>,
    /// The most bytes the job's spilled state may take on disk
    /// (`--spill-disk-limit`); `None`: unbounded.
    pub disk_limit: Option<u64>,
}

/// A job's spill store, opened the first time one of its nodes spills.
#[derive(Debug)]
pub struct SpillSpace {
    config: SpillConfig,
    opened: Mutex<Option<Opened>>,
    /// Tables handed out, for their names.
    tables: std::sync::atomic::AtomicU64,
}

struct Opened {
    /// Declared before `dir`: the database closes before its directory
    /// is removed.
    db: fjall::Database,
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// What one node's spilled state has cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpillStats {
    /// Bytes of entries written (keys and values), over the node's life.
    pub written_bytes: u64,
    /// Bytes of entries read back.
    pub read_bytes: u64,
    /// The node's spilled state on disk now (compressed, after compaction).
    pub disk_bytes: u64,
}

/// One node's spilled entries: a keyspace of the job's store.
pub struct SpillTable {
    space: Arc<SpillSpace>,
    keyspace: fjall::Keyspace,
    db: fjall::Database,
    stats: SpillStats,
}

/// Memtables are flushed to disk past this size: spilled state is meant
/// to leave memory.
const MEMTABLE_BYTES: u64 = 8 << 20;
/// Values a spill encodes before writing them as one batch.
pub const WRITE_CHUNK_BYTES: usize = 4 << 20;
/// The longest key the store holds (fjall's limit).
pub const MAX_KEY_BYTES: usize = u16::MAX as usize;
/// The block cache shared by a job's spilled tables.
const CACHE_BYTES: u64 = 16 << 20;

impl SpillSpace {
    /// A job's spill space; nothing is created until a node spills.
    pub fn new(config: SpillConfig) -> Self {
        Self {
            config,
            opened: Mutex::new(None),
            tables: Default::default(),
        }
    }

    /// A new table for an operator of kind `kind`, opening the job's store
    /// if it is not yet.
    pub fn table(self: &Arc<Self>, kind: &str) -> Result<SpillTable> {
        let name = format!(
            "{}-{}",
            keyspace_name(kind),
            self.tables
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let mut opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        if opened.is_none() {
            *opened = Some(self.open()?);
        }
        let db = opened
            .as_ref()
            .map(|o| o.db.clone())
            .ok_or_else(|| spill_error("open", "the spill directory", "no store"))?;
        let keyspace = db
            .keyspace(&name, || {
                use fjall::config::PinningPolicy;
                // Every table's filter and index stay in memory (about
                // ten bits a key): a lookup that had to load them read
                // and checksummed a whole filter block from the page
                // cache each time, two thirds of a spilling join's CPU.
                fjall::KeyspaceCreateOptions::default()
                    .max_memtable_size(MEMTABLE_BYTES)
                    .manual_journal_persist(true)
                    .filter_block_pinning_policy(PinningPolicy::all(true))
                    .index_block_pinning_policy(PinningPolicy::all(true))
            })
            .map_err(|e| spill_error("open a table in", &self.where_(), e))?;
        Ok(SpillTable {
            space: self.clone(),
            keyspace,
            db,
            stats: SpillStats::default(),
        })
    }

    fn open(&self) -> Result<Opened> {
        let base = self.config.dir.clone().unwrap_or_else(std::env::temp_dir);
        std::fs::create_dir_all(&base)
            .map_err(|e| spill_error("create", &base.display().to_string(), e))?;
        let dir = tempfile::Builder::new()
            .prefix("eddy-spill-")
            .tempdir_in(&base)
            .map_err(|e| spill_error("create a directory in", &base.display().to_string(), e))?;
        let db = fjall::Database::builder(dir.path())
            // Flushes and compactions take one core at most: the job's
            // workers have the others.
            .worker_threads(1)
            .cache_size(CACHE_BYTES)
            .manual_journal_persist(true)
            .open()
            .map_err(|e| spill_error("open", &dir.path().display().to_string(), e))?;
        Ok(Opened { db, dir })
    }

    /// The store's directory, for errors.
    fn where_(&self) -> String {
        self.opened
            .lock()
            .ok()
            .and_then(|o| o.as_ref().map(|o| o.dir.path().display().to_string()))
            .unwrap_or_else(|| "the spill directory".into())
    }

    /// A file for a snapshot's table `name` ([`crate::state::table_file`]),
    /// in the store's directory: a checkpoint of spilled state is written
    /// there a chunk at a time, then linked into the checkpoint.
    fn table_file(&self, name: &str, schema: &SchemaRef) -> Result<TableFileWriter> {
        let dir = {
            let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
            let store = opened.as_ref().ok_or_else(|| {
                spill_error("write a snapshot in", "the spill directory", "no store")
            })?;
            store.dir.path().join("snapshots")
        };
        std::fs::create_dir_all(&dir)
            .map_err(|e| spill_error("create", &dir.display().to_string(), e))?;
        TableFileWriter::create(&dir, name, schema)
    }

    /// Bytes the job's spilled state takes on disk.
    pub fn disk_bytes(&self) -> u64 {
        let opened = self.opened.lock().unwrap_or_else(|e| e.into_inner());
        opened
            .as_ref()
            .and_then(|o| o.db.disk_space().ok())
            .unwrap_or(0)
    }

    /// Fails once the spilled state passes the disk limit.
    fn check_disk(&self) -> Result<()> {
        let Some(limit) = self.config.disk_limit else {
            return Ok(());
        };
        let used = self.disk_bytes();
        if used > limit {
            return Err(EngineError::SpillDiskLimit { used, limit });
        }
        Ok(())
    }
}

impl SpillTable {
    /// Writes entries, each replacing what its key held.
    pub fn write<'a>(
        &mut self,
        entries: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<()> {
        let mut batch = self.db.batch().durability(None);
        for (key, value) in entries {
            self.check_key(key)?;
            if u32::try_from(value.len()).is_err() {
                return Err(spill_error(
                    "write to",
                    &self.space.where_(),
                    format!("a state entry of {} bytes is past 4 GiB", value.len()),
                ));
            }
            self.stats.written_bytes += (key.len() + value.len()) as u64;
            batch.insert(&self.keyspace, key, value);
        }
        batch
            .commit()
            .map_err(|e| spill_error("write to", &self.space.where_(), e))?;
        self.space.check_disk()
    }

    /// Writes an entry per item, its value encoded by `encode` (which
    /// appends it to the buffer it is given), a write batch every
    /// [`WRITE_CHUNK_BYTES`] of values: spilling a large state never holds
    /// a second copy of it whole.
    pub fn write_encoded<'a, T>(
        &mut self,
        items: impl IntoIterator<Item = (&'a [u8], T)>,
        mut encode: impl FnMut(T, &mut Vec<u8>),
    ) -> Result<()> {
        let mut keys: Vec<&[u8]> = Vec::new();
        let mut ends: Vec<usize> = Vec::new();
        let mut values: Vec<u8> = Vec::new();
        for (key, item) in items {
            encode(item, &mut values);
            keys.push(key);
            ends.push(values.len());
            if values.len() >= WRITE_CHUNK_BYTES {
                self.write_chunk(&keys, &ends, &values)?;
                keys.clear();
                ends.clear();
                values.clear();
            }
        }
        if keys.is_empty() {
            return Ok(());
        }
        self.write_chunk(&keys, &ends, &values)
    }

    /// Writes `keys[i]` with `values[ends[i - 1]..ends[i]]`.
    fn write_chunk(&mut self, keys: &[&[u8]], ends: &[usize], values: &[u8]) -> Result<()> {
        let starts = std::iter::once(0).chain(ends.iter().copied());
        let slices = starts.zip(ends.iter().copied()).map(|(s, e)| &values[s..e]);
        self.write(keys.iter().copied().zip(slices))
    }

    /// Forgets entries.
    pub fn remove<'a>(&mut self, keys: impl IntoIterator<Item = &'a [u8]>) -> Result<()> {
        let mut batch = self.db.batch().durability(None);
        for key in keys {
            self.check_key(key)?;
            batch.remove(&self.keyspace, key);
        }
        batch
            .commit()
            .map_err(|e| spill_error("write to", &self.space.where_(), e))
    }

    /// What `key` last held, if anything (the store's own bytes, not a
    /// copy).
    pub fn read(&mut self, key: &[u8]) -> Result<Option<fjall::Slice>> {
        self.check_key(key)?;
        let value = self
            .keyspace
            .get(key)
            .map_err(|e| spill_error("read from", &self.space.where_(), e))?;
        if let Some(value) = &value {
            self.stats.read_bytes += (key.len() + value.len()) as u64;
        }
        Ok(value)
    }

    /// Every entry, in key order.
    pub fn entries(&self) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_ {
        self.keyspace.iter().map(|guard| {
            guard
                .into_inner()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .map_err(|e| spill_error("read from", &self.space.where_(), e))
        })
    }

    /// The entries from `from` (inclusive) to `to` (exclusive), in key
    /// order.
    pub fn entries_between(
        &mut self,
        from: &[u8],
        to: &[u8],
    ) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>)>> + '_ {
        self.keyspace.range(from..to).map(|guard| {
            let (key, value) = guard
                .into_inner()
                .map_err(|e| spill_error("read from", &self.space.where_(), e))?;
            self.stats.read_bytes += (key.len() + value.len()) as u64;
            Ok((key.to_vec(), value.to_vec()))
        })
    }

    /// Forgets every entry.
    pub fn clear(&mut self) -> Result<()> {
        self.keyspace
            .clear()
            .map_err(|e| spill_error("clear", &self.space.where_(), e))
    }

    /// Fails on a key the store cannot hold (empty, or longer than
    /// [`MAX_KEY_BYTES`]), which it would panic on. (Operators spill
    /// keyed state only, and a row-format key is never empty.)
    fn check_key(&self, key: &[u8]) -> Result<()> {
        if key.is_empty() {
            return Err(spill_error(
                "write to",
                &self.space.where_(),
                "an empty state key cannot spill",
            ));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(spill_error(
                "write to",
                &self.space.where_(),
                format!(
                    "a state key of {} bytes is past the {MAX_KEY_BYTES} bytes a spilled key may have \
                     (a GROUP BY or join key that long cannot spill: raise --memory-limit)",
                    key.len()
                ),
            ));
        }
        Ok(())
    }

    /// A file for the snapshot table `name` laid out as `schema`, written
    /// a chunk at a time beside the store ([`crate::state::table_file`]).
    pub fn snapshot_file(&self, name: &str, schema: &SchemaRef) -> Result<TableFileWriter> {
        self.space.table_file(name, schema)
    }

    /// What it has cost so far.
    pub fn stats(&self) -> SpillStats {
        SpillStats {
            disk_bytes: self.keyspace.disk_space(),
            ..self.stats
        }
    }
}

/// Appends `bytes` to a spilled entry's value with its length (`u32`,
/// little-endian) first; [`EntryReader::bytes`] reads them back.
pub fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// Reads a spilled entry's value field by field, as the operator that
/// wrote it laid it out: little-endian numbers and length-prefixed bytes
/// ([`put_bytes`]). A value cut short is an error naming `what` wrote it.
///
/// ```
/// use eddy_engine::spill::{put_bytes, EntryReader};
/// let mut value = 7i64.to_le_bytes().to_vec();
/// put_bytes(&mut value, b"row");
/// let mut reader = EntryReader::new(&value, "an operator");
/// assert_eq!(reader.i64().unwrap(), 7);
/// assert_eq!(reader.bytes().unwrap(), b"row");
/// assert!(reader.is_empty());
/// assert!(reader.u32().is_err());
/// ```
pub struct EntryReader<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> EntryReader<'a> {
    /// A reader of `value`, which `what` wrote.
    pub fn new(value: &'a [u8], what: &'static str) -> Self {
        Self { rest: value, what }
    }

    /// Whether every field has been read.
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next `N` bytes.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let bytes: [u8; N] = self
            .rest
            .get(..N)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| self.cut_short())?;
        self.rest = &self.rest[N..];
        Ok(bytes)
    }

    /// The next `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// The next `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// The next `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// The next length-prefixed bytes ([`put_bytes`]).
    pub fn bytes(&mut self) -> Result<&'a [u8]> {
        let len = self.u32()? as usize;
        let bytes = self.rest.get(..len).ok_or_else(|| self.cut_short())?;
        self.rest = &self.rest[len..];
        Ok(bytes)
    }

    fn cut_short(&self) -> EngineError {
        EngineError::State(format!("{}: a spilled entry is cut short", self.what))
    }
}

/// A keyspace name fjall takes (letters, digits, `_`, `-`, `.`, `#`, `$`).
fn keyspace_name(node: &str) -> String {
    let name: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '#' | '$') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if name.is_empty() {
        "node".into()
    } else {
        name
    }
}

fn spill_error(doing: &'static str, place: &str, error: impl std::fmt::Display) -> EngineError {
    EngineError::Spill {
        doing,
        place: place.to_string(),
        reason: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_replace_read_back_and_leave_with_the_job() {
        let base = tempfile::tempdir().unwrap();
        let space = Arc::new(SpillSpace::new(SpillConfig {
            dir: Some(base.path().to_path_buf()),
            disk_limit: None,
        }));
        let mut a = space.table("window_aggregate").unwrap();
        let mut b = space.table("window_aggregate").unwrap();
        a.write([(&b"k"[..], &b"1"[..]), (&b"j"[..], &b"2"[..])])
            .unwrap();
        a.write([(&b"k"[..], &b"3"[..])]).unwrap();
        b.write([(&b"k"[..], &b"other"[..])]).unwrap();
        assert_eq!(a.read(b"k").unwrap().as_deref(), Some(&b"3"[..]));
        let all: Vec<_> = a.entries().map(|e| e.unwrap()).collect();
        assert_eq!(
            all,
            [
                (b"j".to_vec(), b"2".to_vec()),
                (b"k".to_vec(), b"3".to_vec())
            ]
        );
        a.remove([&b"j"[..]]).unwrap();
        assert_eq!(a.read(b"j").unwrap(), None);
        assert_eq!(b.read(b"k").unwrap().as_deref(), Some(&b"other"[..]));
        assert_eq!(a.stats().written_bytes, 6);
        assert_eq!(std::fs::read_dir(base.path()).unwrap().count(), 1);
        drop((a, b, space));
        assert_eq!(
            std::fs::read_dir(base.path()).unwrap().count(),
            0,
            "the store's directory goes with the job"
        );
    }

    #[test]
    fn an_empty_key_and_one_past_the_limit_are_errors_not_panics() {
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let mut table = space.table("t").unwrap();
        assert!(table.write([(&b""[..], &b"global"[..])]).is_err());
        let long = vec![7u8; MAX_KEY_BYTES + 1];
        let error = table
            .write([(&long[..], &b"v"[..])])
            .unwrap_err()
            .to_string();
        assert!(error.contains("65536 bytes"), "{error}");
        assert!(table.read(&long).is_err());
        assert!(table.remove([&long[..]]).is_err());
        let longest = vec![7u8; MAX_KEY_BYTES];
        table.write([(&longest[..], &b"v"[..])]).unwrap();
        assert!(table.read(&longest).unwrap().is_some());
    }

    #[test]
    fn encoded_entries_are_written_in_chunks_and_all_arrive() {
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let mut table = space.table("t").unwrap();
        let keys: Vec<[u8; 4]> = (0..3_000u32).map(u32::to_be_bytes).collect();
        let value_bytes = 4_000;
        let mut chunks = 0;
        table
            .write_encoded(keys.iter().map(|k| (&k[..], k[3])), |byte, out| {
                chunks += usize::from(out.is_empty());
                out.extend(std::iter::repeat_n(byte, value_bytes));
            })
            .unwrap();
        assert_eq!(chunks, 3_000 * value_bytes / WRITE_CHUNK_BYTES + 1);
        assert_eq!(table.entries().count(), 3_000);
        let value = table.read(&keys[1_234]).unwrap().unwrap();
        assert_eq!(&value[..], &vec![keys[1_234][3]; value_bytes][..]);
    }

    #[test]
    fn spilling_past_the_disk_limit_fails_with_both_figures() {
        let space = Arc::new(SpillSpace::new(SpillConfig {
            dir: None,
            disk_limit: Some(1),
        }));
        let mut table = space.table("t").unwrap();
        let big: Vec<(Vec<u8>, Vec<u8>)> = (0..20_000u32)
            .map(|i| (i.to_be_bytes().to_vec(), i.to_le_bytes().repeat(64)))
            .collect();
        let mut failed = None;
        for chunk in big.chunks(5_000) {
            if let Err(e) = table.write(chunk.iter().map(|(k, v)| (&k[..], &v[..]))) {
                failed = Some(e);
                break;
            }
            table.keyspace.rotate_memtable_and_wait().unwrap();
        }
        let error = failed.expect("the disk limit stops the spill").to_string();
        assert!(error.contains("disk limit"), "{error}");
    }
}
