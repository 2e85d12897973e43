//! `CREATE TABLE`: turns the statement (and its cut-out watermark clause)
//! into a [`TableDef`]: columns, computed columns, event time, lateness and
//! connector options.

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::execution::context::{SessionContext, SessionState};
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{
    ColumnOption, CreateTable, CreateTableOptions, Expr as SqlExpr, SqlOption, TableConstraint,
    Value,
};
use eddy_engine::source::{
    BadRowPolicy, ComputedColumn, EventTimeSpec, LatePolicy, SourceColumn, SourceLayout,
};

use crate::context::DdlContext;
use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::WatermarkClause;
use crate::error::{Position, Result, SqlError};

/// The connector of a table declared without one (`CREATE TABLE t (...);`,
/// Arroyo's memory table): queries insert rows into it and others read
/// them, nothing stored in between.
pub const MEMORY_CONNECTOR: &str = "memory";

/// A declared table: a source or a sink, decided by how queries use it.
#[derive(Debug, Clone)]
pub struct TableDef {
    /// Lower-cased table name.
    pub name: String,
    /// How rows are read (physical columns, computed columns, event time).
    pub layout: SourceLayout,
    /// The `connector` option.
    pub connector: String,
    /// Other options, keys lower-cased.
    pub options: BTreeMap<String, String>,
    /// `PRIMARY KEY (...) NOT ENFORCED` columns, lower-cased (empty: none).
    /// A change feed's rows are versions of the row with their key.
    pub primary_key: Vec<String>,
    /// Where the statement starts.
    pub position: Position,
    /// How Arroyo's `type` option says the table is used (`source` or
    /// `sink`), if it is given.
    pub declared_role: Option<String>,
}

impl TableDef {
    /// All columns in declared order.
    pub fn schema(&self) -> SchemaRef {
        self.layout.output_schema.clone()
    }
}

/// The type the statement reader gives Flink's `col AS expr` columns: the
/// column takes its expression's type.
pub const INFERRED_TYPE: &str = "__eddy_inferred";

fn is_inferred(data_type: &datafusion::sql::sqlparser::ast::DataType) -> bool {
    matches!(data_type, datafusion::sql::sqlparser::ast::DataType::Custom(name, _)
        if name.to_string().eq_ignore_ascii_case(INFERRED_TYPE))
}

fn option_value(expr: &SqlExpr) -> Option<String> {
    match expr {
        SqlExpr::Value(v) => match &v.value {
            Value::SingleQuotedString(s) | Value::DoubleQuotedString(s) | Value::Number(s, _) => {
                Some(s.clone())
            }
            Value::Boolean(b) => Some(b.to_string()),
            _ => None,
        },
        SqlExpr::Identifier(id) => Some(id.value.clone()),
        _ => None,
    }
}

