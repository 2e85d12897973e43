//! Session windows' open sessions on disk: what the session aggregate
//! moved out of memory when the memory budget refused it more
//! ([`crate::spill`]).
//!
//! In: rows of the aggregate's `sessions` table (the key's bytes, the
//! session's start and last row time, each aggregate's state columns: the
//! checkpoint's layout) and the gap that gives each session its end. Out:
//! the same rows read back, and taken off disk, either by key (released
//! rows bring the key again: its session goes on in memory) or by end (a
//! watermark passed it: the session fires); every stored session, for
//! checkpoints. A key's open session is wholly in memory or wholly on disk.
//! Also rows waiting for the watermark (input rows, before they are in
//! order): out by time, those before a watermark's horizon.
//!
//! Three tables. `sessions` holds each session under its end then its key
//! (the end big-endian with the sign bit flipped, so byte order is time
//! order), its value the row's other columns in Arrow's row format: a
//! watermark fires a range of it, in the order sessions end. `ends` maps
//! a key to its session's end, so rows that bring a key find its session
//! by two point reads (a key not on disk costs one, mostly answered by
//! the table's filter). `waiting` holds rows waiting for the watermark,
//! sorted by time, as Arrow IPC chunks keyed by their first time (then a
//! number), so a watermark reads back the chunks that hold a row before
//! its horizon.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use eddy_engine::operators::session_aggregate::spilled::SpilledSessions;
//! use eddy_engine::spill::{SpillConfig, SpillSpace};
//!
//! let schema = Arc::new(Schema::new(vec![
//!     Field::new("key", DataType::Binary, false),
//!     Field::new("start", DataType::Int64, false),
//!     Field::new("last", DataType::Int64, false),
//!     Field::new("count", DataType::Int64, true),
//! ]));
//! let sessions = RecordBatch::try_new(schema.clone(), vec![
//!     Arc::new(BinaryArray::from(vec![&b"a"[..], &b"b"[..]])) as ArrayRef,
//!     Arc::new(Int64Array::from(vec![0, 5])),
//!     Arc::new(Int64Array::from(vec![8, 30])),
//!     Arc::new(Int64Array::from(vec![2, 1])),
//! ]).unwrap();
//! let space = Arc::new(SpillSpace::new(SpillConfig::default()));
//! let input = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
//! let mut spilled = SpilledSessions::open(&space, schema, input, 0, 10).unwrap().unwrap();
//! spilled.write(&sessions).unwrap();
//! // The watermark passed 18 (a's end), not 40 (b's).
//! let ended = spilled.take_ended_before(20).unwrap().unwrap();
//! assert_eq!(ended.num_rows(), 1);
//! // b comes back for its key's next rows, and leaves the disk.
//! let back = spilled.take(&[&b"b"[..], &b"c"[..]]).unwrap().unwrap();
//! assert_eq!(back.num_rows(), 1);
//! assert_eq!(spilled.len(), 0);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, BinaryArray, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatchOptions;
use datafusion::arrow::row::{RowConverter, SortField};

use datafusion::arrow::compute::{sort_to_indices, take_record_batch};

use crate::error::{EngineError, Result};
use crate::operators::spilled_windows::{decode, encode};
use crate::spill::{SpillSpace, SpillStats, SpillTable};
use crate::time::{to_epoch_millis, Timestamp};

/// Sessions, or waiting rows, a spill encodes and writes at a time.
const CHUNK_ROWS: usize = 16 * 1024;

/// Open sessions written to disk, by end and by key.
pub struct SpilledSessions {
    /// (end, key) → the row's columns after the key.
    sessions: SpillTable,
    /// key → end.
    ends: SpillTable,
    /// The sessions table's schema: key, start, last, states.
    schema: SchemaRef,
    /// The columns after the key, in Arrow's row format.
    columns: RowConverter,
    gap_ms: i64,
    /// Sessions on disk now.
    count: usize,
    /// (first time, number) → up to [`CHUNK_ROWS`] input rows, by time.
    waiting: SpillTable,
    /// The input's schema, and which column is the event time.
    input: SchemaRef,
    time_column: usize,
    /// Waiting rows on disk now, and chunks written (for their keys).
    waiting_rows: usize,
    chunks: u64,
}

