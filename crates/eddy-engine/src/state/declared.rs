//! State tables declared on an operator's plan: the one place that knows
//! every table an operator checkpoints.
//!
//! In: the [`TableSpec`]s an [`OperatorPlan::state_tables`] lists (name,
//! schema, how its rows are keyed, TTL). Out: snapshots checked against
//! them as they are written ([`StateSnapshot::put`]) and read
//! ([`StateSnapshot::take`]), checkpoints refused with the table and the
//! column that no longer fit ([`check_restored`]), and a keyed operator's
//! tables spread over another number of instances without code of its own
//! ([`crate::rescale::kept_tables`]).
//!
//! An operator names its tables once, on its plan; its `snapshot` and
//! `restore` hand over and take back rows through those declarations, so a
//! table cannot be written under one layout and read under another, and
//! the runtime (checkpoints, rescaling, spilling) reads what each table is
//! from the plan instead of from the operator's code.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::Int64Array;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::state::declared::{TableKey, TableSpec};
//! use eddy_engine::state::StateSnapshot;
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("k", DataType::Int64, false),
//!     Field::new("n", DataType::Int64, false),
//! ]));
//! // Counts by key: one row per key, the key first.
//! let counts = TableSpec::new("counts", schema.clone()).keyed(TableKey::Columns(0..1));
//! let rows = RecordBatch::try_new(schema, vec![
//!     Arc::new(Int64Array::from(vec![1, 2])),
//!     Arc::new(Int64Array::from(vec![10, 20])),
//! ]).unwrap();
//! let mut snapshot = StateSnapshot::default();
//! snapshot.put(&counts, rows).unwrap();
//! assert_eq!(snapshot.take(&counts).unwrap().num_rows(), 2);
//!
//! // A batch of another layout is refused, naming the table and column.
//! let wrong = RecordBatch::try_new(
//!     Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, false)])),
//!     vec![Arc::new(datafusion::arrow::array::StringArray::from(vec!["a"]))],
//! ).unwrap();
//! let refused = snapshot.put(&counts, wrong).unwrap_err().to_string();
//! assert!(refused.contains("'counts'"), "{refused}");
//! ```
//!
//! [`OperatorPlan::state_tables`]: crate::operator::OperatorPlan::state_tables

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;

use super::StateSnapshot;
use crate::error::{EngineError, Result};
use crate::operator::OperatorPlan;
use crate::rescale::KeyedBy;

/// How the rows of a state table are found by key: what rescaling reads
/// to hand each row to the instance that owns its key group.
#[derive(Debug, Clone)]
pub enum TableKey {
    /// The table belongs to its instance as a whole (an operator that runs
    /// once, or state not keyed): it cannot be spread over instances.
    Whole,
    /// These columns are the key, one row per key.
    Columns(Range<usize>),
    /// Column 0 holds the key row-encoded ([`arrow::row`]) from columns of
    /// these types.
    ///
    /// [`arrow::row`]: datafusion::arrow::row
    Encoded(Vec<DataType>),
    /// The key is these expressions over the table's rows (input rows
    /// held as they came, keyed by the operator's partition keys).
    Exprs(Vec<Arc<dyn PhysicalExpr>>),
    /// Its rows hang off the rows of table `on`, declared before it
    /// ([`KeyedBy`] says how).
    Dependent {
        /// The table with a row per key.
        on: String,
        /// How a row finds its key row.
        by: KeyedBy,
    },
}

/// One table of an operator's checkpointed state, as its plan declares it
/// ([`crate::operator::OperatorPlan::state_tables`]).
#[derive(Debug, Clone)]
pub struct TableSpec {
    name: String,
    schema: SchemaRef,
    key: TableKey,
    ttl_ms: Option<i64>,
    since_added: bool,
    run_time_columns: bool,
    earlier: Vec<SchemaRef>,
}

impl TableSpec {
    /// A table `name` (a file-name-safe word, unique among the operator's
    /// tables) of rows of `schema`, belonging to its instance as a whole
    /// until [`TableSpec::keyed`] says how it is keyed.
    pub fn new(name: impl Into<String>, schema: SchemaRef) -> Self {
        Self {
            name: name.into(),
            schema,
            key: TableKey::Whole,
            ttl_ms: None,
            since_added: false,
            run_time_columns: false,
            earlier: Vec::new(),
        }
    }

