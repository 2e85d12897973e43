//! Loading SQL files and running a job: what `eddy run` and `eddy explain`
//! (and the tests) call.
//!
//! In: paths to `.sql` files or directories (every `*.sql` inside, in name
//! order), `--set` parameters, connector overrides and checkpoint settings.
//! Out: the compiled graph, a running job's handle, or an ended job's
//! report.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use eddy_connectors::ConnectorConfig;
use eddy_engine::runtime::{JobConfig, JobHandle, JobReport, JobState};
use eddy_python::FunctionReport;
use eddy_sql::{compile_with, CompileOptions, CompiledJob, SqlFile};

use crate::error::{CliError, Result};

/// Reads the SQL files named by `paths` (files, or directories of `*.sql`).
/// An argument that is no existing path but looks like SQL (it contains a
/// space) is taken as SQL text, named `<sql>`.
pub fn load_sql(paths: &[PathBuf]) -> Result<Vec<SqlFile>> {
    let mut files = Vec::new();
    for path in paths {
        let text = path.to_string_lossy();
        if !path.exists() && text.contains(' ') {
            files.push(SqlFile {
                name: "<sql>".into(),
                text: text.into_owned(),
            });
            continue;
        }
        let io = |source| CliError::Io {
            path: path.display().to_string(),
            source,
        };
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(io)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "sql"))
                .collect();
            entries.sort();
            if entries.is_empty() {
                return Err(CliError::Usage(format!(
                    "{}: no .sql files in this directory",
                    path.display()
                )));
            }
            for entry in entries {
                files.push(read_file(&entry)?);
            }
        } else {
            files.push(read_file(path)?);
        }
    }
    Ok(files)
}

fn read_file(path: &Path) -> Result<SqlFile> {
    let text = std::fs::read_to_string(path).map_err(|source| CliError::Io {
        path: path.display().to_string(),
        source,
    })?;
    Ok(SqlFile {
        name: path.display().to_string(),
        text,
    })
}

/// Parses `K=V` pairs of `--set` and `--input`.
pub fn parse_pairs(pairs: &[String], flag: &str) -> Result<BTreeMap<String, String>> {
    pairs
        .iter()
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| CliError::Usage(format!("{flag} expects NAME=VALUE, got '{pair}'")))
        })
        .collect()
}

/// Compiles SQL files with parameters.
pub fn compile_files(files: &[SqlFile], params: &BTreeMap<String, String>) -> Result<CompiledJob> {
    compile_files_with(files, params, &CompileOptions::default())
}

/// [`compile_files`] with `options` (how Python functions run).
pub fn compile_files_with(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    options: &CompileOptions,
) -> Result<CompiledJob> {
    let registry = eddy_connectors::registry::Registry::standard();
    let mut options = options.clone();
    // The connectors answer the planner's questions of them.
    options
        .connectors
        .get_or_insert_with(|| std::sync::Arc::new(registry.clone()));
    let mut job = compile_with(files, params, &options)?;
    registry.drop_unused_filters(&mut job.graph);
    Ok(job)
}

/// Compiles and starts a job; the handle watches and steers it.
pub fn start(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    connectors: ConnectorConfig,
    config: &JobConfig,
) -> Result<JobHandle> {
    start_compiled(compile_files(files, params)?, connectors, config)
}

/// Starts a compiled job. (Its Python functions were loaded while it was
/// compiled: see [`CompileOptions::check_python_functions`].)
pub fn start_compiled(
    job: CompiledJob,
    connectors: ConnectorConfig,
    config: &JobConfig,
) -> Result<JobHandle> {
    Ok(eddy_launch::start_single(
        Arc::new(job.graph),
        connectors,
        &eddy_launch::plain_connectors(),
        config,
    )?)
}

/// The run summary's lines for Python functions (none without them).
pub fn python_summary(reports: &[FunctionReport]) -> Vec<String> {
    reports
        .iter()
        .map(|r| {
            let raised = match (&r.first_error, r.raised) {
                (_, 0) => String::new(),
                (Some(first), n) => format!(", {n} raised (value NULL; the first: {first})"),
                (None, n) => format!(", {n} raised (value NULL)"),
            };
            format!(
                "python function {}: {} rows in {} calls{raised}",
                r.name, r.rows, r.calls
            )
        })
        .collect()
}

/// Compiles and runs a job to its end (finished or stopped).
pub fn run(
    files: &[SqlFile],
    params: &BTreeMap<String, String>,
    connectors: ConnectorConfig,
    config: &JobConfig,
) -> Result<JobReport> {
    Ok(start(files, params, connectors, config)?.wait()?)
}

