//! Functions PostgreSQL has that drivers and BI tools call at connect:
//! `version()`, `current_setting(name [, missing_ok])` and
//! `to_regtype(name)`.
//!
//! In: their arguments. Out: text (`version()`, `current_setting`) or a
//! type's oid. SQLAlchemy parses the major version out of `version()`
//! and refuses a server it cannot read; psycopg looks types up with
//! `to_regtype`; Grafana reads `current_setting('search_path')`.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, Int32Array, StringArray};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{exec_err, ScalarValue};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDF, ScalarUDFImpl, Signature, TypeSignature,
    Volatility,
};
use datafusion::prelude::SessionContext;
use datafusion_postgres::pgwire::api::Type;

use super::settings::{setting, SERVER_VERSION};

/// What `version()` says: a PostgreSQL version first, as drivers parse it.
pub fn version_text() -> String {
    format!(
        "PostgreSQL {SERVER_VERSION} on x86_64-pc-linux-gnu, eddy {} (Apache DataFusion {})",
        env!("CARGO_PKG_VERSION"),
        datafusion::DATAFUSION_VERSION
    )
}

/// Registers `version()`, `current_setting()` and `to_regtype()` on
/// `context`.
pub fn register(context: &SessionContext) {
    context.register_udf(ScalarUDF::new_from_impl(Version::new()));
    context.register_udf(ScalarUDF::new_from_impl(CurrentSetting::new()));
    context.register_udf(ScalarUDF::new_from_impl(ToRegtype::new()));
}

/// `version()`.
#[derive(Debug, PartialEq, Eq, Hash)]
struct Version {
    signature: Signature,
}

impl Version {
    fn new() -> Self {
        Self {
            signature: Signature::nullary(Volatility::Stable),
        }
    }
}

impl ScalarUDFImpl for Version {
    fn name(&self) -> &str {
        "version"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, _args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(
            version_text(),
        ))))
    }
}

/// `current_setting(name [, missing_ok])`: a setting eddy has not is an
/// error, or NULL when `missing_ok` is true.
#[derive(Debug, PartialEq, Eq, Hash)]
struct CurrentSetting {
    signature: Signature,
}

impl CurrentSetting {
    fn new() -> Self {
        Self {
            signature: Signature::one_of(
                vec![
                    TypeSignature::Exact(vec![DataType::Utf8]),
                    TypeSignature::Exact(vec![DataType::Utf8, DataType::Boolean]),
                ],
                Volatility::Stable,
            ),
        }
    }
}

impl ScalarUDFImpl for CurrentSetting {
    fn name(&self) -> &str {
        "current_setting"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        let missing_ok = match args.args.get(1) {
            Some(ColumnarValue::Scalar(ScalarValue::Boolean(flag))) => flag.unwrap_or(false),
            Some(_) => return exec_err!("current_setting: missing_ok must be a constant"),
            None => false,
        };
        let lookup = |name: Option<&str>| -> DfResult<Option<&'static str>> {
            let Some(name) = name else { return Ok(None) };
            match setting(name) {
                Some(value) => Ok(Some(value)),
                None if missing_ok => Ok(None),
                None => exec_err!("unrecognized configuration parameter \"{name}\""),
            }
        };
        match &args.args[0] {
            ColumnarValue::Scalar(ScalarValue::Utf8(name)) => Ok(ColumnarValue::Scalar(
                ScalarValue::Utf8(lookup(name.as_deref())?.map(str::to_string)),
            )),
            ColumnarValue::Array(names) => {
                let names = names
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .ok_or_else(|| {
                        DataFusionError::Execution("current_setting: the name must be text".into())
                    })?;
                let values = (0..names.len())
                    .map(|i| lookup((!names.is_null(i)).then(|| names.value(i))))
                    .collect::<DfResult<StringArray>>()?;
                Ok(ColumnarValue::Array(Arc::new(values) as ArrayRef))
            }
            other => exec_err!("current_setting: the name must be text, not {other:?}"),
        }
    }
}

/// `to_regtype(name)`: the oid of a built-in type by its name (`int8`)
/// or SQL name (`bigint`), NULL for a type eddy does not have.
#[derive(Debug, PartialEq, Eq, Hash)]
struct ToRegtype {
    signature: Signature,
}

impl ToRegtype {
    fn new() -> Self {
        Self {
            signature: Signature::exact(vec![DataType::Utf8], Volatility::Stable),
        }
    }
}

