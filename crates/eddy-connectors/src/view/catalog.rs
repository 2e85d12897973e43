//! The views a server holds: each materialized view's schema and its
//! current result as of its latest completed checkpoint (its *epoch*).
//!
//! In: a view sink declaring its view, staging the result it holds at each
//! checkpoint barrier, and the checkpoint's completion (or a resume)
//! publishing it. Out: for readers (the PostgreSQL port, the HTTP API), an
//! immutable [`ViewSnapshot`] per view, never a half-applied one.
//!
//! ```text
//!  sink: declare(name, schema) ── stage(epoch n, rows) ── … ── commit(n) ──> published = rows of n
//!  reader: snapshot(name) ─> Arc<ViewSnapshot> (epoch, batches), unchanged while it is read
//! ```
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_connectors::view::{ViewCatalog, ViewSnapshot};
//!
//! let catalog = ViewCatalog::default();
//! let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
//! let owner = catalog.declare("totals", ViewSnapshot::of_batches(schema.clone(), 0, vec![]), None);
//! let rows = RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(vec![7]))]).unwrap();
//! catalog.stage("totals", owner, ViewSnapshot::of_batches(schema, 3, vec![rows]));
//! assert_eq!(catalog.snapshot("totals").unwrap().epoch, 0); // staged, not yet read
//! catalog.commit("totals", 3);
//! assert_eq!(catalog.snapshot("totals").unwrap().rows(), 1);
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use std::sync::OnceLock;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::record_batch::RecordBatch;

use super::rows::{Held, RowCodec, ViewRows};

/// A view's result as of one completed checkpoint.
#[derive(Debug, Clone)]
pub struct ViewSnapshot {
    /// The checkpoint whose completion published it (0: nothing published
    /// yet, the view is empty).
    pub epoch: u64,
    /// The view's columns.
    pub schema: SchemaRef,
    /// When it was published (milliseconds since the epoch of Unix time).
    pub published_ms: i64,
    content: Content,
}

#[derive(Debug, Clone)]
enum Content {
    /// Rows as batches.
    Batches(Vec<RecordBatch>),
    /// Rows as a view sink holds them: by key, turned into batches on the
    /// first scan.
    Rows {
        rows: ViewRows,
        codec: Arc<RowCodec>,
        batches: Arc<OnceLock<Vec<RecordBatch>>>,
    },
}

impl ViewSnapshot {
    /// A snapshot of `batches`.
    pub fn of_batches(schema: SchemaRef, epoch: u64, batches: Vec<RecordBatch>) -> Self {
        Self {
            epoch,
            schema,
            published_ms: now_ms(),
            content: Content::Batches(batches),
        }
    }

    /// A snapshot of a sink's rows (a clone: O(1)).
    pub fn of_rows(epoch: u64, rows: ViewRows, codec: Arc<RowCodec>) -> Self {
        Self {
            epoch,
            schema: codec.schema().clone(),
            published_ms: now_ms(),
            content: Content::Rows {
                rows,
                codec,
                batches: Arc::new(OnceLock::new()),
            },
        }
    }

    /// Rows held.
    pub fn rows(&self) -> usize {
        match &self.content {
            Content::Batches(batches) => batches.iter().map(RecordBatch::num_rows).sum(),
            Content::Rows { rows, .. } => rows.len(),
        }
    }

    /// The rows as batches (made on the first call, then shared).
    pub fn batches(&self) -> Result<Vec<RecordBatch>, ArrowError> {
        match &self.content {
            Content::Batches(batches) => Ok(batches.clone()),
            Content::Rows {
                rows,
                codec,
                batches,
            } => {
                if let Some(made) = batches.get() {
                    return Ok(made.clone());
                }
                let held: Vec<&Held> = rows.iter().map(|(_, h)| h).collect();
                let made = held
                    .chunks(BATCH_ROWS)
                    .map(|chunk| codec.decode(chunk.iter().copied()))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(batches.get_or_init(|| made).clone())
            }
        }
    }

    /// The columns the view is keyed by, when it is (its query's upsert
    /// key): [`ViewSnapshot::lookup`] finds a key's row without a scan.
    pub fn key_columns(&self) -> Option<&[usize]> {
        match &self.content {
            Content::Rows { codec, .. } => codec.key_columns(),
            Content::Batches(_) => None,
        }
    }

    /// The row of one key (its values as one-row arrays, in key column
    /// order); `None` when the view is not keyed.
    pub fn lookup(&self, key: &[ArrayRef]) -> Result<Option<RecordBatch>, ArrowError> {
        let Content::Rows { rows, codec, .. } = &self.content else {
            return Ok(None);
        };
        if codec.key_columns().is_none() {
            return Ok(None);
        }
        let key = codec.key_of(key)?;
        codec.decode(rows.get(&key).into_iter()).map(Some)
    }
}