impl SpilledSessions {
    /// Tables of `space` for sessions laid out as `schema` (the `sessions`
    /// checkpoint table: a binary key, then start and last times, then
    /// state columns), each ending `gap_ms` after its last row, and for
    /// input rows (`input`, its event time at `time_column`); `None`
    /// when a state column has a type the row format does not take, so
    /// the sessions cannot spill.
    pub fn open(
        space: &Arc<SpillSpace>,
        schema: SchemaRef,
        input: SchemaRef,
        time_column: usize,
        gap_ms: i64,
    ) -> Result<Option<Self>> {
        let fields: Vec<SortField> = schema
            .fields()
            .iter()
            .skip(1)
            .map(|f| SortField::new(f.data_type().clone()))
            .collect();
        if !RowConverter::supports_fields(&fields) {
            return Ok(None);
        }
        Ok(Some(Self {
            sessions: space.table("session_aggregate")?,
            ends: space.table("session_aggregate_ends")?,
            columns: RowConverter::new(fields)?,
            schema,
            gap_ms,
            count: 0,
            waiting: space.table("session_aggregate_waiting")?,
            input,
            time_column,
            waiting_rows: 0,
            chunks: 0,
        }))
    }

    /// Sessions on disk.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no session is on disk.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Waiting rows on disk.
    pub fn waiting_rows(&self) -> usize {
        self.waiting_rows
    }

    /// Writes input rows waiting for the watermark, sorted by time, a
    /// chunk an entry.
    pub fn write_waiting(&mut self, rows: &RecordBatch) -> Result<()> {
        let n = rows.num_rows();
        if n == 0 {
            return Ok(());
        }
        let times = to_epoch_millis(rows.column(self.time_column))?;
        let order = sort_to_indices(&times, None, None)?;
        let rows = take_record_batch(rows, &order)?;
        let times = to_epoch_millis(rows.column(self.time_column))?;
        let mut bytes = Vec::new();
        let mut start = 0;
        while start < n {
            let len = CHUNK_ROWS.min(n - start);
            let mut key = end_bytes(times.value(start)).to_vec();
            key.extend_from_slice(&self.chunks.to_be_bytes());
            self.chunks += 1;
            bytes.clear();
            encode(&rows.slice(start, len), &mut bytes)?;
            self.waiting.write([(&key[..], &bytes[..])])?;
            start += len;
        }
        self.waiting_rows += n;
        Ok(())
    }

    /// The waiting rows on disk in chunks that hold a row before
    /// `horizon` (with the rest of those chunks), taken off disk.
    pub fn take_waiting_before(&mut self, horizon: Timestamp) -> Result<Vec<RecordBatch>> {
        if self.waiting_rows == 0 {
            return Ok(Vec::new());
        }
        let due = self
            .waiting
            .entries_between(&end_bytes(Timestamp::MIN), &end_bytes(horizon))
            .collect::<Result<Vec<_>>>()?;
        self.waiting.remove(due.iter().map(|(key, _)| &key[..]))?;
        let mut tables = Vec::new();
        for (_, bytes) in &due {
            tables.extend(decode(bytes, &self.input)?);
        }
        let rows: usize = tables.iter().map(RecordBatch::num_rows).sum();
        self.waiting_rows = self.waiting_rows.saturating_sub(rows);
        Ok(tables)
    }

    /// Every waiting row on disk, left there.
    pub fn all_waiting(&self) -> Result<Vec<RecordBatch>> {
        let mut tables = Vec::new();
        for entry in self.waiting.entries() {
            let (_, bytes) = entry?;
            tables.extend(decode(&bytes, &self.input)?);
        }
        Ok(tables)
    }

    /// Writes every session of `sessions` (a sessions table whose keys
    /// are on disk in neither table).
    pub fn write(&mut self, sessions: &RecordBatch) -> Result<()> {
        let mut start = 0;
        while start < sessions.num_rows() {
            let len = CHUNK_ROWS.min(sessions.num_rows() - start);
            self.write_chunk(&sessions.slice(start, len))?;
            start += len;
        }
        Ok(())
    }

    fn write_chunk(&mut self, sessions: &RecordBatch) -> Result<()> {
        let keys = binary(sessions, 0)?;
        let lasts = int64(sessions, 2)?;
        let rows = self.columns.convert_columns(&sessions.columns()[1..])?;
        let ends: Vec<[u8; 8]> = lasts
            .values()
            .iter()
            .map(|last| end_bytes(last.saturating_add(self.gap_ms)))
            .collect();
        let by_end: Vec<Vec<u8>> = (0..sessions.num_rows())
            .map(|i| [&ends[i][..], keys.value(i)].concat())
            .collect();
        self.sessions.write(
            by_end
                .iter()
                .zip(rows.iter())
                .map(|(key, row)| (&key[..], row.data())),
        )?;
        self.ends
            .write((0..sessions.num_rows()).map(|i| (keys.value(i), &ends[i][..])))?;
        self.count += sessions.num_rows();
        Ok(())
    }

