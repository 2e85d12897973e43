//! `CREATE TABLE`: turns the statement (and its cut-out watermark clause)
//! into a [`TableDef`]: columns, computed columns, event time, lateness and
//! connector options, in that order ([`table_def`]).

use std::collections::BTreeMap;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::execution::context::{SessionContext, SessionState};
use datafusion::sql::planner::SqlToRel;
use datafusion::sql::sqlparser::ast::{
    ColumnOption, CreateTable, Expr as SqlExpr, TableConstraint,
};
use eddy_engine::source::SourceLayout;

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

    /// The table as its connector sees it when written or read by key:
    /// every column, no filter.
    pub fn connector_spec(&self) -> eddy_engine::graph::ConnectorSpec {
        eddy_engine::graph::ConnectorSpec {
            table: self.name.clone(),
            connector: self.connector.clone(),
            options: self.options.clone(),
            schema: self.schema(),
            declared_at: Some(self.position.clone()),
            primary_key: self.primary_key.clone(),
            filter: None,
            unread_columns: Vec::new(),
            explain: None,
        }
    }
}

pub use columns::INFERRED_TYPE;

mod columns;
mod event_time;
mod options;

/// Builds a [`TableDef`] from a parsed `CREATE TABLE`: its options and
/// connector ([`options`]), its columns ([`columns`], metadata ones as
/// its format or connector (`facts`) knows them), its event time and
/// source policies ([`event_time`]), its primary key.
pub fn table_def(
    ctx: &SessionContext,
    state: &SessionState,
    create: &CreateTable,
    watermark: Option<&WatermarkClause>,
    metadata_columns: &[crate::dialect::statements::MetadataColumn],
    facts: Option<&dyn eddy_engine::graph::ConnectorFacts>,
    position: &Position,
) -> Result<TableDef> {
    let case = IdentifierCase::of(state.config_options());
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
    let mut options = options::with_options(create, case, position)?;
    // Arroyo's table options, read as Arroyo reads them.
    let arroyo = crate::dialect::arroyo_tables::take_arroyo_options(&mut options, position)?;
    let watermark = options::watermark(watermark, &arroyo, position)?;
    let connector = options::connector(&mut options, &name, watermark.is_some(), position)?;
    let debezium = options::is_debezium(&options);
    let metadata_keys = columns::metadata_keys(debezium, &connector, facts);
    columns::check_metadata_columns(
        metadata_columns,
        metadata_keys
            .as_ref()
            .map(|(keys, whose)| (*keys, whose.as_str())),
    )?;
    let columns = columns::ColumnDefs::of(create, case).plan(
        &planner,
        state,
        metadata_columns,
        metadata_keys.as_ref().map(|(keys, _)| *keys),
        debezium,
        arroyo.unstructured,
        &name,
        position,
    )?;
    let policies = event_time::SourcePolicies::take(&mut options, position)?;
    let event_time = event_time::event_time(
        watermark.as_ref(),
        &policies,
        &columns.output,
        case,
        &name,
        position,
    )?;
    let primary_key = primary_key(create, case, &columns.output, &name, position)?;
    Ok(TableDef {
        name,
        primary_key,
        layout: SourceLayout {
            physical_schema: columns.physical,
            output_schema: columns.output,
            columns: columns.columns,
            event_time,
            idle_timeout: policies.idle_timeout,
            bad_rows: policies.bad_rows,
            change_feed_key: None,
        },
        connector,
        options,
        position: position.clone(),
        declared_role: arroyo.role,
    })
}

/// `PRIMARY KEY (a, b) NOT ENFORCED`, or a column's own `PRIMARY KEY`:
/// the key's columns, each a column of the table.
fn primary_key(
    create: &CreateTable,
    case: IdentifierCase,
    output_schema: &SchemaRef,
    name: &str,
    position: &Position,
) -> Result<Vec<String>> {
    let normalize = |ident: &datafusion::sql::sqlparser::ast::Ident| case.name(ident);
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
    Ok(primary_key
        .into_iter()
        .map(|k| k.trim_matches(|c| c == '"' || c == '`').to_string())
        .collect())
}
