//! `eddy sql`: an interactive SQL shell.
//!
//! In: lines typed at a prompt (rustyline: line editing, history kept in a
//! file, statements over several lines up to a `;`). Out: what each
//! statement does, printed:
//!
//! | statement | does |
//! |---|---|
//! | `CREATE TABLE`, `CREATE VIEW`, `CREATE FUNCTION`, `SET` | kept in the session once it plans |
//! | `SELECT ...` | runs, its result drawn as a table updating in place (windows as they fire, an updating query's current rows) until it ends or Ctrl-C |
//! | `EXPLAIN SELECT/INSERT ...` | the operator graph |
//! | `INSERT INTO ...` | starts a job that runs while the shell goes on |
//! | `SHOW JOBS`, `STOP JOB n` | those jobs |
//! | `SHOW TABLES` | the session's definitions |
//! | `\help`, `\quit` | |
//!
//! With `--server URL` the same statements run on an `eddy serve`
//! (`remote`): INSERT submits a job, SELECT runs as a job there whose rows
//! are tailed here, SHOW JOBS and STOP JOB <id> are the server's; tables
//! and views stay in the shell's session and plan here first.

mod live;
mod remote;
mod session;

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use eddy_cli::{job, CliError, Result};
use rustyline::error::ReadlineError;
use rustyline::DefaultEditor;

use crate::args::SqlArgs;
use session::Session;

const HELP: &str = "\
Statements end with ';' and may span lines.
  CREATE ..., SET ...        kept in the session (tables, views, functions)
  SELECT ...                 runs it; the result updates in place (Ctrl-C returns here)
  EXPLAIN SELECT|INSERT ...  the operator graph
  INSERT INTO ...            starts a job in the background
  SHOW JOBS / STOP JOB n     the background jobs
  SHOW TABLES                the session's definitions
  \\help  \\quit";

