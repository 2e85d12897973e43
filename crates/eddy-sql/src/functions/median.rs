//! `median` as Arroyo (and DataFusion before 52) computes it: the median of
//! integers is an integer of the same type (the two middle values averaged
//! in integer arithmetic, truncated), of floats and decimals their type.
//! DataFusion 55 turns integers into DOUBLE first; queries written for
//! Arroyo then print `1001.0` where Arroyo prints `1001`, and a sink column
//! declared BIGINT refuses the result.
//!
//! In: a column of numbers. Out: their median, in the column's type. The
//! accumulators are DataFusion's own (they take integers natively); only
//! the signature differs.

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::functions_aggregate::median::Median as DataFusionMedian;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Coercion, GroupsAccumulator, Signature, TypeSignature,
    TypeSignatureClass, Volatility,
};

/// `median(x)`, keeping the type of `x`.
///
/// ```
/// use datafusion::logical_expr::{AggregateUDF, AggregateUDFImpl};
/// use datafusion::arrow::datatypes::DataType;
/// use eddy_sql::functions::median::Median;
///
/// let median = Median::new();
/// assert_eq!(median.return_type(&[DataType::Int64]).unwrap(), DataType::Int64);
/// assert_eq!(median.return_type(&[DataType::Float64]).unwrap(), DataType::Float64);
/// let _udaf = AggregateUDF::from(median);
/// ```
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct Median {
    inner: DataFusionMedian,
    signature: Signature,
}

impl Default for Median {
    fn default() -> Self {
        Self::new()
    }
}

impl Median {
    /// The function.
    pub fn new() -> Self {
        let exact = |class| TypeSignature::Coercible(vec![Coercion::new_exact(class)]);
        Self {
            inner: DataFusionMedian::new(),
            signature: Signature::one_of(
                vec![
                    exact(TypeSignatureClass::Integer),
                    exact(TypeSignatureClass::Decimal),
                    exact(TypeSignatureClass::Float),
                ],
                Volatility::Immutable,
            ),
        }
    }
}

impl AggregateUDFImpl for Median {
    fn name(&self) -> &str {
        "median"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.return_type(arg_types)
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        self.inner.state_fields(args)
    }

    fn accumulator(&self, args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        self.inner.accumulator(args)
    }

    fn groups_accumulator_supported(&self, args: AccumulatorArgs) -> bool {
        self.inner.groups_accumulator_supported(args)
    }

    fn create_groups_accumulator(
        &self,
        args: AccumulatorArgs,
    ) -> Result<Box<dyn GroupsAccumulator>> {
        self.inner.create_groups_accumulator(args)
    }
}
