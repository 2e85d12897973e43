//! The lookup join against a table read by key: `probe JOIN dim FOR
//! SYSTEM_TIME AS OF probe.proc ON probe.k = dim.k` where `dim` lives in a
//! database (`connector = 'jdbc'`) and `proc` is a `PROCTIME()` column,
//! Flink's JDBC lookup join. Each probe batch asks the table once for the
//! keys it needs that the cache does not hold ([`crate::lookup`]), and each
//! probe row meets the table's rows with its key as they stand then.
//!
//! In: probe rows (append-only), and the table's rows for the keys asked
//! from the [`LookupSource`] the runtime opens ([`OperatorPlan::lookup_table`]).
//! Out: append-only joined rows (probe columns, the table's joined
//! columns), one per matching table row; a LEFT join pads a probe row
//! without a match (or a NULL key) with NULLs, an INNER join drops it.
//!
//! The cache follows the source's [`CachePolicy`] (the table's
//! `lookup.cache.*` options): at most `max_rows` keys, the oldest answers
//! evicted first, each kept at most `ttl`; keys without rows kept too
//! unless told not to. No cache: every batch asks for all its keys.
//!
//! State: none checkpointed (the cache starts empty after a restore, as
//! Flink's); the operator runs as any number of instances.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, Int64Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use datafusion::physical_expr::expressions::col;
//! use eddy_engine::graph::ConnectorSpec;
//! use eddy_engine::lookup::{LookupSource, LookupTable};
//! use eddy_engine::operator::{Collector, OperatorPlan};
//! use eddy_engine::operators::key_lookup_join::KeyLookupJoinPlan;
//! use eddy_engine::operators::probe_join::ProbeJoin;
//!
//! let probe = Arc::new(Schema::new(vec![Field::new("k", DataType::Int64, true)]));
//! let table = Arc::new(Schema::new(vec![
//!     Field::new("id", DataType::Int64, false),
//!     Field::new("square", DataType::Int64, false),
//! ]));
//! /// The table of squares: key k has the row (k, k*k).
//! struct Squares(Arc<Schema>);
//! impl LookupSource for Squares {
//!     fn lookup(&mut self, keys: &[ArrayRef]) -> eddy_engine::Result<RecordBatch> {
//!         let k = keys[0].as_any().downcast_ref::<Int64Array>().unwrap();
//!         let squares: Int64Array = k.iter().map(|v| v.map(|v| v * v)).collect();
//!         Ok(RecordBatch::try_new(self.0.clone(), vec![Arc::new(k.clone()), Arc::new(squares)])?)
//!     }
//! }
//! let plan = KeyLookupJoinPlan {
//!     join: ProbeJoin {
//!         left_outer: false,
//!         left_schema: probe.clone(),
//!         right_schema: table.clone(),
//!         output_schema: Arc::new(Schema::new(
//!             [probe.fields().to_vec(), table.fields().to_vec()].concat(),
//!         )),
//!         left_keys: vec![col("k", &probe).unwrap()],
//!         right_keys: vec![col("id", &table).unwrap()],
//!         residual: None,
//!     },
//!     right_columns: vec![0, 1],
//!     table: LookupTable {
//!         spec: ConnectorSpec {
//!             table: "squares".into(),
//!             connector: "jdbc".into(),
//!             options: Default::default(),
//!             schema: table.clone(),
//!             declared_at: None,
//!             primary_key: vec!["id".into()],
//!             filter: None,
//!             unread_columns: Vec::new(),
//!             explain: None,
//!         },
//!         key_columns: vec!["id".into()],
//!     },
//! };
//! let mut op = plan.create().unwrap();
//! op.lookup_opened(Box::new(Squares(table))); // the runtime does this
//! let mut out = Collector::default();
//! let probes = RecordBatch::try_new(probe, vec![Arc::new(Int64Array::from(vec![2, 3]))]).unwrap();
//! op.on_batch(0, probes, &mut out).unwrap();
//! let joined: Vec<RecordBatch> = out.drain().map(|(_, b)| b).collect();
//! assert_eq!(joined[0].num_rows(), 2);
//! ```

use std::collections::VecDeque;
use std::time::Instant;

use datafusion::arrow::array::{Array, ArrayRef, UInt32Array};
use datafusion::arrow::compute::take;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::arrow::row::RowConverter;
use hashbrown::HashMap;

