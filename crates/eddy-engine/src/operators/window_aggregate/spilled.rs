//! The window aggregation's side of spilling ([`super::super::spilled_windows`]):
//! every open window and frozen slice moves to disk as partial states
//! (the checkpoint's rows: end, keys, each accumulator's state), and a
//! window with rows on disk fires a part of its keys at a time, merging
//! memory's partial states of that part with the spilled ones
//! (`GroupsAccumulator::merge_batch`).

use std::ops::RangeInclusive;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::operators::spilled_windows::{SpilledWindows, PARTS};
use crate::spill::SpillSpace;

/// What moves out, how a window with rows on disk fires, and how a
/// checkpoint reads it.
impl super::WindowAggregateOperator {
    /// Moves every open window (open slice, when sliced) and every frozen
    /// slice to disk, the windows furthest from firing first.
    pub(super) fn spill_windows(&mut self, space: &Arc<SpillSpace>) -> Result<bool> {
        if self.windows.is_empty() && self.frozen.is_empty() {
            return Ok(false);
        }
        let mut spilled = match self.spilled.take() {
            Some(spilled) => spilled,
            None => SpilledWindows::open(space, "window_aggregate", self.state_schema.clone())?,
        };
        let moved = self.move_out(&mut spilled);
        self.spilled = Some(spilled);
        moved.map(|()| true)
    }

    fn move_out(&mut self, spilled: &mut SpilledWindows) -> Result<()> {
        for (end, window) in std::mem::take(&mut self.windows).into_iter().rev() {
            let table = self.state_table(vec![self.window_columns(end, window)?])?;
            spilled.write(end, &table, &self.state_keys(&table))?;
        }
        for (end, tables) in self.frozen.take().into_iter().rev() {
            for table in tables {
                spilled.write(end, &table, &self.state_keys(&table))?;
            }
        }
        Ok(())
    }

    /// The key columns of a state table (after the end).
    fn state_keys(&self, table: &RecordBatch) -> Vec<ArrayRef> {
        table.columns()[1..1 + self.plan.group_by.keys.len()].to_vec()
    }

    /// Whether any window (or slice) ending in `ends` has rows on disk.
    pub(super) fn spilled_in(&self, ends: RangeInclusive<i64>) -> bool {
        self.spilled
            .as_ref()
            .is_some_and(|s| !s.ends_in(ends).is_empty())
    }

    /// Fires the window ending at `end` from `memory` (state tables) and
    /// the rows on disk of the windows or slices ending in `disk`, a part
    /// of its keys at a time: a batch per part that holds any.
    pub(super) fn fire_spilled(
        &mut self,
        end: i64,
        memory: &[RecordBatch],
        disk: RangeInclusive<i64>,
        out: &mut crate::operator::Collector,
    ) -> Result<()> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(());
        };
        let merged = self.merged_parts(memory, disk, &mut spilled);
        self.spilled = Some(spilled);
        for window in merged? {
            out.emit(self.emit(end, window)?);
        }
        Ok(())
    }

    /// `memory`'s rows and those on disk in `disk`, merged into a window
    /// per part that holds any.
    fn merged_parts(
        &self,
        memory: &[RecordBatch],
        disk: RangeInclusive<i64>,
        spilled: &mut SpilledWindows,
    ) -> Result<Vec<super::OpenWindow>> {
        let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); PARTS];
        for table in memory {
            let keys = self.state_keys(table);
            for (part, rows) in SpilledWindows::split(table, &keys)?.into_iter().enumerate() {
                if rows.num_rows() > 0 {
                    parts[part].push(rows);
                }
            }
        }
        let ends = spilled.ends_in(disk);
        let mut windows = Vec::new();
        for (part, tables) in parts.into_iter().enumerate() {
            let mut window = self.open_window()?;
            for table in &tables {
                self.merge_table(&mut window, table)?;
            }
            for &slice in &ends {
                for table in spilled.read(slice, part)? {
                    self.merge_table(&mut window, &table)?;
                }
            }
            if window.num_groups > 0 {
                windows.push(window);
            }
        }
        Ok(windows)
    }

    /// For a checkpoint: every window (or slice) with rows on disk merged
    /// a part at a time with memory's rows of it, written back to disk as
    /// one spill (memory keeps none of it), and handed to `each` part by
    /// part as rows of the state tables, with whether they are a frozen
    /// slice. A row per key, as a job that never spilled checkpoints it;
    /// never more than a part in memory.
    pub(super) fn compact_spilled(
        &mut self,
        each: impl FnMut(bool, RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(());
        };
        let compacted = self.compact_into(&mut spilled, each);
        self.spilled = Some(spilled);
        compacted
    }

    fn compact_into(
        &mut self,
        spilled: &mut SpilledWindows,
        mut each: impl FnMut(bool, RecordBatch) -> Result<()>,
    ) -> Result<()> {
        let horizon = self
            .watermark
            .saturating_sub(self.plan.group_by.allowed_lateness_ms);
        for end in spilled.ends() {
            let mut memory = Vec::new();
            if let Some(window) = self.windows.remove(&end) {
                memory.push(self.state_table(vec![self.window_columns(end, window)?])?);
            }
            memory.extend(self.frozen.remove(end));
            let merged = self
                .merged_parts(&memory, end..=end, spilled)?
                .into_iter()
                .map(|window| self.state_table(vec![self.window_columns(end, window)?]))
                .collect::<Result<Vec<_>>>()?;
            spilled.remove(end)?;
            for table in &merged {
                spilled.write(end, table, &self.state_keys(table))?;
            }
            // A slice the watermark has passed is frozen (`fire_sliced`).
            let frozen = self.slice_ms.is_some() && end <= horizon;
            for table in merged {
                each(frozen, table)?;
            }
        }
        Ok(())
    }
}