    /// The stored sessions of these keys (a sessions table; `None` when
    /// none is stored), taken off disk.
    pub fn take(&mut self, keys: &[&[u8]]) -> Result<Option<RecordBatch>> {
        if self.count == 0 {
            return Ok(None);
        }
        let mut found: Vec<(Vec<u8>, fjall::Slice)> = Vec::new();
        for &key in keys {
            let Some(end) = self.ends.read(key)? else {
                continue;
            };
            let by_end = [end.as_ref(), key].concat();
            let row = self.sessions.read(&by_end)?.ok_or_else(|| {
                EngineError::State(
                    "session_aggregate: a spilled session's key has no session".into(),
                )
            })?;
            found.push((by_end, row));
        }
        if found.is_empty() {
            return Ok(None);
        }
        self.forget(found.iter().map(|(by_end, _)| &by_end[..]))?;
        let table = self.table(found.iter().map(|(k, v)| (&k[8..], v.as_ref())))?;
        Ok(Some(table))
    }

    /// The stored sessions that end before `end` (a sessions table, in
    /// the order they end; `None` when there is none), taken off disk.
    pub fn take_ended_before(&mut self, end: Timestamp) -> Result<Option<RecordBatch>> {
        if self.count == 0 {
            return Ok(None);
        }
        let ended = self
            .sessions
            .entries_between(&end_bytes(Timestamp::MIN), &end_bytes(end))
            .collect::<Result<Vec<_>>>()?;
        if ended.is_empty() {
            return Ok(None);
        }
        self.forget(ended.iter().map(|(by_end, _)| &by_end[..]))?;
        let table = self.table(ended.iter().map(|(k, v)| (&k[8..], &v[..])))?;
        Ok(Some(table))
    }

    /// Every stored session (a sessions table), left on disk.
    pub fn all(&self) -> Result<RecordBatch> {
        let stored = self.sessions.entries().collect::<Result<Vec<_>>>()?;
        self.table(stored.iter().map(|(k, v)| (&k[8..], &v[..])))
    }

    /// Calls `each` with the stored sessions, left on disk, as sessions
    /// tables of at most [`CHUNK_ROWS`] rows: a checkpoint streams them
    /// to its file, never holding them all.
    pub fn each_stored(&self, mut each: impl FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        let mut chunk = Vec::with_capacity(CHUNK_ROWS);
        for entry in self.sessions.entries() {
            chunk.push(entry?);
            if chunk.len() == CHUNK_ROWS {
                each(self.table(chunk.iter().map(|(k, v)| (&k[8..], &v[..])))?)?;
                chunk.clear();
            }
        }
        if !chunk.is_empty() {
            each(self.table(chunk.iter().map(|(k, v)| (&k[8..], &v[..])))?)?;
        }
        Ok(())
    }

    /// Calls `each` with the waiting rows on disk, left there, a stored
    /// chunk at a time.
    pub fn each_waiting(&self, mut each: impl FnMut(RecordBatch) -> Result<()>) -> Result<()> {
        for entry in self.waiting.entries() {
            let (_, bytes) = entry?;
            for batch in decode(&bytes, &self.input)? {
                each(batch)?;
            }
        }
        Ok(())
    }

    /// A file for the snapshot table `name` beside the store.
    pub fn snapshot_file(
        &self,
        name: &str,
        schema: &SchemaRef,
    ) -> Result<crate::state::table_file::TableFileWriter> {
        self.sessions.snapshot_file(name, schema)
    }

    /// Forgets every stored session and waiting row.
    pub fn clear(&mut self) -> Result<()> {
        self.sessions.clear()?;
        self.ends.clear()?;
        self.waiting.clear()?;
        self.count = 0;
        self.waiting_rows = 0;
        Ok(())
    }

    /// What spilling has cost, the tables together.
    pub fn stats(&self) -> SpillStats {
        let tables = [&self.sessions, &self.ends, &self.waiting].map(SpillTable::stats);
        SpillStats {
            written_bytes: tables.iter().map(|t| t.written_bytes).sum(),
            read_bytes: tables.iter().map(|t| t.read_bytes).sum(),
            disk_bytes: tables.iter().map(|t| t.disk_bytes).sum(),
        }
    }

    /// Takes the sessions stored under these `sessions` keys (end, then
    /// key) off both tables.
    fn forget<'a>(&mut self, by_end: impl Iterator<Item = &'a [u8]> + Clone) -> Result<()> {
        let mut removed = 0;
        self.ends.remove(by_end.clone().map(|k| {
            removed += 1;
            &k[8..]
        }))?;
        self.sessions.remove(by_end)?;
        self.count = self.count.saturating_sub(removed);
        Ok(())
    }

    /// A sessions table of (key, the row's other columns) entries.
    fn table<'a>(
        &self,
        entries: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    ) -> Result<RecordBatch> {
        let (keys, rows): (Vec<&[u8]>, Vec<&[u8]>) = entries.unzip();
        let parser = self.columns.parser();
        let mut columns: Vec<ArrayRef> = vec![Arc::new(BinaryArray::from(keys.clone()))];
        columns.extend(
            self.columns
                .convert_rows(rows.iter().map(|row| parser.parse(row)))?,
        );
        Ok(RecordBatch::try_new_with_options(
            self.schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(keys.len())),
        )?)
    }
}

