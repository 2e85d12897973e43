//! The `datagen` connector driven through [`Connector`] and
//! [`SourceReader`]: the rows its options ask for, resuming, pacing, and
//! the errors bad options get.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema, TimeUnit};
use eddy_engine::graph::ConnectorSpec;
use eddy_engine::source::SourceContext;

use super::DatagenConnector;
use crate::config::ConnectorConfig;
use crate::connector::{Connector, Role};

fn spec(columns: &[(&str, DataType)], options: &[(&str, &str)]) -> ConnectorSpec {
    ConnectorSpec {
        table: "t".into(),
        connector: "datagen".into(),
        options: options
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        schema: Arc::new(Schema::new(
            columns
                .iter()
                .map(|(name, t)| Field::new(*name, t.clone(), true))
                .collect::<Vec<_>>(),
        )),
        declared_at: None,
        primary_key: Vec::new(),
        filter: None,
        unread_columns: Vec::new(),
        explain: None,
    }
}

fn config(batch_size: usize) -> ConnectorConfig {
    ConnectorConfig {
        batch_size,
        ..ConnectorConfig::default()
    }
}

/// Every batch the table's source makes (at most `limit`), from `resume`.
fn read(
    spec: &ConnectorSpec,
    batch_size: usize,
    resume: Option<&serde_json::Value>,
    limit: usize,
) -> (Vec<RecordBatch>, serde_json::Value) {
    let mut source = DatagenConnector
        .open_source(&config(batch_size), spec, resume)
        .unwrap();
    let mut ctx = SourceContext::new("t");
    let mut batches = Vec::new();
    while batches.len() < limit {
        match source.next_batch(&mut ctx).unwrap() {
            Some(b) => batches.push(b),
            None => break,
        }
    }
    (batches, source.position())
}

fn all(spec: &ConnectorSpec, batch_size: usize) -> RecordBatch {
    let (batches, _) = read(spec, batch_size, None, usize::MAX);
    concat_batches(&spec.schema, &batches).unwrap()
}

const FAST: (&str, &str) = ("rows-per-second", "1000000000");

#[test]
fn sequences_count_from_start_to_end_and_the_shortest_ends_the_table() {
    let spec = spec(
        &[
            ("id", DataType::Int64),
            ("small", DataType::Int32),
            ("label", DataType::Utf8),
            ("x", DataType::Float64),
        ],
        &[
            FAST,
            ("fields.id.kind", "sequence"),
            ("fields.id.start", "10"),
            ("fields.id.end", "1000"),
            ("fields.small.kind", "sequence"),
            ("fields.small.start", "-3"),
            ("fields.small.end", "3"),
            ("fields.label.kind", "sequence"),
            ("fields.label.start", "98"),
            ("fields.label.end", "5000"),
            ("fields.x.kind", "sequence"),
            ("fields.x.start", "1"),
            ("fields.x.end", "7"),
        ],
    );
    let rows = all(&spec, 3);
    assert_eq!(rows.num_rows(), 7);
    let id: Vec<i64> = rows.column(0).as_primitive::<Int64Type>().values().to_vec();
    assert_eq!(id, (10..17).collect::<Vec<_>>());
    let small: Vec<i32> = rows.column(1).as_primitive::<Int32Type>().values().to_vec();
    assert_eq!(small, (-3..=3).collect::<Vec<_>>());
    let label: Vec<&str> = rows.column(2).as_string::<i32>().iter().flatten().collect();
    assert_eq!(label, ["98", "99", "100", "101", "102", "103", "104"]);
    assert_eq!(
        rows.column(3)
            .as_primitive::<datafusion::arrow::datatypes::Float64Type>()
            .value(6),
        7.0
    );
}

#[test]
fn number_of_rows_bounds_a_random_table_and_its_values_keep_to_their_ranges() {
    let spec = spec(
        &[
            ("n", DataType::Int32),
            ("s", DataType::Utf8),
            ("b", DataType::Boolean),
            ("t", DataType::Timestamp(TimeUnit::Millisecond, None)),
        ],
        &[
            FAST,
            ("number-of-rows", "5000"),
            ("fields.n.min", "-5"),
            ("fields.n.max", "5"),
            ("fields.s.length", "12"),
            ("fields.s.null-rate", "0.25"),
            ("fields.t.max-past", "10s"),
        ],
    );
    let rows = all(&spec, 1024);
    assert_eq!(rows.num_rows(), 5000);
    let n = rows.column(0).as_primitive::<Int32Type>();
    assert!(n.values().iter().all(|v| (-5..=5).contains(v)));
    assert!(
        (-5..=5).all(|v| n.values().contains(&v)),
        "every value drawn"
    );
    let s = rows.column(1).as_string::<i32>();
    let nulls = s.null_count();
    assert!(
        (1000..1500).contains(&nulls),
        "about a quarter NULL: {nulls}"
    );
    assert!(s
        .iter()
        .flatten()
        .all(|v| v.len() == 12 && v.bytes().all(|c| c.is_ascii_alphanumeric())));
    let b = rows.column(2).as_boolean();
    assert!((2000..3000).contains(&b.true_count()), "{}", b.true_count());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let t = rows
        .column(3)
        .as_primitive::<datafusion::arrow::datatypes::TimestampMillisecondType>();
    assert!(t.values().iter().all(|v| (now - 60_000..=now).contains(v)));
}