    /// The same table, its rows keyed as `key` says.
    pub fn keyed(mut self, key: TableKey) -> Self {
        self.key = key;
        self
    }

    /// The same table, its keys expiring `ttl_ms` after their last change
    /// (`None`: never).
    pub fn with_ttl(mut self, ttl_ms: Option<i64>) -> Self {
        self.ttl_ms = ttl_ms;
        self
    }

    /// The same table, marked as one a checkpoint may lack (one added
    /// after the operator's first layout, or written only when it has
    /// rows): a checkpoint without it restores.
    pub fn optional(mut self) -> Self {
        self.since_added = true;
        self
    }

    /// The same table, its columns decided at run time by what it holds
    /// (a DataFusion sliding accumulator's own state, whose shape is the
    /// accumulator's): its declared schema is not checked.
    pub fn run_time_columns(mut self) -> Self {
        self.run_time_columns = true;
        self
    }

    /// The same table, whose rows a checkpoint written under an earlier
    /// layout of it may hold as `schema`: the operator's restore reads
    /// both, so such a checkpoint is not refused.
    pub fn or_earlier(mut self, schema: SchemaRef) -> Self {
        self.earlier.push(schema);
        self
    }

    /// The table's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its rows' schema.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// How its rows are keyed.
    pub fn key(&self) -> &TableKey {
        &self.key
    }

    /// How many leading columns are its key, when it is keyed by its first
    /// columns (a table a checkpoint may write as its changes).
    pub fn leading_key_columns(&self) -> Option<usize> {
        match &self.key {
            TableKey::Columns(columns) if columns.start == 0 && !columns.is_empty() => {
                Some(columns.end)
            }
            _ => None,
        }
    }

    /// How long a key is kept after its last change, if it expires.
    pub fn ttl_ms(&self) -> Option<i64> {
        self.ttl_ms
    }

    /// Whether a checkpoint may lack it ([`TableSpec::optional`]).
    pub fn is_optional(&self) -> bool {
        self.since_added
    }

    /// Column `i` of `table` (rows of this table) as its Arrow array type
    /// `A`; an error naming the table and column when it is not one.
    pub fn column<'a, A: datafusion::arrow::array::Array + 'static>(
        &self,
        table: &'a RecordBatch,
        i: usize,
    ) -> Result<&'a A> {
        table
            .columns()
            .get(i)
            .and_then(|c| c.as_any().downcast_ref::<A>())
            .ok_or_else(|| {
                EngineError::State(format!(
                    "column {i} of state table '{}' is not of its declared type",
                    self.name
                ))
            })
    }

    /// The table without rows.
    pub fn empty(&self) -> RecordBatch {
        RecordBatch::new_empty(self.schema.clone())
    }

    /// Whether rows of `schema` fit the declaration: as many columns, of
    /// the declared types (names and nullability aside: a checkpoint
    /// written under other column names still restores). The error names
    /// the first column that does not fit.
    pub fn check(&self, schema: &Schema) -> std::result::Result<(), TableMismatch> {
        let fits = self.check_against(&self.schema, schema);
        if fits.is_err()
            && self
                .earlier
                .iter()
                .any(|e| self.check_against(e, schema).is_ok())
        {
            return Ok(());
        }
        fits
    }

    fn check_against(
        &self,
        declared: &Schema,
        schema: &Schema,
    ) -> std::result::Result<(), TableMismatch> {
        if self.run_time_columns {
            return Ok(());
        }
        let declared_schema = declared;
        let declared = declared.fields();
        let given = schema.fields();
        if declared.len() != given.len() {
            return Err(TableMismatch::Width {
                table: self.name.clone(),
                given: column_list(schema),
                declared: column_list(declared_schema),
            });
        }
        for (i, (d, g)) in declared.iter().zip(given.iter()).enumerate() {
            if !d.data_type().equals_datatype(g.data_type()) {
                return Err(TableMismatch::Type {
                    table: self.name.clone(),
                    index: i,
                    column: g.name().clone(),
                    given: g.data_type().clone(),
                    declared: d.data_type().clone(),
                });
            }
        }
        Ok(())
    }
}

fn column_list(schema: &Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .map(|f| format!("{}: {}", f.name(), f.data_type()))
        .collect()
}

