//! Key split: routes each row to the output port of the parallel instance
//! that owns its key (see [`crate::parallel`]).
//!
//! In: batches of one input. Out: on port `i`, the rows whose key group
//! instance `i` of N owns ([`crate::partition::instance_rows`]), in input
//! order; watermarks, idle and end markers and barriers go to every port
//! (the runtime broadcasts them). Each row is hashed once, where N filters
//! would hash it N times. Stateless.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::physical_expr::expressions::Column;
//! use eddy_engine::operator::OperatorPlan;
//! use eddy_engine::operators::key_split::KeySplitPlan;
//!
//! let schema = Arc::new(Schema::new(vec![Field::new("k", DataType::Utf8, true)]));
//! let groups = eddy_engine::key_groups::KeyGroups::default();
//! let split = KeySplitPlan::new(schema, vec![Arc::new(Column::new("k", 0))], 4, groups);
//! assert_eq!(split.output_ports(), 4);
//! ```

use std::sync::Arc;

use datafusion::arrow::array::UInt32Array;
use datafusion::arrow::compute::take_record_batch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::physical_expr::PhysicalExpr;

use crate::error::Result;
use crate::key_groups::KeyGroups;
use crate::message::LateBatch;
use crate::operator::{Collector, Operator, OperatorPlan};
use crate::partition::{instance_rows, INSTANCE_HASH};

/// Plan of a key split into `ports` instances.
#[derive(Debug, Clone)]
pub struct KeySplitPlan {
    schema: SchemaRef,
    keys: Vec<Arc<dyn PhysicalExpr>>,
    ports: u32,
    groups: KeyGroups,
}

impl KeySplitPlan {
    /// Splits rows of `schema` by `keys` over `ports` outputs, each owning
    /// a range of `groups`.
    pub fn new(
        schema: SchemaRef,
        keys: Vec<Arc<dyn PhysicalExpr>>,
        ports: u32,
        groups: KeyGroups,
    ) -> Self {
        Self {
            schema,
            keys,
            ports: ports.max(1),
            groups,
        }
    }
}

impl OperatorPlan for KeySplitPlan {
    fn required_input_distribution(&self, _input: usize) -> crate::operator::Distribution {
        crate::operator::Distribution::Any
    }

    fn kind(&self) -> &'static str {
        "key_split"
    }

    fn parameters(&self) -> crate::shape::Parameters {
        use crate::shape::Parameters as P;
        P::new()
            .exprs("keys", &self.keys)
            .value("ports", self.ports)
            .value("key_groups", self.groups)
    }

    fn describe(&self) -> String {
        let keys: Vec<String> = self.keys.iter().map(|k| k.to_string()).collect();
        format!(
            "hash({}) over {} instances ({INSTANCE_HASH}, {} key groups)",
            keys.join(", "),
            self.ports,
            self.groups
        )
    }

    fn output_schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn output_ports(&self) -> usize {
        self.ports as usize
    }

    fn create(&self) -> Result<Box<dyn Operator>> {
        Ok(Box::new(KeySplit { plan: self.clone() }))
    }
}

struct KeySplit {
    plan: KeySplitPlan,
}

impl Operator for KeySplit {
    fn on_batch(&mut self, _input: usize, batch: RecordBatch, out: &mut Collector) -> Result<()> {
        let rows = batch.num_rows();
        let keys = self
            .plan
            .keys
            .iter()
            .map(|k| k.evaluate(&batch)?.into_array(rows))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let targets = instance_rows(&keys, rows, self.plan.ports, self.plan.groups)?;
        let mut by_port: Vec<Vec<u32>> = vec![Vec::new(); self.plan.ports as usize];
        for (row, &port) in targets.iter().enumerate() {
            by_port[port as usize].push(row as u32);
        }
        for (port, indices) in by_port.into_iter().enumerate() {
            if indices.len() == rows {
                out.emit_to(port, batch);
                return Ok(());
            }
            if !indices.is_empty() {
                out.emit_to(
                    port,
                    take_record_batch(&batch, &UInt32Array::from(indices))?,
                );
            }
        }
        Ok(())
    }

