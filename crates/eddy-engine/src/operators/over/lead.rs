//! `lead(value, n, default)` in an OVER node: a row's value `n` rows later
//! in its key's event-time order.
//!
//! In: rows the OVER node has run through its other functions, in
//! event-time order (their `lead` columns not yet filled). Out: the rows
//! whose leads are known, `lead` columns filled.
//!
//! A released row waits here until `n` later rows of its key (the largest
//! `n` of the node's leads) have been released too: every row still to come
//! is later than the released ones, so from then on its leads are final,
//! and the row goes out once, never revised. A key's last rows go out at
//! the end of the input with the default where fewer than `n` rows
//! followed. The output watermark is held at the earliest waiting row, so
//! nothing downstream takes it for late.
//!
//! With a state time-to-live (`SET 'table.exec.state.ttl'`), a key's rows
//! more than the TTL of event time apart belong to separate runs (as for
//! the node's other functions, whose state starts afresh there): a lead
//! never reaches across that gap, and a run is over once the watermark
//! passes its last row by the TTL, so its last rows go out with their
//! defaults then instead of waiting for the end.
//!
//! Checkpoints: table `waiting` (the waiting rows, output columns).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::{cast, concat_batches, interleave, take_record_batch};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::common::ScalarValue;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use super::operator::OverOperator;
use super::{OverFunction, OverPlan};
use crate::error::Result;
use crate::time::{to_epoch_millis, Timestamp, WATERMARK_MAX};

/// Rows released but waiting for their leads, and the earliest of their
/// event times (the output watermark's hold).
#[derive(Default)]
pub(super) struct Waiting {
    pub(super) rows: Option<RecordBatch>,
    pub(super) earliest: Option<Timestamp>,
}

impl Waiting {
    pub(super) fn num_rows(&self) -> usize {
        self.rows.as_ref().map_or(0, |r| r.num_rows())
    }

    pub(super) fn bytes(&self) -> usize {
        self.rows.as_ref().map_or(0, |r| r.get_array_memory_size())
    }
}

/// One `lead` of the node: its output column, value, offset and default.
struct Lead<'a> {
    column: usize,
    value: &'a Arc<dyn PhysicalExpr>,
    offset: usize,
    default: &'a ScalarValue,
}

/// The node's leads.
fn leads(plan: &OverPlan) -> Vec<Lead<'_>> {
    let base = plan.input_schema.fields().len();
    plan.functions
        .iter()
        .enumerate()
        .filter_map(|(f, function)| match function {
            OverFunction::Lead {
                value,
                offset,
                default,
            } => Some(Lead {
                column: base + f,
                value,
                offset: *offset,
                default,
            }),
            _ => None,
        })
        .collect()
}

impl OverOperator {
    /// Whether the node has a `lead` (rows then wait here).
    pub(super) fn has_leads(&self) -> bool {
        self.plan.has_leads()
    }

    /// Adds `processed` (rows just run through the node, output columns) to
    /// the waiting rows and returns those whose leads are now final: rows
    /// still to come are at or after `horizon`; at the end (`horizon` is
    /// [`WATERMARK_MAX`]) every row goes.
    pub(super) fn pair_leads(
        &mut self,
        processed: Option<RecordBatch>,
        horizon: Timestamp,
    ) -> Result<Option<RecordBatch>> {
        let schema = self.plan.output_schema.clone();
        let combined = match (self.waiting.rows.take(), processed) {
            (None, None) => return Ok(None),
            (Some(rows), None) | (None, Some(rows)) => rows,
            (Some(waiting), Some(processed)) => concat_batches(&schema, [&waiting, &processed])?,
        };
        let inputs: Vec<usize> = (0..self.plan.input_schema.fields().len()).collect();
        let input = combined.project(&inputs)?;
        let (keys, _) = super::super::key_rows(&self.converter, &self.plan.partition_by, &input)?;
        let times = to_epoch_millis(input.column(self.plan.time_column))?;
        let leads = leads(&self.plan);
        let reach = leads.iter().map(|l| l.offset).max().unwrap_or(0);
        let ttl = self.plan.state_ttl_ms;
        let end = horizon == WATERMARK_MAX;

        // Each key's rows, in order.
        let mut by_key: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for row in 0..combined.num_rows() {
            by_key
                .entry(keys.row(row).data())
                .or_default()
                .push(row as u32);
        }
        let mut done: Vec<(u32, Vec<Option<u32>>)> = Vec::new();
        let mut waiting: Vec<u32> = Vec::new();
        for rows in by_key.values() {
            // Runs of the key: rows no more than the TTL apart.
            let mut start = 0;
            while start < rows.len() {
                let mut stop = start + 1;
                while stop < rows.len()
                    && ttl.is_none_or(|ttl| {
                        times
                            .value(rows[stop] as usize)
                            .saturating_sub(times.value(rows[stop - 1] as usize))
                            <= ttl
                    })
                {
                    stop += 1;
                }
                let last = times.value(rows[stop - 1] as usize);
                let closed = end
                    || stop < rows.len()
                    || ttl.is_some_and(|ttl| horizon > last.saturating_add(ttl));
                for j in start..stop {
                    if !closed && j + reach >= stop {
                        waiting.push(rows[j]);
                        continue;
                    }
                    let sources = leads
                        .iter()
                        .map(|l| {
                            rows.get(j + l.offset)
                                .filter(|_| j + l.offset < stop)
                                .copied()
                        })
                        .collect();
                    done.push((rows[j], sources));
                }
                start = stop;
            }
        }
        done.sort_unstable_by_key(|(row, _)| *row);
        waiting.sort_unstable();

        self.waiting = Waiting::default();
        if !waiting.is_empty() {
            let indices = UInt32Array::from(waiting);
            let earliest = datafusion::arrow::compute::min(
                &datafusion::arrow::array::TimestampMillisecondArray::from(
                    indices
                        .values()
                        .iter()
                        .map(|&i| times.value(i as usize))
                        .collect::<Vec<_>>(),
                ),
            );
            self.waiting = Waiting {
                rows: Some(take_record_batch(&combined, &indices)?),
                earliest,
            };
        }
        if done.is_empty() {
            return Ok(None);
        }
        let indices = UInt32Array::from_iter_values(done.iter().map(|(row, _)| *row));
        let out = take_record_batch(&combined, &indices)?;
        let mut columns = out.columns().to_vec();
        for (l, lead) in leads.iter().enumerate() {
            let values = lead.value.evaluate(&input)?.into_array(input.num_rows())?;
            let default = cast(&lead.default.to_array_of_size(1)?, values.data_type())?;
            let sources: Vec<(usize, usize)> = done
                .iter()
                .map(|(_, s)| match s[l] {
                    Some(row) => (0, row as usize),
                    None => (1, 0),
                })
                .collect();
            let column: ArrayRef = interleave(&[values.as_ref(), default.as_ref()], &sources)?;
            let wanted = schema.field(lead.column).data_type();
            columns[lead.column] = if column.data_type() == wanted {
                column
            } else {
                cast(&column, wanted)?
            };
        }
        Ok(Some(RecordBatch::try_new(schema, columns)?))
    }
}
