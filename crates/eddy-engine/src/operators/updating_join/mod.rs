//! Regular joins whose result changes: INNER, LEFT, RIGHT and FULL joins on
//! key equality, without a time bound, over append-only or updating inputs;
//! and semi and anti joins (`IN`, `EXISTS`, `NOT EXISTS`, `INTERSECT`,
//! `EXCEPT`), which emit a left row while it has (or has no) partner.
//!
//! In: rows of either side, append-only or updating (a side's `-U`/`-D`
//! rows take the row back out). Out: an updating stream of the joined rows
//! (left columns, right columns, the row kind). For a row put in on one
//! side, every partner the other side holds (same key, the residual
//! condition true) yields `+I` of the pair; on a preserved side (LEFT's
//! left, ...) a row without partners yields `+I` of itself padded with
//! NULLs, and a partner that had none until now first takes its padded row
//! back (`-D`). A row taken out does the reverse. Keys that are NULL match
//! nothing.
//!
//! Keyed by the join key (one instance per share of the keys; a null-aware
//! anti join runs once, its rule reading the whole right side). State per
//! side: its rows by key, each encoded row with its copies and
//! how many partner rows (copies counted) it pairs with, which says when a
//! preserved row goes from padded to paired and back. Checkpoints: one
//! table per side of (key, row, copies, partners).
//!
//! Each batch is joined in two steps: the candidate pairs of all its rows
//! (the other side does not change during the batch) are built and the
//! residual condition evaluated on them as one batch; then the rows are
//! applied in order, updating partner counts, and the output assembled with
//! `interleave`.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{Int64Array, StringArray};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::changelog;
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::interval_join::JoinKind;
//! use eddy_engine::operators::updating_join::{JoinOutput, UpdatingJoinPlan};
//!
//! let side = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
//! let plan = UpdatingJoinPlan {
//!     kind: JoinOutput::Pairs(JoinKind::Left),
//!     nulls_equal: false,
//!     null_aware: false,
//!     left_schema: side.clone(),
//!     right_schema: side.clone(),
//!     output_schema: changelog::updating_schema(
//!         &Schema::new(vec![Field::new("k", DataType::Utf8, true), Field::new("k2", DataType::Utf8, true)]),
//!         &[],
//!     ),
//!     left_keys: vec![col("k", &side).unwrap()],
//!     right_keys: vec![col("k", &side).unwrap()],
//!     residual: None,
//!     state_ttl_ms: None,
//! };
//! let mut op = plan.create().unwrap();
//! let mut out = Collector::default();
//! let rows = RecordBatch::try_new(side, vec![Arc::new(StringArray::from(vec!["a"]))]).unwrap();
//! op.on_batch(0, rows.clone(), &mut out).unwrap(); // +I (a, NULL)
//! op.on_batch(1, rows, &mut out).unwrap(); // -D (a, NULL), +I (a, a)
//! let kinds: Vec<i8> = out
//!     .drain()
//!     .flat_map(|(_, b)| changelog::row_kinds(&b).unwrap().values().to_vec())
//!     .collect();
//! assert_eq!(kinds, vec![0, 3, 0]);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::{
    new_null_array, Array, ArrayRef, BinaryArray, BinaryBuilder, Int64Array, Int8Array,
    UInt32Array, UInt64Array,
};
use datafusion::arrow::compute::{interleave, take};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::{RecordBatch, RecordBatchOptions};
use datafusion::arrow::row::{RowConverter, SortField};
use datafusion::physical_expr::PhysicalExpr;

pub mod side;
pub mod spilled;

use std::hash::BuildHasher;

use self::side::{Bucket, Held, Side};
use self::spilled::SpilledSides;
use super::interval_join::JoinKind;
use super::ttl::TtlSweeps;
use crate::changelog::{self, RowKind};
use crate::error::Result;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::state::declared::TableSpec;
use crate::state::table_file::{ChunkedTableFile, TableChunk};
use crate::state::StateSnapshot;
use crate::time::{Timestamp, WATERMARK_MIN};

const KIND: &str = "updating_join";

/// What a join emits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinOutput {
    /// Pairs, and the null-padded rows of the side(s) the kind preserves:
    /// the left columns, then the right ones.
    Pairs(JoinKind),
    /// Left rows with at least one partner (`IN`, `EXISTS`, `INTERSECT`):
    /// the left columns.
    LeftSemi,
    /// Left rows without a partner (`NOT EXISTS`, `EXCEPT`): the left
    /// columns.
    LeftAnti,
}

impl JoinOutput {
    /// The SQL name: `INNER`, ..., `LEFT SEMI`, `LEFT ANTI`.
    pub fn name(self) -> &'static str {
        match self {
            JoinOutput::Pairs(kind) => kind.name(),
            JoinOutput::LeftSemi => "LEFT SEMI",
            JoinOutput::LeftAnti => "LEFT ANTI",
        }
    }
}

/// Plan of a regular join with a changing result.
#[derive(Debug, Clone)]
pub struct UpdatingJoinPlan {
    /// What it emits: pairs (INNER, LEFT, RIGHT, FULL), or left rows with
    /// (semi) or without (anti) partners.
    pub kind: JoinOutput,
    /// Whether NULL keys equal each other (`INTERSECT`, `EXCEPT`); else a
    /// NULL key matches nothing, as in SQL's `=`.
    pub nulls_equal: bool,
    /// `NOT IN (subquery)` (a left anti join with SQL's NULL rule): while
    /// the right side holds a row with a NULL key, no left row is emitted;
    /// while it holds none at all, every left row is, NULL keys included.
    pub null_aware: bool,
    /// The left input's own columns (an updating input's row kind follows).
    pub left_schema: SchemaRef,
    /// The right input's own columns.
    pub right_schema: SchemaRef,
    /// Left columns, right columns (semi and anti joins: the left columns
    /// only), the row kind.
    pub output_schema: SchemaRef,
    /// Key expressions over left rows.
    pub left_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Key expressions over right rows (same types, in the same order).
    pub right_keys: Vec<Arc<dyn PhysicalExpr>>,
    /// Condition on the joined columns beyond the keys.
    pub residual: Option<Arc<dyn PhysicalExpr>>,
    /// `SET 'table.exec.state.ttl'`: forget a key's rows (both sides) the
    /// watermark has passed by this much since a row with the key came.
    pub state_ttl_ms: Option<i64>,
}