use super::probe_join::ProbeJoin;
use crate::error::{EngineError, Result};
use crate::lookup::{CachePolicy, LookupSource, LookupTable};
use crate::operator::{Collector, Distribution, Operator, OperatorPlan};
use crate::state::StateSnapshot;

const KIND: &str = "key_lookup_join";

/// A key's table rows, each row-encoded.
type TableRows = Vec<Box<[u8]>>;
/// Table rows by encoded key.
type Answers = HashMap<Box<[u8]>, TableRows>;

/// Plan of a lookup join against a table read by key.
#[derive(Debug, Clone)]
pub struct KeyLookupJoinPlan {
    /// The probe, the table's columns the join reads, the keys (over the
    /// table's joined columns: a column, or a cast of one, each, of the
    /// probe keys' types), the residual condition.
    pub join: ProbeJoin,
    /// Where each of the joined table columns is among the table's.
    pub right_columns: Vec<usize>,
    /// The table and the columns the keys equal.
    pub table: LookupTable,
}

impl OperatorPlan for KeyLookupJoinPlan {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn parameters(&self) -> crate::shape::Parameters {
        self.join.residual_parameter(self.join.parameters())
    }

    fn describe(&self) -> String {
        format!(
            "{}, asking table '{}' ({}) by {} for each batch's keys",
            self.join.describe(),
            self.table.spec.table,
            self.table.spec.connector,
            self.table.key_columns.join(", "),
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.join.output_schema.clone()
    }

    /// Nothing is kept but a cache: any instance joins any row.
    fn required_input_distribution(&self, _input: usize) -> Distribution {
        Distribution::Any
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(KeyLookupJoin {
            probe_keys: self.join.key_converter()?,
            table_keys: super::key_converter(&self.join.right_keys, &self.join.right_schema)?,
            rows: self.join.row_converter()?,
            plan: self.clone(),
            source: None,
            cache: Cache::new(CachePolicy::default()),
        }))
    }

    fn lookup_table(&self) -> Option<&LookupTable> {
        Some(&self.table)
    }
}

/// The answers kept. See the module docs.
struct Cache {
    policy: CachePolicy,
    /// Each key's table rows (encoded), and when they came.
    entries: HashMap<Box<[u8]>, (TableRows, Instant)>,
    /// Keys in the order their answers came, with when: the oldest is
    /// evicted first; an entry whose time no longer matches is stale.
    order: VecDeque<(Box<[u8]>, Instant)>,
    bytes: usize,
}

impl Cache {
    fn new(policy: CachePolicy) -> Self {
        Self {
            policy,
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        }
    }

    /// The rows of `key` while its answer is fresh.
    fn get(&self, key: &[u8], now: Instant) -> Option<&[Box<[u8]>]> {
        let (rows, at) = self.entries.get(key)?;
        let fresh = self
            .policy
            .ttl
            .is_none_or(|ttl| now.duration_since(*at) < ttl);
        fresh.then_some(rows.as_slice())
    }

    /// Keeps `rows` as `key`'s answer, if the policy keeps it.
    fn put(&mut self, key: Box<[u8]>, rows: Vec<Box<[u8]>>, now: Instant) {
        let Some(max_rows) = self.policy.max_rows else {
            return;
        };
        if max_rows == 0 || (rows.is_empty() && !self.policy.cache_missing) {
            return;
        }
        self.bytes += entry_bytes(&key, &rows);
        if let Some(old) = self.entries.insert(key.clone(), (rows, now)) {
            self.bytes -= entry_bytes(&key, &old.0);
        }
        self.order.push_back((key, now));
        while self.entries.len() > max_rows {
            let Some((oldest, at)) = self.order.pop_front() else {
                break;
            };
            if self
                .entries
                .get(&oldest)
                .is_some_and(|(_, kept)| *kept == at)
            {
                if let Some((rows, _)) = self.entries.remove(&oldest) {
                    self.bytes -= entry_bytes(&oldest, &rows);
                }
            }
        }
        // Stale order entries (keys answered again) are dropped as they
        // reach the front; keep the queue from growing past twice the keys.
        if self.order.len() > 2 * self.entries.len() + 16 {
            let entries = &self.entries;
            self.order
                .retain(|(k, at)| entries.get(k).is_some_and(|(_, kept)| kept == at));
        }
    }
}