#[test]
fn the_same_seed_makes_the_same_rows_and_another_seed_others() {
    let columns = [("n", DataType::Int64), ("s", DataType::Utf8)];
    let options = |seed: &'static str| {
        spec(
            &columns,
            &[
                FAST,
                ("number-of-rows", "300"),
                ("seed", seed),
                ("fields.s.length", "5"),
            ],
        )
    };
    assert_eq!(all(&options("1"), 64), all(&options("1"), 7));
    assert_ne!(all(&options("1"), 64), all(&options("2"), 64));
}

#[test]
fn a_resumed_source_makes_the_rows_after_its_position() {
    let spec = spec(
        &[("id", DataType::Int64), ("r", DataType::Float64)],
        &[
            FAST,
            ("fields.id.kind", "sequence"),
            ("fields.id.start", "1"),
            ("fields.id.end", "1000"),
        ],
    );
    let whole = all(&spec, 100);
    let (first, position) = read(&spec, 100, None, 3);
    assert_eq!(position, serde_json::json!({"row": 300}));
    let (rest, end) = read(&spec, 100, Some(&position), usize::MAX);
    assert_eq!(end, serde_json::json!({"row": 1000}));
    let resumed = concat_batches(&spec.schema, first.iter().chain(&rest)).unwrap();
    assert_eq!(resumed, whole);
    // A position it cannot read is refused as such, not as an option.
    let bad = serde_json::json!({"row": "three hundred"});
    let err = DatagenConnector
        .open_source(&config(100), &spec, Some(&bad))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.starts_with("its checkpointed position {\"row\":\"three hundred\"} cannot be read"),
        "{err}"
    );
}

#[test]
fn rows_per_second_paces_the_rows_on_the_wall_clock() {
    let spec = spec(
        &[("id", DataType::Int64)],
        &[
            ("rows-per-second", "1000"),
            ("fields.id.kind", "sequence"),
            ("fields.id.start", "1"),
            ("fields.id.end", "200"),
        ],
    );
    let started = Instant::now();
    let rows = all(&spec, 4096);
    assert_eq!(rows.num_rows(), 200);
    // 200 rows at 1000 a second: not before 0.2 s (less a first batch).
    assert!(
        started.elapsed().as_millis() >= 150,
        "{:?}",
        started.elapsed()
    );
    let mut source = DatagenConnector
        .open_source(&config(4096), &spec, None)
        .unwrap();
    assert!(source.bounded());
    let batch = source
        .next_batch(&mut SourceContext::new("t"))
        .unwrap()
        .unwrap();
    assert_eq!(
        batch.num_rows(),
        50,
        "a twentieth of a second's rows a batch"
    );
}

#[test]
fn a_table_without_an_end_is_live() {
    let spec = spec(&[("n", DataType::Int64)], &[FAST]);
    let source = DatagenConnector
        .open_source(&config(10), &spec, None)
        .unwrap();
    assert!(!source.bounded());
}

#[test]
fn bad_options_are_refused_naming_the_option_and_why() {
    let check = |columns: &[(&str, DataType)], options: &[(&str, &str)]| {
        DatagenConnector
            .check(&config(10), &spec(columns, options), Role::Source)
            .unwrap_err()
            .to_string()
    };
    let int = [("id", DataType::Int64)];
    /// Columns, options, and what the error says.
    type Case<'a> = (&'a [(&'a str, DataType)], &'a [(&'a str, &'a str)], &'a str);
    let cases: &[Case] = &[
        (
            &int,
            &[("fields.id.kind", "sequence"), ("fields.id.start", "1")],
            "needs its start and end",
        ),
        (
            &int,
            &[
                ("fields.id.kind", "sequence"),
                ("fields.id.start", "5"),
                ("fields.id.end", "1"),
            ],
            "ends (1) before it starts (5)",
        ),
        (&int, &[("fields.id.kind", "zipf")], "'zipf' is not a kind"),
        (&int, &[("fields.id.length", "3")], "fields.id.length"),
        (
            &int,
            &[("fields.id.colour", "red")],
            "'colour' is not a field option",
        ),
        (
            &int,
            &[("fields.other.kind", "random")],
            "no physical column 'other'",
        ),
        (
            &int,
            &[("fields.id.min", "ten")],
            "option 'fields.id.min': 'ten' is not a valid number",
        ),
        (
            &int,
            &[("fields.id.null-rate", "2")],
            "not a share from 0 to 1",
        ),
        (&int, &[("rows-per-second", "0")], "0 rows a second"),
        (
            &[("b", DataType::Boolean)],
            &[
                ("fields.b.kind", "sequence"),
                ("fields.b.start", "1"),
                ("fields.b.end", "2"),
            ],
            "cannot make sequence values of column 'b'",
        ),
        (
            &[("d", DataType::Date32)],
            &[],
            "cannot make random values of column 'd'",
        ),
        (
            &[("small", DataType::Int8)],
            &[
                ("fields.small.kind", "sequence"),
                ("fields.small.start", "1"),
                ("fields.small.end", "1000"),
            ],
            "does not fit column 'small'",
        ),
    ];
    for (columns, options, expected) in cases {
        let error = check(columns, options);
        assert!(error.contains(expected), "{options:?}: {error}");
    }
}

#[test]
fn a_sequence_column_declared_in_any_case_takes_its_options() {
    let spec = spec(
        &[("orderId", DataType::Int64)],
        &[
            FAST,
            ("fields.orderid.kind", "sequence"),
            ("fields.orderid.start", "1"),
            ("fields.orderid.end", "4"),
        ],
    );
    assert_eq!(all(&spec, 10).num_rows(), 4);
}