impl OperatorPlan for UpdatingJoinPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new()
            .debug("kind", self.kind)
            .flag("nulls_equal", self.nulls_equal)
            .flag("null_aware", self.null_aware)
            .exprs("left_keys", &self.left_keys)
            .exprs("right_keys", &self.right_keys)
            .expr("residual", self.residual.as_ref())
            .debug("state_ttl_ms", self.state_ttl_ms)
    }

    fn describe(&self) -> String {
        let keys = super::describe_key_pairs(&self.left_keys, &self.right_keys);
        let residual = self
            .residual
            .as_ref()
            .map(|r| format!(" and {r}"))
            .unwrap_or_default();
        let nulls = if self.nulls_equal {
            ", NULL keys equal"
        } else {
            ""
        };
        format!(
            "{} on {}{residual}{nulls}, every row kept, output updating",
            self.kind.name(),
            keys
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.output_schema.clone()
    }

    /// Keyed by the join key: a key's rows of both sides meet in one
    /// instance (the planner hashes the right side by its keys, which
    /// have the left keys' types). Not a null-aware anti join (`NOT IN`),
    /// whose rule reads the whole right side, nor a join without keys.
    /// Each side by its own keys; a null-aware anti join (`NOT IN`) runs
    /// as one, since a NULL on the right answers for every key.
    fn required_input_distribution(&self, input: usize) -> crate::operator::Distribution {
        if self.null_aware {
            return crate::operator::Distribution::Single;
        }
        crate::operator::Distribution::hash(match input {
            0 => self.left_keys.clone(),
            _ => self.right_keys.clone(),
        })
    }

    /// Each side's table, `left` and `right`, holds its rows: the join
    /// key and the row (row-encoded), the row's copies, how many partners
    /// it has, and when its key was last touched (for the TTL). Keyed by
    /// the encoded key (both sides' keys have the left keys' types).
    fn state_tables(&self) -> Result<Vec<TableSpec>> {
        let schema = Arc::new(Schema::new(vec![
            Field::new("key", DataType::Binary, false),
            Field::new("row", DataType::Binary, false),
            Field::new("copies", DataType::UInt32, false),
            Field::new("partners", DataType::UInt64, false),
            Field::new("touched_at", DataType::Int64, false),
        ]));
        let key = super::encoded_key(&self.left_keys, &self.left_schema)?;
        Ok(SIDE_TABLES
            .iter()
            .map(|name| {
                TableSpec::new(*name, schema.clone())
                    .keyed(key.clone())
                    .with_ttl(self.state_ttl_ms)
            })
            .collect())
    }

    /// The watermark is the least of the parts', the counts their sums.
    fn rescale_state(
        &self,
        parts: Vec<crate::rescale::InstanceState>,
        keys: &crate::rescale::KeyRange,
    ) -> Result<StateSnapshot> {
        crate::rescale::rescaled(
            parts,
            &self.state_tables()?,
            keys,
            |metas: &[(Meta, bool)]| {
                (
                    crate::rescale::counted_sum(metas, |m| m.0),
                    crate::rescale::counted_sum(metas, |m| m.1),
                    crate::rescale::counted_sum(metas, |m| m.2),
                    crate::rescale::least(metas, |m| m.3),
                )
            },
        )
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        let key_fields = self
            .left_keys
            .iter()
            .map(|k| Ok(SortField::new(k.data_type(&self.left_schema)?)))
            .collect::<Result<Vec<_>>>()?;
        let row_fields = |schema: &SchemaRef| -> Vec<SortField> {
            schema
                .fields()
                .iter()
                .map(|f| SortField::new(f.data_type().clone()))
                .collect()
        };
        Ok(Box::new(UpdatingJoin {
            tables: self.state_tables()?,
            keys: RowConverter::new(key_fields)?,
            rows: [
                RowConverter::new(row_fields(&self.left_schema))?,
                RowConverter::new(row_fields(&self.right_schema))?,
            ],
            sides: [Side::default(), Side::default()],
            hasher: hashbrown::DefaultHashBuilder::default(),
            held: 0,
            bytes: 0,
            unmatched_retractions: 0,
            right_rows: 0,
            right_null_rows: 0,
            watermark: WATERMARK_MIN,
            sweeps: TtlSweeps::new(self.state_ttl_ms),
            expired_before: WATERMARK_MIN,
            spilled: None,
            plan: self.clone(),
        }))
    }
}

/// Bytes a key of `len` bytes costs in a side's map (its box, the map
/// slot, the bucket).
const KEY_COST: usize = 48;
/// Bytes a row of `len` bytes costs besides them (its box and count).
const ROW_COST: usize = 40;

/// Bytes a key and its bucket cost in memory.
fn bucket_bytes(key: &[u8], bucket: &Bucket) -> usize {
    key.len()
        + KEY_COST
        + bucket
            .rows
            .iter()
            .map(|(row, _)| row.len() + ROW_COST)
            .sum::<usize>()
}

/// A side's checkpoint table, built bucket by bucket.
#[derive(Default)]
struct SideTable {
    keys: BinaryBuilder,
    rows: BinaryBuilder,
    copies: Vec<u32>,
    partners: Vec<u64>,
    touched_at: Vec<Timestamp>,
}

impl SideTable {
    fn push(&mut self, key: &[u8], bucket: &Bucket) {
        for (row, held) in &bucket.rows {
            self.keys.append_value(key);
            self.rows.append_value(row);
            self.copies.push(held.copies);
            self.partners.push(held.partners);
            self.touched_at.push(bucket.touched_at);
        }
    }
}

impl TableChunk for SideTable {
    fn size(&self) -> (usize, usize) {
        (self.copies.len(), self.rows.values_slice().len())
    }

