//! Which files and row groups a Parquet or Delta source may skip: those
//! whose statistics show that no row meets the table's pushed-down filter
//! ([`eddy_engine::graph::SourceFilter`]).
//!
//! In: the filter, the table's physical columns, and per container what is
//! known of it: a file's partition values and Delta statistics
//! (`numRecords`, `minValues`, `maxValues`, `nullCount`), or a file's row
//! group statistics from its footer. Out: per container, whether it may
//! hold a wanted row (DataFusion's [`PruningPredicate`] decides).
//!
//! Statistics are used only where they bound the values the reader
//! produces: floats (NaN) are never used; a Delta text maximum of 32 or
//! more characters may be a truncated prefix and is not used; a Delta
//! timestamp maximum is used only for a column declared at millisecond or
//! coarser precision (writers store it truncated to milliseconds).
//! Everything else unknown leaves the container in.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, BooleanArray, UInt64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field, SchemaRef, TimeUnit};
use datafusion::common::pruning::PruningStatistics;
use datafusion::common::{Column, ScalarValue};
use datafusion::parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use datafusion::parquet::file::metadata::ParquetMetaData;
use datafusion::physical_optimizer::pruning::{PruningPredicate, PruningPredicateBuilder};
use eddy_engine::graph::SourceFilter;

use super::reader::FileToRead;

/// A source's pushed-down filter, ready to judge statistics.
///
/// ```
/// use std::sync::Arc;
/// use datafusion::arrow::datatypes::{DataType, Field, Schema};
/// use datafusion::logical_expr::Operator;
/// use datafusion::physical_expr::expressions::{binary, col, lit};
/// use eddy_connectors::parquet::{pruning::Pruner, reader::FileToRead};
/// use eddy_engine::graph::SourceFilter;
///
/// let schema = Arc::new(Schema::new(vec![Field::new("country", DataType::Utf8, true)]));
/// let predicate = binary(col("country", &schema)?, Operator::Eq, lit("US"), &schema)?;
/// let filter = SourceFilter {
///     predicate,
///     text: "country = 'US'".into(),
///     observed_columns: Vec::new(),
/// };
/// let pruner = Pruner::new(Some(&filter), &schema).expect("partition values can rule files out");
/// let file = |country: &str| FileToRead {
///     path: format!("t/country={country}/part-0.parquet").into(),
///     partition_values: [("country".to_string(), Some(country.to_string()))].into(),
///     stats: None,
/// };
/// assert_eq!(pruner.files(&[file("US"), file("DE")]), [true, false]);
/// # Ok::<(), datafusion::error::DataFusionError>(())
/// ```
#[derive(Debug)]
pub struct Pruner {
    predicate: PruningPredicate,
    schema: SchemaRef,
    /// Physical columns a skipped container's rows still hand over (see
    /// [`SourceFilter::observed_columns`]).
    pub observed_columns: Vec<usize>,
}

impl Pruner {
    /// The pruner of `filter` over the table's physical `schema`; `None`
    /// when there is no filter or statistics cannot rule anything out.
    pub fn new(filter: Option<&SourceFilter>, schema: &SchemaRef) -> Option<Self> {
        let filter = filter?;
        let predicate = PruningPredicateBuilder::new()
            .with_file_schema(schema.clone())
            .build(filter.predicate.clone())?;
        Some(Self {
            predicate: Arc::unwrap_or_clone(predicate),
            schema: schema.clone(),
            observed_columns: filter.observed_columns.clone(),
        })
    }

    /// Per file, whether it may hold a wanted row.
    pub fn files(&self, files: &[FileToRead]) -> Vec<bool> {
        let containers: Vec<Container> = files
            .iter()
            .map(|f| Container::of_file(f, &self.schema))
            .collect();
        self.keep(&Containers {
            containers,
            schema: &self.schema,
        })
    }

