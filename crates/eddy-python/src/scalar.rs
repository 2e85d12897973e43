//! A scalar Python function as a DataFusion UDF.
//!
//! In: a batch's argument columns (cast to the declared types). Out: one
//! value per row, from one request to a worker per batch: the worker calls
//! the function per row (default) or once with pyarrow arrays
//! (`vectorized`). Rows that raised are NULL and counted (or the job
//! fails, `on_error = 'fail'`).
//!
//! The function is `Volatile`: DataFusion never evaluates it while
//! planning, so no Python runs before the job does.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::definition::FunctionDefinition;
use crate::error::PythonError;
use crate::runtime::PythonRuntime;
use crate::wire::{self, Frame, FrameError, Reply, CALL, RESULT};

/// A scalar Python function.
#[derive(Debug)]
pub struct PythonScalarFunction {
    definition: Arc<FunctionDefinition>,
    index: usize,
    runtime: Arc<PythonRuntime>,
    signature: Signature,
}

impl PythonScalarFunction {
    /// Declares `definition` in `runtime`.
    pub fn new(definition: FunctionDefinition, runtime: &Arc<PythonRuntime>) -> Self {
        let definition = Arc::new(definition);
        let index = runtime.define(Arc::clone(&definition));
        let signature = Signature::exact(definition.args.clone(), Volatility::Volatile);
        Self {
            definition,
            index,
            runtime: Arc::clone(runtime),
            signature,
        }
    }
}

impl PartialEq for PythonScalarFunction {
    fn eq(&self, other: &Self) -> bool {
        self.definition == other.definition
            && self.index == other.index
            && Arc::ptr_eq(&self.runtime, &other.runtime)
    }
}

impl Eq for PythonScalarFunction {}

impl Hash for PythonScalarFunction {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.definition.hash(state);
        self.index.hash(state);
    }
}

impl ScalarUDFImpl for PythonScalarFunction {
    fn name(&self) -> &str {
        &self.definition.name
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(self.definition.returns.clone())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows;
        if rows == 0 {
            return Ok(ColumnarValue::Array(wire::empty(&self.definition.returns)));
        }
        let name = &self.definition.name;
        let mut frame = Frame::new(CALL);
        frame.u32(self.index as u32);
        frame.u32(args.args.len() as u32);
        frame.u64(rows as u64);
        for (value, declared) in args.args.into_iter().zip(&self.definition.args) {
            let array = wire::as_type(value.into_array(rows)?, declared)?;
            frame
                .column(array.as_ref())
                .map_err(|problem| PythonError::Protocol {
                    function: name.clone(),
                    problem,
                })?;
        }
        let mut reply = self.runtime.request(self.index, rows, frame.finish())?;
        let protocol = |problem: FrameError| PythonError::Protocol {
            function: name.clone(),
            problem,
        };
        if reply.op() != RESULT {
            return Err(protocol(FrameError::UnexpectedReply(reply.op())).into());
        }
        let column = reply.column(&self.definition.returns).map_err(protocol)?;
        if column.len() != rows {
            return Err(protocol(FrameError::Count {
                found: column.len(),
                what: "values",
                expected: rows,
                of: "rows",
            })
            .into());
        }
        let errors = read_errors(&mut reply).map_err(protocol)?;
        self.runtime.raised(self.index, &errors);
        Ok(ColumnarValue::Array(column))
    }
}

/// The rows that raised, after a reply's column.
pub(crate) fn read_errors(
    reply: &mut Reply,
) -> std::result::Result<Vec<(u64, String)>, FrameError> {
    reply.align();
    let n = reply.u32()?;
    let mut errors = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let row = reply.u64()?;
        let len = reply.u32()? as usize;
        errors.push((row, reply.text(len)?));
    }
    Ok(errors)
}
