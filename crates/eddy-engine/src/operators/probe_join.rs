//! What every join that probes a table with each row as it comes shares
//! (the lookup joins, streamed or read by key, and the event-time temporal
//! join): the probe side and the table side, their keys, the residual
//! condition and LEFT or INNER ([`ProbeJoin`], part of each such plan); and
//! the output step: a probe batch and, for each of its rows, the table rows
//! it matched (row-encoded) in; the joined rows, filtered by the residual
//! condition, and for a LEFT join the probe rows left without a match padded
//! with NULLs, out.

use std::sync::Arc;

use datafusion::arrow::array::{new_null_array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::{concat_batches, filter_record_batch, take};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::RowConverter;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::operator::{Collector, Distribution};
use crate::shape::Parameters;
use crate::state::declared::{TableKey, TableSpec};
use crate::state::StateSnapshot;

/// A join that probes a table (input 1) with each row of a stream (input
/// 0): the part of its plan every such join has.
#[derive(Debug, Clone)]
pub struct ProbeJoin {
    /// LEFT (a probe row without a match is padded) or INNER.
    pub left_outer: bool,
    /// The probe rows' columns.
    pub left_schema: SchemaRef,
    /// The table's columns as joined (without a changelog's row kind).
    pub right_schema: SchemaRef,
    /// Probe columns, then table columns.
    pub output_schema: SchemaRef,
    /// Key expressions over probe rows.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Key expressions over table rows (same types, same order).
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Condition on the joined columns beyond the keys.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
}

impl ProbeJoin {
    /// The parameters a probe join's shape starts with (`crate::shape`):
    /// LEFT or INNER and the keys; each join adds its own, then the
    /// residual condition ([`Self::residual_parameter`]).
    pub(crate) fn parameters(&self) -> Parameters {
        Parameters::new()
            .flag("left_outer", self.left_outer)
            .exprs("left_keys", &self.left_keys)
            .exprs("right_keys", &self.right_keys)
    }

    /// `parameters` with the residual condition added.
    pub(crate) fn residual_parameter(&self, parameters: Parameters) -> Parameters {
        parameters.expr("residual", self.residual.as_ref())
    }

    /// How `eddy explain` starts the join's line: `LEFT on l = r`.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{} on {}",
            if self.left_outer { "LEFT" } else { "INNER" },
            super::describe_key_pairs(&self.left_keys, &self.right_keys)
        )
    }

    /// The probe (input 0) and the table (input 1), each hashed by its own
    /// keys (of the same types): each key's table rows and probe rows meet
    /// in one instance, so the join runs as several.
    pub(crate) fn hashed_by_keys(&self, input: usize) -> Distribution {
        Distribution::hash(match input {
            0 => self.left_keys.clone(),
            _ => self.right_keys.clone(),
        })
    }

    /// A state table of probe rows waiting, keyed by the probe keys.
    pub(crate) fn waiting_probes(&self, name: &'static str) -> TableSpec {
        TableSpec::new(name, self.left_schema.clone())
            .keyed(TableKey::Exprs(self.left_keys.clone()))
    }

    /// How a state table of the table's rows whose first column is the
    /// probe key row-encoded ([`Self::key_converter`]) is keyed.
    pub(crate) fn encoded_key(&self) -> Result<TableKey> {
        super::encoded_key(&self.left_keys, &self.left_schema)
    }

    /// A converter of probe keys (and so of the table's keys, of the same
    /// types) to rows.
    pub(crate) fn key_converter(&self) -> Result<RowConverter> {
        super::key_converter(&self.left_keys, &self.left_schema)
    }

    /// A converter of the table's whole rows.
    pub(crate) fn row_converter(&self) -> Result<RowConverter> {
        super::row_converter(&self.right_schema)
    }

    /// Emits `probes` joined with the table rows `matches` gives for each
    /// probe row (encoded by `rows`, a converter of `right_schema`); `kind`
    /// names the operator in errors.
    pub(crate) fn emit<'t>(
        &self,
        probes: &RecordBatch,
        matches: impl Fn(usize) -> Option<&'t [Box<[u8]>]>,
        rows: &RowConverter,
        kind: &'static str,
        out: &mut Collector,
    ) -> Result<()> {
        let mut matched_rows: Vec<u32> = Vec::new();
        let mut found: Vec<&[u8]> = Vec::new();
        let mut unmatched: Vec<u32> = Vec::new();
        for r in 0..probes.num_rows() {
            match matches(r) {
                Some(table_rows) if !table_rows.is_empty() => {
                    for row in table_rows {
                        matched_rows.push(r as u32);
                        found.push(row);
                    }
                }
                _ => unmatched.push(r as u32),
            }
        }
        let parser = rows.parser();
        let table_columns = rows.convert_rows(found.iter().map(|row| parser.parse(row)))?;
        let indices = UInt32Array::from(matched_rows.clone());
        let mut joined = self.joined_rows(probes, &indices, Some(table_columns))?;
        if let Some(residual) = &self.residual {
            if joined.num_rows() > 0 {
                let mask = super::predicate_mask(residual, &joined, kind)?;
                if self.left_outer {
                    // A probe row none of whose matches pass is padded.
                    let mut passed = vec![false; probes.num_rows()];
                    for (i, &r) in matched_rows.iter().enumerate() {
                        passed[r as usize] |= mask.value(i);
                    }
                    let mut seen = vec![false; probes.num_rows()];
                    for &r in &matched_rows {
                        if !passed[r as usize] && !seen[r as usize] {
                            seen[r as usize] = true;
                            unmatched.push(r);
                        }
                    }
                }
                joined = filter_record_batch(&joined, &mask)?;
            }
        }
        if joined.num_rows() > 0 {
            out.emit(joined);
        }
        if self.left_outer && !unmatched.is_empty() {
            unmatched.sort_unstable();
            out.emit(self.joined_rows(probes, &UInt32Array::from(unmatched), None)?);
        }
        Ok(())
    }

    /// Joined rows: `probes`' rows at `indices` beside `right`'s columns
    /// (one row each), or, with no `right`, beside NULLs of the table's
    /// columns (a LEFT join's unmatched rows).
    fn joined_rows(
        &self,
        probes: &RecordBatch,
        indices: &UInt32Array,
        right: Option<Vec<ArrayRef>>,
    ) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = probes
            .columns()
            .iter()
            .map(|c| Ok(take(c.as_ref(), indices, None)?))
            .collect::<Result<_>>()?;
        match right {
            Some(right) => columns.extend(right),
            None => columns.extend(
                self.right_schema
                    .fields()
                    .iter()
                    .map(|f| new_null_array(f.data_type(), indices.len())),
            ),
        }
        Ok(RecordBatch::try_new_with_options(
            self.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(indices.len())),
        )?)
    }
}