fn entry_bytes(key: &[u8], rows: &[Box<[u8]>]) -> usize {
    key.len() + rows.iter().map(|r| r.len()).sum::<usize>()
}

struct KeyLookupJoin {
    plan: KeyLookupJoinPlan,
    probe_keys: RowConverter,
    table_keys: RowConverter,
    rows: RowConverter,
    source: Option<Box<dyn LookupSource>>,
    cache: Cache,
}

impl KeyLookupJoin {
    /// Asks the table for `keys` (columns of distinct, non-NULL keys) and
    /// returns each key's rows, encoded; keys without rows are absent.
    fn ask(&mut self, keys: &[ArrayRef]) -> Result<Answers> {
        let source = self.source.as_mut().ok_or_else(|| {
            EngineError::operator(
                KIND,
                format!("table '{}' was not opened", self.plan.table.spec.table),
            )
        })?;
        let found = source.lookup(keys)?;
        let joined = RecordBatch::try_new(
            self.plan.join.right_schema.clone(),
            self.plan
                .right_columns
                .iter()
                .map(|&c| found.column(c).clone())
                .collect(),
        )?;
        let table_keys =
            super::nullable_key_rows(&self.table_keys, &self.plan.join.right_keys, &joined)?;
        let rows = self.rows.convert_columns(joined.columns())?;
        let mut answers = Answers::new();
        for (r, key) in table_keys.into_iter().enumerate() {
            if let Some(key) = key {
                answers
                    .entry(key)
                    .or_default()
                    .push(rows.row(r).data().into());
            }
        }
        Ok(answers)
    }
}

impl Operator for KeyLookupJoin {
    fn on_batch(&mut self, _input: usize, probes: RecordBatch, out: &mut Collector) -> Result<()> {
        if probes.num_rows() == 0 {
            return Ok(());
        }
        let (encoded, columns) =
            super::key_rows(&self.probe_keys, &self.plan.join.left_keys, &probes)?;
        let keys: Vec<Option<&[u8]>> = (0..probes.num_rows())
            .map(|r| (!columns.iter().any(|c| c.is_null(r))).then(|| encoded.row(r).data()))
            .collect();
        let now = Instant::now();
        // The first row of each key the cache cannot answer.
        let mut missing: HashMap<&[u8], u32> = HashMap::new();
        for (r, key) in keys.iter().enumerate() {
            if let Some(key) = key {
                if self.cache.get(key, now).is_none() {
                    missing.entry(key).or_insert(r as u32);
                }
            }
        }
        let mut answers = Answers::new();
        if !missing.is_empty() {
            let mut first_rows: Vec<u32> = missing.values().copied().collect();
            first_rows.sort_unstable();
            let first_rows = UInt32Array::from(first_rows);
            let asked = columns
                .iter()
                .map(|c| Ok(take(c.as_ref(), &first_rows, None)?))
                .collect::<Result<Vec<ArrayRef>>>()?;
            answers = self.ask(&asked)?;
            for key in missing.keys() {
                if !answers.contains_key(*key) {
                    answers.insert((*key).into(), Vec::new());
                }
            }
        }
        let cache = &self.cache;
        self.plan.join.emit(
            &probes,
            |r| {
                let key = keys[r]?;
                answers
                    .get(key)
                    .map(Vec::as_slice)
                    .or_else(|| cache.get(key, now))
            },
            &self.rows,
            KIND,
            out,
        )?;
        for (key, rows) in answers {
            self.cache.put(key, rows, now);
        }
        Ok(())
    }

    fn lookup_opened(&mut self, source: Box<dyn LookupSource>) {
        self.cache = Cache::new(source.cache());
        self.source = Some(source);
    }

    fn state_rows(&self) -> usize {
        self.cache.entries.len()
    }

    fn state_bytes(&self) -> usize {
        self.cache.bytes
    }

    fn snapshot(&mut self) -> Result<StateSnapshot> {
        Ok(StateSnapshot::default())
    }

    fn restore(&mut self, _state: StateSnapshot) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::logical_expr::Operator as BinaryOp;
    use datafusion::physical_expr::expressions::{col, lit, BinaryExpr};
    use datafusion::physical_expr::PhysicalExpr;

    use super::*;
    use crate::graph::ConnectorSpec;

    /// Customers 1..=5 named `c{id}`, each asked key counted.
    struct Customers {
        schema: SchemaRef,
        asked: Arc<Mutex<Vec<i64>>>,
        policy: CachePolicy,
    }