    fn finish(mut self, spec: &TableSpec) -> Result<RecordBatch> {
        Ok(RecordBatch::try_new(
            spec.schema().clone(),
            vec![
                Arc::new(self.keys.finish()),
                Arc::new(self.rows.finish()),
                Arc::new(UInt32Array::from(self.copies)),
                Arc::new(UInt64Array::from(self.partners)),
                Arc::new(Int64Array::from(self.touched_at)),
            ],
        )?)
    }
}

/// A checkpoint's meta: unmatched retractions, right rows and right rows
/// with a NULL key (null-aware anti joins), the watermark.
type Meta = (u64, u64, u64, Timestamp);

/// A checkpoint's tables: the left side's rows, the right side's.
const SIDE_TABLES: [&str; 2] = ["left", "right"];

/// A held row of the other side: its encoded key and row.
type PartnerRef = (Box<[u8]>, Box<[u8]>);

struct UpdatingJoin {
    plan: UpdatingJoinPlan,
    /// The plan's state tables: the left side's, the right side's.
    tables: Vec<TableSpec>,
    keys: RowConverter,
    /// Row encoders of the left and right side.
    rows: [RowConverter; 2],
    sides: [Side; 2],
    /// Hashes encoded keys for both sides (one hasher: a key's hash
    /// finds it on either side).
    hasher: hashbrown::DefaultHashBuilder,
    held: usize,
    /// Bytes the sides hold (keys and rows with their overheads), kept as
    /// rows come and go.
    bytes: usize,
    unmatched_retractions: u64,
    /// Null-aware anti joins: right rows held, and those with a NULL key.
    right_rows: u64,
    right_null_rows: u64,
    watermark: Timestamp,
    sweeps: TtlSweeps,
    /// The cutoff of the last TTL sweep: a spilled bucket last touched
    /// before it is gone, as it would be had it stayed in memory.
    expired_before: Timestamp,
    /// The keys moved to disk when the memory budget refused more
    /// ([`Operator::spill`]); memory then holds those touched since.
    spilled: Option<SpilledSides>,
}

/// Whether an anti join emits a left row: by the gate (see
/// `UpdatingJoin::gate`), else when its key is not NULL and it has no
/// partner.
fn anti_out(gate: Option<bool>, null_key: bool, partners: u64) -> bool {
    match gate {
        Some(all) => all,
        None => !null_key && partners == 0,
    }
}

/// An output row: kind, this side's batch row (or NULLs), the candidate
/// pair whose partner row it holds (or NULLs).
struct OutRow {
    kind: RowKind,
    own: Option<usize>,
    partner: Option<usize>,
}

impl UpdatingJoin {
    /// Brings the spilled buckets of the batch's keys (`keys`, hashed as
    /// `hashes`; the rows `skip` says never touch state left out) back
    /// into memory, both sides of each key, and takes them off disk; a
    /// bucket the TTL has since expired is forgotten instead.
    fn read_back(
        &mut self,
        keys: &datafusion::arrow::row::Rows,
        hashes: &[u64],
        skip: impl Fn(usize) -> bool,
    ) -> Result<()> {
        let Some(spilled) = self.spilled.as_mut() else {
            return Ok(());
        };
        let mut asked: hashbrown::HashSet<&[u8]> = hashbrown::HashSet::new();
        let mut gone: [Vec<&[u8]>; 2] = Default::default();
        for (r, &hash) in hashes.iter().enumerate() {
            let key = keys.row(r).data();
            if skip(r)
                || self.sides.iter().any(|s| s.get(hash, key).is_some())
                || !asked.insert(key)
            {
                continue;
            }
            for (side, gone) in gone.iter_mut().enumerate() {
                let Some(bucket) = spilled.read(side, key)? else {
                    continue;
                };
                gone.push(key);
                if bucket.touched_at < self.expired_before {
                    self.held -= bucket.held();
                    continue;
                }
                self.bytes += bucket_bytes(key, &bucket);
                *self.sides[side].get_or_insert(hash, key).0 = bucket;
            }
        }
        for (side, keys) in gone.into_iter().enumerate() {
            if !keys.is_empty() {
                spilled.forget(side, keys)?;
            }
        }
        Ok(())
    }

    fn preserves(&self, side: usize) -> bool {
        match self.plan.kind {
            JoinOutput::Pairs(kind) if side == 0 => kind.keeps_left(),
            JoinOutput::Pairs(kind) => kind.keeps_right(),
            JoinOutput::LeftSemi | JoinOutput::LeftAnti => false,
        }
    }

    /// Whether the join emits only left rows (semi and anti joins).
    fn left_rows_only(&self) -> bool {
        !matches!(self.plan.kind, JoinOutput::Pairs(_))
    }

    /// A null-aware anti join's rule from the right side as a whole:
    /// `Some(true)` every left row is emitted (no right rows), `Some(false)`
    /// none is (a right row has a NULL key), `None` each by its partners.
    fn gate(&self) -> Option<bool> {
        if !self.plan.null_aware {
            None
        } else if self.right_rows == 0 {
            Some(true)
        } else if self.right_null_rows > 0 {
            Some(false)
        } else {
            None
        }
    }

    /// The left rows whose emission changes when the gate goes from
    /// `before` to `after` (their partners before this right row were
    /// theirs now, less `changed` for those it matched), as changes.
    fn flip_all(
        &self,
        before: Option<bool>,
        after: Option<bool>,
        changed: &hashbrown::HashSet<PartnerRef>,
        delta: i64,
    ) -> Vec<(RowKind, Box<[u8]>)> {
        let mut flips = Vec::new();
        for (key, bucket) in self.sides[0].iter() {
            let null_key = key.is_empty();
            for (row, held) in &bucket.rows {
                let matched = changed.contains(&(key.into(), row.clone()));
                let partners_before = if matched {
                    (held.partners as i64 - delta).max(0) as u64
                } else {
                    held.partners
                };
                let was = anti_out(before, null_key, partners_before);
                let is = anti_out(after, null_key, held.partners);
                if was != is {
                    let kind = if is { RowKind::Insert } else { RowKind::Delete };
                    for _ in 0..held.copies {
                        flips.push((kind, row.clone()));
                    }
                }
            }
        }
        flips
    }

