//! Each partition's rows in order, with their copies: the state of the
//! operators that keep every row of an updating input by partition
//! (updating Top-N, OVER over an updating input), and its state table.
//!
//! In: rows row-encoded as (sort key, row) under their partition key.
//! Out: the declared table `rows` ([`table_spec`]) a checkpoint holds, and
//! the partitions again from it ([`load`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::array::{BinaryArray, Int64Array, UInt32Array};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;
use hashbrown::HashMap;

use crate::error::Result;
use crate::state::declared::TableSpec;
use crate::time::Timestamp;

/// A partition's rows in order: (sort key, row) -> copies.
pub(crate) type Ordered = BTreeMap<(Box<[u8]>, Box<[u8]>), u32>;

/// A partition: its rows and the watermark when a row last touched it.
pub(crate) struct Partition {
    pub rows: Ordered,
    pub touched_at: Timestamp,
}

/// The partitions by their encoded key.
pub(crate) type Partitions = HashMap<Box<[u8]>, Partition>;

/// Bytes a row costs: its sort key, its row, the map's node.
pub(crate) fn entry_bytes((sort, row): &(Box<[u8]>, Box<[u8]>)) -> usize {
    sort.len() + row.len() + 48
}

/// The state table `rows`: the partition key, the sort key and the row
/// (row-encoded), the row's copies and when its partition was last
/// touched (for the TTL); keyed by the partition key.
pub(crate) fn table_spec(
    partition_by: &[Arc<dyn PhysicalExpr>],
    input_schema: &Schema,
    ttl_ms: Option<i64>,
) -> Result<TableSpec> {
    Ok(TableSpec::new(
        "rows",
        Arc::new(Schema::new(vec![
            Field::new("partition", DataType::Binary, false),
            Field::new("sort", DataType::Binary, false),
            Field::new("row", DataType::Binary, false),
            Field::new("copies", DataType::UInt32, false),
            Field::new("touched_at", DataType::Int64, false),
        ])),
    )
    .keyed(super::encoded_key(partition_by, input_schema)?)
    .with_ttl(ttl_ms))
}

/// `partitions` as rows of the table `spec` declares.
pub(crate) fn table(spec: &TableSpec, partitions: &Partitions) -> Result<RecordBatch> {
    let mut partition: Vec<&[u8]> = Vec::new();
    let mut sort: Vec<&[u8]> = Vec::new();
    let mut row: Vec<&[u8]> = Vec::new();
    let mut copies = Vec::new();
    let mut touched_at = Vec::new();
    for (key, p) in partitions {
        for ((s, r), &c) in &p.rows {
            partition.push(key);
            sort.push(s);
            row.push(r);
            copies.push(c);
            touched_at.push(p.touched_at);
        }
    }
    Ok(RecordBatch::try_new(
        spec.schema().clone(),
        vec![
            Arc::new(BinaryArray::from(partition)),
            Arc::new(BinaryArray::from(sort)),
            Arc::new(BinaryArray::from(row)),
            Arc::new(UInt32Array::from(copies)),
            Arc::new(Int64Array::from(touched_at)),
        ],
    )?)
}

/// The partitions a table of `spec` holds, with the rows they hold (copies
/// counted) and their bytes.
pub(crate) fn load(spec: &TableSpec, table: &RecordBatch) -> Result<(Partitions, usize, usize)> {
    let partition = spec.column::<BinaryArray>(table, 0)?;
    let sort = spec.column::<BinaryArray>(table, 1)?;
    let row = spec.column::<BinaryArray>(table, 2)?;
    let copies = spec.column::<UInt32Array>(table, 3)?;
    let touched_at = spec.column::<Int64Array>(table, 4)?;
    let mut partitions = Partitions::new();
    let mut held = 0;
    for r in 0..table.num_rows() {
        partitions
            .entry(partition.value(r).into())
            .or_insert_with(|| Partition {
                rows: Ordered::new(),
                touched_at: touched_at.value(r),
            })
            .rows
            .insert((sort.value(r).into(), row.value(r).into()), copies.value(r));
        held += copies.value(r) as usize;
    }
    let bytes = partitions
        .iter()
        .map(|(k, p)| k.len() + p.rows.keys().map(entry_bytes).sum::<usize>())
        .sum();
    Ok((partitions, held, bytes))
}