/// Rows per batch of a scanned view.
const BATCH_ROWS: usize = 8192;

/// One view: who writes it, what readers see, and what waits for a
/// checkpoint to complete.
#[derive(Debug)]
struct View {
    /// The sink that writes it now; stages of an older one (a run that a
    /// resume replaced) are ignored.
    owner: u64,
    published: Arc<ViewSnapshot>,
    /// Results of checkpoints not yet complete, oldest first.
    staged: Vec<ViewSnapshot>,
}

/// See the module docs. Cloning shares the catalog.
#[derive(Debug, Clone, Default)]
pub struct ViewCatalog {
    inner: Arc<(Mutex<Views>, Condvar)>,
}

#[derive(Debug, Default)]
struct Views {
    views: BTreeMap<String, View>,
    owners: u64,
    /// Views removed: a checkpoint of their job committed late never
    /// brings one back ([`ViewCatalog::restore`]); a sink declaring the
    /// name again does.
    dropped: std::collections::BTreeSet<String>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl ViewCatalog {
    fn lock(&self) -> MutexGuard<'_, Views> {
        self.inner.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sink starts writing view `name`; the owner token its stages
    /// carry. `empty` is the view before anything is published (its
    /// columns and key); `restored` what a resumed sink holds (the result
    /// of a completed checkpoint): readers see it at once. A view declared
    /// again without one keeps what readers see until the new owner
    /// publishes, unless its columns changed.
    pub fn declare(&self, name: &str, empty: ViewSnapshot, restored: Option<ViewSnapshot>) -> u64 {
        let mut views = self.lock();
        views.owners += 1;
        views.dropped.remove(name);
        let owner = views.owners;
        let schema = empty.schema.clone();
        let empty = Arc::new(empty);
        let view = views.views.entry(name.to_string()).or_insert_with(|| View {
            owner,
            published: empty.clone(),
            staged: Vec::new(),
        });
        view.owner = owner;
        view.staged.clear();
        if view.published.schema != schema {
            view.published = empty;
        }
        if let Some(restored) = restored {
            view.published = Arc::new(restored);
        }
        drop(views);
        self.inner.1.notify_all();
        owner
    }

    /// The result of checkpoint `snapshot.epoch`, readable once it completes.
    pub fn stage(&self, name: &str, owner: u64, snapshot: ViewSnapshot) {
        let mut views = self.lock();
        if let Some(view) = views.views.get_mut(name).filter(|v| v.owner == owner) {
            view.staged.push(snapshot);
        }
    }

    /// Checkpoint `epoch` completed: the newest result staged at or before
    /// it is what readers see now.
    pub fn commit(&self, name: &str, epoch: u64) {
        let mut views = self.lock();
        let Some(view) = views.views.get_mut(name) else {
            return;
        };
        let Some(last) = view.staged.iter().rposition(|s| s.epoch <= epoch) else {
            return;
        };
        let mut superseded: Vec<ViewSnapshot> = view.staged.drain(..=last).collect();
        let mut replaced = None;
        if let Some(snapshot) = superseded.pop() {
            replaced = Some(std::mem::replace(
                &mut view.published,
                Arc::new(ViewSnapshot {
                    published_ms: now_ms(),
                    ..snapshot
                }),
            ));
        }
        drop(views);
        self.inner.1.notify_all();
        // What only the old snapshots held (the nodes of their maps that
        // later changes copied) is freed here, outside the lock: freeing a
        // checkpoint's worth of changes takes milliseconds, which readers
        // would otherwise wait for.
        drop(superseded);
        drop(replaced);
    }

    /// Readers see these rows now, as of `epoch` (a job without
    /// checkpoints ended).
    pub fn publish(&self, name: &str, owner: u64, snapshot: ViewSnapshot) {
        let epoch = snapshot.epoch;
        self.stage(name, owner, snapshot);
        self.commit(name, epoch);
    }

    /// What readers see of view `name` now.
    pub fn snapshot(&self, name: &str) -> Option<Arc<ViewSnapshot>> {
        self.lock().views.get(name).map(|v| v.published.clone())
    }

    /// The views held, by name.
    pub fn names(&self) -> Vec<String> {
        self.lock().views.keys().cloned().collect()
    }

    /// Forgets view `name` (its job was dropped).
    pub fn remove(&self, name: &str) -> bool {
        let mut views = self.lock();
        let removed = views.views.remove(name).is_some();
        views.dropped.insert(name.to_string());
        drop(views);
        self.inner.1.notify_all();
        removed
    }

    /// Readers see `batches` as view `name` at `epoch`, unless a sink
    /// holds the view or it was removed: the result in the last
    /// checkpoint of a job that ended, which runs nothing when resumed.
    /// Whether it was taken.
    pub fn restore(&self, name: &str, snapshot: ViewSnapshot) -> bool {
        let mut views = self.lock();
        if views.views.contains_key(name) || views.dropped.contains(name) {
            return false;
        }
        views.views.insert(
            name.to_string(),
            View {
                owner: 0,
                published: Arc::new(snapshot),
                staged: Vec::new(),
            },
        );
        drop(views);
        self.inner.1.notify_all();
        true
    }

    /// Whether view `name` is held.
    pub fn contains(&self, name: &str) -> bool {
        self.lock().views.contains_key(name)
    }

    /// Waits until view `name` is published at `epoch` or later; the
    /// snapshot then, or `None` when `timeout` passed first (or the view
    /// went).
    pub fn wait_for(&self, name: &str, epoch: u64, timeout: Duration) -> Option<Arc<ViewSnapshot>> {
        let deadline = Instant::now() + timeout;
        let mut views = self.lock();
        loop {
            let published = views.views.get(name).map(|v| v.published.clone())?;
            if published.epoch >= epoch {
                return Some(published);
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            views = self
                .inner
                .1
                .wait_timeout(views, left)
                .map(|(guard, _)| guard)
                .unwrap_or_else(|e| e.into_inner().0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn batch(schema: &SchemaRef, values: Vec<i64>) -> RecordBatch {
        RecordBatch::try_new(schema.clone(), vec![Arc::new(Int64Array::from(values))])
            .expect("a batch")
    }

    fn snap(schema: &SchemaRef, epoch: u64, values: Vec<i64>) -> ViewSnapshot {
        ViewSnapshot::of_batches(schema.clone(), epoch, vec![batch(schema, values)])
    }

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]))
    }

    #[test]
    fn readers_see_only_completed_checkpoints_in_order() {
        let catalog = ViewCatalog::default();
        let schema = schema();
        let owner = catalog.declare("v", snap(&schema, 0, vec![]), None);
        catalog.stage("v", owner, snap(&schema, 1, vec![1]));
        catalog.stage("v", owner, snap(&schema, 2, vec![1, 2]));
        assert_eq!(catalog.snapshot("v").expect("declared").rows(), 0);
        catalog.commit("v", 1);
        let one = catalog.snapshot("v").expect("declared");
        assert_eq!((one.epoch, one.rows()), (1, 1));
        catalog.commit("v", 2);
        assert_eq!(catalog.snapshot("v").expect("declared").epoch, 2);
        // a snapshot taken before stays as it was
        assert_eq!(one.rows(), 1);
    }

    #[test]
    fn a_replaced_owner_stages_nothing() {
        let catalog = ViewCatalog::default();
        let schema = schema();
        let old = catalog.declare("v", snap(&schema, 0, vec![]), None);
        let new = catalog.declare("v", snap(&schema, 0, vec![]), None);
        catalog.stage("v", old, snap(&schema, 5, vec![9]));
        catalog.commit("v", 5);
        assert_eq!(catalog.snapshot("v").expect("declared").epoch, 0);
        catalog.publish("v", new, snap(&schema, 4, vec![4]));
        assert_eq!(catalog.snapshot("v").expect("declared").epoch, 4);
    }

    #[test]
    fn an_ended_job_s_result_is_restored_only_where_nothing_holds_the_view() {
        let catalog = ViewCatalog::default();
        let schema = schema();
        assert!(catalog.restore("v", snap(&schema, 7, vec![1, 2])));
        assert_eq!(catalog.snapshot("v").expect("restored").rows(), 2);
        assert!(!catalog.restore("v", snap(&schema, 8, vec![])), "held");
        catalog.remove("v");
        assert!(!catalog.restore("v", snap(&schema, 8, vec![])), "dropped");
        catalog.declare("v", snap(&schema, 0, vec![]), None);
        assert!(catalog.contains("v"), "declared again");
    }

    #[test]
    fn waiting_ends_at_the_epoch_or_the_timeout() {
        let catalog = ViewCatalog::default();
        let schema = schema();
        let owner = catalog.declare("v", snap(&schema, 0, vec![]), None);
        assert!(catalog
            .wait_for("v", 1, Duration::from_millis(20))
            .is_none());
        let writer = catalog.clone();
        let publisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            writer.publish("v", owner, snap(&schema, 3, vec![3]));
        });
        let seen = catalog
            .wait_for("v", 2, Duration::from_secs(10))
            .expect("published");
        assert_eq!(seen.epoch, 3);
        publisher.join().expect("the publisher ends");
        assert!(catalog.wait_for("gone", 0, Duration::ZERO).is_none());
    }
}
