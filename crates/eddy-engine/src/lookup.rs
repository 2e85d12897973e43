//! Tables read by key as rows come: a database table a lookup join asks
//! for the keys of each probe batch (`JOIN dim FOR SYSTEM_TIME AS OF
//! s.proc_time ON s.k = dim.k` where `dim` is a `jdbc` table), instead of a
//! table streamed into the job and held whole.
//!
//! In: the keys one probe batch needs, as columns (one row per distinct
//! key, no NULLs). Out: the table's rows with those keys, in the table's
//! columns ([`LookupTable::spec`]'s schema). A connector opens a
//! [`LookupSource`] through [`crate::graph::ConnectorFactory::open_lookup`];
//! the join ([`crate::operators::key_lookup_join`]) keeps the answers in
//! its cache as the source's [`CachePolicy`] says.
//!
//! ```
//! use std::sync::Arc;
//! use datafusion::arrow::array::{ArrayRef, Int64Array};
//! use datafusion::arrow::datatypes::{DataType, Field, Schema};
//! use datafusion::arrow::record_batch::RecordBatch;
//! use eddy_engine::lookup::{CachePolicy, LookupSource};
//!
//! /// Squares: the row of key k is (k, k*k).
//! struct Squares;
//! impl LookupSource for Squares {
//!     fn lookup(&mut self, keys: &[ArrayRef]) -> eddy_engine::Result<RecordBatch> {
//!         let k = keys[0].as_any().downcast_ref::<Int64Array>().unwrap();
//!         let schema = Arc::new(Schema::new(vec![
//!             Field::new("k", DataType::Int64, false),
//!             Field::new("square", DataType::Int64, false),
//!         ]));
//!         let squares: Int64Array = k.iter().map(|v| v.map(|v| v * v)).collect();
//!         Ok(RecordBatch::try_new(schema, vec![Arc::new(k.clone()), Arc::new(squares)])?)
//!     }
//!     fn cache(&self) -> CachePolicy {
//!         CachePolicy { max_rows: Some(1000), ..CachePolicy::default() }
//!     }
//! }
//! let rows = Squares.lookup(&[Arc::new(Int64Array::from(vec![3])) as ArrayRef]).unwrap();
//! assert_eq!(rows.num_rows(), 1);
//! ```

use std::time::Duration;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::record_batch::RecordBatch;

use crate::graph::ConnectorSpec;
use crate::Result;

/// A table a lookup join reads by key: the table as declared, and the
/// columns the join's keys equal (in the order of the join's keys).
#[derive(Debug, Clone)]
pub struct LookupTable {
    /// The declared table (connector, options, columns).
    pub spec: ConnectorSpec,
    /// The table's columns the probe's keys are compared with.
    pub key_columns: Vec<String>,
}

/// How a lookup join keeps what it was told (Flink's `lookup.cache.*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CachePolicy {
    /// Keys kept at most; `None`: nothing is kept, every probe batch asks.
    pub max_rows: Option<usize>,
    /// How long an answer is kept after it came; `None`: until evicted.
    pub ttl: Option<Duration>,
    /// Whether a key without rows is kept too (asked again only after it
    /// is evicted or expires).
    pub cache_missing: bool,
}

/// One open connection to a table read by key. See the module docs.
pub trait LookupSource: Send {
    /// The table's rows whose key columns equal one of the rows of `keys`
    /// (one array per key column, in [`LookupTable::key_columns`]' order,
    /// no NULLs), in the table's columns. Retries and reconnects are the
    /// source's own; an error here fails the job.
    fn lookup(&mut self, keys: &[ArrayRef]) -> Result<RecordBatch>;

    /// How answers are cached; none by default.
    fn cache(&self) -> CachePolicy {
        CachePolicy::default()
    }
}