    fn on_late_batch(&mut self, _input: usize, late: LateBatch, out: &mut Collector) -> Result<()> {
        let batch = late.rows();
        let rows = batch.num_rows();
        let keys = self
            .plan
            .keys
            .iter()
            .map(|k| k.evaluate(batch)?.into_array(rows))
            .collect::<datafusion::error::Result<Vec<_>>>()?;
        let targets = instance_rows(&keys, rows, self.plan.ports, self.plan.groups)?;
        let mut by_port: Vec<Vec<u32>> = vec![Vec::new(); self.plan.ports as usize];
        for (row, &port) in targets.iter().enumerate() {
            by_port[port as usize].push(row as u32);
        }
        for (port, indices) in by_port.into_iter().enumerate() {
            if !indices.is_empty() {
                out.emit_late_to(port, late.take(&UInt32Array::from(indices))?);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use datafusion::arrow::array::{Array, StringArray};
    use datafusion::physical_expr::expressions::col;

    use super::*;
    use crate::operator::Distribution;
    use crate::operators::testing::{keyed, kv_schema};

    /// The keys each port got.
    fn keys_by_port(out: &mut Collector) -> BTreeMap<usize, Vec<String>> {
        let mut by_port: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (port, batch) in out.drain() {
            let keys = batch
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone();
            for i in 0..keys.len() {
                by_port
                    .entry(port)
                    .or_default()
                    .push(keys.value(i).to_string());
            }
        }
        by_port
    }

    #[test]
    fn late_rows_go_to_their_keys_instance_with_their_marks() {
        let plan = KeySplitPlan::new(
            kv_schema(),
            vec![col("k", &kv_schema()).unwrap()],
            2,
            KeyGroups::default(),
        );
        let mut split = plan.create().unwrap();
        let mut out = Collector::default();
        let keys = ["a", "b", "c", "d", "a"];
        split
            .on_batch(0, keyed(&keys, &[1, 2, 3, 4, 5], None), &mut out)
            .unwrap();
        let on_time = keys_by_port(&mut out);
        let late = LateBatch::new(
            keyed(&keys, &[1, 2, 3, 4, 5], None),
            datafusion::arrow::array::Int64Array::from(vec![10, 20, 30, 40, 50]),
        )
        .unwrap();
        split.on_late_batch(0, late, &mut out).unwrap();
        let mut late_keys: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (port, emitted) in out.drain_emitted() {
            let crate::operator::Emitted::Late(late) = emitted else {
                panic!("late rows went on without their marks");
            };
            let k = late
                .rows()
                .column(0)
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone();
            for row in 0..late.num_rows() {
                // Each row kept its own mark (10 per value).
                let v = late
                    .rows()
                    .column(1)
                    .as_any()
                    .downcast_ref::<datafusion::arrow::array::Int64Array>()
                    .unwrap()
                    .value(row);
                assert_eq!(late.watermark(row), v * 10);
                late_keys
                    .entry(port)
                    .or_default()
                    .push(k.value(row).to_string());
            }
        }
        assert_eq!(
            late_keys, on_time,
            "the same instance as on-time rows of the key"
        );
    }

    #[test]
    fn each_key_goes_to_one_port_every_time() {
        let schema = kv_schema();
        let plan = KeySplitPlan::new(
            schema.clone(),
            vec![col("k", &schema).unwrap()],
            3,
            KeyGroups::default(),
        );
        assert_eq!(plan.distribution(), Distribution::Any);
        assert_eq!(plan.output_ports(), 3);
        let mut op = plan.create().unwrap();
        let mut out = Collector::default();
        let keys = ["a", "b", "c", "d", "e", "f", "g", "h", "a", "b", "c", "d"];
        let values: Vec<i64> = (0..keys.len() as i64).collect();
        op.on_batch(0, keyed(&keys, &values, None), &mut out)
            .unwrap();
        let first = keys_by_port(&mut out);
        assert_eq!(first.values().map(Vec::len).sum::<usize>(), keys.len());
        assert!(first.len() > 1, "spread over more than one port: {first:?}");
        for (port, got) in &first {
            assert!(*port < 3);
            for key in got {
                assert!(
                    first.iter().all(|(p, ks)| p == port || !ks.contains(key)),
                    "{key} on two ports: {first:?}"
                );
            }
        }
        // The same keys in another batch go where they went before.
        op.on_batch(0, keyed(&["h", "a"], &[0, 0], None), &mut out)
            .unwrap();
        for (port, got) in keys_by_port(&mut out) {
            for key in got {
                assert!(first[&port].contains(&key), "{key} moved to port {port}");
            }
        }
    }
}