/// What one statement is.
#[derive(Debug, PartialEq, Eq)]
enum Statement<'a> {
    Define(&'a str),
    Select(&'a str),
    Explain(&'a str),
    Insert(&'a str),
    ShowJobs,
    ShowTables,
    StopJob(&'a str),
    Help,
    Quit,
    Unknown(&'a str),
}

fn classify(text: &str) -> Statement<'_> {
    let text = text.trim().trim_end_matches(';').trim();
    let upper = text.to_ascii_uppercase();
    let words: Vec<&str> = upper.split_whitespace().collect();
    match words.as_slice() {
        ["\\Q" | "\\QUIT" | "QUIT" | "EXIT"] => Statement::Quit,
        ["\\H" | "\\HELP" | "HELP" | "\\?"] => Statement::Help,
        ["SHOW", "JOBS"] => Statement::ShowJobs,
        ["SHOW", "TABLES"] => Statement::ShowTables,
        ["STOP", "JOB", _] => {
            Statement::StopJob(text.split_whitespace().nth(2).unwrap_or_default())
        }
        ["CREATE" | "SET", ..] => Statement::Define(text),
        ["SELECT" | "WITH", ..] => Statement::Select(text),
        ["EXPLAIN", ..] => Statement::Explain(text[7..].trim_start()),
        ["INSERT", ..] => Statement::Insert(text),
        _ => Statement::Unknown(text),
    }
}

/// Whether `text` holds a whole statement: a shell command, or SQL ending
/// with `;` outside quotes.
fn complete(text: &str) -> bool {
    let trimmed = text.trim();
    if trimmed.starts_with('\\')
        || matches!(
            trimmed.to_ascii_lowercase().as_str(),
            "quit" | "exit" | "help"
        )
    {
        return true;
    }
    let mut quote = None;
    let mut last = None;
    for c in trimmed.chars() {
        match (quote, c) {
            (None, '\'' | '"' | '`') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            _ => {}
        }
        if !c.is_whitespace() {
            last = Some((c, quote.is_none()));
        }
    }
    matches!(last, Some((';', true)))
}

/// Runs the shell until `\quit` or end of input.
pub(crate) fn shell(args: SqlArgs) -> Result<()> {
    let params = job::parse_pairs(&args.set, "--set")?;
    let remote = args
        .server
        .as_deref()
        .map(|url| remote::Remote::connect(url, args.token.clone()))
        .transpose()?;
    let connected = remote.as_ref().map(|r| r.url().to_string());
    let mut session = Session::new(params, args.output, args.rows.max(1), remote);
    let mut editor = DefaultEditor::new()
        .map_err(|e| CliError::Usage(format!("cannot open the terminal: {e}")))?;
    let history = args
        .history
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".eddy_history")));
    if let Some(path) = &history {
        let _ = editor.load_history(path);
    }
    // A running SELECT is interrupted with Ctrl-C (the prompt reads it as
    // a key, not a signal).
    let interrupted = Arc::new(AtomicBool::new(false));
    {
        let interrupted = interrupted.clone();
        if let Err(e) = ctrlc::set_handler(move || interrupted.store(true, Ordering::SeqCst)) {
            tracing::warn!("cannot handle Ctrl-C: {e}");
        }
    }
    println!("eddy SQL shell. Statements end with ';'. \\help for help, \\quit to leave.");
    if let Some(url) = connected {
        println!("Jobs run on the server at {url}.");
    }
    let mut pending = String::new();
    loop {
        let prompt = if pending.is_empty() {
            "eddy> "
        } else {
            "   -> "
        };
        let line = match editor.readline(prompt) {
            Ok(line) => line,
            Err(ReadlineError::Interrupted) => {
                pending.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(CliError::Usage(format!("cannot read the terminal: {e}"))),
        };
        if !pending.is_empty() {
            pending.push('\n');
        }
        pending.push_str(&line);
        if pending.trim().is_empty() {
            pending.clear();
            continue;
        }
        if !complete(&pending) {
            continue;
        }
        let text = std::mem::take(&mut pending);
        let _ = editor.add_history_entry(text.as_str());
        let said = match classify(&text) {
            Statement::Quit => break,
            Statement::Help => Ok(HELP.to_string()),
            Statement::Define(sql) => session.define(sql),
            Statement::Explain(sql) => session.explain(sql),
            Statement::Insert(sql) => session.insert(sql),
            Statement::ShowJobs => session.show_jobs(),
            Statement::ShowTables => Ok(session.show_tables()),
            Statement::StopJob(job) => session.stop_job(job),
            Statement::Select(sql) => session
                .select(sql, &interrupted, &mut std::io::stdout())
                .map(|()| String::new()),
            Statement::Unknown(sql) => Err(CliError::Usage(format!(
                "not a statement the shell runs: {}\n{HELP}",
                sql.lines().next().unwrap_or_default()
            ))),
        };
        match said {
            Ok(text) if text.is_empty() => {}
            Ok(text) => println!("{text}"),
            Err(e) => println!("error: {e}"),
        }
    }
    if let Some(path) = &history {
        let _ = editor.save_history(path);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_end_with_a_semicolon_outside_quotes() {
        assert!(complete("SELECT 1;"));
        assert!(complete("SELECT 1\n  FROM t ;  "));
        assert!(!complete("SELECT ';"));
        assert!(!complete("SELECT a\nFROM t"));
        assert!(complete("\\help"));
        assert!(complete("quit"));
    }

    #[test]
    fn statements_are_told_apart() {
        assert_eq!(classify("show jobs;"), Statement::ShowJobs);
        assert_eq!(classify("STOP JOB 2;"), Statement::StopJob("2"));
        assert_eq!(
            classify("explain select 1;"),
            Statement::Explain("select 1")
        );
        assert_eq!(
            classify("create table t (a int);"),
            Statement::Define("create table t (a int)")
        );
        assert_eq!(
            classify("with x as (select 1) select * from x;"),
            Statement::Select("with x as (select 1) select * from x")
        );
        assert_eq!(classify("\\q"), Statement::Quit);
        assert!(matches!(classify("DROP TABLE t;"), Statement::Unknown(_)));
    }
}
