//! Keeping a streamed Delta table healthy: compaction of the small files
//! a stream makes (`optimize_every`) and deletion of files the table no
//! longer needs (`vacuum_retention`).
//!
//! In: the table's log and the sink's options. Out: an `OPTIMIZE` commit
//! (`remove` + `add`, `dataChange: false`, so readers of changes skip
//! it) and deleted files.
//!
//! - **Compaction** bin-packs, per partition, the files smaller than the
//!   target size into files of about that size, when a partition has at
//!   least two of them. It commits only if every file it compacted is
//!   still in the table (another writer's merge may have rewritten one);
//!   otherwise its files are deleted and the table is left as it is.
//! - **Vacuum** deletes the files whose removal was committed longer ago
//!   than the retention (older versions that still list them can no
//!   longer be read, as in Delta), and data files no commit ever added (a
//!   killed run's, a merge attempt that lost a race) once they are older
//!   than the retention and [`ORPHAN_MIN_AGE_MS`], so that a file written
//!   for a checkpoint not yet committed is never taken.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use datafusion::arrow::datatypes::SchemaRef;

use super::log::{self, Add, Snapshot};
use super::sink::{commit_info, discard, remove, CommitCounts, DeltaOptions, CHANGES_DIR};
use super::table_store::TableStore;
use crate::error::Result;
use crate::parquet::reader::{read_file, FileToRead};

/// Files no commit added are deleted only once at least this old (an
/// hour): a file written for a checkpoint that is not complete yet, by
/// this job or another writer, is younger.
pub const ORPHAN_MIN_AGE_MS: i64 = 3600 * 1000;

/// One round of maintenance: compaction when `optimize_every` is set,
/// then vacuum when `vacuum_retention` is. `keep` are files this writer
/// has written and not committed yet.
pub fn maintain(
    log: &mut Snapshot,
    options: &DeltaOptions,
    sink: &SchemaRef,
    app_id: &str,
    keep: &[PathBuf],
) -> Result<CommitCounts> {
    let mut counts = CommitCounts::default();
    log::refresh(&options.dir, log)?;
    if options.optimize_every.is_some() {
        counts += optimize(log, options, sink, app_id)?;
    }
    if let Some(retention) = options.vacuum_retention_ms {
        counts.vacuumed += vacuum(&options.dir, log, retention, log::now_ms(), keep)?;
    }
    Ok(counts)
}

/// Compacts small files (see the module docs); one commit.
pub fn optimize(
    log: &mut Snapshot,
    options: &DeltaOptions,
    sink: &SchemaRef,
    app_id: &str,
) -> Result<CommitCounts> {
    let dir = &options.dir;
    let mut by_partition: BTreeMap<Vec<(String, Option<String>)>, Vec<&Add>> = BTreeMap::new();
    for add in &log.files {
        if (add.size as u64) < options.target_file_size {
            by_partition
                .entry(add.partition_values.clone().into_iter().collect())
                .or_default()
                .push(add);
        }
    }
    let chosen: Vec<Add> = by_partition
        .into_values()
        .filter(|files| files.len() >= 2)
        .flatten()
        .cloned()
        .collect();
    if chosen.is_empty() {
        return Ok(CommitCounts::default());
    }
    let mut writer = options.writer(sink, format!("{app_id}-optimize-{}", log::now_ms()));
    for add in &chosen {
        let file = FileToRead {
            path: dir.join(log::decode_path(&add.path)),
            partition_values: add.partition_values.clone(),
            stats: None,
        };
        for batch in read_file(&file, sink)? {
            writer.write(&batch)?;
        }
    }
    let written = writer.finish()?;
    let now = log::now_ms();
    let made = log::commit_next(dir, log, |current| {
        let present: HashSet<&str> = current.files.iter().map(|f| f.path.as_str()).collect();
        if chosen.iter().any(|f| !present.contains(f.path.as_str())) {
            return Ok(None);
        }
        let mut actions = vec![commit_info(
            "OPTIMIZE",
            serde_json::json!({
                "targetSize": options.target_file_size.to_string(),
                "filesCompacted": chosen.len(),
            }),
            false,
        )];
        actions.extend(chosen.iter().map(|f| remove(f, now, false)));
        actions.extend(written.iter().map(|f| f.add(now, false)));
        Ok(Some(actions))
    })?;
    if made.is_none() {
        discard(dir, &written);
        return Ok(CommitCounts::default());
    }
    Ok(CommitCounts {
        compactions: 1,
        removed: chosen.len() as u64,
        ..Default::default()
    })
}

/// Deletes what the table no longer needs at `now` (see the module
/// docs); returns the number of files deleted.
pub fn vacuum(
    dir: &Path,
    log: &Snapshot,
    retention_ms: i64,
    now: i64,
    keep: &[PathBuf],
) -> Result<u64> {
    let cutoff = now - retention_ms;
    let orphan_cutoff = now - retention_ms.max(ORPHAN_MIN_AGE_MS);
    let live: HashSet<PathBuf> = log
        .files
        .iter()
        .map(|f| dir.join(log::decode_path(&f.path)))
        .chain(keep.iter().cloned())
        .collect();
    let tombstones: BTreeMap<PathBuf, i64> = log
        .tombstones
        .values()
        .map(|r| {
            (
                dir.join(log::decode_path(&r.path)),
                r.deletion_timestamp.unwrap_or(now),
            )
        })
        .collect();
    let mut found = Vec::new();
    data_files(dir, &mut found)?;
    data_files(&dir.join(CHANGES_DIR), &mut found)?;
    let table = TableStore::of(dir)?;
    let mut deleted = 0;
    for (path, modified) in found {
        if live.contains(&path) {
            continue;
        }
        let expired = match tombstones.get(&path) {
            // Its retention has passed once it is as old as the retention
            // (at once with none: a round's compaction and vacuum share a
            // millisecond often enough).
            Some(&removed_at) => removed_at <= cutoff,
            None => modified < orphan_cutoff,
        };
        if expired {
            table.delete(&crate::storage::relative_name(&path, dir))?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// The `.parquet` files under `dir`, local or in a bucket (not under
/// names starting with `.` or `_`), with their modification times (ms
/// since the epoch); none when `dir` does not exist.
fn data_files(dir: &Path, found: &mut Vec<(PathBuf, i64)>) -> Result<()> {
    for file in TableStore::of(dir)?.data_files()? {
        found.push((dir.join(&file.path), file.modified_ms));
    }
    Ok(())
}

/// Test access to the file listing.
#[cfg(test)]
pub(crate) mod tests_support {
    /// The `.parquet` data files under `dir`.
    pub fn data_files(dir: &std::path::Path, found: &mut Vec<(std::path::PathBuf, i64)>) {
        super::data_files(dir, found).unwrap();
    }
}
