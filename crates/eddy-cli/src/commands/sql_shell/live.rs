//! A live result table: what a `SELECT` of the shell has produced so far,
//! redrawn in place as rows come.
//!
//! In: the lines the query's stdout sink writes (`TAG> {json}`, or
//! `TAG> +U {json}` for an updating result), or a server's tail events
//! (`row`, `change`, `from`, `skipped`). Out: a table (comfy-table) of the
//! result as it stands: an append-only query's latest rows, an updating
//! query's current rows (an update or delete takes its row out), drawn in
//! place ([`draw_until_end`]).

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};

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
    /// Rows the result had before this table saw it, and rows it missed
    /// falling behind (a server's tail): not shown, and said so.
    unseen: u64,
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
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(row)) => self.take(kind, row),
            _ => self.unreadable += 1,
        }
    }

    /// Takes one event of a server's tail (`GET .../sinks/{sink}/tail`).
    pub(super) fn apply_event(&mut self, event: &str, data: &str) {
        let value = serde_json::from_str::<Value>(data).unwrap_or(Value::Null);
        match (event, value) {
            ("row", Value::Object(row)) => self.take(None, row),
            ("change", Value::Object(mut change)) => {
                let kind = change
                    .get("kind")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                match (kind.as_deref(), change.remove("row")) {
                    (Some(kind @ ("+I" | "-U" | "+U" | "-D")), Some(Value::Object(row))) => {
                        self.take(Some(kind), row)
                    }
                    _ => self.unreadable += 1,
                }
            }
            ("from", value) => self.unseen += value["row"].as_u64().unwrap_or(0),
            ("skipped", value) => self.unseen += value["rows"].as_u64().unwrap_or(0),
            ("end", _) => {}
            _ => self.unreadable += 1,
        }
    }

    fn take(&mut self, kind: Option<&str>, row: Map<String, Value>) {
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
        if self.unseen > 0 {
            text.push_str(&format!(
                ", {} not seen here (written before the tail began, or missed falling behind)",
                self.unseen
            ));
        }
        text
    }
}

/// Draws `table` in place on `out` (its latest `rows`), after each call of
/// `poll`, which feeds it what came since (waiting up to a refresh) and
/// returns the query's final state once it ended; until then, or until
/// `interrupted` (Ctrl-C). Returns whether it was interrupted.
pub(super) fn draw_until_end(
    out: &mut impl Write,
    table: &mut LiveTable,
    rows: usize,
    interrupted: &AtomicBool,
    mut poll: impl FnMut(&mut LiveTable) -> Option<String>,
) -> bool {
    interrupted.store(false, Ordering::SeqCst);
    let _ = writeln!(out, "(Ctrl-C stops the query and returns to the prompt)");
    let mut drawn = 0;
    loop {
        let ended = poll(table);
        let stop = interrupted.load(Ordering::SeqCst);
        let state = match (&ended, stop) {
            (Some(state), _) => state.as_str(),
            (None, true) => "stopped",
            (None, false) => "running",
        };
        let text = format!("{}\nquery {state}", table.render(rows));
        // Back over what was drawn, then the table as it stands.
        if drawn > 0 {
            let _ = write!(out, "\x1b[{drawn}F\x1b[J");
        }
        let _ = writeln!(out, "{text}");
        let _ = out.flush();
        drawn = text.lines().count();
        if ended.is_some() || stop {
            return stop && ended.is_none();
        }
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
    fn a_servers_tail_events_fill_the_table_and_say_what_was_not_seen() {
        let mut table = LiveTable::default();
        table.apply_event("from", r#"{"row": 7}"#);
        table.apply_event("change", r#"{"kind": "+I", "row": {"k": "a", "n": 1}}"#);
        table.apply_event("change", r#"{"kind": "-U", "row": {"k": "a", "n": 1}}"#);
        table.apply_event("change", r#"{"kind": "+U", "row": {"k": "a", "n": 2}}"#);
        table.apply_event("skipped", r#"{"rows": 3}"#);
        table.apply_event("row", "not json");
        let text = table.render(10);
        assert!(text.contains("a ┆ 2") && !text.contains("a ┆ 1"), "{text}");
        assert!(
            text.contains("1 current rows, 3 received, 1 unreadable lines, 10 not seen here"),
            "{text}"
        );
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