    impl LookupSource for Customers {
        fn lookup(&mut self, keys: &[ArrayRef]) -> Result<RecordBatch> {
            let ids = keys[0].as_any().downcast_ref::<Int64Array>().unwrap();
            let found: Vec<i64> = ids
                .values()
                .iter()
                .copied()
                .filter(|id| (1..=5).contains(id))
                .collect();
            self.asked
                .lock()
                .unwrap()
                .extend(ids.values().iter().copied());
            let names: StringArray = found.iter().map(|id| Some(format!("c{id}"))).collect();
            Ok(RecordBatch::try_new(
                self.schema.clone(),
                vec![Arc::new(Int64Array::from(found)), Arc::new(names)],
            )?)
        }
        fn cache(&self) -> CachePolicy {
            self.policy
        }
    }

    fn schemas() -> (SchemaRef, SchemaRef) {
        (
            Arc::new(Schema::new(vec![Field::new(
                "customer",
                DataType::Int64,
                true,
            )])),
            Arc::new(Schema::new(vec![
                Field::new("id", DataType::Int64, false),
                Field::new("name", DataType::Utf8, true),
            ])),
        )
    }

    fn plan(left_outer: bool, residual: Option<Arc<dyn PhysicalExpr>>) -> KeyLookupJoinPlan {
        let (probe, table) = schemas();
        KeyLookupJoinPlan {
            join: ProbeJoin {
                left_outer,
                left_schema: probe.clone(),
                right_schema: table.clone(),
                // A LEFT join's table columns are NULL where nothing matched.
                output_schema: Arc::new(Schema::new(
                    [
                        probe.fields().to_vec(),
                        table
                            .fields()
                            .iter()
                            .map(|f| Arc::new(f.as_ref().clone().with_nullable(true)))
                            .collect(),
                    ]
                    .concat(),
                )),
                left_keys: vec![col("customer", &probe).unwrap()],
                right_keys: vec![col("id", &table).unwrap()],
                residual,
            },
            right_columns: vec![0, 1],
            table: LookupTable {
                spec: ConnectorSpec {
                    table: "customers".into(),
                    connector: "jdbc".into(),
                    options: Default::default(),
                    schema: table,
                    declared_at: None,
                    primary_key: vec!["id".into()],
                    filter: None,
                    unread_columns: Vec::new(),
                    explain: None,
                },
                key_columns: vec!["id".into()],
            },
        }
    }

    fn opened(
        plan: &KeyLookupJoinPlan,
        policy: CachePolicy,
    ) -> (Box<dyn Operator>, Arc<Mutex<Vec<i64>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut op = plan.create().unwrap();
        op.lookup_opened(Box::new(Customers {
            schema: schemas().1,
            asked: asked.clone(),
            policy,
        }));
        (op, asked)
    }

    fn probes(ids: &[Option<i64>]) -> RecordBatch {
        RecordBatch::try_new(schemas().0, vec![Arc::new(Int64Array::from(ids.to_vec()))]).unwrap()
    }

    /// (customer, name) per output row, sorted.
    fn joined(op: &mut dyn Operator, ids: &[Option<i64>]) -> Vec<(Option<i64>, Option<String>)> {
        let mut out = Collector::default();
        op.on_batch(0, probes(ids), &mut out).unwrap();
        let mut rows = Vec::new();
        for (_, batch) in out.drain() {
            let c = batch
                .column(0)
                .as_any()
                .downcast_ref::<Int64Array>()
                .unwrap();
            let n = batch
                .column(2)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap();
            for r in 0..batch.num_rows() {
                rows.push((
                    c.is_valid(r).then(|| c.value(r)),
                    n.is_valid(r).then(|| n.value(r).to_string()),
                ));
            }
        }
        rows.sort();
        rows
    }

    fn named(id: i64) -> (Option<i64>, Option<String>) {
        (Some(id), Some(format!("c{id}")))
    }

    #[test]
    fn inner_drops_and_left_pads_missing_and_null_keys_asking_each_key_once() {
        let (mut inner, asked) = opened(&plan(false, None), CachePolicy::default());
        let ids = [Some(1), Some(9), None, Some(1), Some(3)];
        assert_eq!(
            joined(inner.as_mut(), &ids),
            vec![named(1), named(1), named(3)]
        );
        let mut keys = asked.lock().unwrap().clone();
        keys.sort();
        assert_eq!(keys, vec![1, 3, 9], "each distinct non-NULL key once");
        let (mut left, _) = opened(&plan(true, None), CachePolicy::default());
        assert_eq!(
            joined(left.as_mut(), &ids),
            vec![(None, None), named(1), named(1), named(3), (Some(9), None)]
        );
    }