/// Why rows of a schema do not fit a state table's declaration
/// ([`TableSpec::check`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TableMismatch {
    /// Another number of columns.
    #[error(
        "state table '{table}' has {} columns ({}), the operator declares {} ({})",
        given.len(),
        given.join(", "),
        declared.len(),
        declared.join(", ")
    )]
    Width {
        table: String,
        /// The columns given, `name: type`.
        given: Vec<String>,
        /// The columns declared, `name: type`.
        declared: Vec<String>,
    },
    /// A column of another type.
    #[error("column {index} ('{column}') of state table '{table}' is {given}, the operator declares {declared}")]
    Type {
        table: String,
        index: usize,
        column: String,
        given: DataType,
        declared: DataType,
    },
}

/// A plan's declared tables ([`OperatorPlan::state_tables`]), each also
/// reading the layout it has in each of the plan's
/// [`OperatorPlan::earlier_layouts`] (state taken before aggregates were
/// appended).
pub fn of_plan(plan: &dyn OperatorPlan) -> Result<Vec<TableSpec>> {
    let mut specs = plan.state_tables()?;
    for earlier in plan.earlier_layouts() {
        for table in earlier.state_tables()? {
            if let Some(spec) = specs.iter_mut().find(|s| s.name == table.name) {
                spec.earlier.push(table.schema);
            }
        }
    }
    Ok(specs)
}

/// The declaration named `name` among `specs`.
pub fn find<'a>(specs: &'a [TableSpec], name: &str) -> Option<&'a TableSpec> {
    specs.iter().find(|s| s.name == name)
}

/// Whether a checkpointed node's tables fit the operator's declarations,
/// before it is restored: every table it holds is declared and fits, and
/// every declared table is there (or is optional). The error says
/// which table, and why, so that a checkpoint of another layout is
/// refused with a reason rather than misread.
pub fn check_restored(specs: &[TableSpec], state: &StateSnapshot) -> Result<()> {
    if state.is_empty() {
        return Ok(());
    }
    let held = state.tables.iter().map(|t| (&t.name, t.batch.schema()));
    for (name, schema) in held.chain(state.files.iter().map(|f| (&f.name, f.schema.clone()))) {
        let Some(spec) = find(specs, name) else {
            return Err(EngineError::State(format!(
                "the checkpoint holds a state table '{name}' the operator does not declare (it declares {})",
                names(specs)
            )));
        };
        spec.check(&schema)?;
    }
    for spec in specs {
        let named = |name: &String| *name == spec.name;
        let present = state.tables.iter().any(|t| named(&t.name))
            || state.files.iter().any(|f| named(&f.name));
        if !spec.since_added && !present {
            return Err(EngineError::State(format!(
                "the checkpoint lacks the operator's state table '{}'",
                spec.name
            )));
        }
    }
    Ok(())
}

/// Whether a snapshot the operator handed over holds only declared tables
/// (each put through [`StateSnapshot::put`] is already checked).
pub fn check_snapshot(specs: &[TableSpec], state: &StateSnapshot) -> Result<()> {
    let tables = state.tables.iter().map(|t| &t.name);
    for name in tables.chain(state.files.iter().map(|f| &f.name)) {
        if find(specs, name).is_none() {
            return Err(EngineError::State(format!(
                "an operator checkpointed a state table '{name}' it does not declare (it declares {})",
                names(specs)
            )));
        }
    }
    Ok(())
}

fn names(specs: &[TableSpec]) -> String {
    if specs.is_empty() {
        return "none".into();
    }
    specs
        .iter()
        .map(|s| format!("'{}'", s.name))
        .collect::<Vec<_>>()
        .join(", ")
}

impl StateSnapshot {
    /// Adds the declared table `spec` as a file already written
    /// ([`super::table_file`]); an error when its rows do not fit the
    /// declaration.
    pub fn put_file(&mut self, spec: &TableSpec, file: super::table_file::TableFile) -> Result<()> {
        spec.check_against(&spec.schema, &file.schema)?;
        if file.name != spec.name {
            return Err(EngineError::State(format!(
                "a file of table '{}' checkpointed as '{}'",
                file.name, spec.name
            )));
        }
        self.files.push(file);
        Ok(())
    }