    /// Per row group of a file (its footer `metadata`), whether it may
    /// hold a wanted row. Partition values hold for every row group.
    pub fn row_groups(&self, file: &FileToRead, metadata: &ParquetMetaData) -> Vec<bool> {
        let groups = metadata.row_groups().len();
        let partitions = Container::of_partitions(file, &self.schema);
        let columns = self
            .schema
            .fields()
            .iter()
            .map(|field| {
                let column = match partitions.columns.get(field.name()) {
                    // A partition column: one value for the whole file.
                    Some(value) => RowGroupColumn {
                        min: value
                            .min
                            .as_ref()
                            .and_then(|v| v.to_array_of_size(groups).ok()),
                        max: value
                            .max
                            .as_ref()
                            .and_then(|v| v.to_array_of_size(groups).ok()),
                        nulls: None,
                    },
                    None => RowGroupColumn::of_footer(field, metadata).unwrap_or_default(),
                };
                (field.name().clone(), column)
            })
            .collect();
        self.keep(&RowGroups {
            groups,
            columns,
            rows: UInt64Array::from_iter_values(
                metadata.row_groups().iter().map(|g| g.num_rows() as u64),
            ),
        })
    }

    fn keep(&self, statistics: &dyn PruningStatistics) -> Vec<bool> {
        match self.predicate.prune(statistics) {
            Ok(keep) => keep,
            Err(e) => {
                tracing::debug!("statistics not used: {e}");
                vec![true; statistics.num_containers()]
            }
        }
    }
}

/// Whether statistics of a column of this declared type are used.
fn usable_type(data_type: &DataType) -> bool {
    !matches!(
        data_type,
        DataType::Float16 | DataType::Float32 | DataType::Float64
    )
}

/// What is known of one column in one file.
#[derive(Debug, Clone, Default)]
struct Known {
    min: Option<ScalarValue>,
    max: Option<ScalarValue>,
    nulls: Option<u64>,
}

/// What is known of one file.
#[derive(Debug, Default)]
struct Container {
    rows: Option<u64>,
    columns: HashMap<String, Known>,
}

impl Container {
    /// Partition values (exact: every row has the value).
    fn of_partitions(file: &FileToRead, schema: &SchemaRef) -> Self {
        let mut container = Container::default();
        for (name, value) in &file.partition_values {
            let Ok(field) = schema.field_with_name(name) else {
                continue;
            };
            let known = match value {
                Some(text) => {
                    let typed = ScalarValue::Utf8(Some(text.clone()))
                        .cast_to(field.data_type())
                        .ok();
                    Known {
                        min: typed.clone(),
                        max: typed,
                        nulls: Some(0),
                    }
                }
                None => Known::default(),
            };
            container.columns.insert(name.clone(), known);
        }
        container
    }

    /// Partition values and a Delta file's statistics.
    fn of_file(file: &FileToRead, schema: &SchemaRef) -> Self {
        let mut container = Self::of_partitions(file, schema);
        let Some(stats) = file
            .stats
            .as_deref()
            .and_then(|s| serde_json::from_str::<DeltaStats>(s).ok())
        else {
            return container;
        };
        container.rows = stats.num_records;
        for field in schema.fields() {
            let name = field.name();
            if container.columns.contains_key(name) || !usable_type(field.data_type()) {
                continue;
            }
            let typed = |value: Option<&serde_json::Value>, is_max: bool| -> Option<ScalarValue> {
                let scalar = match value? {
                    serde_json::Value::String(text) => {
                        if is_max
                            && matches!(
                                field.data_type(),
                                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View
                            )
                            && text.chars().count() >= 32
                        {
                            return None;
                        }
                        if is_max
                            && matches!(field.data_type(), DataType::Timestamp(unit, _) if matches!(unit, TimeUnit::Microsecond | TimeUnit::Nanosecond))
                        {
                            return None;
                        }
                        ScalarValue::Utf8(Some(text.clone()))
                    }
                    serde_json::Value::Number(n) => match n.as_i64() {
                        Some(i) => ScalarValue::Int64(Some(i)),
                        None => return None,
                    },
                    serde_json::Value::Bool(b) => ScalarValue::Boolean(Some(*b)),
                    _ => return None,
                };
                scalar.cast_to(field.data_type()).ok()
            };
            container.columns.insert(
                name.clone(),
                Known {
                    min: typed(stats.min_values.get(name), false),
                    max: typed(stats.max_values.get(name), true),
                    nulls: stats.null_count.get(name).and_then(|n| n.as_u64()),
                },
            );
        }
        container
    }
}

