//! The tables DataFusion sees behind the PostgreSQL port: every
//! materialized view in schema `public`, read as of its latest completed
//! checkpoint, and eddy's system tables in schema `eddy` (`jobs`, `views`:
//! what `SHOW JOBS` and `SHOW VIEWS` read).
//!
//! In: the server's [`ViewCatalog`] and job manager. Out: DataFusion
//! [`TableProvider`]s. A scan takes one view's snapshot as it starts, so a
//! query never sees a half-applied checkpoint; a query over two views
//! sees each at its own latest epoch.

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray, UInt64Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{SchemaProvider, Session, TableProvider};
use datafusion::common::ScalarValue;
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::{Expr, Operator, TableProviderFilterPushDown};
use datafusion::physical_plan::ExecutionPlan;
use eddy_connectors::view::{ViewCatalog, ViewSnapshot};

use super::catalog::SessionCatalog;
use crate::jobs::JobManager;

/// Rows of a scanned view are spread over this many partitions at most.
const SCAN_PARTITIONS: usize = 4;

/// A view dropped between a statement's planning and its execution (a
/// prepared statement run after `DROP MATERIALIZED VIEW`).
#[derive(Debug, thiserror::Error)]
#[error("materialized view \"{name}\" was dropped")]
pub struct ViewDropped {
    /// The view's name.
    pub name: String,
}

/// Schema `public`: the materialized views.
#[derive(Debug)]
pub struct ViewSchema {
    views: ViewCatalog,
}

impl ViewSchema {
    /// The views of `views`.
    pub fn new(views: ViewCatalog) -> Self {
        Self { views }
    }

    fn find(&self, name: &str) -> Option<String> {
        let names = self.views.names();
        names
            .iter()
            .find(|n| n.as_str() == name)
            .or_else(|| names.iter().find(|n| n.eq_ignore_ascii_case(name)))
            .cloned()
    }
}

#[async_trait]
impl SchemaProvider for ViewSchema {
    fn table_names(&self) -> Vec<String> {
        self.views.names()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        let Some(name) = self.find(name) else {
            return Ok(None);
        };
        Ok(self.views.snapshot(&name).map(|snapshot| {
            Arc::new(ViewTable {
                name,
                schema: snapshot.schema.clone(),
                views: self.views.clone(),
            }) as Arc<dyn TableProvider>
        }))
    }

    fn table_exist(&self, name: &str) -> bool {
        self.find(name).is_some()
    }
}

/// One materialized view as a table.
#[derive(Debug)]
pub struct ViewTable {
    name: String,
    schema: SchemaRef,
    views: ViewCatalog,
}

#[async_trait]
impl TableProvider for ViewTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    /// An equality on a key column narrows the scan to one key's row; the
    /// filter is still applied to it (`Inexact`).
    fn supports_filters_pushdown(
        &self,
        filters: &[&Expr],
    ) -> Result<Vec<TableProviderFilterPushDown>> {
        let keys = self.key_columns();
        Ok(filters
            .iter()
            .map(|filter| match key_equality(filter, &self.schema) {
                Some((column, _)) if keys.contains(&column) => TableProviderFilterPushDown::Inexact,
                _ => TableProviderFilterPushDown::Unsupported,
            })
            .collect())
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let snapshot = self.snapshot()?;
        if snapshot.schema != self.schema {
            return Err(DataFusionError::Plan(format!(
                "materialized view \"{}\" changed its columns while the query was planned; run it again",
                self.name
            )));
        }
        // Every key column equal to a value: that key's row, found, not scanned.
        let equal: Vec<(usize, ScalarValue)> = filters
            .iter()
            .filter_map(|f| key_equality(f, &self.schema))
            .collect();
        if let Some(found) = key_row(&snapshot, &equal)? {
            return MemTable::try_new(self.schema.clone(), vec![vec![found]])?
                .scan(state, projection, &[], limit)
                .await;
        }
        let batches = snapshot.batches()?;
        let mut partitions = vec![Vec::new(); SCAN_PARTITIONS.min(batches.len()).max(1)];
        let count = partitions.len();
        for (i, batch) in batches.into_iter().enumerate() {
            partitions[i % count].push(batch);
        }
        MemTable::try_new(self.schema.clone(), partitions)?
            .scan(state, projection, filters, limit)
            .await
    }
}

impl ViewTable {
    /// The view's latest published snapshot.
    fn snapshot(&self) -> Result<Arc<ViewSnapshot>> {
        self.views.snapshot(&self.name).ok_or_else(|| {
            DataFusionError::External(Box::new(ViewDropped {
                name: self.name.clone(),
            }))
        })
    }

