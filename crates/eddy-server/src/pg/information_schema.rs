//! `information_schema` as PostgreSQL shows it: `tables`, `columns`,
//! `schemata` and `views` of the port's catalog, with PostgreSQL's type
//! names (`character varying`, `bigint`, `timestamp without time zone`).
//!
//! In: the catalog the port's session reads (views, eddy's system tables,
//! `pg_catalog`). Out: one row per schema, relation or column, computed
//! when scanned, so a view created a moment ago is listed.
//!
//! DataFusion's own `information_schema` names Arrow's types (`Utf8View`,
//! `Int64`); BI tools read `data_type` to choose time columns and
//! formats (Grafana offers the `timestamp`/`bigint` columns as time), so
//! the port has this one instead.

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use datafusion::arrow::array::{ArrayRef, Int32Array, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::catalog::{CatalogProvider, SchemaProvider, Session, TableProvider};
use datafusion::datasource::{MemTable, TableType};
use datafusion::error::{DataFusionError, Result};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_postgres::arrow_pg::datatypes::into_pg_type;
use datafusion_postgres::pgwire::api::Type;

/// The schema's name.
pub const NAME: &str = "information_schema";

/// The owner every schema is shown with.
const OWNER: &str = "eddy";

/// Schema `information_schema` of one catalog.
#[derive(Debug)]
pub struct InformationSchema {
    catalog_name: String,
    catalog: Weak<dyn CatalogProvider>,
}

impl InformationSchema {
    /// The information schema of `catalog` (held weakly: the catalog holds
    /// this schema).
    pub fn new(catalog_name: &str, catalog: &Arc<dyn CatalogProvider>) -> Self {
        Self {
            catalog_name: catalog_name.to_string(),
            catalog: Arc::downgrade(catalog),
        }
    }
}

/// The relations `information_schema` has.
#[derive(Debug, Clone, Copy)]
enum Relation {
    Tables,
    Columns,
    Schemata,
    Views,
}

impl Relation {
    const ALL: [(&'static str, Relation); 4] = [
        ("tables", Relation::Tables),
        ("columns", Relation::Columns),
        ("schemata", Relation::Schemata),
        ("views", Relation::Views),
    ];

    fn schema(self) -> SchemaRef {
        let text = |name: &str| Field::new(name, DataType::Utf8, true);
        let int = |name: &str| Field::new(name, DataType::Int32, true);
        Arc::new(Schema::new(match self {
            Relation::Tables => vec![
                text("table_catalog"),
                text("table_schema"),
                text("table_name"),
                text("table_type"),
                text("is_insertable_into"),
                text("is_typed"),
            ],
            Relation::Columns => vec![
                text("table_catalog"),
                text("table_schema"),
                text("table_name"),
                text("column_name"),
                int("ordinal_position"),
                text("column_default"),
                text("is_nullable"),
                text("data_type"),
                int("character_maximum_length"),
                int("numeric_precision"),
                int("numeric_precision_radix"),
                int("numeric_scale"),
                int("datetime_precision"),
                text("udt_catalog"),
                text("udt_schema"),
                text("udt_name"),
                text("is_identity"),
                text("is_generated"),
                text("is_updatable"),
            ],
            Relation::Schemata => vec![
                text("catalog_name"),
                text("schema_name"),
                text("schema_owner"),
            ],
            Relation::Views => vec![
                text("table_catalog"),
                text("table_schema"),
                text("table_name"),
                text("view_definition"),
                text("check_option"),
                text("is_updatable"),
                text("is_insertable_into"),
            ],
        }))
    }
}

#[async_trait]
impl SchemaProvider for InformationSchema {
    fn table_names(&self) -> Vec<String> {
        Relation::ALL
            .iter()
            .map(|(name, _)| name.to_string())
            .collect()
    }

    async fn table(&self, name: &str) -> Result<Option<Arc<dyn TableProvider>>> {
        Ok(Relation::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, relation)| {
                Arc::new(InformationTable {
                    relation: *relation,
                    schema: relation.schema(),
                    catalog_name: self.catalog_name.clone(),
                    catalog: self.catalog.clone(),
                }) as Arc<dyn TableProvider>
            }))
    }

    fn table_exist(&self, name: &str) -> bool {
        Relation::ALL.iter().any(|(known, _)| *known == name)
    }
}

