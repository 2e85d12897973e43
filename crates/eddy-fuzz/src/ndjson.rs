//! The NDJSON target: arbitrary bytes through the NDJSON source and the
//! source runner of two real tables (planned from SQL, with computed event
//! time, NOT NULL columns, decimals, timestamps, the clock-skew guard).
//!
//! Invariants, besides "no panic, no hang": every line is accounted for
//! (decoded rows + bad lines = non-blank lines, counted independently here)
//! and every decoded row is on time, late or bad.

use std::io::{BufReader, Cursor, Read};

use datafusion::arrow::datatypes::SchemaRef;
use eddy_connectors::ndjson::NdjsonSource;
use eddy_engine::graph::NodeKind;
use eddy_engine::source::{SourceContext, SourceLayout, SourceReader, SourceRunner};

use crate::mutate::Rng;

const TABLES: &str = r#"
CREATE TABLE events (
  id BIGINT NOT NULL, k VARCHAR NOT NULL, amount DOUBLE, n INT, flag BOOLEAN, ts_ms BIGINT,
  ts TIMESTAMP GENERATED ALWAYS AS (to_timestamp_millis(ts_ms)) STORED,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (connector = 'file', path = 'unused', max_future_skew = '1 hour', allowed_lateness = '1s');
CREATE TABLE readings (
  device VARCHAR, ts TIMESTAMP(3) NOT NULL, level DECIMAL(10, 2), tags VARCHAR,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (connector = 'file', path = 'unused');
SELECT * FROM events;
SELECT * FROM readings;
"#;

/// Seeds: good and near-good rows of both tables.
pub const SEEDS: &[&str] = &[
    r#"{"id": 1, "k": "a", "amount": 2.5, "n": 3, "flag": true, "ts_ms": 1700000000000}"#,
    r#"{"id": 2, "k": "b", "amount": "7", "ts_ms": 1700000001000}"#,
    r#"{"device": "d1", "ts": "2023-11-14T22:13:20.000Z", "level": 12.25, "tags": "x"}"#,
    r#"{"device": null, "ts": "2023-11-14 22:13:21", "level": "3.5"}"#,
];

/// Tokens that matter to JSON decoding.
pub const DICTIONARY: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    "\\",
    ":",
    ",",
    "null",
    "true",
    "false",
    "1e400",
    "-1e400",
    "99999999999999999999999",
    "-0",
    "0.1",
    "1e-400",
    "\\u0000",
    "\\ud800",
    "\"ts\": ",
    "\"id\": ",
    "\"k\": ",
    "\n",
    "\r\n",
    "\r",
    " ",
    "\t",
    "NaN",
    "Infinity",
    "\u{feff}",
    "\"2023-02-30T25:61:61Z\"",
    "9223372036854775807",
    "-9223372036854775808",
    "\"ts_ms\": 9223372036854775807",
];

/// One table: the schema the connector decodes into and the source layout.
pub struct Table {
    schema: SchemaRef,
    layout: SourceLayout,
}

/// Plans the target's tables with the real SQL front end.
pub fn tables() -> Vec<Table> {
    let files = [eddy_sql::SqlFile {
        name: "fuzz.sql".into(),
        text: TABLES.into(),
    }];
    let job = eddy_sql::compile(&files, &Default::default()).unwrap_or_else(|e| {
        eprintln!("the fuzz target's tables do not plan: {e}");
        std::process::exit(2)
    });
    job.graph
        .nodes
        .iter()
        .filter_map(|node| match &node.kind {
            NodeKind::Source { spec, layout } => Some(Table {
                schema: spec.schema.clone(),
                layout: layout.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// Lines the source must account for: non-blank after the line break is
/// removed, or longer than `max_line_bytes`.
fn expected_rows(input: &[u8], max_line_bytes: usize) -> usize {
    let mut lines: Vec<&[u8]> = input.split(|&b| b == b'\n').collect();
    if input.ends_with(b"\n") || input.is_empty() {
        lines.pop();
    }
    lines
        .into_iter()
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line))
        .filter(|line| line.len() > max_line_bytes || !line.iter().all(u8::is_ascii_whitespace))
        .count()
}

/// Runs one input through every table; an invariant broken is an error.
pub fn check(tables: &[Table], input: &[u8], rng: &mut Rng) -> Result<(), String> {
    for (t, table) in tables.iter().enumerate() {
        let batch_size = *rng.pick(&[1, 3, 64, 8192]);
        let max_line_bytes = *rng.pick(&[16, 1024, 16 << 20]);
        let threads = *rng.pick(&[1, 1, 2]);
        let reader: Box<dyn Read + Send> = Box::new(Cursor::new(input.to_vec()));
        let mut source = NdjsonSource::new(
            BufReader::with_capacity(*rng.pick(&[7, 4096]), reader),
            "fuzz.ndjson".into(),
            table.schema.clone(),
            batch_size,
            threads,
            false,
            &[],
        )
        .with_max_line_bytes(max_line_bytes);
        let mut runner = SourceRunner::new(table.layout.clone());
        let mut ctx = SourceContext::new("fuzz");
        let mut judge_ctx = SourceContext::new("fuzz");
        let (mut decoded, mut bad_lines, mut judged) = (0, 0, 0);
        loop {
            let batch = source
                .next_batch(&mut ctx)
                .map_err(|e| format!("table {t}: reading failed: {e}"))?;
            bad_lines += ctx.take_bad_rows().len();
            let Some(batch) = batch else { break };
            decoded += batch.num_rows();
            let origins = ctx.take_origins();
            let out = runner
                .process(&batch, None, origins.as_deref(), &mut judge_ctx)
                .map_err(|e| format!("table {t}: judging failed: {e}"))?;
            judged += out.on_time.map_or(0, |b| b.num_rows())
                + out.late.map_or(0, |b| b.num_rows())
                + judge_ctx.take_bad_rows().len();
        }
        let expected = expected_rows(input, max_line_bytes);
        if decoded + bad_lines != expected {
            return Err(format!(
                "table {t} (max_line_bytes {max_line_bytes}, batch size {batch_size}): {decoded} rows + {bad_lines} bad lines, expected {expected} lines"
            ));
        }
        if judged != decoded {
            return Err(format!(
                "table {t}: {decoded} rows decoded but {judged} on time, late or bad"
            ));
        }
    }
    Ok(())
}