    /// The row whose key columns equal `key` (each key column's index and
    /// value, nothing else): `Some` (no row when the key has none), or
    /// `None` when `key` is not exactly the view's key or the view's
    /// columns changed since it was planned.
    pub fn key_lookup(&self, key: &[(usize, ScalarValue)]) -> Result<Option<RecordBatch>> {
        let snapshot = self.snapshot()?;
        let Some(columns) = snapshot.key_columns() else {
            return Ok(None);
        };
        if snapshot.schema != self.schema
            || key.len() != columns.len()
            || key.iter().any(|(column, _)| !columns.contains(column))
        {
            return Ok(None);
        }
        key_row(&snapshot, key)
    }

    /// The view's key columns now (none for a view keyed by whole rows).
    fn key_columns(&self) -> Vec<usize> {
        self.views
            .snapshot(&self.name)
            .and_then(|s| s.key_columns().map(<[usize]>::to_vec))
            .unwrap_or_default()
    }
}

/// The row of the key whose every column `equal` gives a value for (other
/// pairs are ignored); `None` when the view is not keyed or a key column
/// has no value.
fn key_row(snapshot: &ViewSnapshot, equal: &[(usize, ScalarValue)]) -> Result<Option<RecordBatch>> {
    let Some(columns) = snapshot.key_columns() else {
        return Ok(None);
    };
    let key: Option<Vec<ArrayRef>> = columns
        .iter()
        .map(|c| {
            equal
                .iter()
                .find(|(column, _)| column == c)
                .and_then(|(_, value)| value.to_array().ok())
        })
        .collect();
    match key {
        Some(key) => Ok(snapshot.lookup(&key)?),
        None => Ok(None),
    }
}

/// `column = value` (either way round), as the column's index and the
/// value cast to the column's type.
fn key_equality(filter: &Expr, schema: &SchemaRef) -> Option<(usize, ScalarValue)> {
    let Expr::BinaryExpr(binary) = filter else {
        return None;
    };
    if binary.op != Operator::Eq {
        return None;
    }
    let (column, value) = match (binary.left.as_ref(), binary.right.as_ref()) {
        (Expr::Column(c), Expr::Literal(v, _)) | (Expr::Literal(v, _), Expr::Column(c)) => (c, v),
        _ => return None,
    };
    let index = schema.index_of(&column.name).ok()?;
    let value = value.cast_to(schema.field(index).data_type()).ok()?;
    (!value.is_null()).then_some((index, value))
}

/// A table computed when it is scanned.
struct SystemTable {
    schema: SchemaRef,
    rows: Box<dyn Fn() -> Result<RecordBatch> + Send + Sync>,
}

impl std::fmt::Debug for SystemTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SystemTable")
            .field("schema", &self.schema)
            .finish()
    }
}

#[async_trait]
impl TableProvider for SystemTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let rows = (self.rows)()?;
        MemTable::try_new(self.schema.clone(), vec![vec![rows]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

fn strings(values: Vec<Option<String>>) -> ArrayRef {
    Arc::new(StringArray::from(values))
}

/// Table `eddy.jobs`: every job of the server.
pub fn jobs_table(manager: Arc<JobManager>) -> Arc<dyn TableProvider> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("state", DataType::Utf8, false),
        Field::new("created_at", DataType::Utf8, false),
        Field::new("started_at", DataType::Utf8, true),
        Field::new("events_per_second", DataType::Int64, false),
        Field::new("error", DataType::Utf8, true),
    ]));
    let rows_schema = schema.clone();
    Arc::new(SystemTable {
        schema,
        rows: Box::new(move || {
            let jobs = manager.list();
            let text = |f: &dyn Fn(&crate::views::JobSummary) -> Option<String>| {
                strings(jobs.iter().map(f).collect())
            };
            Ok(RecordBatch::try_new(
                rows_schema.clone(),
                vec![
                    text(&|j| Some(j.id.clone())),
                    text(&|j| Some(j.name.clone())),
                    text(&|j| Some(j.state.name().to_string())),
                    text(&|j| Some(j.created_at.clone())),
                    text(&|j| j.started_at.clone()),
                    Arc::new(Int64Array::from_iter_values(
                        jobs.iter().map(|j| j.events_per_second.round() as i64),
                    )),
                    text(&|j| j.error.clone()),
                ],
            )?)
        }),
    })
}