    /// Left rows as an output batch of `changes`.
    fn left_rows_batch(&self, changes: &[(RowKind, Box<[u8]>)]) -> Result<RecordBatch> {
        let parser = self.rows[0].parser();
        let mut columns =
            self.rows[0].convert_rows(changes.iter().map(|(_, row)| parser.parse(row)))?;
        columns.push(Arc::new(Int8Array::from(
            changes.iter().map(|(k, _)| k.byte()).collect::<Vec<_>>(),
        )));
        super::batch_of(&self.plan.output_schema, columns)
    }

    /// Assembles output rows: this side's columns from `data`, the other
    /// side's from `partners` (one row per candidate pair).
    fn output(
        &self,
        side: usize,
        data: &RecordBatch,
        partners: &[ArrayRef],
        rows: &[OutRow],
    ) -> Result<RecordBatch> {
        let n = rows.len();
        let own_columns = |c: usize| -> Result<ArrayRef> {
            let column = data.column(c);
            let nulls = new_null_array(column.data_type(), 1);
            let sources: [&dyn Array; 2] = [column.as_ref(), nulls.as_ref()];
            let picks: Vec<(usize, usize)> = rows
                .iter()
                .map(|r| r.own.map_or((1, 0), |i| (0, i)))
                .collect();
            Ok(interleave(&sources, &picks)?)
        };
        let partner_columns = |c: usize| -> Result<ArrayRef> {
            let column = &partners[c];
            let nulls = new_null_array(column.data_type(), 1);
            let sources: [&dyn Array; 2] = [column.as_ref(), nulls.as_ref()];
            let picks: Vec<(usize, usize)> = rows
                .iter()
                .map(|r| r.partner.map_or((1, 0), |i| (0, i)))
                .collect();
            Ok(interleave(&sources, &picks)?)
        };
        let (own_width, other_width) = match (self.left_rows_only(), side) {
            (true, 0) => (data.num_columns(), 0),
            (true, _) => (0, partners.len()),
            (false, _) => (data.num_columns(), partners.len()),
        };
        let own: Vec<ArrayRef> = (0..own_width).map(own_columns).collect::<Result<_>>()?;
        let other: Vec<ArrayRef> = (0..other_width)
            .map(partner_columns)
            .collect::<Result<_>>()?;
        let mut columns = match (self.left_rows_only(), side) {
            (true, 0) => own,
            (true, _) => other,
            (false, 0) => [own, other].concat(),
            (false, _) => [other, own].concat(),
        };
        columns.push(Arc::new(Int8Array::from(
            rows.iter().map(|r| r.kind.byte()).collect::<Vec<_>>(),
        )));
        Ok(RecordBatch::try_new_with_options(
            self.plan.output_schema.clone(),
            columns,
            &RecordBatchOptions::new().with_row_count(Some(n)),
        )?)
    }
}