    #[test]
    fn without_a_cache_every_batch_asks_and_with_one_only_for_keys_it_lacks() {
        let (mut uncached, asked) = opened(&plan(false, None), CachePolicy::default());
        joined(uncached.as_mut(), &[Some(1), Some(2)]);
        joined(uncached.as_mut(), &[Some(1), Some(2)]);
        assert_eq!(asked.lock().unwrap().len(), 4);

        let policy = CachePolicy {
            max_rows: Some(100),
            ttl: None,
            cache_missing: true,
        };
        let (mut cached, asked) = opened(&plan(false, None), policy);
        assert_eq!(joined(cached.as_mut(), &[Some(1), Some(7)]), vec![named(1)]);
        assert_eq!(
            joined(cached.as_mut(), &[Some(1), Some(7), Some(2)]),
            vec![named(1), named(2)]
        );
        assert_eq!(
            *asked.lock().unwrap(),
            vec![1, 7, 2],
            "1 and the missing 7 came from the cache"
        );
        assert_eq!(cached.state_rows(), 3);
        assert!(cached.state_bytes() > 0);

        let policy = CachePolicy {
            cache_missing: false,
            ..policy
        };
        let (mut not_missing, asked) = opened(&plan(false, None), policy);
        joined(not_missing.as_mut(), &[Some(7)]);
        joined(not_missing.as_mut(), &[Some(7)]);
        assert_eq!(
            *asked.lock().unwrap(),
            vec![7, 7],
            "a key without rows is asked again"
        );
    }

    #[test]
    fn the_cache_keeps_at_most_max_rows_keys_evicting_the_oldest_and_expires_by_ttl() {
        let policy = CachePolicy {
            max_rows: Some(2),
            ttl: None,
            cache_missing: true,
        };
        let (mut op, asked) = opened(&plan(false, None), policy);
        joined(op.as_mut(), &[Some(1)]);
        joined(op.as_mut(), &[Some(2)]);
        joined(op.as_mut(), &[Some(3)]); // evicts 1
        assert_eq!(op.state_rows(), 2);
        joined(op.as_mut(), &[Some(2), Some(3)]);
        joined(op.as_mut(), &[Some(1)]);
        assert_eq!(*asked.lock().unwrap(), vec![1, 2, 3, 1]);

        let policy = CachePolicy {
            max_rows: Some(10),
            ttl: Some(Duration::from_millis(30)),
            cache_missing: true,
        };
        let (mut op, asked) = opened(&plan(false, None), policy);
        joined(op.as_mut(), &[Some(4)]);
        joined(op.as_mut(), &[Some(4)]);
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(joined(op.as_mut(), &[Some(4)]), vec![named(4)]);
        assert_eq!(
            *asked.lock().unwrap(),
            vec![4, 4],
            "asked again once expired"
        );
    }

    #[test]
    fn a_residual_condition_filters_matches_and_a_left_join_pads_rows_none_of_whose_matches_pass() {
        let output = plan(true, None).join.output_schema;
        let not_c2: Arc<dyn PhysicalExpr> = Arc::new(BinaryExpr::new(
            col("name", &output).unwrap(),
            BinaryOp::NotEq,
            lit("c2"),
        ));
        let (mut left, _) = opened(&plan(true, Some(not_c2.clone())), CachePolicy::default());
        assert_eq!(
            joined(left.as_mut(), &[Some(1), Some(2)]),
            vec![named(1), (Some(2), None)]
        );
        let (mut inner, _) = opened(&plan(false, Some(not_c2)), CachePolicy::default());
        assert_eq!(joined(inner.as_mut(), &[Some(1), Some(2)]), vec![named(1)]);
    }

    #[test]
    fn a_join_whose_table_was_not_opened_says_so() {
        let mut op = plan(false, None).create().unwrap();
        let mut out = Collector::default();
        let err = op.on_batch(0, probes(&[Some(1)]), &mut out).unwrap_err();
        assert!(
            err.to_string().contains("'customers' was not opened"),
            "{err}"
        );
    }
}
