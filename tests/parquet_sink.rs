//! Rolling, partitioned, typed file sinks, end to end through the `eddy`
//! binary: what a job writes as Parquet (partitioned by a column or by an
//! event-time pattern, rolled by rows, compressed) or as rolled NDJSON,
//! read back with the parquet crate, equals what the plain NDJSON sink
//! writes for the same query: every type, NULLs, partitions, several files.
//! Timestamps are stored adjusted to UTC; names sort and never repeat.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use serde_json::Value;

const QUERY: &str = r#"
CREATE TABLE events (
  id BIGINT NOT NULL, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR,
  ts TIMESTAMP(3), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
) WITH (connector = 'file', path = '${IN}');

CREATE TABLE plain (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
  WITH (connector = 'ndjson', path = '${OUT}/plain.ndjson');
CREATE TABLE by_country (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
  WITH (connector = 'parquet', path = '${OUT}/by_country', partition_by = 'country',
        rolling_rows = '7', row_group_size = '3', compression = 'snappy');
CREATE TABLE by_hour (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
  WITH (connector = 'parquet', path = '${OUT}/by_hour', partition_by = 'ts:dt=%Y-%m-%d/hour=%H',
        compression = 'none');
CREATE TABLE rolled (id BIGINT, n INT, amount DOUBLE, ok BOOLEAN, country VARCHAR, note VARCHAR, ts TIMESTAMP(3))
  WITH (connector = 'ndjson', path = '${OUT}/rolled', partition_by = 'country', rolling_rows = '5');

INSERT INTO plain SELECT * FROM events;
INSERT INTO by_country SELECT * FROM events;
INSERT INTO by_hour SELECT * FROM events;
INSERT INTO rolled SELECT * FROM events;
"#;

fn input() -> String {
    let countries = [Some("US"), Some("DE"), Some("a/b"), None];
    (0..60)
        .map(|i: i64| {
            let mut row = serde_json::Map::new();
            row.insert("id".into(), i.into());
            if i % 5 != 0 {
                row.insert("n".into(), (i * 3 - 40).into());
            }
            if i % 7 != 3 {
                row.insert("amount".into(), (i as f64 * 1.25 - 7.5).into());
            }
            row.insert(
                "ok".into(),
                if i % 4 == 1 {
                    Value::Null
                } else {
                    (i % 3 == 0).into()
                },
            );
            row.insert(
                "country".into(),
                countries[(i % 4) as usize].map_or(Value::Null, Value::from),
            );
            row.insert("note".into(), format!("row \"{i}\" é,/").into());
            row.insert("ts".into(), (1_700_000_000_000 + i * 60_000).into());
            Value::Object(row).to_string()
        })
        .map(|line| line + "\n")
        .collect()
}

/// A row as a JSON object with keys sorted, so rows compare whatever the
/// column order.
fn canonical(value: Value) -> String {
    let Value::Object(map) = value else {
        panic!("not an object")
    };
    let sorted: BTreeMap<String, Value> = map.into_iter().collect();
    serde_json::to_string(&sorted).unwrap()
}

/// `country=a%2Fb/` -> ("country", "a/b"); NULL partitions as JSON null.
fn partition_values(dir: &str) -> Vec<(String, Value)> {
    dir.split('/')
        .filter(|level| !level.is_empty())
        .filter_map(|level| level.split_once('='))
        .map(|(name, value)| {
            let value = if value == "__HIVE_DEFAULT_PARTITION__" {
                Value::Null
            } else {
                let mut out = Vec::new();
                let bytes = value.as_bytes();
                let mut i = 0;
                while i < bytes.len() {
                    if bytes[i] == b'%' {
                        out.push(u8::from_str_radix(&value[i + 1..i + 3], 16).unwrap());
                        i += 3;
                    } else {
                        out.push(bytes[i]);
                        i += 1;
                    }
                }
                Value::from(String::from_utf8(out).unwrap())
            };
            (name.to_string(), value)
        })
        .collect()
}

/// Rows read back from Parquet, timestamps turned back into the table's
/// naive milliseconds, column partitions put back from the path.
fn parquet_rows(dir: &Path, column_partitions: bool) -> Vec<String> {
    let mut rows = Vec::new();
    for (partition, batch) in common::read_parquet_tree(dir) {
        for field in batch.schema().fields() {
            if let DataType::Timestamp(_, tz) = field.data_type() {
                assert_eq!(
                    tz.as_deref(),
                    Some("UTC"),
                    "{} is stored adjusted to UTC",
                    field.name()
                );
            }
        }
        let columns = batch
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                DataType::Timestamp(_, _) => {
                    cast(c, &DataType::Timestamp(TimeUnit::Millisecond, None)).unwrap()
                }
                _ => c.clone(),
            })
            .collect::<Vec<_>>();
        let fields: Vec<_> = batch
            .schema()
            .fields()
            .iter()
            .zip(&columns)
            .map(|(f, c)| f.as_ref().clone().with_data_type(c.data_type().clone()))
            .collect();
        let batch = RecordBatch::try_new(
            std::sync::Arc::new(datafusion::arrow::datatypes::Schema::new(fields)),
            columns,
        )
        .unwrap();
        let mut text = Vec::new();
        eddy_connectors::json_lines::encode_json_lines(&batch, &mut text).unwrap();
        for line in String::from_utf8(text).unwrap().lines() {
            let mut value: Value = serde_json::from_str(line).unwrap();
            if column_partitions {
                for (name, v) in partition_values(&partition) {
                    value.as_object_mut().unwrap().insert(name, v);
                }
            }
            rows.push(canonical(value));
        }
    }
    rows.sort();
    rows
}

fn files_under(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(files_under(&path));
        } else {
            found.push(path.to_string_lossy().to_string());
        }
    }
    found.sort();
    found
}