impl Operator for UpdatingJoin {
    fn on_batch(&mut self, input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let side = input.min(1);
        let other = 1 - side;
        let now = self.watermark;
        let n = batch.num_rows();
        if n == 0 {
            return Ok(());
        }
        let kinds = changelog::row_kinds(&batch).cloned();
        if let Some(kinds) = &kinds {
            changelog::check_kinds(kinds)?;
        }
        let data = changelog::data_columns(&batch)?;
        let key_exprs = if side == 0 {
            &self.plan.left_keys
        } else {
            &self.plan.right_keys
        };
        let key_columns = key_exprs
            .iter()
            .map(|k| Ok(k.evaluate(&data)?.into_array(n)?))
            .collect::<Result<Vec<ArrayRef>>>()?;
        let keys = self.keys.convert_columns(&key_columns)?;
        // Each key hashed once, for both sides' tables.
        let hashes: Vec<u64> = (0..n)
            .map(|r| self.hasher.hash_one(keys.row(r).data()))
            .collect();
        let nulls_equal = self.plan.nulls_equal;
        let has_null_key = |r: usize| !nulls_equal && key_columns.iter().any(|c| c.is_null(r));
        let encoded = self.rows[side].convert_columns(data.columns())?;
        self.read_back(&keys, &hashes, has_null_key)?;

        // Step 1: candidate pairs (row, partner) and the residual on them.
        // A partner is its place in the bucket of the row's key on the
        // other side, which this batch does not reorder (only this side's
        // rows come and go).
        let mut pair_rows: Vec<u32> = Vec::new();
        let mut pair_slot: Vec<u32> = Vec::new();
        let mut row_pairs: Vec<std::ops::Range<usize>> = Vec::with_capacity(n);
        let partners = {
            let mut partner_rows: Vec<&[u8]> = Vec::new();
            for r in 0..n {
                let start = pair_rows.len();
                if !has_null_key(r) {
                    if let Some(bucket) = self.sides[other].get(hashes[r], keys.row(r).data()) {
                        for (slot, (partner, _)) in bucket.rows.iter().enumerate() {
                            pair_rows.push(r as u32);
                            pair_slot.push(slot as u32);
                            partner_rows.push(partner);
                        }
                    }
                }
                row_pairs.push(start..pair_rows.len());
            }
            let parser = self.rows[other].parser();
            self.rows[other].convert_rows(partner_rows.iter().map(|row| parser.parse(row)))?
        };
        let passes: Vec<bool> = match &self.plan.residual {
            Some(residual) if !pair_rows.is_empty() => {
                let indices = UInt32Array::from(pair_rows.clone());
                let own: Vec<ArrayRef> = data
                    .columns()
                    .iter()
                    .map(|c| Ok(take(c.as_ref(), &indices, None)?))
                    .collect::<Result<_>>()?;
                let columns = if side == 0 {
                    [own, partners.clone()].concat()
                } else {
                    [partners.clone(), own].concat()
                };
                let fields: Vec<Field> = self
                    .plan
                    .left_schema
                    .fields()
                    .iter()
                    .chain(self.plan.right_schema.fields().iter())
                    .map(|f| f.as_ref().clone().with_nullable(true))
                    .collect();
                let joined = RecordBatch::try_new_with_options(
                    Arc::new(Schema::new(fields)),
                    columns,
                    &RecordBatchOptions::new().with_row_count(Some(pair_rows.len())),
                )?;
                let mask = super::predicate_mask(residual, &joined, KIND)?;
                (0..mask.len()).map(|i| mask.value(i)).collect()
            }
            _ => vec![true; pair_rows.len()],
        };

        // Step 2: apply the rows in order.
        let preserves_own = self.preserves(side);
        let preserves_other = self.preserves(other);
        let left_rows_only = self.left_rows_only();
        let semi = self.plan.kind == JoinOutput::LeftSemi;
        let mut rows = Vec::new();
        for r in 0..n {
            let retraction = kinds
                .as_ref()
                .is_some_and(|k| changelog::is_retraction_byte(k.value(r)));
            let null_key = has_null_key(r);
            // A null-aware anti join keeps its left rows with NULL keys
            // (under an empty key, which no encoded key is): they are
            // emitted while the right side is empty.
            let keep_null = null_key && self.plan.null_aware && side == 0;
            let (key, hash): (&[u8], u64) = if keep_null {
                (&[], self.hasher.hash_one(&[] as &[u8]))
            } else {
                (keys.row(r).data(), hashes[r])
            };
            let row: &[u8] = encoded.row(r).data();
            let gate_before = self.gate();
            if self.plan.null_aware && side == 1 {
                if retraction {
                    self.right_rows = self.right_rows.saturating_sub(1);
                    if null_key {
                        self.right_null_rows = self.right_null_rows.saturating_sub(1);
                    }
                } else {
                    self.right_rows += 1;
                    if null_key {
                        self.right_null_rows += 1;
                    }
                }
            }
            let gate_after = self.gate();
            let flipped = gate_before != gate_after;
            let mut matched: hashbrown::HashSet<PartnerRef> = hashbrown::HashSet::new();
            if retraction && (!null_key || keep_null) {
                let held = self.sides[side]
                    .get_mut(hash, key)
                    .and_then(|bucket| bucket.get_mut(row));
                match held {
                    Some(held) => held.copies -= 1,
                    None => {
                        self.unmatched_retractions += 1;
                        continue;
                    }
                }
            }
            let mut partners_of_row = 0u64;
            let pairs = row_pairs[r].clone();
            let mut partner_bucket = if pairs.is_empty() {
                None
            } else {
                self.sides[other].get_mut(hashes[r], keys.row(r).data())
            };
            for p in pairs {
                if !passes[p] {
                    continue;
                }
                let Some((partner_row, partner)) = partner_bucket.as_mut().and_then(|bucket| {
                    bucket.touched_at = now;
                    bucket.rows.get_mut(pair_slot[p] as usize)
                }) else {
                    continue;
                };
                let copies = partner.copies;
                partners_of_row += u64::from(copies);
                if left_rows_only {
                    if side == 0 {
                        continue; // right rows are never output
                    }
                    // A left row's partners change: it enters or leaves
                    // a semi join's output (the reverse for an anti join).
                    let before = partner.partners;
                    if retraction {
                        partner.partners -= 1;
                    } else {
                        partner.partners += 1;
                    }
                    if self.plan.null_aware {
                        // The gate decides, or all flips come below.
                        matched.insert((keys.row(r).data().into(), partner_row.clone()));
                        if flipped || gate_after.is_some() {
                            continue;
                        }
                    }
                    if (before == 0) != (partner.partners == 0) {
                        let matched = partner.partners > 0;
                        let kind = if matched == semi {
                            RowKind::Insert
                        } else {
                            RowKind::Delete
                        };
                        for _ in 0..copies {
                            rows.push(OutRow {
                                kind,
                                own: None,
                                partner: Some(p),
                            });
                        }
                    }
                } else if retraction {
                    partner.partners -= 1;
                    for _ in 0..copies {
                        rows.push(OutRow {
                            kind: RowKind::Delete,
                            own: Some(r),
                            partner: Some(p),
                        });
                    }
                    if preserves_other && partner.partners == 0 {
                        for _ in 0..copies {
                            rows.push(OutRow {
                                kind: RowKind::Insert,
                                own: None,
                                partner: Some(p),
                            });
                        }
                    }
                } else {
                    if preserves_other && partner.partners == 0 {
                        for _ in 0..copies {
                            rows.push(OutRow {
                                kind: RowKind::Delete,
                                own: None,
                                partner: Some(p),
                            });
                        }
                    }
                    partner.partners += 1;
                    for _ in 0..copies {
                        rows.push(OutRow {
                            kind: RowKind::Insert,
                            own: Some(r),
                            partner: Some(p),
                        });
                    }
                }
            }
            if flipped {
                // The right side went empty, or gained or lost its NULLs:
                // every left row may change.
                let delta = if retraction { -1 } else { 1 };
                let flips = self.flip_all(gate_before, gate_after, &matched, delta);
                if !flips.is_empty() {
                    if !rows.is_empty() {
                        out.emit(self.output(side, &data, &partners, &rows)?);
                        rows.clear();
                    }
                    out.emit(self.left_rows_batch(&flips)?);
                }
            }
            let left_row_out = match self.plan.kind {
                JoinOutput::LeftSemi => side == 0 && partners_of_row > 0,
                JoinOutput::LeftAnti if self.plan.null_aware => {
                    side == 0 && anti_out(gate_after, null_key, partners_of_row)
                }
                JoinOutput::LeftAnti => side == 0 && partners_of_row == 0,
                JoinOutput::Pairs(_) => preserves_own && partners_of_row == 0,
            };
            if left_row_out {
                let kind = if retraction {
                    RowKind::Delete
                } else {
                    RowKind::Insert
                };
                rows.push(OutRow {
                    kind,
                    own: Some(r),
                    partner: None,
                });
            }
            if null_key && !keep_null {
                continue; // never matches: not kept
            }
            if retraction {
                self.held -= 1;
                if let Some(bucket) = self.sides[side].get_mut(hash, key) {
                    if bucket.get(row).is_some_and(|h| h.copies == 0) {
                        bucket.remove(row);
                        self.bytes -= row.len() + ROW_COST;
                    }
                    if bucket.is_empty() {
                        self.sides[side].remove(hash, key);
                        self.bytes -= key.len() + KEY_COST;
                    }
                }
            } else {
                self.held += 1;
                let (bucket, added_key) = self.sides[side].get_or_insert(hash, key);
                if added_key {
                    self.bytes += key.len() + KEY_COST;
                }
                bucket.touched_at = now;
                let (held, added) = bucket.entry(row);
                held.copies += 1;
                held.partners = partners_of_row;
                if added {
                    self.bytes += row.len() + ROW_COST;
                }
            }
        }
        if !rows.is_empty() {
            out.emit(self.output(side, &data, &partners, &rows)?);
        }
        Ok(())
    }