/// One relation of `information_schema`, computed when scanned.
#[derive(Debug)]
struct InformationTable {
    relation: Relation,
    schema: SchemaRef,
    catalog_name: String,
    catalog: Weak<dyn CatalogProvider>,
}

#[async_trait]
impl TableProvider for InformationTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::View
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let catalog = self
            .catalog
            .upgrade()
            .ok_or_else(|| DataFusionError::Internal("the catalog is gone".into()))?;
        let mut rows = Rows::default();
        for schema_name in sorted(catalog.schema_names()) {
            rows.schema(&self.catalog_name, &schema_name);
            if !matches!(self.relation, Relation::Schemata) {
                let Some(schema) = catalog.schema(&schema_name) else {
                    continue;
                };
                for table_name in sorted(schema.table_names()) {
                    if let Some(table) = schema.table(&table_name).await? {
                        rows.relation(&self.catalog_name, &schema_name, &table_name, &table);
                    }
                }
            }
        }
        let batch = rows.batch(self.relation, self.schema.clone())?;
        MemTable::try_new(self.schema.clone(), vec![vec![batch]])?
            .scan(state, projection, filters, limit)
            .await
    }
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

/// The rows of every relation, gathered in one walk of the catalog.
#[derive(Default)]
struct Rows {
    schemata: Vec<[Option<String>; 3]>,
    tables: Vec<[Option<String>; 6]>,
    views: Vec<[Option<String>; 7]>,
    columns: Vec<ColumnRow>,
}

struct ColumnRow {
    text: [Option<String>; 4],
    ordinal: i32,
    nullable: bool,
    data_type: DataType,
}

impl Rows {
    fn schema(&mut self, catalog: &str, schema: &str) {
        self.schemata.push([
            Some(catalog.into()),
            Some(schema.into()),
            Some(OWNER.into()),
        ]);
    }

    fn relation(
        &mut self,
        catalog: &str,
        schema: &str,
        name: &str,
        table: &Arc<dyn TableProvider>,
    ) {
        let kind = match table.table_type() {
            TableType::Base => "BASE TABLE",
            TableType::View => "VIEW",
            TableType::Temporary => "LOCAL TEMPORARY",
        };
        let yes_no = |yes: bool| Some(if yes { "YES" } else { "NO" }.to_string());
        let insertable = matches!(table.table_type(), TableType::Base);
        self.tables.push([
            Some(catalog.into()),
            Some(schema.into()),
            Some(name.into()),
            Some(kind.into()),
            yes_no(insertable),
            yes_no(false),
        ]);
        if matches!(table.table_type(), TableType::View) {
            self.views.push([
                Some(catalog.into()),
                Some(schema.into()),
                Some(name.into()),
                table.get_table_definition().map(str::to_string),
                Some("NONE".into()),
                yes_no(false),
                yes_no(false),
            ]);
        }
        for (index, field) in table.schema().fields().iter().enumerate() {
            self.columns.push(ColumnRow {
                text: [
                    Some(catalog.into()),
                    Some(schema.into()),
                    Some(name.into()),
                    Some(field.name().clone()),
                ],
                ordinal: index as i32 + 1,
                nullable: field.is_nullable(),
                data_type: field.data_type().clone(),
            });
        }
    }

    fn batch(self, relation: Relation, schema: SchemaRef) -> Result<RecordBatch> {
        let columns: Vec<ArrayRef> = match relation {
            Relation::Schemata => text_columns(&self.schemata),
            Relation::Tables => text_columns(&self.tables),
            Relation::Views => text_columns(&self.views),
            Relation::Columns => column_columns(&self.columns),
        };
        Ok(RecordBatch::try_new(schema, columns)?)
    }
}