#[test]
fn parquet_and_rolled_ndjson_hold_exactly_what_the_ndjson_sink_holds() {
    let dir = tempfile::tempdir().unwrap();
    let input_path = dir.path().join("events.ndjson");
    std::fs::write(&input_path, input()).unwrap();
    let sql = dir.path().join("q.sql");
    std::fs::write(&sql, QUERY).unwrap();
    let out = dir.path().join("out");
    for batch_size in ["1", "8192"] {
        let _ = std::fs::remove_dir_all(&out);
        let run = Command::new(env!("CARGO_BIN_EXE_eddy"))
            .arg("run")
            .arg(&sql)
            .args(["--quiet", "--batch-size", batch_size, "--set"])
            .arg(format!("IN={}", input_path.display()))
            .arg("--set")
            .arg(format!("OUT={}", out.display()))
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );

        let mut expected: Vec<String> = std::fs::read_to_string(out.join("plain.ndjson"))
            .unwrap()
            .lines()
            .map(|l| canonical(serde_json::from_str(l).unwrap()))
            .collect();
        expected.sort();
        assert_eq!(expected.len(), 60);

        assert_eq!(
            parquet_rows(&out.join("by_country"), true),
            expected,
            "by_country"
        );
        assert_eq!(
            parquet_rows(&out.join("by_hour"), false),
            expected,
            "by_hour"
        );

        let mut rolled = Vec::new();
        for file in files_under(&out.join("rolled")) {
            let partition = Path::new(&file)
                .parent()
                .unwrap()
                .strip_prefix(out.join("rolled"))
                .unwrap()
                .to_string_lossy()
                .to_string();
            for line in std::fs::read_to_string(&file).unwrap().lines() {
                let mut value: Value = serde_json::from_str(line).unwrap();
                for (name, v) in partition_values(&partition) {
                    value.as_object_mut().unwrap().insert(name, v);
                }
                rolled.push(canonical(value));
            }
        }
        rolled.sort();
        assert_eq!(rolled, expected, "rolled NDJSON");

        // Partitions as directories, several rolled files, names unique and
        // sorted by the time they were opened.
        let by_country = files_under(&out.join("by_country"));
        for partition in [
            "country=US",
            "country=DE",
            "country=a%2Fb",
            "country=__HIVE_DEFAULT_PARTITION__",
        ] {
            let files: Vec<&String> = by_country
                .iter()
                .filter(|f| f.contains(&format!("/{partition}/")))
                .collect();
            assert_eq!(
                files.len(),
                3,
                "15 rows of {partition} in files of at most 7: {by_country:?}"
            );
        }
        let hours = files_under(&out.join("by_hour"));
        assert!(
            hours.iter().any(|f| f.contains("/dt=2023-11-14/hour=22/")),
            "{hours:?}"
        );
        assert!(
            hours.iter().any(|f| f.contains("/dt=2023-11-14/hour=23/")),
            "{hours:?}"
        );
        let rolled_files = files_under(&out.join("rolled"));
        assert_eq!(
            rolled_files.len(),
            4 * 3,
            "15 rows per partition in files of 5: {rolled_files:?}"
        );
        let names: Vec<&str> = by_country
            .iter()
            .map(|f| f.rsplit('/').next().unwrap())
            .collect();
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "file names never repeat");
        assert!(
            names
                .iter()
                .all(|n| n.starts_with("part-2") && n.ends_with(".parquet")),
            "{names:?}"
        );
    }
}

#[test]
fn bad_sink_options_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let sql = dir.path().join("q.sql");
    std::fs::write(dir.path().join("empty.ndjson"), "").unwrap();
    for (options, message) in [
        (
            "compression = 'lzma'",
            "'lzma' is not one of 'zstd', 'snappy', 'gzip', 'none'",
        ),
        (
            "partition_by = 'nope'",
            "no column 'nope' (columns: id, ts)",
        ),
        ("partition_by = 'id:%Y'", "needs a TIMESTAMP column"),
        ("rolling_bytes = '5 parsecs'", "is not a size unit"),
        ("rolling_rowz = '5'", "did you mean 'rolling_rows'?"),
    ] {
        std::fs::write(
            &sql,
            format!(
                "CREATE TABLE t (id BIGINT, ts TIMESTAMP(3)) WITH (connector = 'file', path = '{}');
                 CREATE TABLE o (id BIGINT, ts TIMESTAMP(3)) WITH (connector = 'parquet', path = '{}', {options});
                 INSERT INTO o SELECT id, ts FROM t;",
                dir.path().join("empty.ndjson").display(),
                dir.path().join("o").display()
            ),
        )
        .unwrap();
        let run = Command::new(env!("CARGO_BIN_EXE_eddy"))
            .arg("run")
            .arg(&sql)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            !run.status.success() && stderr.contains(message),
            "{options}: {stderr}"
        );
    }
}
