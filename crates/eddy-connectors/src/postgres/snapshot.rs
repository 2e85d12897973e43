//! A table's rows read in chunks by primary key, each chunk in a short
//! transaction of its own, so a large table never holds one transaction
//! (and the vacuum horizon) open for the whole copy.
//!
//! In: a query connection, the [`PgTable`], where the previous chunk ended.
//! Out: the chunk's rows (into [`TextRows`], as inserts) and a
//! [`ChunkRecord`]: its last key and the transaction snapshot it was read
//! in (`pg_current_snapshot()`: which transactions it sees).
//!
//! How chunks and the change stream agree, exactly: the replication slot
//! exists before the first chunk is read, and the stream is read from the
//! slot's position after the last. A change is a transaction's; a chunk's
//! rows hold exactly the transactions its snapshot sees. So a change to a
//! key in chunk `i` is skipped when chunk `i`'s snapshot sees its
//! transaction (the chunk holds it already) and applied when it does not
//! ([`ChunkIndex`]). Two transactions that change one row commit in the
//! order their row locks allow, so no change is applied out of order.
//! Once the stream passes the WAL position read after the last chunk
//! (`catch_up_until`), no transaction it brings was seen by any chunk, and
//! the chunks are forgotten.
//!
//! ```
//! use eddy_connectors::postgres::snapshot::XidSnapshot;
//!
//! let s = XidSnapshot::parse("100:105:101,103").unwrap();
//! assert!(s.sees(99) && s.sees(102) && s.sees(104));
//! assert!(!s.sees(101) && !s.sees(105) && !s.sees(200));
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, StringArray};
use datafusion::arrow::datatypes::{Field, SchemaRef};
use datafusion::arrow::row::{OwnedRow, RowConverter, SortField};
use eddy_engine::changelog::RowKind;
use postgres::Client;
use serde::{Deserialize, Serialize};

use super::config::{quote_ident, CdcConfig};
use super::table::{message, PgTable};
use super::text_columns::{convert, TextRows};
use crate::error::{ConnectorError, Result};

/// The transactions a snapshot sees: all below `xmin`, and those below
/// `xmax` not in progress (`xip`) when it was taken. 64-bit transaction
/// ids, as `pg_current_snapshot()` prints them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct XidSnapshot {
    /// Every transaction below it had ended.
    pub xmin: u64,
    /// No transaction from it on had.
    pub xmax: u64,
    /// Those in between still in progress.
    pub xip: Vec<u64>,
}

impl XidSnapshot {
    /// Reads `xmin:xmax:xip,...`.
    pub fn parse(text: &str) -> Result<Self> {
        let bad = || {
            ConnectorError::postgres(
                "reading a snapshot",
                format!("'{text}' is not xmin:xmax:xip"),
            )
        };
        let mut parts = text.split(':');
        let number = |s: Option<&str>| s.and_then(|s| s.trim().parse::<u64>().ok());
        let xmin = number(parts.next()).ok_or_else(bad)?;
        let xmax = number(parts.next()).ok_or_else(bad)?;
        let xip = match parts.next() {
            None | Some("") => Vec::new(),
            Some(list) => list
                .split(',')
                .map(|x| x.trim().parse::<u64>().map_err(|_| bad()))
                .collect::<Result<_>>()?,
        };
        Ok(Self { xmin, xmax, xip })
    }

    /// Whether the snapshot sees transaction `xid` (the 32 bits the
    /// replication stream sends, widened to the epoch nearest `xmax`).
    pub fn sees(&self, xid: u32) -> bool {
        let full = widen(xid, self.xmax);
        full < self.xmin || (full < self.xmax && !self.xip.contains(&full))
    }
}