/// The types `to_regtype` knows, with their SQL names.
const TYPES: &[(Type, &str)] = &[
    (Type::BOOL, "boolean"),
    (Type::INT2, "smallint"),
    (Type::INT4, "integer"),
    (Type::INT8, "bigint"),
    (Type::FLOAT4, "real"),
    (Type::FLOAT8, "double precision"),
    (Type::NUMERIC, "numeric"),
    (Type::TEXT, "text"),
    (Type::VARCHAR, "character varying"),
    (Type::BPCHAR, "character"),
    (Type::BYTEA, "bytea"),
    (Type::DATE, "date"),
    (Type::TIME, "time without time zone"),
    (Type::TIMESTAMP, "timestamp without time zone"),
    (Type::TIMESTAMPTZ, "timestamp with time zone"),
    (Type::INTERVAL, "interval"),
    (Type::JSON, "json"),
    (Type::JSONB, "jsonb"),
    (Type::UUID, "uuid"),
    (Type::OID, "oid"),
];

fn type_oid(name: &str) -> Option<i32> {
    let name = name
        .trim()
        .trim_start_matches("pg_catalog.")
        .to_ascii_lowercase();
    TYPES
        .iter()
        .find(|(pg, sql)| pg.name() == name || *sql == name)
        .map(|(pg, _)| pg.oid() as i32)
}

impl ScalarUDFImpl for ToRegtype {
    fn name(&self) -> &str {
        "to_regtype"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> DfResult<DataType> {
        Ok(DataType::Int32)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> DfResult<ColumnarValue> {
        match &args.args[0] {
            ColumnarValue::Scalar(ScalarValue::Utf8(name)) => Ok(ColumnarValue::Scalar(
                ScalarValue::Int32(name.as_deref().and_then(type_oid)),
            )),
            ColumnarValue::Array(names) => {
                let names = names
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .ok_or_else(|| {
                        DataFusionError::Execution("to_regtype: the name must be text".into())
                    })?;
                let oids: Int32Array = names.iter().map(|name| name.and_then(type_oid)).collect();
                Ok(ColumnarValue::Array(Arc::new(oids) as ArrayRef))
            }
            other => exec_err!("to_regtype: the name must be text, not {other:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn one(context: &SessionContext, sql: &str) -> DfResult<String> {
        let batches = context.sql(sql).await?.collect().await?;
        let column = batches[0].column(0);
        Ok(datafusion::arrow::util::display::array_value_to_string(
            column, 0,
        )?)
    }

    #[tokio::test]
    async fn version_leads_with_a_postgresql_version_drivers_parse() {
        let context = SessionContext::new();
        register(&context);
        let version = one(&context, "SELECT version()").await.unwrap();
        assert!(version.starts_with("PostgreSQL 16.6 "), "{version}");
        assert!(version.contains("eddy"), "{version}");
    }

    #[tokio::test]
    async fn current_setting_answers_known_names_and_refuses_others() {
        let context = SessionContext::new();
        register(&context);
        let search_path = one(&context, "SELECT current_setting('search_path')")
            .await
            .unwrap();
        assert_eq!(search_path, "\"$user\", public");
        let conforming = one(
            &context,
            "SELECT current_setting('Standard_Conforming_Strings')",
        )
        .await
        .unwrap();
        assert_eq!(conforming, "on");
        let error = one(&context, "SELECT current_setting('no_such')")
            .await
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("unrecognized configuration parameter \"no_such\""),
            "{error}"
        );
        let missing = context
            .sql("SELECT current_setting('no_such', true) IS NULL")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let flag = datafusion::arrow::util::display::array_value_to_string(missing[0].column(0), 0)
            .unwrap();
        assert_eq!(flag, "true");
    }

    #[tokio::test]
    async fn to_regtype_finds_built_in_types_by_either_name() {
        let context = SessionContext::new();
        register(&context);
        let oid = |sql: &'static str| {
            let context = context.clone();
            async move { one(&context, sql).await.unwrap() }
        };
        assert_eq!(oid("SELECT to_regtype('int8')").await, "20");
        assert_eq!(oid("SELECT to_regtype('bigint')").await, "20");
        assert_eq!(oid("SELECT to_regtype('pg_catalog.text')").await, "25");
        assert_eq!(oid("SELECT to_regtype('hstore') IS NULL").await, "true");
    }
}
