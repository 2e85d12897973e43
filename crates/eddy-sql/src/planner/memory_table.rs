//! Tables without a connector (Arroyo's memory tables): `CREATE TABLE mid
//! (k VARCHAR, n BIGINT);` declares a table that queries write into with
//! `INSERT INTO mid SELECT ...` and read from like any table.
//!
//! In: the table's declared columns and every `INSERT INTO` it (each a
//! query with DataFusion's casts to the declared columns). Out: where a
//! query reads the table, the union of its inserts' streams, planned once
//! and shared by every reader, as a view's stream is. Nothing is stored:
//! rows pass from the inserting queries to the reading ones as they come,
//! with the event time (and watermark) of the rows inserted.

use datafusion::logical_expr::LogicalPlan;

use super::statement_text::StatementText;
use super::stream::Stream;
use super::Compiler;
use crate::error::{Position, Result, SqlError};

/// A table without a connector and the queries inserting into it.
#[derive(Clone)]
pub(super) struct MemoryTable {
    /// Where it is declared.
    pub position: Position,
    /// Its inserts, in the order written.
    pub inserts: Vec<MemoryInsert>,
}

/// One `INSERT INTO` a memory table: its query, and what its errors point
/// into.
#[derive(Clone)]
pub(super) struct MemoryInsert {
    pub plan: LogicalPlan,
    /// Where the insert was written.
    pub text: StatementText,
}

impl Compiler {
    /// The stream of memory table `name` (the union of what is inserted
    /// into it), planned at its first read; `None` when `name` is no
    /// memory table.
    pub(super) fn memory_stream(
        &mut self,
        name: &str,
        cx: &StatementText,
    ) -> Result<Option<Stream>> {
        let Some(table) = self.catalog.memory_tables.get(name).cloned() else {
            return Ok(None);
        };
        if let Some(stream) = self.view_streams.get(name) {
            return Ok(Some(stream.clone()));
        }
        if table.inserts.is_empty() {
            return Err(SqlError::at(&cx.at,
                format!(
                    "'{name}' is read but nothing is inserted into it: a table without a connector (declared at {}) passes rows from the queries that INSERT INTO it to the queries that read it",
                    table.position
                ),
            ));
        }
        if !self.memory_planning.insert(name.to_string()) {
            return Err(SqlError::at(&cx.at,
                format!("'{name}' is read by a query that inserts into it, directly or through others: rows would go round for ever"),
            ));
        }
        let mut streams = Vec::with_capacity(table.inserts.len());
        let mut failed = None;
        for insert in &table.inserts {
            // Errors inside an insert point into it.
            self.note_columns_read(&insert.plan);
            let planned = self.plan_stream(&insert.plan, &insert.text);
            match planned {
                Ok(stream) => streams.push(stream),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        self.memory_planning.remove(name);
        if let Some(e) = failed {
            return Err(e);
        }
        let schema = table.inserts[0].plan.schema().clone();
        let mut stream = if streams.len() == 1 {
            streams.remove(0)
        } else {
            self.union_streams(streams, schema)
        };
        stream.materialize(&mut self.graph);
        self.view_streams.insert(name.to_string(), stream.clone());
        Ok(Some(stream))
    }
}
