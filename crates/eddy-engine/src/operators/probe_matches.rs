//! The output step of the joins that probe a table with each row as it
//! comes (the lookup joins, streamed or read by key): a probe batch and,
//! for each of its rows, the table rows it matched (row-encoded) in; the
//! joined rows, filtered by the residual condition, and for a LEFT join
//! the probe rows left without a match padded with NULLs, out.

use std::sync::Arc;

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::filter_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::RowConverter;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::operator::Collector;

/// What a probe join's output looks like.
pub(crate) struct ProbeJoinShape<'a> {
    /// The operator's kind, for errors.
    pub kind: &'static str,
    /// LEFT (a probe row without a match is padded) or INNER.
    pub left_outer: bool,
    /// The table's columns as joined.
    pub right_schema: &'a SchemaRef,
    /// Probe columns, then table columns.
    pub output_schema: &'a SchemaRef,
    /// Condition on the joined columns beyond the keys.
    pub residual: Option<&'a Arc<dyn PhysicalExpr>>,
}

impl ProbeJoinShape<'_> {
    /// Emits `probes` joined with the table rows `matches` gives for each
    /// probe row (encoded by `rows`, a converter of `right_schema`).
    pub(crate) fn emit<'t>(
        &self,
        probes: &RecordBatch,
        matches: impl Fn(usize) -> Option<&'t [Box<[u8]>]>,
        rows: &RowConverter,
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
        let mut joined = super::probe_join_rows(
            self.output_schema,
            probes,
            &indices,
            Some(table_columns),
            self.right_schema,
        )?;
        if let Some(residual) = self.residual {
            if joined.num_rows() > 0 {
                let mask = super::predicate_mask(residual, &joined, self.kind)?;
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
            out.emit(super::probe_join_rows(
                self.output_schema,
                probes,
                &UInt32Array::from(unmatched),
                None,
                self.right_schema,
            )?);
        }
        Ok(())
    }
}