fn text_columns<const N: usize>(rows: &[[Option<String>; N]]) -> Vec<ArrayRef> {
    (0..N)
        .map(|i| {
            Arc::new(
                rows.iter()
                    .map(|row| row[i].clone())
                    .collect::<StringArray>(),
            ) as ArrayRef
        })
        .collect()
}

fn column_columns(rows: &[ColumnRow]) -> Vec<ArrayRef> {
    let described: Vec<TypeDescription> = rows
        .iter()
        .map(|row| TypeDescription::of(&row.data_type))
        .collect();
    let text = |f: &dyn Fn(usize) -> Option<String>| -> ArrayRef {
        Arc::new((0..rows.len()).map(f).collect::<StringArray>())
    };
    let int = |f: &dyn Fn(usize) -> Option<i32>| -> ArrayRef {
        Arc::new((0..rows.len()).map(f).collect::<Int32Array>())
    };
    let fixed = |value: &'static str| move |_: usize| Some(value.to_string());
    vec![
        text(&|i| rows[i].text[0].clone()),
        text(&|i| rows[i].text[1].clone()),
        text(&|i| rows[i].text[2].clone()),
        text(&|i| rows[i].text[3].clone()),
        int(&|i| Some(rows[i].ordinal)),
        text(&|_| None),
        text(&|i| Some(if rows[i].nullable { "YES" } else { "NO" }.into())),
        text(&|i| Some(described[i].data_type.clone())),
        int(&|_| None),
        int(&|i| described[i].precision),
        int(&|i| described[i].precision.map(|_| described[i].radix)),
        int(&|i| described[i].scale),
        int(&|i| described[i].datetime_precision),
        text(&|i| rows[i].text[0].clone()),
        text(&fixed("pg_catalog")),
        text(&|i| Some(described[i].udt_name.clone())),
        text(&fixed("NO")),
        text(&fixed("NEVER")),
        text(&fixed("NO")),
    ]
}

/// How PostgreSQL describes a column's type in `information_schema`.
struct TypeDescription {
    /// `data_type`: the SQL name (`bigint`, `character varying`).
    data_type: String,
    /// `udt_name`: the type's name in `pg_type` (`int8`, `varchar`).
    udt_name: String,
    precision: Option<i32>,
    radix: i32,
    scale: Option<i32>,
    datetime_precision: Option<i32>,
}

impl TypeDescription {
    fn of(data_type: &DataType) -> Self {
        let pg = into_pg_type(data_type).unwrap_or(Type::TEXT);
        let mut description = Self {
            data_type: sql_name(&pg).to_string(),
            udt_name: pg.name().to_string(),
            precision: None,
            radix: 2,
            scale: None,
            datetime_precision: None,
        };
        match data_type {
            DataType::Decimal128(precision, scale) | DataType::Decimal256(precision, scale) => {
                description.precision = Some(*precision as i32);
                description.scale = Some(*scale as i32);
                description.radix = 10;
            }
            DataType::UInt64 => {
                description.precision = Some(20);
                description.scale = Some(0);
                description.radix = 10;
            }
            _ => match pg {
                Type::INT2 => (description.precision, description.scale) = (Some(16), Some(0)),
                Type::INT4 => (description.precision, description.scale) = (Some(32), Some(0)),
                Type::INT8 => (description.precision, description.scale) = (Some(64), Some(0)),
                Type::FLOAT4 => description.precision = Some(24),
                Type::FLOAT8 => description.precision = Some(53),
                Type::DATE => description.datetime_precision = Some(0),
                Type::TIME | Type::TIMESTAMP | Type::TIMESTAMPTZ | Type::INTERVAL => {
                    description.datetime_precision = Some(6)
                }
                _ => {}
            },
        }
        description
    }
}