/// The parts of a Delta `add`'s `stats` used here.
#[derive(Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DeltaStats {
    num_records: Option<u64>,
    #[serde(default)]
    min_values: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    max_values: BTreeMap<String, serde_json::Value>,
    #[serde(default)]
    null_count: BTreeMap<String, serde_json::Value>,
}

/// Files as containers.
struct Containers<'a> {
    containers: Vec<Container>,
    schema: &'a SchemaRef,
}

impl Containers<'_> {
    fn values(
        &self,
        column: &Column,
        pick: impl Fn(&Known) -> Option<ScalarValue>,
    ) -> Option<ArrayRef> {
        let field = self.schema.field_with_name(&column.name).ok()?;
        let null = ScalarValue::try_from(field.data_type()).ok()?;
        let values: Vec<ScalarValue> = self
            .containers
            .iter()
            .map(|c| {
                c.columns
                    .get(&column.name)
                    .and_then(&pick)
                    .unwrap_or_else(|| null.clone())
            })
            .collect();
        if values.iter().all(ScalarValue::is_null) {
            return None;
        }
        ScalarValue::iter_to_array(values).ok()
    }
}

impl PruningStatistics for Containers<'_> {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |k| k.min.clone())
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.values(column, |k| k.max.clone())
    }

    fn num_containers(&self) -> usize {
        self.containers.len()
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let counts: UInt64Array = self
            .containers
            .iter()
            .map(|c| c.columns.get(&column.name).and_then(|k| k.nulls))
            .collect();
        (counts.null_count() < counts.len()).then(|| Arc::new(counts) as ArrayRef)
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        let counts: UInt64Array = self.containers.iter().map(|c| c.rows).collect();
        (counts.null_count() < counts.len()).then(|| Arc::new(counts) as ArrayRef)
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

/// What a footer says of one column over a file's row groups.
#[derive(Debug, Default)]
struct RowGroupColumn {
    min: Option<ArrayRef>,
    max: Option<ArrayRef>,
    nulls: Option<UInt64Array>,
}

impl RowGroupColumn {
    /// The footer's statistics of declared column `field`, cast to its
    /// declared type as the reader casts the values (`None`: the file has
    /// no such column).
    fn of_footer(field: &Field, metadata: &ParquetMetaData) -> Option<Self> {
        let descriptor = metadata.file_metadata().schema_descr();
        let file_schema = datafusion::parquet::arrow::parquet_to_arrow_schema(
            descriptor,
            metadata.file_metadata().key_value_metadata(),
        )
        .ok()?;
        let converter = StatisticsConverter::try_new(field.name(), &file_schema, descriptor)
            .ok()?
            .with_missing_null_counts_as_zero(false);
        let groups = metadata.row_groups();
        let typed = |array: ArrayRef| -> Option<ArrayRef> {
            if usable_type(field.data_type()) {
                cast(&array, field.data_type()).ok()
            } else {
                None
            }
        };
        Some(Self {
            min: converter.row_group_mins(groups.iter()).ok().and_then(typed),
            max: converter
                .row_group_maxes(groups.iter())
                .ok()
                .and_then(typed),
            nulls: converter.row_group_null_counts(groups.iter()).ok(),
        })
    }
}

/// A file's row groups as containers.
struct RowGroups {
    groups: usize,
    columns: HashMap<String, RowGroupColumn>,
    rows: UInt64Array,
}

impl PruningStatistics for RowGroups {
    fn min_values(&self, column: &Column) -> Option<ArrayRef> {
        self.columns.get(&column.name)?.min.clone()
    }

    fn max_values(&self, column: &Column) -> Option<ArrayRef> {
        self.columns.get(&column.name)?.max.clone()
    }

    fn num_containers(&self) -> usize {
        self.groups
    }

    fn null_counts(&self, column: &Column) -> Option<ArrayRef> {
        let nulls = self.columns.get(&column.name)?.nulls.clone()?;
        Some(Arc::new(nulls))
    }

    fn row_counts(&self) -> Option<ArrayRef> {
        Some(Arc::new(self.rows.clone()))
    }

    fn contained(&self, _column: &Column, _values: &HashSet<ScalarValue>) -> Option<BooleanArray> {
        None
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use datafusion::arrow::record_batch::RecordBatch;
    use datafusion::logical_expr::Operator;
    use datafusion::parquet::arrow::ArrowWriter;
    use datafusion::parquet::file::properties::WriterProperties;
    use datafusion::physical_expr::expressions::{binary, col, lit};
    use eddy_engine::source::{SourceContext, SourceReader};

    use super::*;
    use crate::parquet::reader::ParquetFilesReader;

    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("k", DataType::Int64, false),
            Field::new("m", DataType::Utf8, true),
            Field::new("t", DataType::Int64, false),
        ]))
    }

    /// Rows `keys` (`m` = "x", `t` = 1000 + k) in row groups of 10.
    fn write(path: &Path, keys: std::ops::Range<i64>) {
        let batch = RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(Int64Array::from_iter_values(keys.clone())),
                Arc::new(StringArray::from_iter_values(keys.clone().map(|_| "x"))),
                Arc::new(Int64Array::from_iter_values(keys.map(|k| 1000 + k))),
            ],
        )
        .unwrap();
        let properties = WriterProperties::builder()
            .set_max_row_group_row_count(Some(10))
            .build();
        let mut writer = ArrowWriter::try_new(
            std::fs::File::create(path).unwrap(),
            schema(),
            Some(properties),
        )
        .unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    fn filter(op: Operator, column: &str, value: ScalarValue, time: Vec<usize>) -> SourceFilter {
        let schema = schema();
        SourceFilter {
            predicate: binary(col(column, &schema).unwrap(), op, lit(value), &schema).unwrap(),
            text: format!("{column} {op} ..."),
            observed_columns: time,
        }
    }

    /// Every row read, and every row handed over as skipped, by `reader`.
    fn drain(mut reader: ParquetFilesReader) -> (Vec<RecordBatch>, Vec<RecordBatch>) {
        let mut ctx = SourceContext::new("t");
        let (mut read, mut skipped) = (Vec::new(), Vec::new());
        while let Some(batch) = reader.next_batch(&mut ctx).unwrap() {
            skipped.extend(ctx.take_skipped());
            read.push(batch);
        }
        skipped.extend(ctx.take_skipped());
        (read, skipped)
    }

    fn column(batches: &[RecordBatch], i: usize) -> Vec<Option<i64>> {
        batches
            .iter()
            .flat_map(|b| {
                b.column(i)
                    .as_any()
                    .downcast_ref::<Int64Array>()
                    .unwrap()
                    .iter()
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn row_groups_the_filter_rules_out_are_not_read_but_their_observed_columns_are_handed_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        write(&path, 0..50);
        let files = vec![FileToRead {
            path,
            partition_values: Default::default(),
            stats: None,
        }];
        // k < 15 OR k >= 40: row groups 2 and 3 (k 20..39) cannot hold one.
        let schema = schema();
        let low = binary(
            col("k", &schema).unwrap(),
            Operator::Lt,
            lit(15i64),
            &schema,
        )
        .unwrap();
        let high = binary(
            col("k", &schema).unwrap(),
            Operator::GtEq,
            lit(40i64),
            &schema,
        )
        .unwrap();
        let either = SourceFilter {
            predicate: binary(low, Operator::Or, high, &schema).unwrap(),
            text: "k < 15 OR k >= 40".into(),
            observed_columns: vec![2],
        };
        let pruner = Pruner::new(Some(&either), &schema).unwrap();
        let reader = ParquetFilesReader::new(
            "t",
            files.clone(),
            schema.clone(),
            4,
            None,
            Default::default(),
        )
        .unwrap()
        .with_pruner(Some(pruner));
        let (read, skipped) = drain(reader);
        let keys: Vec<i64> = column(&read, 0).into_iter().flatten().collect();
        assert_eq!(keys, (0..20).chain(40..50).collect::<Vec<_>>());
        // The skipped rows carry their observed column only.
        assert_eq!(
            column(&skipped, 2),
            (1020..1040).map(Some).collect::<Vec<_>>()
        );
        assert!(skipped
            .iter()
            .all(|b| b.column(0).data_type() == &DataType::Null));

        // With no observed columns nothing of the skipped rows is decoded.
        let no_time = SourceFilter {
            observed_columns: Vec::new(),
            ..either
        };
        let reader =
            ParquetFilesReader::new("t", files, schema.clone(), 4, None, Default::default())
                .unwrap()
                .with_pruner(Pruner::new(Some(&no_time), &schema));
        let (read, skipped) = drain(reader);
        assert_eq!(column(&read, 0).len(), 30);
        assert!(skipped.is_empty());
    }

    #[test]
    fn a_resumed_read_goes_on_after_the_skipped_row_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.parquet");
        write(&path, 0..50);
        let files = vec![FileToRead {
            path: path.clone(),
            partition_values: Default::default(),
            stats: None,
        }];
        let schema = schema();
        let high = filter(Operator::GtEq, "k", ScalarValue::Int64(Some(25)), vec![2]);
        // Resumed after 32 rows of the file: row group 3 from its 3rd row.
        let resume = crate::parquet::reader::FilesPosition {
            file: 0,
            row: 32,
            path: Some(path),
            extra: Default::default(),
        };
        let reader = ParquetFilesReader::new(
            "t",
            files,
            schema.clone(),
            4,
            Some(resume),
            Default::default(),
        )
        .unwrap()
        .with_pruner(Pruner::new(Some(&high), &schema));
        let (read, skipped) = drain(reader);
        assert_eq!(
            column(&read, 0).into_iter().flatten().collect::<Vec<_>>(),
            (32..50).collect::<Vec<_>>()
        );
        assert!(skipped.is_empty());
    }

    #[test]
    fn files_are_skipped_by_partition_values_and_delta_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let mut files = Vec::new();
        for (i, (m, keys)) in [("a", 0..10), ("b", 10..20), ("c", 20..30)]
            .into_iter()
            .enumerate()
        {
            let path = dir.path().join(format!("{i}.parquet"));
            write(&path, keys.clone());
            files.push(FileToRead {
                path,
                partition_values: [("m".to_string(), Some(m.to_string()))].into(),
                stats: Some(format!(
                    r#"{{"numRecords":10,"minValues":{{"k":{}}},"maxValues":{{"k":{}}},"nullCount":{{"k":0}}}}"#,
                    keys.start,
                    keys.end - 1
                )),
            });
        }
        let schema = schema();
        let by_partition = filter(
            Operator::Eq,
            "m",
            ScalarValue::Utf8(Some("b".into())),
            vec![],
        );
        let pruner = Pruner::new(Some(&by_partition), &schema).unwrap();
        assert_eq!(pruner.files(&files), [false, true, false]);
        let by_stats = filter(Operator::Gt, "k", ScalarValue::Int64(Some(12)), vec![]);
        let pruner = Pruner::new(Some(&by_stats), &schema).unwrap();
        assert_eq!(pruner.files(&files), [false, true, true]);
        // The partition value comes from the path, not the file's column.
        let reader =
            ParquetFilesReader::new("t", files, schema.clone(), 100, None, Default::default())
                .unwrap()
                .with_pruner(Pruner::new(Some(&by_partition), &schema));
        let (read, _) = drain(reader);
        assert_eq!(
            column(&read, 0).into_iter().flatten().collect::<Vec<_>>(),
            (10..20).collect::<Vec<_>>()
        );
        // A long text maximum may be a truncated prefix: not used.
        let long = "z".repeat(40);
        let truncated = vec![FileToRead {
            path: dir.path().join("0.parquet"),
            partition_values: Default::default(),
            stats: Some(format!(
                r#"{{"numRecords":10,"minValues":{{"m":"a"}},"maxValues":{{"m":"{long}"}}}}"#
            )),
        }];
        let above = filter(
            Operator::Gt,
            "m",
            ScalarValue::Utf8(Some(format!("{long}a"))),
            vec![],
        );
        let pruner = Pruner::new(Some(&above), &schema).unwrap();
        assert_eq!(pruner.files(&truncated), [true]);
    }
}