/// A session's end as bytes whose order is the time order.
fn end_bytes(end: Timestamp) -> [u8; 8] {
    ((end as u64) ^ (1 << 63)).to_be_bytes()
}

fn binary(table: &RecordBatch, column: usize) -> Result<&BinaryArray> {
    table
        .column(column)
        .as_any()
        .downcast_ref::<BinaryArray>()
        .ok_or_else(bad_table)
}

fn int64(table: &RecordBatch, column: usize) -> Result<&Int64Array> {
    table
        .column(column)
        .as_any()
        .downcast_ref::<Int64Array>()
        .ok_or_else(bad_table)
}

fn bad_table() -> EngineError {
    EngineError::State("session_aggregate: bad sessions table".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spill::SpillConfig;
    use datafusion::arrow::array::Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};

    fn sessions(keys: &[&str], lasts: &[i64]) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Binary, false),
            Field::new("start", DataType::Int64, false),
            Field::new("last", DataType::Int64, false),
            Field::new("sum", DataType::Int64, true),
        ]));
        RecordBatch::try_new(
            schema,
            vec![
                Arc::new(BinaryArray::from(
                    keys.iter().map(|k| k.as_bytes()).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(
                    lasts.iter().map(|l| l - 1).collect::<Vec<_>>(),
                )),
                Arc::new(Int64Array::from(lasts.to_vec())),
                Arc::new(Int64Array::from((0..keys.len() as i64).collect::<Vec<_>>())),
            ],
        )
        .unwrap()
    }

    fn keys(table: &RecordBatch) -> Vec<String> {
        let keys = binary(table, 0).unwrap();
        (0..keys.len())
            .map(|i| String::from_utf8(keys.value(i).to_vec()).unwrap())
            .collect()
    }

    #[test]
    fn sessions_fire_in_end_order_and_leave_the_disk_once() {
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let table = sessions(&["c", "a", "b", "neg"], &[30, 10, 20, -5]);
        let input = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
        let mut spilled = SpilledSessions::open(&space, table.schema(), input, 0, 5)
            .unwrap()
            .unwrap();
        spilled.write(&table).unwrap();
        assert_eq!(spilled.len(), 4);
        assert_eq!(keys(&spilled.all().unwrap()), ["neg", "a", "b", "c"]);
        // Ends: neg 0, a 15, b 25, c 35.
        assert!(spilled.take_ended_before(0).unwrap().is_none());
        let ended = spilled.take_ended_before(25).unwrap().unwrap();
        assert_eq!(keys(&ended), ["neg", "a"]);
        assert_eq!(int64(&ended, 3).unwrap().values().as_ref(), &[3, 1]);
        assert!(spilled.take(&[b"a"]).unwrap().is_none(), "a fired");
        let back = spilled.take(&[b"c", b"zzz"]).unwrap().unwrap();
        assert_eq!(keys(&back), ["c"]);
        assert_eq!(back, table.slice(0, 1));
        assert_eq!(keys(&spilled.all().unwrap()), ["b"]);
        assert_eq!(spilled.len(), 1);
        let stats = spilled.stats();
        assert!(stats.written_bytes > 0 && stats.read_bytes > 0);
    }

    #[test]
    fn waiting_rows_come_back_by_the_chunks_a_horizon_reaches() {
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let table = sessions(&["a"], &[1]);
        let input = Arc::new(Schema::new(vec![Field::new("t", DataType::Int64, false)]));
        let mut spilled = SpilledSessions::open(&space, table.schema(), input.clone(), 0, 5)
            .unwrap()
            .unwrap();
        let rows = |times: Vec<i64>| {
            RecordBatch::try_new(input.clone(), vec![Arc::new(Int64Array::from(times))]).unwrap()
        };
        spilled.write_waiting(&rows(vec![30, 10, 20])).unwrap();
        spilled.write_waiting(&rows(vec![50])).unwrap();
        assert_eq!(spilled.waiting_rows(), 4);
        assert!(spilled.take_waiting_before(10).unwrap().is_empty());
        // The first chunk starts at 10: it comes back whole, sorted.
        let back = spilled.take_waiting_before(11).unwrap();
        assert_eq!(back, [rows(vec![10, 20, 30])]);
        assert_eq!(spilled.waiting_rows(), 1);
        assert_eq!(spilled.all_waiting().unwrap(), [rows(vec![50])]);
        spilled.clear().unwrap();
        assert_eq!(spilled.waiting_rows(), 0);
        assert!(spilled.all_waiting().unwrap().is_empty());
    }
}