    fn state_rows(&self) -> usize {
        self.held
    }

    fn state_bytes(&self) -> usize {
        self.bytes
    }

    /// Counted as rows come and go.
    fn state_bytes_are_counted(&self) -> bool {
        true
    }

    /// Every key in memory goes to disk with both sides' rows, and memory
    /// starts afresh: it then holds the keys touched since, each read back
    /// the first time a row of either side brings it. A null-aware anti
    /// join (`NOT IN`), whose rule reads every left row, does not spill.
    fn spill(&mut self, space: &Arc<crate::spill::SpillSpace>) -> Result<bool> {
        if self.plan.null_aware || self.bytes == 0 {
            return Ok(false);
        }
        if self.spilled.is_none() {
            self.spilled = Some(SpilledSides::open(space)?);
        }
        if let Some(spilled) = self.spilled.as_mut() {
            for side in 0..2 {
                spilled.write(side, &self.sides[side])?;
            }
        }
        crate::runtime::drop_later::drop_later(std::mem::take(&mut self.sides));
        self.bytes = 0;
        Ok(true)
    }

    fn spill_stats(&self) -> crate::spill::SpillStats {
        self.spilled
            .as_ref()
            .map(SpilledSides::stats)
            .unwrap_or_default()
    }

    fn late_rows(&self) -> u64 {
        self.unmatched_retractions
    }

    /// Both inputs ended: nothing will be joined or checkpointed again, so
    /// the rows held are freed off the job's path (the counts of what was
    /// held stay, as the job's final figures).
    fn on_end(&mut self, _out: &mut Collector) -> Result<()> {
        crate::runtime::drop_later::drop_later(std::mem::take(&mut self.sides));
        Ok(())
    }

    fn on_watermark(&mut self, watermark: Timestamp, _out: &mut Collector) -> Result<()> {
        self.watermark = self.watermark.max(watermark);
        let Some(cutoff) = self.sweeps.due(self.watermark) else {
            return Ok(());
        };
        self.expired_before = cutoff;
        for side in 0..2 {
            let (mut rows, mut bytes) = (0usize, 0usize);
            self.sides[side].retain(|key, bucket| {
                let keep = bucket.touched_at >= cutoff;
                if !keep {
                    bytes += key.len() + KEY_COST;
                    for (row, held) in &bucket.rows {
                        rows += held.copies as usize;
                        bytes += row.len() + ROW_COST;
                    }
                }
                keep
            });
            self.held -= rows;
            self.bytes -= bytes;
            if side == 1 {
                self.right_rows = self.right_rows.saturating_sub(rows as u64);
            }
        }
        Ok(())
    }

    /// Both sides whole: the buckets on disk, then those in memory (a key
    /// is in one place or the other). Spilled buckets the TTL has expired
    /// are left out and taken off disk.
    fn snapshot(&mut self) -> Result<StateSnapshot> {
        let mut snapshot = StateSnapshot::with_meta::<Meta>(&(
            self.unmatched_retractions,
            self.right_rows,
            self.right_null_rows,
            self.watermark,
        ))?;
        for side in 0..2 {
            let spec = &self.tables[side];
            let Some(spilled) = self.spilled.as_mut() else {
                let mut table = SideTable::default();
                for (key, bucket) in self.sides[side].iter() {
                    table.push(key, bucket);
                }
                snapshot.put(spec, table.finish(spec)?)?;
                continue;
            };
            // The stored buckets, then memory's, streamed to a file a
            // chunk at a time rather than gathered in memory.
            let file = spilled.snapshot_file(spec.name(), spec.schema())?;
            let mut file = ChunkedTableFile::<SideTable>::new(file, spec);
            let mut expired = Vec::new();
            for entry in spilled.entries(side) {
                let (key, bucket) = entry?;
                if bucket.touched_at < self.expired_before {
                    self.held -= bucket.held();
                    expired.push(key);
                } else {
                    file.push(|table| table.push(&key, &bucket))?;
                }
            }
            spilled.forget(side, expired.iter().map(Vec::as_slice))?;
            for (key, bucket) in self.sides[side].iter() {
                file.push(|table| table.push(key, bucket))?;
            }
            snapshot.put_file(spec, file.finish()?)?;
        }
        Ok(snapshot)
    }