/// The SQL standard's name of a PostgreSQL type, as `data_type` shows it.
fn sql_name(pg: &Type) -> &str {
    match *pg {
        Type::BOOL => "boolean",
        Type::INT2 => "smallint",
        Type::INT4 => "integer",
        Type::INT8 => "bigint",
        Type::FLOAT4 => "real",
        Type::FLOAT8 => "double precision",
        Type::NUMERIC => "numeric",
        Type::VARCHAR => "character varying",
        Type::BPCHAR => "character",
        Type::TIME => "time without time zone",
        Type::TIMESTAMP => "timestamp without time zone",
        Type::TIMESTAMPTZ => "timestamp with time zone",
        _ if pg.name().starts_with('_') => "ARRAY",
        _ => pg.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::datatypes::TimeUnit;
    use datafusion::prelude::{SessionConfig, SessionContext};

    #[test]
    fn arrow_types_get_postgresql_names() {
        let name = |t: DataType| TypeDescription::of(&t).data_type;
        assert_eq!(name(DataType::Utf8View), "text");
        assert_eq!(name(DataType::Int64), "bigint");
        assert_eq!(name(DataType::Int32), "integer");
        assert_eq!(name(DataType::Float64), "double precision");
        assert_eq!(name(DataType::Boolean), "boolean");
        assert_eq!(
            name(DataType::Timestamp(TimeUnit::Millisecond, None)),
            "timestamp without time zone"
        );
        assert_eq!(
            name(DataType::Timestamp(
                TimeUnit::Microsecond,
                Some("UTC".into())
            )),
            "timestamp with time zone"
        );
        assert_eq!(name(DataType::Decimal128(10, 2)), "numeric");
        let decimal = TypeDescription::of(&DataType::Decimal128(10, 2));
        assert_eq!(
            (decimal.precision, decimal.scale, decimal.radix),
            (Some(10), Some(2), 10)
        );
        assert_eq!(TypeDescription::of(&DataType::Int64).udt_name, "int8");
    }

    #[tokio::test]
    async fn lists_schemas_tables_and_columns_of_its_catalog() {
        let context = SessionContext::new_with_config(
            SessionConfig::new()
                .with_information_schema(false)
                .with_default_catalog_and_schema("eddy", "public"),
        );
        context
            .sql("CREATE TABLE t (id BIGINT NOT NULL, name VARCHAR, at TIMESTAMP)")
            .await
            .unwrap();
        let catalog = context.catalog("eddy").unwrap();
        catalog
            .register_schema(NAME, Arc::new(InformationSchema::new("eddy", &catalog)))
            .unwrap();
        let rows = context
            .sql(
                "SELECT table_schema, table_name, column_name, ordinal_position, is_nullable, data_type, udt_name \
                 FROM information_schema.columns WHERE table_schema = 'public' ORDER BY ordinal_position",
            )
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&rows)
            .unwrap()
            .to_string();
        let expected = [
            "| public       | t          | id          | 1                | NO          | bigint                      | int8     |",
            "| public       | t          | name        | 2                | YES         | text                        | text     |",
            "| public       | t          | at          | 3                | YES         | timestamp without time zone | timestamp |",
        ];
        for line in expected {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            assert!(
                text.lines()
                    .any(|l| l.split('|').map(str::trim).collect::<Vec<_>>() == cells),
                "no row {line} in\n{text}"
            );
        }
        let tables = context
            .sql(
                "SELECT table_schema || '.' || table_name || ' ' || table_type AS t \
                 FROM information_schema.tables ORDER BY 1",
            )
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let text = datafusion::arrow::util::pretty::pretty_format_batches(&tables)
            .unwrap()
            .to_string();
        assert!(text.contains("public.t BASE TABLE"), "{text}");
        assert!(text.contains("information_schema.columns VIEW"), "{text}");
    }
}
