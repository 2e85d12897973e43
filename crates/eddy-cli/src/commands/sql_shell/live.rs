//! A live result table: what a `SELECT` of the shell has produced so far,
//! redrawn in place as rows come.
//!
//! In: the lines the query's stdout sink writes (`TAG> {json}`, or
//! `TAG> +U {json}` for an updating result). Out: a table (comfy-table) of
//! the result as it stands: an append-only query's latest rows, an updating
//! query's current rows (an update or delete takes its row out).

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{ContentArrangement, Table};
use serde_json::{Map, Value};

/// The result so far.
#[derive(Debug, Default)]
pub(super) struct LiveTable {
    columns: Vec<String>,
    rows: Vec<Map<String, Value>>,
    /// Rows received (inserts and changes alike).
    received: u64,
    /// Lines that were not rows (never expected; counted, not hidden).
    unreadable: u64,
    updating: bool,
}

impl LiveTable {
    /// An empty table of these columns (more are added as rows bring them).
    pub(super) fn with_columns(columns: Vec<String>) -> Self {
        Self {
            columns,
            ..Self::default()
        }
    }

    /// Takes one line of the sink's output.
    pub(super) fn apply(&mut self, line: &str) {
        let Some((_, rest)) = line.split_once("> ") else {
            self.unreadable += 1;
            return;
        };
        let (kind, json) = match rest.split_once(' ') {
            Some((kind @ ("+I" | "-U" | "+U" | "-D"), json)) => (Some(kind), json),
            _ => (None, rest),
        };
        let Ok(Value::Object(row)) = serde_json::from_str::<Value>(json) else {
            self.unreadable += 1;
            return;
        };
        self.received += 1;
        for column in row.keys() {
            if !self.columns.contains(column) {
                self.columns.push(column.clone());
            }
        }
        match kind {
            Some("-U" | "-D") => {
                self.updating = true;
                if let Some(at) = self.rows.iter().position(|r| *r == row) {
                    self.rows.remove(at);
                }
            }
            Some(_) => {
                self.updating = true;
                self.rows.push(row);
            }
            None => self.rows.push(row),
        }
    }

    /// The table as it stands: at most `limit` rows (the latest).
    pub(super) fn render(&self, limit: usize) -> String {
        let mut table = Table::new();
        table
            .load_preset(UTF8_FULL_CONDENSED)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(self.columns.clone());
        let shown = self.rows.len().saturating_sub(limit);
        for row in &self.rows[shown..] {
            table.add_row(self.columns.iter().map(|c| match row.get(c) {
                None | Some(Value::Null) => "NULL".to_string(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            }));
        }
        let mut text = if self.columns.is_empty() {
            "(no rows yet)".to_string()
        } else {
            table.to_string()
        };
        let what = if self.updating {
            "current rows"
        } else {
            "rows"
        };
        text.push_str(&format!(
            "\n{} {what}{}, {} received",
            self.rows.len(),
            if shown > 0 {
                format!(" (the latest {limit} shown)")
            } else {
                String::new()
            },
            self.received
        ));
        if self.unreadable > 0 {
            text.push_str(&format!(", {} unreadable lines", self.unreadable));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_updating_result_shows_its_current_rows() {
        let mut table = LiveTable::default();
        table.apply(r#"Q> +I {"k": "a", "n": 1}"#);
        table.apply(r#"Q> +I {"k": "b", "n": 1}"#);
        table.apply(r#"Q> -U {"k": "a", "n": 1}"#);
        table.apply(r#"Q> +U {"k": "a", "n": 2}"#);
        let text = table.render(10);
        assert!(text.contains("2 current rows, 4 received"), "{text}");
        assert!(!text.contains("│ a ┆ 1"), "{text}");
        assert!(text.contains("a ┆ 2"), "{text}");
    }

    #[test]
    fn an_append_only_result_shows_its_latest_rows() {
        let mut table = LiveTable::default();
        for i in 0..30 {
            table.apply(&format!(r#"Q> {{"i": {i}}}"#));
        }
        table.apply("not a row");
        let text = table.render(5);
        assert!(
            text.contains("30 rows (the latest 5 shown), 30 received, 1 unreadable lines"),
            "{text}"
        );
        assert!(text.contains("29") && !text.contains(" 24 "), "{text}");
    }
}