    fn restore(&mut self, mut state: StateSnapshot) -> Result<()> {
        if state.is_empty() {
            return Ok(());
        }
        (
            self.unmatched_retractions,
            self.right_rows,
            self.right_null_rows,
            self.watermark,
        ) = state.meta::<Meta>()?;
        self.sweeps.resume(self.watermark);
        self.held = 0;
        for side in 0..2 {
            let spec = &self.tables[side];
            let table = state.take(spec)?;
            let keys = spec.column::<BinaryArray>(&table, 0)?;
            let rows = spec.column::<BinaryArray>(&table, 1)?;
            let copies = spec.column::<UInt32Array>(&table, 2)?;
            let partners = spec.column::<UInt64Array>(&table, 3)?;
            let touched_at = spec.column::<Int64Array>(&table, 4)?;
            self.sides[side].clear();
            if let Some(spilled) = self.spilled.as_mut() {
                spilled.clear()?;
            }
            for r in 0..table.num_rows() {
                let key = keys.value(r);
                let (bucket, _) = self.sides[side].get_or_insert(self.hasher.hash_one(key), key);
                bucket.touched_at = touched_at.value(r);
                *bucket.entry(rows.value(r)).0 = Held {
                    copies: copies.value(r),
                    partners: partners.value(r),
                };
                self.held += copies.value(r) as usize;
            }
        }
        self.bytes = self
            .sides
            .iter()
            .flat_map(|s| s.iter())
            .map(|(key, bucket)| bucket_bytes(key, bucket))
            .sum();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operators::testing::{changes, kv_rows as rows};

    fn side() -> SchemaRef {
        crate::operators::testing::kv_schema()
    }

    fn plan(kind: JoinKind) -> UpdatingJoinPlan {
        plan_of(JoinOutput::Pairs(kind))
    }

    fn plan_of(kind: JoinOutput) -> UpdatingJoinPlan {
        let side = side();
        let width = if kind == JoinOutput::LeftSemi || kind == JoinOutput::LeftAnti {
            1
        } else {
            2
        };
        let fields: Vec<Field> = (0..width)
            .flat_map(|_| side.fields().iter())
            .map(|f| f.as_ref().clone().with_nullable(true))
            .collect();
        UpdatingJoinPlan {
            kind,
            nulls_equal: false,
            null_aware: false,
            left_schema: side.clone(),
            right_schema: side.clone(),
            output_schema: changelog::updating_schema(&Schema::new(fields), &[]),
            left_keys: vec![col("k", &side).unwrap()],
            right_keys: vec![col("k", &side).unwrap()],
            residual: None,
            state_ttl_ms: None,
        }
    }

    #[test]
    fn runs_keyed_except_a_null_aware_anti_join() {
        use crate::operator::Distribution;
        let keyed = plan(JoinKind::Left);
        for (input, keys) in [(0, &keyed.left_keys), (1, &keyed.right_keys)] {
            assert_eq!(
                keyed.required_input_distribution(input),
                Distribution::Hash(keys.clone())
            );
        }
        let not_in = UpdatingJoinPlan {
            null_aware: true,
            ..plan_of(JoinOutput::LeftAnti)
        };
        for input in 0..2 {
            assert_eq!(
                not_in.required_input_distribution(input),
                Distribution::Single
            );
        }
    }

    #[test]
    fn instances_merged_by_a_rescale_keep_their_padded_rows() {
        use crate::key_groups::KeyGroups;
        let plan = plan(JoinKind::Left);
        // Two instances, each with a padded left row of its own key.
        let parts: Vec<StateSnapshot> = [("a", 1), ("b", 2)]
            .into_iter()
            .map(|(key, value)| {
                let mut op = plan.create().unwrap();
                let mut out = Collector::default();
                op.on_batch(0, rows(&[Some(key)], &[value], None), &mut out)
                    .unwrap();
                op.snapshot().unwrap()
            })
            .collect();
        // One instance after: both rows, paired when their partners come.
        let mut op = crate::operators::testing::rescaled_instance(
            &plan,
            &parts,
            KeyGroups::default(),
            0,
            1,
            2,
        );
        assert_eq!(op.state_rows(), 2);
        let mut out = Collector::default();
        op.on_batch(1, rows(&[Some("b"), Some("a")], &[8, 7], None), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            [
                "-D b 2 NULL NULL",
                "+I b 2 b 8",
                "-D a 1 NULL NULL",
                "+I a 1 a 7"
            ]
        );
    }

    #[test]
    fn a_full_join_pads_until_a_partner_comes_and_after_it_goes() {
        let mut op = plan(JoinKind::Full).create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&[Some("a"), None], &[1, 2], None), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I a 1 NULL NULL", "+I NULL 2 NULL NULL"]
        );
        op.on_batch(
            1,
            rows(&[Some("a"), Some("b")], &[7, 8], Some(&[0, 0])),
            &mut out,
        )
        .unwrap();
        assert_eq!(
            changes(&mut out),
            ["-D a 1 NULL NULL", "+I a 1 a 7", "+I NULL NULL b 8"]
        );
        // The right row leaves: the left row is padded again.
        op.on_batch(1, rows(&[Some("a")], &[7], Some(&[3])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["-D a 1 a 7", "+I a 1 NULL NULL"]);
        assert_eq!(op.state_rows(), 2, "a on the left, b on the right");
    }

