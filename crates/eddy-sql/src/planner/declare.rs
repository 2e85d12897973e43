//! Reading a job's statements, one at a time, into the catalog.
//!
//! In: a parsed statement (`CREATE TABLE`, `CREATE VIEW`, `INSERT`, a
//! query, `SET`, `CREATE FUNCTION`) and where it was written. Out: its
//! declarations in the [`super::catalog::Catalog`] (a table, a view, a
//! memory table's insert, an output to plan, a setting), checked as far as
//! they can be alone: the graph is built from them after the last
//! statement (`Compiler::finish`).

use std::collections::BTreeMap;
use std::sync::Arc;

use datafusion::logical_expr::{DmlStatement, LogicalPlan, WriteOp};
use datafusion::sql::sqlparser::ast::{
    Expr as SqlExpr, ObjectName, Set, Statement, Value as SqlValue,
};

use super::statement_text::StatementText;
use super::{insert_names, json_unions_as_text, memory_table, Compiler, Output, View};
use crate::ddl::{table_def, TableDef};
use crate::dialect::hints::QueryUid;
use crate::dialect::identifiers::IdentifierCase;
use crate::dialect::statements::ParsedStatement;
use crate::error::{Result, SqlError};
use crate::params::SourceMap;
use crate::side_streams::{BAD_ROWS_OF, LATE_ROWS_OF};
use eddy_engine::source::bad_rows::bad_row_schema;

impl Compiler {
    pub(super) fn add_statement(
        &mut self,
        mut parsed: ParsedStatement,
        map: &SourceMap,
    ) -> Result<()> {
        let text = StatementText::of(&parsed, map);
        let position = parsed.position.clone();
        self.lift_match_recognize(&mut parsed.statement, &text)?;
        if let (Some(uid), false) = (
            &parsed.uid,
            matches!(
                parsed.statement,
                Statement::CreateView(_) | Statement::Insert(_) | Statement::Query(_)
            ),
        ) {
            return Err(SqlError::at(
                &uid.position,
                "a uid hint names a query: it belongs in an INSERT, a SELECT or a CREATE VIEW",
            ));
        }
        match parsed.statement {
            Statement::CreateTable(create) => {
                let state = self.ctx.state();
                let def = table_def(
                    &self.ctx,
                    &state,
                    &create,
                    parsed.watermark.as_ref(),
                    &parsed.metadata_columns,
                    self.connector_facts.as_deref(),
                    &position,
                )?;
                self.register(&def.name, def.schema(), &position)?;
                if def.connector == crate::ddl::MEMORY_CONNECTOR {
                    self.catalog.memory_tables.insert(
                        def.name.clone(),
                        memory_table::MemoryTable {
                            position: position.clone(),
                            inserts: Vec::new(),
                        },
                    );
                    return Ok(());
                }
                if def.layout.event_time.is_some() {
                    if let Ok(mut late) = self.late_schemas.write() {
                        late.insert(def.name.clone(), def.layout.late_schema());
                    }
                }
                if let Ok(mut bad) = self.bad_schemas.write() {
                    bad.insert(def.name.clone(), bad_row_schema());
                }
                self.catalog.tables.insert(def.name.clone(), def);
            }
            Statement::CreateView(view) => {
                let name = self.identifier_case().object_name(&view.name);
                let named = match self.check_uid(parsed.uid.as_ref())? {
                    Some(uid) => uid,
                    None => format!("view {name}"),
                };
                let plan = self.plan_statement(Statement::Query(view.query), &text)?;
                let plan = self.name_view_columns(&name, &view.columns, plan, &text)?;
                let mut schema = plan.schema().as_arrow().clone();
                schema.metadata.remove(LATE_ROWS_OF);
                schema.metadata.remove(BAD_ROWS_OF);
                self.register(&name, Arc::new(schema), &position)?;
                self.catalog.views.insert(
                    name,
                    View {
                        plan,
                        text: text.clone(),
                        emit_on_window_close: parsed.emit_on_window_close.clone(),
                        named,
                    },
                );
            }
            statement @ Statement::Insert(_) => {
                let uid = self.check_uid(parsed.uid.as_ref())?;
                let mut statement = statement;
                if let Statement::Insert(insert) = &mut statement {
                    self.shape_sink(insert, &text)?;
                }
                let plan = match self.plan_statement(statement.clone(), &text) {
                    // Positional, as in Flink: a SELECT whose items DataFusion
                    // refuses (two of them named alike, as `a` and
                    // `CAST(a AS VARCHAR)` are) plans once its unnamed items
                    // are named after the sink's columns, which changes
                    // nothing else; any other mistake fails again and is
                    // reported as first found.
                    Err(e) => {
                        let targets = self.insert_targets(&statement);
                        let renamed = match &mut statement {
                            Statement::Insert(insert) => {
                                insert_names::name_after_targets(insert, &targets)
                            }
                            _ => false,
                        };
                        match renamed {
                            true => self.plan_statement(statement, &text).map_err(|_| e)?,
                            false => return Err(e),
                        }
                    }
                    Ok(plan) => plan,
                };
                let LogicalPlan::Dml(DmlStatement {
                    table_name,
                    op: WriteOp::Insert(_),
                    input,
                    ..
                }) = plan
                else {
                    return Err(SqlError::at(&position, "only INSERT INTO is supported"));
                };
                let sink = table_name.table().to_string();
                if let Some(memory) = self.catalog.memory_tables.get_mut(&sink) {
                    if uid.is_some() {
                        return Err(SqlError::at(
                            &position,
                            "a uid hint names a query that writes a sink; this one inserts into a table without a connector (its operators are named by the queries that read it)",
                        ));
                    }
                    memory.inserts.push(memory_table::MemoryInsert {
                        plan: input.as_ref().clone(),
                        text: text.clone(),
                    });
                    return Ok(());
                }
                self.catalog.sinks.insert(sink.clone());
                self.catalog.outputs.push(Output {
                    sink,
                    plan: input.as_ref().clone(),
                    text: text.clone(),
                    emit_on_window_close: parsed.emit_on_window_close.clone(),
                    uid,
                });
            }
            statement @ Statement::Query(_) => {
                let uid = self.check_uid(parsed.uid.as_ref())?;
                let plan = self.plan_statement(statement, &text)?;
                let plan = json_unions_as_text(plan).map_err(|e| self.df_error(&text, e))?;
                let n = self
                    .catalog
                    .outputs
                    .iter()
                    .filter(|o| o.sink.starts_with("query"))
                    .count()
                    + 1;
                let sink = format!("query{n}");
                let def = TableDef {
                    name: sink.clone(),
                    layout: eddy_engine::source::SourceLayout {
                        physical_schema: Arc::new(plan.schema().as_arrow().clone()),
                        output_schema: Arc::new(plan.schema().as_arrow().clone()),
                        columns: Vec::new(),
                        event_time: None,
                        idle_timeout: None,
                        bad_rows: Default::default(),
                        change_feed_key: None,
                    },
                    connector: "stdout".into(),
                    options: BTreeMap::new(),
                    primary_key: Vec::new(),
                    position: position.clone(),
                    declared_role: None,
                };
                self.catalog.tables.insert(sink.clone(), def);
                self.catalog.sinks.insert(sink.clone());
                self.catalog.outputs.push(Output {
                    sink,
                    plan,
                    text: text.clone(),
                    emit_on_window_close: parsed.emit_on_window_close.clone(),
                    uid,
                });
            }
            Statement::Set(Set::SingleAssignment {
                variable, values, ..
            }) => {
                self.apply_setting(&variable, &values, &text)?;
            }
            Statement::CreateFunction(create) => {
                self.create_function(create, parsed.function.unwrap_or_default(), &text)?;
            }
            other => {
                let text = other.to_string();
                let head: String = text
                    .split_whitespace()
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ");
                return Err(SqlError::at(
                    &position,
                    format!("'{head}' is not supported; eddy takes CREATE TABLE, CREATE VIEW, CREATE FUNCTION, INSERT INTO, SELECT and SET"),
                ));
            }
        }
        Ok(())
    }