/// Builds a [`TableDef`] from a parsed `CREATE TABLE`.
pub fn table_def(
    ctx: &SessionContext,
    state: &SessionState,
    create: &CreateTable,
    watermark: Option<&WatermarkClause>,
    metadata_columns: &[crate::dialect::statements::MetadataColumn],
    position: &Position,
) -> Result<TableDef> {
    let case = IdentifierCase::of(state.config_options());
    let normalize = |ident: &datafusion::sql::sqlparser::ast::Ident| case.name(ident);
    let name = case.object_name(&create.name);
    if create.query.is_some() {
        return Err(SqlError::at(
            position,
            "CREATE TABLE ... AS SELECT is not supported; use CREATE VIEW",
        ));
    }
    let provider = DdlContext::new(ctx, state);
    let planner = SqlToRel::new_with_options(
        &provider,
        datafusion::sql::planner::ParserOptions::from(&state.config_options().sql_parser),
    );

    // Options.
    let raw_options = match &create.table_options {
        CreateTableOptions::With(options) | CreateTableOptions::Options(options) => options.clone(),
        CreateTableOptions::None => Vec::new(),
        _ => {
            return Err(SqlError::at(
                position,
                "table options must be given as WITH (key = 'value', ...)",
            ))
        }
    };
    let mut options = BTreeMap::new();
    for option in raw_options {
        let SqlOption::KeyValue { key, value } = option else {
            return Err(SqlError::at(
                position,
                "table options must be key = 'value' pairs",
            ));
        };
        let text = option_value(&value).ok_or_else(|| {
            SqlError::at(
                position,
                format!(
                    "option '{}' needs a literal value, found {value}",
                    key.value
                ),
            )
        })?;
        let name = key.value.to_lowercase();
        if options.insert(name.clone(), text).is_some() {
            return Err(SqlError::at(
                position,
                format!("option '{name}' is given twice in the WITH clause of table '{name_of_table}'; give it once", name_of_table = create.name),
            ));
        }
    }
    // Flink's `PARTITIONED BY (dt, hm)`: the file sinks' `partition_by`.
    if let datafusion::sql::sqlparser::ast::HiveDistributionStyle::PARTITIONED { columns } =
        &create.hive_distribution
    {
        let names: Vec<String> = columns.iter().map(|c| normalize(&c.name)).collect();
        for name in &names {
            if !create.columns.iter().any(|c| normalize(&c.name) == *name) {
                return Err(SqlError::at(
                    position,
                    format!(
                        "PARTITIONED BY column '{name}' is not a column of '{}'",
                        create.name
                    ),
                ));
            }
        }
        if options
            .insert("partition_by".to_string(), names.join(","))
            .is_some()
        {
            return Err(SqlError::at(
                position,
                "PARTITIONED BY and the partition_by option say the same thing: give one",
            ));
        }
    }
    // Arroyo's table options, read as Arroyo reads them.
    let arroyo = crate::dialect::arroyo_tables::take_arroyo_options(&mut options, position)?;
    let arroyo_watermark;
    let watermark = match (watermark, &arroyo.event_time_field) {
        (None, Some(field)) => {
            let column = datafusion::sql::sqlparser::ast::Ident::new(field.clone());
            arroyo_watermark = WatermarkClause {
                bound_column: column.clone(),
                column,
                bound_ms: crate::dialect::arroyo_tables::DEFAULT_BOUND_MS,
                position: position.clone(),
            };
            Some(&arroyo_watermark)
        }
        (Some(_), Some(_)) => {
            return Err(SqlError::at(
                position,
                "event_time_field and a WATERMARK clause say the same thing: give one",
            ))
        }
        (watermark, None) => watermark,
    };
    let connector = match options.remove("connector") {
        Some(connector) => connector.to_lowercase(),
        // No WITH at all: a table that passes rows between queries.
        None if options.is_empty() => MEMORY_CONNECTOR.to_string(),
        None => {
            return Err(SqlError::at(
                position,
                format!("table '{name}' needs WITH (connector = '...') (a table without a connector takes no options)"),
            ))
        }
    };
    if connector == MEMORY_CONNECTOR && watermark.is_some() {
        return Err(SqlError::at(
            position,
            format!("table '{name}' has no connector: it passes on the rows inserted into it with their event time and watermark, so it declares none (drop its WATERMARK clause)"),
        ));
    }

    // Columns: physical ones first get a schema of their own.
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
            json_columns.push(normalize(&plain.name));
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
    // Metadata columns: only a Debezium envelope has them (so far).
    for crate::dialect::statements::MetadataColumn {
        column,
        key,
        position,
    } in metadata_columns
    {
        let debezium = options
            .get("format")
            .is_some_and(|f| f.trim().eq_ignore_ascii_case("debezium-json"));
        if !debezium {
            return Err(SqlError::at(
                position,
                format!("column '{column}' is read from the record's metadata ('{key}'), which only a Debezium change feed (format = 'debezium-json') has"),
            ));
        }
        if eddy_engine::source::ChangeMetadata::of_key(key).is_none() {
            return Err(SqlError::at(
                position,
                format!(
                    "column '{column}': '{key}' is not a Debezium metadata key; known: {}",
                    eddy_engine::source::ChangeMetadata::KEYS
                        .iter()
                        .map(|(k, what)| format!("'{k}' ({})", what.describe()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
    }
    let plan_error =
        |e: datafusion::error::DataFusionError| SqlError::at(position, e.strip_backtrace());
    let mark_json = |schema: datafusion::arrow::datatypes::Schema| {
        let fields: Vec<Field> = schema
            .fields()
            .iter()
            .map(|f| {
                let mut f = f.as_ref().clone();
                if let Some(crate::dialect::statements::MetadataColumn { key, .. }) =
                    metadata_columns
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
        datafusion::arrow::datatypes::Schema::new_with_metadata(fields, schema.metadata().clone())
    };
    // Flink's MAP types reach the planner as marked structs (see
    // `dialect::flink_types`).
    let maps = crate::dialect::flink_types::maps_from_structs;
    // A Debezium change feed's TIMESTAMPs are microseconds (PostgreSQL's
    // precision, Debezium's MicroTimestamp numbers).
    let debezium = options
        .get("format")
        .is_some_and(|f| f.trim().eq_ignore_ascii_case("debezium-json"));
    let feed_times = |schema: Schema| {
        if debezium {
            microsecond_timestamps(schema)
        } else {
            schema
        }
    };
    let declared = feed_times(mark_json(maps(
        planner.build_schema(all_defs).map_err(plan_error)?,
    )));
    let physical = feed_times(mark_json(maps(
        planner.build_schema(physical_defs).map_err(plan_error)?,
    )));
    let physical = Arc::new(if arroyo.unstructured {
        unstructured(physical, &name, position)?
    } else {
        physical
    });
    // A change's time is a TIMESTAMP or epoch milliseconds.
    for metadata in metadata_columns {
        let typed = physical
            .field_with_name(&metadata.column)
            .ok()
            .map(|f| f.data_type().clone());
        if let Some(other) =
            typed.filter(|t| !matches!(t, DataType::Int64 | DataType::Timestamp(_, _)))
        {
            return Err(SqlError::at(
                &metadata.position,
                format!(
                    "column '{}' reads '{}', a time: declare it TIMESTAMP(3) (or BIGINT for epoch milliseconds), not {other}",
                    metadata.column, metadata.key
                ),
            ));
        }
    }
    let physical_df = DFSchema::try_from(physical.as_ref().clone()).map_err(plan_error)?;

    let mut columns = Vec::with_capacity(declared.fields().len());
    let mut physical_index = 0;
    let mut output_fields: Vec<Field> = Vec::new();
    for (field, generation) in declared.fields().iter().zip(generated) {
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
                if crate::dialect::flink_functions::is_proctime_call(&logical) {
                    out = crate::dialect::flink_functions::mark_proctime(out);
                }
                output_fields.push(out.clone());
                columns.push(SourceColumn::Computed(ComputedColumn {
                    field: out,
                    expr: physical_expr,
                }));
            }
        }
    }
    let output_schema = Arc::new(Schema::new(output_fields));

    // Event time and lateness.
    let allowed_lateness_ms = match options.remove("allowed_lateness") {
        Some(text) => eddy_engine::time::parse_duration(&text)
            .map_err(|e| SqlError::at(position, format!("allowed_lateness: {e}")))?
            .as_millis() as i64,
        None => 0,
    };
    let idle_timeout = match options.remove("idle_timeout") {
        Some(text) => Some(
            eddy_engine::time::parse_duration(&text)
                .map_err(|e| SqlError::at(position, format!("idle_timeout: {e}")))?,
        )
        .filter(|d| !d.is_zero()),
        None => None,
    };
    let bad_rows = match options.remove("bad_rows") {
        Some(text) => text
            .parse::<BadRowPolicy>()
            .map_err(|e| SqlError::at(position, format!("bad_rows: {e}")))?,
        None => BadRowPolicy::default(),
    };
    let late_rows = match options.remove("late_rows") {
        Some(text) => Some(
            text.parse::<LatePolicy>()
                .map_err(|e| SqlError::at(position, format!("late_rows: {e}")))?,
        ),
        None => None,
    };
    let max_future_skew_ms = match options.remove("max_future_skew") {
        Some(text) => Some(
            eddy_engine::time::parse_duration(&text)
                .map_err(|e| SqlError::at(position, format!("max_future_skew: {e}")))?
                .as_millis() as i64,
        ),
        None => None,
    };
    let event_time = match watermark {
        None => {
            if allowed_lateness_ms > 0 {
                return Err(SqlError::at(
                    position,
                    "allowed_lateness needs a WATERMARK FOR clause",
                ));
            }
            if max_future_skew_ms.is_some() {
                return Err(SqlError::at(
                    position,
                    "max_future_skew needs a WATERMARK FOR clause (it guards the watermark)",
                ));
            }
            if late_rows == Some(LatePolicy::Divert) {
                return Err(SqlError::at(
                    position,
                    "late_rows = 'divert' needs a WATERMARK FOR clause (rows are late against the watermark)",
                ));
            }
            None
        }
        Some(w) => {
            let column_name = normalize(&w.column);
            if normalize(&w.bound_column) != column_name {
                return Err(SqlError::at(
                    &w.position,
                    format!(
                        "the watermark of '{column_name}' is taken from '{}': a watermark must be `WATERMARK FOR col AS col` or `WATERMARK FOR col AS col - INTERVAL '2' SECOND`",
                        normalize(&w.bound_column)
                    ),
                ));
            }
            let column = output_schema.index_of(&column_name).map_err(|_| {
                SqlError::at(
                    &w.position,
                    format!("watermark column '{column_name}' is not a column of '{name}'"),
                )
            })?;
            match output_schema.field(column).data_type() {
                DataType::Timestamp(_, _) | DataType::Int64 => {}
                other => {
                    return Err(SqlError::at(
                        &w.position,
                        format!("watermark column '{column_name}' must be a TIMESTAMP (or BIGINT epoch ms), not {other}"),
                    ))
                }
            }
            Some(EventTimeSpec {
                column,
                bound_ms: w.bound_ms,
                allowed_lateness_ms,
                max_future_skew_ms,
                late_rows: late_rows.unwrap_or_default(),
            })
        }
    };
    // PRIMARY KEY (a, b) NOT ENFORCED, or a column's own PRIMARY KEY.
    let mut primary_key = Vec::new();
    for constraint in &create.constraints {
        if let TableConstraint::PrimaryKey(key) = constraint {
            primary_key.extend(key.columns.iter().map(|c| match &c.column.expr {
                SqlExpr::Identifier(id) => normalize(id),
                other => other.to_string(),
            }));
        }
    }
    for column in &create.columns {
        if column
            .options
            .iter()
            .any(|o| matches!(o.option, ColumnOption::PrimaryKey(_)))
        {
            primary_key.push(normalize(&column.name));
        }
    }
    for key in &primary_key {
        let key = key.trim_matches(|c| c == '"' || c == '`');
        if output_schema.index_of(key).is_err() {
            return Err(SqlError::at(
                position,
                format!("PRIMARY KEY column '{key}' is not a column of '{name}'"),
            ));
        }
    }
    let primary_key = primary_key
        .into_iter()
        .map(|k| k.trim_matches(|c| c == '"' || c == '`').to_string())
        .collect();
    Ok(TableDef {
        name,
        primary_key,
        layout: SourceLayout {
            physical_schema: physical,
            output_schema,
            columns,
            event_time,
            idle_timeout,
            bad_rows,
            change_feed_key: None,
        },
        connector,
        options,
        position: position.clone(),
        declared_role: arroyo.role,
    })
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
