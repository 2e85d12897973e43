//! A `CREATE TABLE`'s columns: the physical ones a connector reads, the
//! computed ones (`GENERATED ALWAYS AS`, Flink's `col AS expr`) planned
//! over them, JSON columns, metadata columns of a change feed.
//!
//! In: the statement's column definitions and options. Out: the physical
//! schema and each output column as read or computed
//! ([`SourceColumn`]), with the output schema.

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::execution::context::SessionState;
use datafusion::sql::planner::{ContextProvider, PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{ColumnDef, ColumnOption, CreateTable, Expr as SqlExpr};
use eddy_engine::source::{ComputedColumn, SourceColumn};

use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::MetadataColumn;
use crate::error::{Position, Result, SqlError};
use eddy_engine::graph::ConnectorFacts;
use eddy_engine::source::ChangeMetadata;

/// The type the statement reader gives Flink's `col AS expr` columns: the
/// column takes its expression's type.
pub const INFERRED_TYPE: &str = "__eddy_inferred";

fn is_inferred(data_type: &datafusion::sql::sqlparser::ast::DataType) -> bool {
    matches!(data_type, datafusion::sql::sqlparser::ast::DataType::Custom(name, _)
        if name.to_string().eq_ignore_ascii_case(INFERRED_TYPE))
}

/// The statement's columns, sorted out for planning.
pub(super) struct ColumnDefs {
    /// The columns a connector reads (not computed).
    physical: Vec<ColumnDef>,
    /// Every column, computed ones typed for planning.
    all: Vec<ColumnDef>,
    /// Per column: its generation expression, and whether it takes the
    /// expression's type (Flink's `col AS expr`).
    generated: Vec<Option<(SqlExpr, bool)>>,
    /// Columns declared JSON (text holding each value's JSON).
    json: Vec<String>,
}

/// The table's columns as a connector reads them and as queries see them.
pub(super) struct TableColumns {
    /// What the connector reads.
    pub physical: SchemaRef,
    /// Each output column, read or computed.
    pub columns: Vec<SourceColumn>,
    /// What queries see.
    pub output: SchemaRef,
}

impl ColumnDefs {
    /// Sorts `create`'s columns out.
    pub(super) fn of(create: &CreateTable, case: IdentifierCase) -> Self {
        let mut physical_defs = Vec::new();
        let mut all_defs = Vec::new();
        // Per column: its generation expression, and whether it takes the
        // expression's type (Flink's `col AS expr`).
        let mut generated: Vec<Option<(SqlExpr, bool)>> = Vec::new();
        let mut json_columns: Vec<String> = Vec::new();
        for column in &create.columns {
            let mut plain = column.clone();
            let mut generation = None;
            plain.options.retain(|o| match &o.option {
                ColumnOption::Generated {
                    generation_expr: Some(expr),
                    ..
                } => {
                    generation = Some(expr.clone());
                    false
                }
                _ => true,
            });
            if generation.is_none() {
                physical_defs.push(plain.clone());
            }
            if matches!(
                plain.data_type,
                datafusion::sql::sqlparser::ast::DataType::JSON
                    | datafusion::sql::sqlparser::ast::DataType::JSONB
            ) {
                // A JSON column: text holding each value's JSON (see
                // `eddy_engine::source::JSON_COLUMN_KEY`).
                plain.data_type = datafusion::sql::sqlparser::ast::DataType::Text;
                json_columns.push(case.name(&plain.name));
                if generation.is_none() {
                    if let Some(last) = physical_defs.last_mut() {
                        last.data_type = datafusion::sql::sqlparser::ast::DataType::Text;
                    }
                }
            }
            let inferred = is_inferred(&plain.data_type);
            if inferred {
                // Flink's `col AS expr`: planned as a BIGINT here, given the
                // expression's own type below.
                plain.data_type = datafusion::sql::sqlparser::ast::DataType::BigInt(None);
            }
            all_defs.push(plain);
            generated.push(generation.map(|expr| (expr, inferred)));
        }
        Self {
            physical: physical_defs,
            all: all_defs,
            generated,
            json: json_columns,
        }
    }

    /// Plans the columns: their schemas (JSON, metadata and MAP columns
    /// marked, a change feed's timestamps in microseconds, an unstructured
    /// table's one column), then each computed column over the physical
    /// ones.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan<S: ContextProvider>(
        self,
        planner: &SqlToRel<'_, S>,
        state: &SessionState,
        metadata_columns: &[MetadataColumn],
        metadata_keys: Option<&[(&'static str, ChangeMetadata)]>,
        debezium: bool,
        unstructured_json: bool,
        table: &str,
        position: &Position,
    ) -> Result<TableColumns> {
        let json_columns = self.json;
        let plan_error =
            |e: datafusion::error::DataFusionError| SqlError::at(position, e.strip_backtrace());
        let mark_json = |schema: datafusion::arrow::datatypes::Schema| {
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .map(|f| {
                    let mut f = f.as_ref().clone();
                    if let Some(MetadataColumn { key, .. }) = metadata_columns
                        .iter()
                        .find(|m| m.column.eq_ignore_ascii_case(f.name()))
                    {
                        let mut metadata = f.metadata().clone();
                        metadata.insert(
                            eddy_engine::source::METADATA_COLUMN_KEY.to_string(),
                            key.to_ascii_lowercase(),
                        );
                        f = f.with_metadata(metadata);
                    }
                    if json_columns
                        .iter()
                        .any(|c| c.eq_ignore_ascii_case(f.name()))
                    {
                        let mut metadata = f.metadata().clone();
                        metadata.insert(
                            eddy_engine::source::JSON_COLUMN_KEY.to_string(),
                            "true".to_string(),
                        );
                        f.with_metadata(metadata)
                    } else {
                        f
                    }
                })
                .collect();
            datafusion::arrow::datatypes::Schema::new_with_metadata(
                fields,
                schema.metadata().clone(),
            )
        };
        // Flink's MAP types reach the planner as marked structs (see
        // `dialect::flink_types`).
        let maps = crate::dialect::flink_types::maps_from_structs;
        // A Debezium change feed's TIMESTAMPs are microseconds (PostgreSQL's
        // precision, Debezium's MicroTimestamp numbers).
        let feed_times = |schema: Schema| {
            if debezium {
                microsecond_timestamps(schema)
            } else {
                schema
            }
        };
        let declared = feed_times(mark_json(maps(
            planner.build_schema(self.all).map_err(plan_error)?,
        )));
        let physical = feed_times(mark_json(maps(
            planner.build_schema(self.physical).map_err(plan_error)?,
        )));
        let physical = Arc::new(if unstructured_json {
            unstructured(physical, table, position)?
        } else {
            physical
        });
        // A change's time is a TIMESTAMP or epoch milliseconds; a name a
        // STRING.
        for metadata in metadata_columns {
            let typed = physical
                .field_with_name(&metadata.column)
                .ok()
                .map(|f| f.data_type().clone());
            let time = metadata_keys
                .and_then(|keys| ChangeMetadata::in_keys(keys, &metadata.key))
                .is_none_or(ChangeMetadata::is_time);
            let fits = |t: &DataType| {
                if time {
                    matches!(t, DataType::Int64 | DataType::Timestamp(_, _))
                } else {
                    matches!(t, DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8)
                }
            };
            if let Some(other) = typed.filter(|t| !fits(t)) {
                let want = if time {
                    "a time: declare it TIMESTAMP(3) (or BIGINT for epoch milliseconds)"
                } else {
                    "a name: declare it STRING"
                };
                return Err(SqlError::at(
                    &metadata.position,
                    format!(
                        "column '{}' reads '{}', {want}, not {other}",
                        metadata.column, metadata.key
                    ),
                ));
            }
        }
        let physical_df = DFSchema::try_from(physical.as_ref().clone()).map_err(plan_error)?;

        let mut columns = Vec::with_capacity(declared.fields().len());
        let mut physical_index = 0;
        let mut output_fields: Vec<Field> = Vec::new();
        for (field, generation) in declared.fields().iter().zip(self.generated) {
            match generation {
                None => {
                    columns.push(SourceColumn::Physical(physical_index));
                    physical_index += 1;
                    output_fields.push(field.as_ref().clone());
                }
                Some((expr, inferred)) => {
                    let column_error = |e: datafusion::error::DataFusionError| {
                        SqlError::at(
                            position,
                            format!(
                                "computed column '{}': {}",
                                field.name(),
                                e.strip_backtrace()
                            ),
                        )
                    };
                    let logical = planner
                        .sql_to_expr(expr, &physical_df, &mut PlannerContext::new())
                        .map_err(column_error)?;
                    let physical_expr =
                        crate::context::physical_expr(state, logical.clone(), &physical_df)
                            .map_err(column_error)?;
                    let data_type = if inferred {
                        datafusion::logical_expr::ExprSchemable::get_type(&logical, &physical_df)
                            .map_err(column_error)?
                    } else {
                        field.data_type().clone()
                    };
                    let mut out = field
                        .as_ref()
                        .clone()
                        .with_data_type(data_type)
                        .with_nullable(true);
                    if crate::functions::flink::is_proctime_call(&logical) {
                        out = crate::functions::flink::mark_proctime(out);
                    }
                    output_fields.push(out.clone());
                    columns.push(SourceColumn::Computed(ComputedColumn {
                        field: out,
                        expr: physical_expr,
                    }));
                }
            }
        }
        Ok(TableColumns {
            physical,
            columns,
            output: Arc::new(Schema::new(output_fields)),
        })
    }
}

/// The metadata keys a table's records carry, and whose they are: a
/// Debezium envelope's, or those its connector knows (`facts`: a
/// PostgreSQL change's for `postgres-cdc`); none for other tables.
pub(super) fn metadata_keys(
    debezium: bool,
    connector: &str,
    facts: Option<&dyn ConnectorFacts>,
) -> Option<(&'static [(&'static str, ChangeMetadata)], String)> {
    if debezium {
        return Some((&ChangeMetadata::KEYS, "a Debezium".to_string()));
    }
    let keys = facts.map_or(&[][..], |f| f.metadata_keys(connector));
    (!keys.is_empty()).then(|| (keys, format!("a {connector}")))
}