/// A 32-bit transaction id as the 64-bit one nearest `near`.
fn widen(xid: u32, near: u64) -> u64 {
    let candidate = (near & !0xFFFF_FFFF) | xid as u64;
    let half = 1u64 << 31;
    if candidate > near.saturating_add(half) && candidate >= 1 << 32 {
        candidate - (1 << 32)
    } else if candidate.saturating_add(half) < near {
        candidate + (1 << 32)
    } else {
        candidate
    }
}

/// One chunk read: the keys up to `last` (from the previous chunk's last
/// key, exclusive), seen as of `snapshot`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// The chunk's last key, as text in key order; `None` for the table's
    /// last chunk, which holds every key above the one before.
    pub last: Option<Vec<Option<String>>>,
    /// The transactions its rows hold.
    pub snapshot: XidSnapshot,
}

/// Reads the chunk after `after` (the first when `None`) into `rows`.
/// Returns its record and whether it was the table's last.
pub fn read_chunk(
    client: &mut Client,
    config: &CdcConfig,
    table: &PgTable,
    after: Option<&[Option<String>]>,
    rows: &mut TextRows,
) -> Result<(ChunkRecord, bool)> {
    let context = || format!("reading a snapshot chunk of {}", config.qualified());
    let fail = |e: postgres::Error| ConnectorError::postgres(context(), message(&e));
    let chunked = table.key_order_comparable && config.chunk_rows != u64::MAX;
    let select: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        // Named apart from the columns: ORDER BY a column's own name
        // would sort by this text.
        .map(|(i, c)| format!("{}::text AS c{i}", quote_ident(&c.name)))
        .collect();
    let keys: Vec<String> = table
        .key
        .iter()
        .map(|&k| quote_ident(&table.columns[k].name))
        .collect();
    let mut sql = format!("SELECT {} FROM {}", select.join(", "), config.qualified());
    let bound: Vec<Option<String>> = after.map(<[_]>::to_vec).unwrap_or_default();
    if chunked {
        if after.is_some() {
            let params: Vec<String> = table
                .key
                .iter()
                .enumerate()
                .map(|(i, &k)| format!("${}::text::{}", i + 1, table.columns[k].type_name))
                .collect();
            sql.push_str(&format!(
                " WHERE ({}) > ({})",
                keys.join(", "),
                params.join(", ")
            ));
        }
        sql.push_str(&format!(
            " ORDER BY {} LIMIT {}",
            keys.join(", "),
            config.chunk_rows
        ));
    }
    let params: Vec<&(dyn postgres::types::ToSql + Sync)> = bound
        .iter()
        .map(|v| v as &(dyn postgres::types::ToSql + Sync))
        .collect();
    let mut tx = client
        .build_transaction()
        .isolation_level(postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .map_err(fail)?;
    let snapshot: String = tx
        .query_one("SELECT pg_current_snapshot()::text", &[])
        .map_err(fail)?
        .get(0);
    let found = tx.query(sql.as_str(), &params).map_err(fail)?;
    tx.commit().map_err(fail)?;
    let width = table.columns.len();
    let mut last_key: Option<Vec<Option<String>>> = None;
    for row in &found {
        // Borrowed from the row: no value is copied but into the columns.
        rows.push(
            RowKind::Insert,
            (0..width).map(|c| row.get::<_, Option<&str>>(c).map(str::as_bytes)),
        );
    }
    if let Some(row) = found.last() {
        last_key = Some(
            table
                .key
                .iter()
                .map(|&k| row.get::<_, Option<String>>(k))
                .collect(),
        );
    }
    let finished = !chunked || (found.len() as u64) < config.chunk_rows;
    Ok((
        ChunkRecord {
            last: if finished { None } else { last_key },
            snapshot: XidSnapshot::parse(&snapshot)?,
        },
        finished,
    ))
}

/// Which chunk a key fell in, to tell whether a change is in it already.
pub struct ChunkIndex {
    chunks: Vec<ChunkRecord>,
    bounds: Vec<OwnedRow>,
    converter: RowConverter,
    key_fields: Vec<Arc<Field>>,
}

impl std::fmt::Debug for ChunkIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkIndex")
            .field("chunks", &self.chunks.len())
            .finish_non_exhaustive()
    }
}