    /// Adds the rows of the declared table `spec`; an error when they do
    /// not fit its declaration.
    pub fn put(&mut self, spec: &TableSpec, batch: RecordBatch) -> Result<()> {
        spec.check_against(&spec.schema, &batch.schema())?;
        self.push_table(spec.name.clone(), batch);
        Ok(())
    }

    /// Adds the declared table `spec` held as several batches, shared
    /// rather than copied ([`StateSnapshot::push_batches`]).
    pub fn put_batches(
        &mut self,
        spec: &TableSpec,
        batches: impl IntoIterator<Item = RecordBatch>,
    ) -> Result<()> {
        let mut pushed = false;
        for batch in batches {
            pushed = true;
            self.put(spec, batch)?;
        }
        if !pushed {
            self.put(spec, spec.empty())?;
        }
        Ok(())
    }

    /// Removes and returns the rows of the declared table `spec`; an error
    /// when the snapshot lacks it or its rows do not fit.
    pub fn take(&mut self, spec: &TableSpec) -> Result<RecordBatch> {
        let batch = self.take_table(&spec.name)?;
        spec.check(&batch.schema())?;
        Ok(batch)
    }

    /// Like [`StateSnapshot::take`], but `None` when the snapshot lacks
    /// the table (one [optional](TableSpec::optional)).
    pub fn take_if_present(&mut self, spec: &TableSpec) -> Result<Option<RecordBatch>> {
        let named = |name: &String| *name == spec.name;
        if self.tables.iter().any(|t| named(&t.name)) || self.files.iter().any(|f| named(&f.name)) {
            self.take(spec).map(Some)
        } else {
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::Field;

    use super::*;

    fn spec() -> TableSpec {
        TableSpec::new(
            "counts",
            Arc::new(Schema::new(vec![
                Field::new("k", DataType::Int64, false),
                Field::new("n", DataType::Int64, false),
            ])),
        )
        .keyed(TableKey::Columns(0..1))
    }

    fn batch(names: [&str; 2]) -> RecordBatch {
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new(names[0], DataType::Int64, true),
                Field::new(names[1], DataType::Int64, true),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap()
    }

    #[test]
    fn a_checkpoint_under_other_column_names_restores() {
        let mut state = StateSnapshot::default();
        state.push_table("counts", batch(["key", "count"]));
        check_restored(&[spec()], &state).unwrap();
        assert_eq!(state.take(&spec()).unwrap().num_rows(), 1);
    }

    #[test]
    fn a_checkpoint_of_another_layout_is_refused_with_the_table_and_column() {
        let mut state = StateSnapshot::default();
        state.push_table(
            "counts",
            RecordBatch::try_new(
                Arc::new(Schema::new(vec![
                    Field::new("k", DataType::Int64, false),
                    Field::new("n", DataType::Utf8, false),
                ])),
                vec![
                    Arc::new(Int64Array::from(vec![1])),
                    Arc::new(datafusion::arrow::array::StringArray::from(vec!["x"])),
                ],
            )
            .unwrap(),
        );
        let why = check_restored(&[spec()], &state).unwrap_err().to_string();
        assert!(
            why.contains("column 1 ('n') of state table 'counts' is Utf8"),
            "{why}"
        );
    }

    #[test]
    fn undeclared_and_missing_tables_are_refused() {
        let mut state = StateSnapshot::default();
        state.push_table("other", batch(["k", "n"]));
        let why = check_restored(&[spec()], &state).unwrap_err().to_string();
        assert!(
            why.contains("'other' the operator does not declare"),
            "{why}"
        );
        assert!(check_snapshot(&[spec()], &state).is_err());

        let state = StateSnapshot::with_meta(&1).unwrap();
        let why = check_restored(&[spec()], &state).unwrap_err().to_string();
        assert!(
            why.contains("lacks the operator's state table 'counts'"),
            "{why}"
        );
        check_restored(&[spec().optional()], &state).unwrap();
    }

    #[test]
    fn an_empty_declared_table_is_put_as_one_empty_batch() {
        let mut state = StateSnapshot::default();
        state.put_batches(&spec(), Vec::new()).unwrap();
        assert_eq!(state.tables.len(), 1);
        assert_eq!(state.take(&spec()).unwrap().num_rows(), 0);
    }
}