/// Table `eddy.views`: every materialized view, its job, its key (the
/// columns a point query finds without a scan), and the epoch and size of
/// what queries read now.
pub fn views_table(catalog: Arc<SessionCatalog>, views: ViewCatalog) -> Arc<dyn TableProvider> {
    let schema = Arc::new(Schema::new(vec![
        Field::new("name", DataType::Utf8, false),
        Field::new("job", DataType::Utf8, true),
        Field::new("key", DataType::Utf8, true),
        Field::new("epoch", DataType::UInt64, false),
        Field::new("rows", DataType::UInt64, false),
        Field::new("published_at", DataType::Utf8, true),
        Field::new("query", DataType::Utf8, true),
    ]));
    let rows_schema = schema.clone();
    Arc::new(SystemTable {
        schema,
        rows: Box::new(move || {
            let names = views.names();
            let declared = catalog.views();
            let of = |name: &str| declared.iter().find(|v| v.name.eq_ignore_ascii_case(name));
            let snapshots: Vec<_> = names.iter().map(|n| views.snapshot(n)).collect();
            Ok(RecordBatch::try_new(
                rows_schema.clone(),
                vec![
                    strings(names.iter().map(|n| Some(n.clone())).collect()),
                    strings(names.iter().map(|n| of(n).map(|v| v.job.clone())).collect()),
                    strings(
                        snapshots
                            .iter()
                            .map(|s| {
                                let s = s.as_ref()?;
                                let names: Vec<&str> = s
                                    .key_columns()?
                                    .iter()
                                    .map(|&c| s.schema.field(c).name().as_str())
                                    .collect();
                                Some(names.join(", "))
                            })
                            .collect(),
                    ),
                    Arc::new(UInt64Array::from_iter_values(
                        snapshots.iter().map(|s| s.as_ref().map_or(0, |s| s.epoch)),
                    )),
                    Arc::new(UInt64Array::from_iter_values(
                        snapshots
                            .iter()
                            .map(|s| s.as_ref().map_or(0, |s| s.rows() as u64)),
                    )),
                    strings(
                        snapshots
                            .iter()
                            .map(|s| {
                                s.as_ref()
                                    .filter(|s| s.epoch > 0)
                                    .and_then(|s| {
                                        chrono::DateTime::from_timestamp_millis(s.published_ms)
                                    })
                                    .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
                            })
                            .collect(),
                    ),
                    strings(
                        names
                            .iter()
                            .map(|n| of(n).map(|v| v.query.clone()))
                            .collect(),
                    ),
                ],
            )?)
        }),
    })
}

#[cfg(test)]
pub(in crate::pg) mod tests {
    use super::*;
    use datafusion::arrow::array::Int8Array;
    use datafusion::prelude::{col, lit, SessionContext};
    use eddy_connectors::view::ViewSink;
    use eddy_engine::sink::SinkWriter;

    /// A view `v` of 1000 rows (`k` text key `k0`..`k999`, `n` its number),
    /// published at checkpoint 1.
    pub(in crate::pg) fn keyed_view() -> ViewCatalog {
        let schema = Arc::new(Schema::new(vec![
            Field::new("k", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
            eddy_engine::changelog::row_kind_field(&[]),
        ]));
        let views = ViewCatalog::default();
        let mut sink =
            ViewSink::open("v", &schema, &["k".to_string()], views.clone(), None).expect("opens");
        let keys: Vec<String> = (0..1000).map(|i| format!("k{i}")).collect();
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(StringArray::from(keys)),
                Arc::new(Int64Array::from_iter_values(0..1000)),
                Arc::new(Int8Array::from(vec![0; 1000])),
            ],
        )
        .expect("a batch");
        sink.write(&batch).expect("writes");
        sink.precommit(1, 0).expect("precommits");
        views.commit("v", 1);
        views
    }

    #[tokio::test]
    async fn an_equality_on_the_key_reads_one_row_not_the_view() {
        let views = keyed_view();
        let table = ViewSchema::new(views)
            .table("v")
            .await
            .expect("looked up")
            .expect("a view");
        let filter = col("k").eq(lit("k42"));
        let pushed = table
            .supports_filters_pushdown(&[&filter])
            .expect("answers");
        assert_eq!(pushed, vec![TableProviderFilterPushDown::Inexact]);
        let context = SessionContext::new();
        let plan = table
            .scan(&context.state(), None, &[filter], None)
            .await
            .expect("scans");
        let batches = datafusion::physical_plan::collect(plan, context.task_ctx())
            .await
            .expect("runs");
        let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
        assert_eq!(rows, 1, "the key's row alone");
        let other = col("n").eq(lit(42i64));
        assert_eq!(
            table.supports_filters_pushdown(&[&other]).expect("answers"),
            vec![TableProviderFilterPushDown::Unsupported]
        );
    }
}