impl ChunkIndex {
    /// The index of a table's chunks (`schema`: the eddy table's physical
    /// columns, `key`: the key's indices into them).
    pub fn new(chunks: Vec<ChunkRecord>, schema: &SchemaRef, key: &[usize]) -> Result<Self> {
        let key_fields: Vec<Arc<Field>> = key.iter().map(|&k| schema.fields()[k].clone()).collect();
        let converter = RowConverter::new(
            key_fields
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect(),
        )?;
        let mut index = Self {
            chunks: Vec::new(),
            bounds: Vec::new(),
            converter,
            key_fields,
        };
        let bounded: Vec<Vec<Option<String>>> =
            chunks.iter().filter_map(|c| c.last.clone()).collect();
        index.bounds = index.rows(&bounded)?;
        index.chunks = chunks;
        Ok(index)
    }

    /// Keys (as text, in key order) in Arrow's row form.
    pub fn rows(&self, keys: &[Vec<Option<String>>]) -> Result<Vec<OwnedRow>> {
        let columns: Vec<ArrayRef> = self
            .key_fields
            .iter()
            .enumerate()
            .map(|(i, field)| {
                let texts: StringArray = keys.iter().map(|k| k[i].as_deref()).collect();
                convert(&texts, field.data_type())
                    .map_err(|e| ConnectorError::postgres("comparing keys", e))
            })
            .collect::<Result<_>>()?;
        let rows = self.converter.convert_columns(&columns)?;
        Ok(rows.iter().map(|r| r.owned()).collect())
    }

    /// Whether the chunk holding `key` already holds transaction `xid`.
    pub fn holds(&self, key: &OwnedRow, xid: u32) -> bool {
        let i = self.bounds.partition_point(|b| b.row() < key.row());
        self.chunks
            .get(i)
            .or(self.chunks.last())
            .is_some_and(|c| c.snapshot.sees(xid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::{DataType, Schema};

    #[test]
    fn transaction_ids_widen_across_an_epoch() {
        let near = (3u64 << 32) + 10;
        assert_eq!(widen(5, near), (3 << 32) + 5);
        assert_eq!(widen(u32::MAX - 1, near), (2 << 32) + u32::MAX as u64 - 1);
        assert_eq!(widen(7, (3u64 << 32) - 3), (3 << 32) + 7);
        assert!(XidSnapshot::parse("1:2:x").is_err());
        assert_eq!(XidSnapshot::parse("7:7:").unwrap().xip, Vec::<u64>::new());
    }

    #[test]
    fn a_change_is_held_by_its_keys_chunk_when_that_snapshot_saw_it() {
        let schema = Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)]));
        let snap = |xmax: u64| XidSnapshot {
            xmin: xmax,
            xmax,
            xip: vec![],
        };
        let chunks = vec![
            ChunkRecord {
                last: Some(vec![Some("10".into())]),
                snapshot: snap(100),
            },
            ChunkRecord {
                last: Some(vec![Some("20".into())]),
                snapshot: snap(200),
            },
            ChunkRecord {
                last: None,
                snapshot: snap(300),
            },
        ];
        let index = ChunkIndex::new(chunks, &schema, &[0]).unwrap();
        let keys = index
            .rows(&[
                vec![Some("9".into())],
                vec![Some("10".into())],
                vec![Some("11".into())],
                vec![Some("500".into())],
            ])
            .unwrap();
        // Transaction 150: after chunk 1's snapshot, before chunk 2's.
        assert!(!index.holds(&keys[0], 150));
        assert!(!index.holds(&keys[1], 150));
        assert!(index.holds(&keys[2], 150));
        assert!(index.holds(&keys[3], 250));
        assert!(!index.holds(&keys[3], 300));
    }
}