/// Probe rows waiting (for the table to be read whole, or for the
/// watermark), as they came; checkpointed as the table
/// [`ProbeJoin::waiting_probes`] declares.
#[derive(Default)]
pub(crate) struct WaitingProbes {
    batches: Vec<RecordBatch>,
}

impl WaitingProbes {
    /// Whether no probe row waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// `batch` waits too.
    pub(crate) fn push(&mut self, batch: RecordBatch) {
        if batch.num_rows() > 0 {
            self.batches.push(crate::state::owned_batch::owned(batch));
        }
    }

    /// Every waiting row, in the order they came, as one batch of
    /// `schema` (none waits after).
    pub(crate) fn take_all(&mut self, schema: &SchemaRef) -> Result<RecordBatch> {
        let all = concat_batches(schema, &self.batches)?;
        self.batches.clear();
        Ok(all)
    }

    /// Rows waiting.
    pub(crate) fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Bytes their batches hold.
    pub(crate) fn bytes(&self) -> usize {
        self.batches
            .iter()
            .map(RecordBatch::get_array_memory_size)
            .sum()
    }

    /// Puts the waiting rows into `snapshot` as the table `spec`.
    pub(crate) fn snapshot(&self, snapshot: &mut StateSnapshot, spec: &TableSpec) -> Result<()> {
        snapshot.put_batches(spec, self.batches.iter().cloned())
    }

    /// The waiting rows the table `spec` of `state` holds, in place of
    /// these.
    pub(crate) fn restore(&mut self, state: &mut StateSnapshot, spec: &TableSpec) -> Result<()> {
        self.batches.clear();
        self.push(state.take(spec)?);
        Ok(())
    }
}