    /// A sink declared without columns (`CREATE TABLE out WITH (...)`, as
    /// Arroyo allows) takes the columns of the first query inserted into
    /// it; later inserts must fit them, as for any sink.
    /// The columns an INSERT fills, in order: its column list, or its
    /// table's columns.
    pub(super) fn insert_targets(&self, statement: &Statement) -> Vec<String> {
        use datafusion::sql::sqlparser::ast::TableObject;
        let Statement::Insert(insert) = statement else {
            return Vec::new();
        };
        if !insert.columns.is_empty() {
            return insert
                .columns
                .iter()
                .map(|c| c.to_string().trim_matches('"').to_string())
                .collect();
        }
        let TableObject::TableName(table) = &insert.table else {
            return Vec::new();
        };
        let name = self.identifier_case().object_name(table);
        self.catalog
            .tables
            .get(&name)
            .map(|def| {
                def.schema()
                    .fields()
                    .iter()
                    .map(|f| f.name().clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(super) fn shape_sink(
        &mut self,
        insert: &mut datafusion::sql::sqlparser::ast::Insert,
        cx: &StatementText,
    ) -> Result<()> {
        use datafusion::sql::sqlparser::ast::TableObject;
        let TableObject::TableName(table) = &insert.table else {
            return Ok(());
        };
        let name = self.identifier_case().object_name(table);
        let shapeless = self
            .catalog
            .tables
            .get(&name)
            .is_some_and(|def| def.schema().fields().is_empty());
        let (true, Some(query)) = (shapeless, insert.source.as_ref()) else {
            return Ok(());
        };
        if !insert.columns.is_empty() {
            return Err(SqlError::at(&cx.at,
                format!("'{name}' declares no columns: it takes the columns of the query inserted into it, so the INSERT names none"),
            ));
        }
        let plan = self.plan_statement(Statement::Query(query.clone()), cx)?;
        // JSON values (`->`, `json_get`) go in as their JSON text.
        let unions: Vec<usize> = plan
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| crate::functions::arroyo_json::is_json_union(f.data_type()))
            .map(|(i, _)| i)
            .collect();
        let fields: Vec<datafusion::arrow::datatypes::Field> = plan
            .schema()
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let field = f
                    .as_ref()
                    .clone()
                    .with_nullable(true)
                    .with_metadata(Default::default());
                if unions.contains(&i) {
                    field.with_data_type(datafusion::arrow::datatypes::DataType::Utf8)
                } else {
                    field
                }
            })
            .collect();
        if let Some(query) = insert.source.as_mut() {
            crate::functions::arroyo_json::json_values_as_text(query, &unions);
        }
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
        if let Some(def) = self.catalog.tables.get_mut(&name) {
            def.layout.physical_schema = schema.clone();
            def.layout.output_schema = schema.clone();
        }
        let reference = datafusion::common::TableReference::bare(name.as_str());
        self.ctx
            .deregister_table(reference)
            .map_err(|e| self.df_error(cx, e))?;
        self.register(&name, schema, &cx.at)
    }

    /// `SET key = value`: job-wide settings.
    pub(super) fn apply_setting(
        &mut self,
        variable: &ObjectName,
        values: &[SqlExpr],
        cx: &StatementText,
    ) -> Result<()> {
        let key: Vec<String> = variable
            .0
            .iter()
            .filter_map(|p| p.as_ident())
            .map(|i| i.value.clone())
            .collect();
        let key = key.join(".").to_lowercase();
        let value = match values {
            [SqlExpr::Value(v)] => match &v.value {
                SqlValue::SingleQuotedString(s)
                | SqlValue::DoubleQuotedString(s)
                | SqlValue::Number(s, _) => s.clone(),
                other => other.to_string(),
            },
            [other] => other.to_string(),
            _ => return Err(SqlError::at(&cx.at, format!("SET {key} takes one value"))),
        };
        match key.as_str() {
            "sql.case-sensitive" | "datafusion.sql_parser.enable_ident_normalization" => {
                let flag = match value.trim().to_ascii_lowercase().as_str() {
                    "true" => true,
                    "false" => false,
                    _ => {
                        return Err(SqlError::at(&cx.at,
                            format!("SET {key}: '{value}' is not true or false"),
                        ))
                    }
                };
                // The two keys say the same thing opposite ways round.
                let sensitive = flag == (key == "sql.case-sensitive");
                let case = if sensitive {
                    IdentifierCase::Sensitive
                } else {
                    IdentifierCase::Fold
                };
                let state = self.ctx.state_ref();
                let mut state = state.write();
                case.apply(state.config_mut().options_mut());
                Ok(())
            }
            "table.exec.state.ttl" | "state_ttl" | "state.ttl" => {
                let ttl = eddy_engine::time::parse_duration(&value)
                    .map_err(|e| SqlError::at(&cx.at, format!("SET {key}: {e}")))?;
                self.state_ttl_ms = (!ttl.is_zero()).then_some(ttl.as_millis() as i64);
                Ok(())
            }
            // Flink's mini-batch settings trade latency for throughput by
            // buffering rows; eddy always moves rows in batches (as many
            // as a source read at once), so they are checked and need no
            // more: results are the same with or without them.
            "table.exec.mini-batch.enabled" => match value.trim().to_ascii_lowercase().as_str() {
                "true" | "false" => Ok(()),
                _ => Err(SqlError::at(&cx.at,
                    format!("SET {key}: '{value}' is not true or false"),
                )),
            },
            "table.exec.mini-batch.allow-latency" => eddy_engine::time::parse_duration(&value)
                .map(|_| ())
                .map_err(|e| SqlError::at(&cx.at, format!("SET {key}: {e}"))),
            "table.exec.mini-batch.size" => value
                .trim()
                .parse::<u64>()
                .map(|_| ())
                .map_err(|_| {
                    SqlError::at(&cx.at, format!("SET {key}: '{value}' is not a number of rows"))
                }),
            _ => Err(SqlError::at(&cx.at,
                format!("unknown setting '{key}' (known: 'sql.case-sensitive', whether unquoted names keep their case as in Flink (default false: folded to lower case); 'table.exec.state.ttl', the time-to-live of idle keys' state: OVER, joins, updating aggregates and Top-N; Flink's 'table.exec.mini-batch.*', accepted as eddy always works in batches)"),
            )),
        }
    }

    /// A statement's `uid` hint as its operators are named (`uid <name>`),
    /// refused when another statement has it.
    pub(super) fn check_uid(&mut self, uid: Option<&QueryUid>) -> Result<Option<String>> {
        let Some(uid) = uid else { return Ok(None) };
        if let Some(first) = self.catalog.uids.get(&uid.name) {
            return Err(SqlError::at(
                &uid.position,
                format!(
                    "uid('{}') is already the name of the statement at {first}; each query's uid must be its own",
                    uid.name
                ),
            ));
        }
        self.catalog
            .uids
            .insert(uid.name.clone(), uid.position.clone());
        Ok(Some(format!("uid {}", uid.name)))
    }
}
