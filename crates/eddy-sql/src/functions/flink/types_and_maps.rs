//! `TYPEOF(x)`: the SQL name of `x`'s type (`BIGINT NOT NULL`,
//! `VARCHAR`, `TIMESTAMP(3)`, `DECIMAL(10, 2)`, `ARRAY<INT>`, ...), as
//! Flink writes types; and `STR_TO_MAP(s[, pair_delimiter[,
//! key_value_delimiter]])`: the text split into pairs at `pair_delimiter`
//! (`,` by default) and each pair into key and value at the first
//! `key_value_delimiter` (`=`), both regular expressions as in Flink; a
//! pair without one maps its key to NULL, and a later equal key wins.
//!
//! In: any column (TYPEOF); string columns (STR_TO_MAP). Out: a string
//! column; a `MAP<VARCHAR, VARCHAR>` column, NULL where `s` is NULL.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, MapBuilder, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, Fields, TimeUnit};
use datafusion::common::{exec_err, plan_err, Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::{arrays, constant_text};

/// Flink's name of an Arrow type.
pub(super) fn sql_type_name(data_type: &DataType) -> String {
    match data_type {
        DataType::Null => "NULL".into(),
        DataType::Boolean => "BOOLEAN".into(),
        DataType::Int8 => "TINYINT".into(),
        DataType::Int16 => "SMALLINT".into(),
        DataType::Int32 => "INT".into(),
        DataType::Int64 => "BIGINT".into(),
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => "BIGINT".into(),
        DataType::Float16 | DataType::Float32 => "FLOAT".into(),
        DataType::Float64 => "DOUBLE".into(),
        DataType::Decimal128(p, s) | DataType::Decimal256(p, s) => format!("DECIMAL({p}, {s})"),
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "VARCHAR".into(),
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView => "VARBINARY".into(),
        DataType::FixedSizeBinary(n) => format!("BINARY({n})"),
        DataType::Date32 | DataType::Date64 => "DATE".into(),
        DataType::Time32(_) | DataType::Time64(_) => "TIME".into(),
        DataType::Timestamp(unit, zone) => {
            let precision = match unit {
                TimeUnit::Second => 0,
                TimeUnit::Millisecond => 3,
                TimeUnit::Microsecond => 6,
                TimeUnit::Nanosecond => 9,
            };
            match zone {
                Some(_) => format!("TIMESTAMP_LTZ({precision})"),
                None => format!("TIMESTAMP({precision})"),
            }
        }
        DataType::Interval(_) | DataType::Duration(_) => "INTERVAL".into(),
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            format!("ARRAY<{}>", field_type(f))
        }
        DataType::Map(entries, _) => match entries.data_type() {
            DataType::Struct(kv) if kv.len() == 2 => {
                format!("MAP<{}, {}>", field_type(&kv[0]), field_type(&kv[1]))
            }
            other => sql_type_name(other),
        },
        DataType::Struct(fields) => format!(
            "ROW<{}>",
            fields
                .iter()
                .map(|f| format!("`{}` {}", f.name(), field_type(f)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        DataType::Dictionary(_, value) => sql_type_name(value),
        other => other.to_string().to_uppercase(),
    }
}

fn field_type(field: &Field) -> String {
    let name = sql_type_name(field.data_type());
    if field.is_nullable() {
        name
    } else {
        format!("{name} NOT NULL")
    }
}

/// `TYPEOF(x)`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct TypeOf {
    signature: Signature,
}

impl TypeOf {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::any(1, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for TypeOf {
    fn name(&self) -> &str {
        "typeof"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let Some(field) = args.arg_fields.first() else {
            return exec_err!("TYPEOF takes one argument");
        };
        Ok(ColumnarValue::Scalar(ScalarValue::Utf8(Some(field_type(
            field,
        )))))
    }
}

/// `STR_TO_MAP(s[, pair_delimiter[, key_value_delimiter]])`.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(super) struct StrToMap {
    signature: Signature,
}

impl StrToMap {
    pub(super) fn new() -> Self {
        Self {
            signature: Signature::variadic_any(Volatility::Immutable),
        }
    }
}

fn map_type() -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "entries",
            DataType::Struct(Fields::from(vec![
                Field::new("keys", DataType::Utf8, false),
                Field::new("values", DataType::Utf8, true),
            ])),
            false,
        )),
        false,
    )
}

impl ScalarUDFImpl for StrToMap {
    fn name(&self) -> &str {
        "str_to_map"
    }
    fn signature(&self) -> &Signature {
        &self.signature
    }
    fn return_type(&self, args: &[DataType]) -> Result<DataType> {
        if !(1..=3).contains(&args.len()) {
            return plan_err!("STR_TO_MAP takes 1 to 3 arguments, not {}", args.len());
        }
        Ok(map_type())
    }
    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<Arc<Field>> {
        let types: Vec<DataType> = args
            .arg_fields
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        Ok(Arc::new(Field::new(
            self.name(),
            self.return_type(&types)?,
            true,
        )))
    }
    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let delimiter = |i: usize, default: &str| -> Result<regex::Regex> {
            let text = match args.args.get(i) {
                Some(value) => constant_text(value, "STR_TO_MAP", "delimiter")?,
                None => default.to_string(),
            };
            regex::Regex::new(&text).or_else(|e| exec_err!("STR_TO_MAP: delimiter '{text}': {e}"))
        };
        let (pairs, key_value) = (delimiter(1, ",")?, delimiter(2, "=")?);
        let columns = arrays(&args)?;
        let text = cast(&columns[0], &DataType::Utf8)?;
        let Some(text) = text.as_any().downcast_ref::<StringArray>() else {
            return exec_err!("STR_TO_MAP: text expected");
        };
        let mut builder = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        let mut entries: Vec<(&str, Option<&str>)> = Vec::new();
        for r in 0..text.len() {
            if text.is_null(r) {
                builder.append(false)?;
                continue;
            }
            entries.clear();
            for pair in pairs.split(text.value(r)) {
                let (key, value) = match key_value.find(pair) {
                    Some(m) => (&pair[..m.start()], Some(&pair[m.end()..])),
                    None => (pair, None),
                };
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some(entry) => entry.1 = value,
                    None => entries.push((key, value)),
                }
            }
            for (key, value) in &entries {
                builder.keys().append_value(key);
                builder.values().append_option(*value);
            }
            builder.append(true)?;
        }
        let map: ArrayRef = Arc::new(builder.finish());
        // The builder names its fields its own way; the declared type is used.
        Ok(ColumnarValue::Array(cast(&map, &map_type()).unwrap_or(map)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_are_named_as_flink_names_them() {
        assert_eq!(sql_type_name(&DataType::Int64), "BIGINT");
        assert_eq!(
            sql_type_name(&DataType::Timestamp(TimeUnit::Millisecond, None)),
            "TIMESTAMP(3)"
        );
        assert_eq!(
            sql_type_name(&DataType::Decimal128(10, 2)),
            "DECIMAL(10, 2)"
        );
        assert_eq!(
            field_type(&Field::new(
                "x",
                DataType::new_list(DataType::Utf8, true),
                false
            )),
            "ARRAY<VARCHAR> NOT NULL"
        );
    }
}
