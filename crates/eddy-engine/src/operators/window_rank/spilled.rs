//! The window Top-N's side of spilling ([`super::super::spilled_windows`]):
//! every window's waiting rows move to disk, split by their PARTITION BY
//! values, and a window with rows on disk is ranked a part at a time (a
//! partition lies wholly in one part, so its ranks are the same), from
//! memory's rows of that part and the spilled ones.

use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::Result;
use crate::operator::Collector;
use crate::operators::spilled_windows::{SpilledWindows, PARTS};
use crate::spill::SpillSpace;
use crate::time::Timestamp;

impl super::WindowRankOperator {
    /// Moves every window's waiting rows to disk, the windows furthest
    /// from being complete first.
    pub(super) fn spill_windows(&mut self, space: &Arc<SpillSpace>) -> Result<bool> {
        if self.pending.is_empty() {
            return Ok(false);
        }
        let mut spilled = match self.spilled.take() {
            Some(spilled) => spilled,
            None => SpilledWindows::open(space, "window_rank", self.plan.input_schema.clone())?,
        };
        let moved = self.move_out(&mut spilled);
        self.spilled = Some(spilled);
        moved.map(|()| true)
    }

    fn move_out(&mut self, spilled: &mut SpilledWindows) -> Result<()> {
        for (time, parts) in std::mem::take(&mut self.pending).into_iter().rev() {
            let rows = concat_batches(&self.plan.input_schema, parts.iter())?;
            spilled.write(time, &rows, &self.partition_keys(&rows)?)?;
        }
        Ok(())
    }

    /// The PARTITION BY values of `rows`.
    fn partition_keys(&self, rows: &RecordBatch) -> Result<Vec<ArrayRef>> {
        let n = rows.num_rows();
        self.plan
            .partition_by
            .iter()
            .map(|e| Ok(e.evaluate(rows)?.into_array(n)?))
            .collect()
    }

    /// Ranks the window of `time` from memory's rows of it (`memory`) and
    /// its rows on disk, a part at a time: a batch per part that holds
    /// any; forgets the rows on disk.
    pub(super) fn fire_spilled(
        &mut self,
        time: Timestamp,
        memory: Vec<RecordBatch>,
        out: &mut Collector,
    ) -> Result<()> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(());
        };
        let parts = self.parts(time, &memory, &mut spilled);
        let removed = spilled.remove(time);
        self.spilled = Some(spilled);
        for rows in parts? {
            out.emit(self.rank(self.top(self.sort(&rows)?)?)?);
        }
        removed
    }

    /// Each part's rows of the window of `time` that has any: memory's
    /// (`memory`) and those on disk.
    fn parts(
        &self,
        time: Timestamp,
        memory: &[RecordBatch],
        spilled: &mut SpilledWindows,
    ) -> Result<Vec<RecordBatch>> {
        let mut parts: Vec<Vec<RecordBatch>> = vec![Vec::new(); PARTS];
        for rows in memory {
            let keys = self.partition_keys(rows)?;
            for (part, rows) in SpilledWindows::split(rows, &keys)?.into_iter().enumerate() {
                parts[part].push(rows);
            }
        }
        let mut out = Vec::new();
        for (part, mut tables) in parts.into_iter().enumerate() {
            tables.extend(spilled.read(time, part)?);
            let rows = concat_batches(&self.plan.input_schema, tables.iter())?;
            if rows.num_rows() > 0 {
                out.push(rows);
            }
        }
        Ok(out)
    }

    /// For a checkpoint: every window with rows on disk gathered a part at
    /// a time with memory's rows of it (trimmed to what can make the top,
    /// as memory keeps them), written back to disk as one spill (memory
    /// keeps none of it), and returned: the rows a job that never spilled
    /// would hold.
    pub(super) fn compact_spilled(&mut self) -> Result<Vec<RecordBatch>> {
        let Some(mut spilled) = self.spilled.take() else {
            return Ok(Vec::new());
        };
        let compacted = self.compact_into(&mut spilled);
        self.spilled = Some(spilled);
        compacted
    }

    fn compact_into(&mut self, spilled: &mut SpilledWindows) -> Result<Vec<RecordBatch>> {
        let mut held = Vec::new();
        for time in spilled.ends() {
            let memory = self.pending.remove(&time).unwrap_or_default();
            let parts = self
                .parts(time, &memory, spilled)?
                .into_iter()
                .map(|rows| self.trim(rows))
                .collect::<Result<Vec<_>>>()?;
            spilled.remove(time)?;
            for rows in &parts {
                spilled.write(time, rows, &self.partition_keys(rows)?)?;
            }
            held.extend(parts);
        }
        Ok(held)
    }
}