    #[test]
    fn an_inner_join_over_copies_and_a_restore() {
        let plan = plan(JoinKind::Inner);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&[Some("a"), Some("a")], &[1, 1], None), &mut out)
            .unwrap();
        assert!(changes(&mut out).is_empty());
        let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(1, rows(&[Some("a")], &[5], None), &mut out)
                .unwrap();
            assert_eq!(changes(&mut out), ["+I a 1 a 5", "+I a 1 a 5"]);
        }
        // A retraction of a row never put in is counted, not applied.
        op.on_batch(1, rows(&[Some("z")], &[5], Some(&[3])), &mut out)
            .unwrap();
        assert!(changes(&mut out).is_empty());
        assert_eq!(op.late_rows(), 1);
    }

    #[test]
    fn semi_and_anti_joins_follow_the_partners_of_each_left_row() {
        let mut semi = plan_of(JoinOutput::LeftSemi).create().unwrap();
        let mut anti = plan_of(JoinOutput::LeftAnti).create().unwrap();
        let mut out = Collector::default();
        let left = rows(&[Some("a"), None], &[1, 2], None);
        semi.on_batch(0, left.clone(), &mut out).unwrap();
        assert!(changes(&mut out).is_empty(), "no partner yet");
        anti.on_batch(0, left, &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 1", "+I NULL 2"]);
        // Two partners of a: the semi join emits a once, when the first comes.
        let right = rows(&[Some("a"), Some("a")], &[7, 8], Some(&[0, 0]));
        semi.on_batch(1, right.clone(), &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 1"]);
        anti.on_batch(1, right, &mut out).unwrap();
        assert_eq!(changes(&mut out), ["-D a 1"]);
        // Both leave: a has no partner again.
        let gone = rows(&[Some("a"), Some("a")], &[7, 8], Some(&[3, 3]));
        semi.on_batch(1, gone.clone(), &mut out).unwrap();
        assert_eq!(changes(&mut out), ["-D a 1"]);
        anti.on_batch(1, gone, &mut out).unwrap();
        assert_eq!(changes(&mut out), ["+I a 1"]);
    }

    #[test]
    fn null_keys_match_when_the_join_says_they_are_equal() {
        let mut plan = plan_of(JoinOutput::LeftSemi);
        plan.nulls_equal = true;
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(1, rows(&[None], &[0], None), &mut out).unwrap();
        op.on_batch(0, rows(&[None, Some("b")], &[1, 2], None), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I NULL 1"]);
    }

    #[test]
    fn not_in_emits_nothing_while_the_subquery_has_a_null_and_everything_while_it_is_empty() {
        let mut plan = plan_of(JoinOutput::LeftAnti);
        plan.null_aware = true;
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_batch(0, rows(&[Some("a"), None], &[1, 2], None), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["+I a 1", "+I NULL 2"],
            "an empty subquery"
        );
        op.on_batch(1, rows(&[Some("b")], &[0], Some(&[0])), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["-D NULL 2"],
            "a NULL is not NOT IN a non-empty set"
        );
        op.on_batch(1, rows(&[None], &[0], Some(&[0])), &mut out)
            .unwrap();
        assert_eq!(
            changes(&mut out),
            ["-D a 1"],
            "nothing is NOT IN a set with a NULL"
        );
        let snapshot = op.snapshot().unwrap();
        let mut restored = plan.create().unwrap();
        restored.restore(snapshot).unwrap();
        restored
            .on_batch(
                1,
                rows(&[None, Some("b")], &[0, 0], Some(&[3, 3])),
                &mut out,
            )
            .unwrap();
        let mut got = changes(&mut out);
        got.sort();
        assert_eq!(got, ["+I NULL 2", "+I a 1"], "empty again");
    }

    #[test]
    fn keys_idle_past_the_ttl_are_forgotten_on_both_sides() {
        let mut plan = plan(JoinKind::Inner);
        plan.state_ttl_ms = Some(10);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        op.on_watermark(0, &mut out).unwrap();
        op.on_batch(0, rows(&[Some("a"), Some("b")], &[1, 2], None), &mut out)
            .unwrap();
        op.on_watermark(8, &mut out).unwrap();
        // A right row of a at 8 meets a's left row and keeps the key alive.
        op.on_batch(1, rows(&[Some("a")], &[7], Some(&[0])), &mut out)
            .unwrap();
        assert_eq!(changes(&mut out), ["+I a 1 a 7"]);
        op.on_watermark(15, &mut out).unwrap();
        assert_eq!(op.state_rows(), 2, "b (last seen at 0) is gone");
        let mut restored = crate::operators::testing::restored(&plan, op.as_mut());
        for op in [&mut op, &mut restored] {
            op.on_batch(
                1,
                rows(&[Some("b"), Some("a")], &[5, 6], Some(&[0, 0])),
                &mut out,
            )
            .unwrap();
            assert_eq!(
                changes(&mut out),
                ["+I a 1 a 6"],
                "b's left row never pairs"
            );
        }
    }

    /// Batches alternating between the sides (left first) over 30 keys,
    /// a quarter of each retracting a row that side holds, a few keys NULL.
    fn churn(batches: usize) -> Vec<(usize, RecordBatch)> {
        let mut held: [Vec<(usize, i64)>; 2] = Default::default();
        let mut seed = 11u64;
        let mut out = Vec::new();
        for b in 0..batches {
            let side = b % 2;
            let (mut ks, mut vs, mut kinds) = (Vec::new(), Vec::new(), Vec::new());
            for r in 0..20 {
                let pick = crate::operators::testing::next_pick(&mut seed);
                if r % 4 == 3 && !held[side].is_empty() {
                    let at = pick % held[side].len();
                    let (k, v) = held[side].swap_remove(at);
                    ks.push(k);
                    vs.push(v);
                    kinds.push(3);
                } else {
                    let (k, v) = (pick % 31, (pick % 3) as i64);
                    held[side].push((k, v));
                    ks.push(k);
                    vs.push(v);
                    kinds.push(0);
                }
            }
            let names: Vec<String> = ks.iter().map(|k| format!("k{k}")).collect();
            let keys: Vec<Option<&str>> = ks
                .iter()
                .zip(&names)
                .map(|(&k, name)| (k != 30).then_some(name.as_str()))
                .collect();
            out.push((side, rows(&keys, &vs, Some(&kinds))));
        }
        out
    }

    #[test]
    fn spilled_keys_come_back_as_they_left_and_every_change_is_the_same() {
        for kind in [
            JoinOutput::Pairs(JoinKind::Full),
            JoinOutput::Pairs(JoinKind::Left),
            JoinOutput::Pairs(JoinKind::Inner),
            JoinOutput::LeftSemi,
            JoinOutput::LeftAnti,
        ] {
            eprintln!("{kind:?}");
            let mut plan = plan_of(kind);
            // The watermark passes the TTL: idle keys expire in memory and
            // on disk alike.
            plan.state_ttl_ms = Some(6);
            crate::operators::testing::assert_spilling_changes_nothing(&plan, &churn(40), 4);
        }
    }

    #[test]
    fn a_null_aware_anti_join_does_not_spill() {
        use crate::spill::{SpillConfig, SpillSpace};
        let space = Arc::new(SpillSpace::new(SpillConfig::default()));
        let mut op = UpdatingJoinPlan {
            null_aware: true,
            ..plan_of(JoinOutput::LeftAnti)
        }
        .create()
        .unwrap();
        op.on_batch(0, rows(&[Some("a")], &[1], None), &mut Collector::default())
            .unwrap();
        assert!(!op.spill(&space).unwrap());
        assert!(op.state_bytes() > 0);
    }
}