fn mebibytes(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// A short human summary of a finished job (sources, sinks).
pub fn summary(report: &JobReport) -> String {
    let mut lines = Vec::new();
    if let Some(checkpoint) = report.already_finished {
        return format!("the job had already finished (its checkpoint {checkpoint} says so); nothing was run or written again");
    }
    if let Some(from) = report.checkpoints.restored_from {
        lines.push(format!("resumed from checkpoint {from}"));
    }
    if report.nodes.iter().any(|node| node.kind == "key_split") {
        lines.push(format!(
            "keyed operators ran as {} instances each (--parallelism)",
            report.parallelism
        ));
    }
    for node in &report.nodes {
        let m = &node.metrics;
        match node.kind.as_str() {
            "source" => lines.push(format!(
                "source {}: {} rows read = {} on time + {} late + {} bad",
                node.name,
                m.rows_in,
                m.rows_in.saturating_sub(m.late_rows + m.bad_rows),
                m.late_rows,
                m.bad_rows
            )),
            "sink" => lines.push(format!("sink {}: {} rows written", node.name, m.rows_in)),
            "calc" | "union" => {}
            _ => {
                let inputs: Vec<String> = m.rows_in_by_input.iter().map(u64::to_string).collect();
                lines.push(format!(
                    "{}: {} rows in ({}), {} rows out, {} in state (at most {}; {}, at most {}){}{}",
                    node.name,
                    m.rows_in,
                    inputs.join(" + "),
                    m.rows_out,
                    m.state_rows,
                    m.peak_state_rows,
                    mebibytes(m.state_bytes),
                    mebibytes(m.peak_state_bytes),
                    if m.spill_written_bytes > 0 {
                        format!(
                            ", spilled {} to disk and read {} back ({} on disk)",
                            mebibytes(m.spill_written_bytes),
                            mebibytes(m.spill_read_bytes),
                            mebibytes(m.spill_disk_bytes)
                        )
                    } else {
                        String::new()
                    },
                    if m.late_rows > 0 {
                        format!(", {} dropped as late", m.late_rows)
                    } else {
                        String::new()
                    }
                ));
            }
        }
    }
    lines.extend(report.connectors.iter().cloned());
    let c = &report.checkpoints;
    if let Some(last) = c.last_id {
        lines.push(format!(
            "checkpoints: {} taken, {} written in all; the last #{last} ({}, {} ms); longest {} ms",
            c.completed,
            mebibytes(c.total_bytes),
            mebibytes(c.last_bytes),
            c.last_duration_ms,
            c.max_duration_ms
        ));
    }
    let verb = if report.state == JobState::Stopped {
        "stopped"
    } else {
        "finished"
    };
    lines.push(format!("{verb} in {} ms", report.elapsed_ms));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decode threads one job's sources get, by how many NDJSON files
    /// it reads.
    fn decode_threads(sql: &str, inputs: &[(&str, &str)]) -> usize {
        let files = [SqlFile {
            name: "<test>".into(),
            text: sql.into(),
        }];
        let job = compile_files(&files, &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
        let config = ConnectorConfig {
            decode_threads: 4,
            inputs: inputs
                .iter()
                .map(|(t, p)| (t.to_string(), p.to_string()))
                .collect(),
            ..ConnectorConfig::default()
        };
        eddy_connectors::Connectors::new(config)
            .sharing_decode_threads(&job.graph)
            .config()
            .decode_threads
    }

    const TWO_SOURCES: &str = "
CREATE TABLE a (k VARCHAR) WITH (connector = 'file', path = 'a.ndjson');
CREATE TABLE b (order_id VARCHAR) WITH (connector = 'generator', stream = 'orders');
CREATE TABLE out (k VARCHAR) WITH (connector = 'blackhole');
INSERT INTO out SELECT k FROM a UNION ALL SELECT order_id FROM b;";

    #[test]
    fn ndjson_sources_share_the_decode_threads() {
        // One NDJSON file (the generator decodes nothing): all four.
        assert_eq!(decode_threads(TWO_SOURCES, &[]), 4);
        // `--input` makes the generator's table a file too: two each.
        assert_eq!(decode_threads(TWO_SOURCES, &[("b", "b.ndjson")]), 2);
        // Or stdin.
        assert_eq!(decode_threads(TWO_SOURCES, &[("b", "-")]), 2);
    }

    fn sql(text: &str) -> [SqlFile; 1] {
        [SqlFile {
            name: "<test>".into(),
            text: text.into(),
        }]
    }

    /// Why `text` does not compile (empty when it does).
    fn refusal(text: &str) -> String {
        compile_files(&sql(text), &BTreeMap::new())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    fn kinds(job: &CompiledJob) -> Vec<String> {
        job.graph
            .nodes
            .iter()
            .map(|n| match &n.kind {
                eddy_engine::graph::NodeKind::Operator(plan) => plan.kind().to_string(),
                _ => n.name.clone(),
            })
            .collect()
    }

    const ORDERS_CDC: &str =
        "CREATE TABLE orders (id BIGINT, amount BIGINT, PRIMARY KEY (id) NOT ENFORCED) \
         WITH ('connector' = 'postgres-cdc', 'hostname' = 'h', 'username' = 'u', 'password' = 'p', \
         'database-name' = 'd', 'table-name' = 'orders', 'slot.name' = 's'{MODE}); \
         CREATE TABLE out (n BIGINT) WITH ('connector' = 'blackhole'); \
         INSERT INTO out SELECT count(*) FROM orders;";

    #[test]
    fn the_connectors_say_which_tables_are_changes_by_key() {
        let changes = compile_files(&sql(&ORDERS_CDC.replace("{MODE}", "")), &BTreeMap::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            kinds(&changes).contains(&"changelog_normalize".to_string()),
            "{:?}",
            kinds(&changes)
        );
        // Read once: a plain table, no changelog step.
        let once = ORDERS_CDC.replace("{MODE}", ", 'scan.startup.mode' = 'snapshot'");
        let snapshot =
            compile_files(&sql(&once), &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
        assert!(!kinds(&snapshot).contains(&"changelog_normalize".to_string()));
        // Without the connectors' answers (eddy_sql alone) the planner
        // knows nothing of them: the table reads as its format says.
        let alone = eddy_sql::compile(&sql(&ORDERS_CDC.replace("{MODE}", "")), &BTreeMap::new())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!kinds(&alone).contains(&"changelog_normalize".to_string()));
        // Changes by key need the key.
        let keyless = ORDERS_CDC
            .replace("{MODE}", "")
            .replace(", PRIMARY KEY (id) NOT ENFORCED", "");
        let refused = refusal(&keyless);
        assert!(
            refused.contains("reads a table's changes (connector 'postgres-cdc')")
                && refused.contains("PRIMARY KEY"),
            "{refused}"
        );
    }

    #[test]
    fn an_upsert_format_needs_a_connector_whose_records_have_keys() {
        let on = |connector: &str| {
            compile_files(
                &sql(&format!(
                    "CREATE TABLE t (k BIGINT, v BIGINT, PRIMARY KEY (k) NOT ENFORCED) WITH \
                     ('connector' = '{connector}', 'topic' = 't', 'path' = 't.ndjson', \
                     'properties.bootstrap.servers' = 'localhost:9092', \
                     'format' = 'upsert-json', 'key_column' = 'k'); \
                     CREATE TABLE out (n BIGINT) WITH ('connector' = 'blackhole'); \
                     INSERT INTO out SELECT count(*) FROM t;"
                )),
                &BTreeMap::new(),
            )
        };
        let kafka = on("kafka").unwrap_or_else(|e| panic!("{e}"));
        assert!(kinds(&kafka).contains(&"changelog_normalize".to_string()));
        let file = on("file").err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            file.contains("format 'upsert-json' reads an upsert topic"),
            "{file}"
        );
    }

    #[test]
    fn metadata_columns_are_those_the_connector_knows() {
        let table = |column: &str| {
            ORDERS_CDC
                .replace("{MODE}", "")
                .replace("amount BIGINT,", &format!("amount BIGINT, {column},"))
        };
        let known = table("tbl STRING METADATA FROM 'table_name' VIRTUAL");
        compile_files(&sql(&known), &BTreeMap::new()).unwrap_or_else(|e| panic!("{e}"));
        let unknown = table("tbl STRING METADATA FROM 'partition' VIRTUAL");
        let refused = refusal(&unknown);
        assert!(
            refused.contains("'partition' is not a postgres-cdc metadata key")
                && refused.contains("'table_name'"),
            "{refused}"
        );
    }

    #[test]
    fn a_sink_connector_says_what_explain_shows_of_it() {
        let job = |delivery: &str| {
            let job = compile_files(
                &sql(&format!(
                    "CREATE TABLE t (k BIGINT) WITH ('connector' = 'generator', 'rows' = '1'); \
                     CREATE TABLE out (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'totals', \
                     'properties.bootstrap.servers' = 'localhost:9092', 'format' = 'json'{delivery}); \
                     CREATE TABLE quiet (k BIGINT) WITH ('connector' = 'blackhole'); \
                     INSERT INTO out SELECT k FROM t; INSERT INTO quiet SELECT k FROM t;"
                )),
                &BTreeMap::new(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let line = |name: &str| {
                let id = job.graph.nodes.iter().position(|n| n.name == name);
                job.graph.describe_node(id.expect("the sink is planned"))
            };
            (line("out"), line("quiet"))
        };
        let (kafka, blackhole) = job(", 'delivery' = 'at_least_once'");
        assert!(
            kafka.contains("sink out [connector=kafka, topic=totals, delivery: at least once]"),
            "{kafka}"
        );
        assert!(
            blackhole.contains("sink quiet [connector=blackhole]"),
            "{blackhole}"
        );
        let (exactly_once, _) = job("");
        assert!(
            exactly_once.contains("delivery: exactly once with checkpoints"),
            "{exactly_once}"
        );
        // eddy_sql alone knows no connector: the line names it only.
        let alone = eddy_sql::compile(
            &sql(
                "CREATE TABLE t (k BIGINT) WITH ('connector' = 'generator', 'rows' = '1'); \
                  CREATE TABLE out (k BIGINT) WITH ('connector' = 'kafka', 'topic' = 'totals'); \
                  INSERT INTO out SELECT k FROM t;",
            ),
            &BTreeMap::new(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let sink = alone.graph.nodes.len() - 1;
        assert!(
            alone
                .graph
                .describe_node(sink)
                .contains("sink out [connector=kafka] "),
            "{}",
            alone.graph.describe_node(sink)
        );
    }
}