/// Metadata columns are read from a Debezium envelope or a PostgreSQL
/// change ([`metadata_keys`]), each from a key it knows.
pub(super) fn check_metadata_columns(
    metadata_columns: &[MetadataColumn],
    keys: Option<(&[(&'static str, ChangeMetadata)], &str)>,
) -> Result<()> {
    for MetadataColumn {
        column,
        key,
        position,
    } in metadata_columns
    {
        let Some((keys, whose)) = keys else {
            return Err(SqlError::at(
                position,
                format!("column '{column}' is read from the record's metadata ('{key}'), which only a Debezium change feed (format = 'debezium-json') and a postgres-cdc table have"),
            ));
        };
        if ChangeMetadata::in_keys(keys, key).is_none() {
            return Err(SqlError::at(
                position,
                format!(
                    "column '{column}': '{key}' is not {whose} metadata key; known: {}",
                    keys.iter()
                        .map(|(k, what)| format!("'{k}' ({})", what.describe()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `schema` with its nanosecond timestamps in microseconds.
fn microsecond_timestamps(schema: Schema) -> Schema {
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Nanosecond, zone) => {
                f.as_ref().clone().with_data_type(DataType::Timestamp(
                    datafusion::arrow::datatypes::TimeUnit::Microsecond,
                    zone.clone(),
                ))
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    Schema::new_with_metadata(fields, schema.metadata().clone())
}

/// The schema of a table read as unstructured JSON: its one column marked
/// so that the decoder hands each line, whole, to it.
fn unstructured(schema: Schema, name: &str, position: &Position) -> Result<Schema> {
    let [field] = schema.fields().iter().collect::<Vec<_>>()[..] else {
        return Err(SqlError::at(
            position,
            format!("'{name}' is read as unstructured JSON ('json.unstructured' = 'true'): it has one column, the line as JSON (value JSON), not {}", schema.fields().len()),
        ));
    };
    if !matches!(
        field.data_type(),
        DataType::Utf8 | DataType::Utf8View | DataType::LargeUtf8
    ) {
        return Err(SqlError::at(
            position,
            format!("'{name}' is read as unstructured JSON: its column '{}' holds the line's JSON text, so it is JSON (or TEXT), not {}", field.name(), field.data_type()),
        ));
    }
    let mut metadata = field.metadata().clone();
    metadata.insert(
        eddy_engine::source::UNSTRUCTURED_COLUMN_KEY.to_string(),
        "true".to_string(),
    );
    let field = field.as_ref().clone().with_metadata(metadata);
    Ok(Schema::new_with_metadata(
        vec![field],
        schema.metadata().clone(),
    ))
}
