//! One decoded change of the replication stream taken into a batch's
//! rows, as the reader sends them: upserts and deletes by key.
//!
//! In: a [`Change`] (pgoutput), the relation it refers to (mapped to the
//! eddy table's columns by name when its description comes), the
//! transaction it belongs to, and, while changes made during the snapshot
//! may come, the snapshot's chunks. Out: rows pushed into [`TextRows`]:
//! an insert `+I`, an update's new row `+U` (a delete `-D` of the old key
//! first when the key moved), a delete `-D`. A change its key's chunk
//! already holds is skipped ([`super::snapshot`]). Errors, each naming the
//! table and the WAL position: a declared column gone from the table, an
//! unchanged TOASTed value PostgreSQL did not send, a `TRUNCATE`.

use eddy_engine::changelog::RowKind;

use super::config::CdcConfig;
use super::pgoutput::{Change, Relation, Value};
use super::snapshot::ChunkIndex;
use super::table::{lsn_text, PgTable};
use super::text_columns::TextRows;
use crate::error::{ConnectorError, Result};

/// The table's relation as the stream described it: its OID, where each
/// declared column is among its columns, and the description.
pub type MappedRelation = (u32, Vec<usize>, Relation);

/// The transaction being read.
#[derive(Debug, Clone, Copy)]
pub struct Transaction {
    /// Its id (32 bits, as the stream sends it).
    pub xid: u32,
    /// Whether its changes are checked against the snapshot's chunks.
    pub check: bool,
}

/// Takes one decoded change into `rows`.
#[allow(clippy::too_many_arguments)]
pub fn apply(
    config: &CdcConfig,
    table: &PgTable,
    index: Option<&ChunkIndex>,
    relation: &mut Option<MappedRelation>,
    transaction: Option<Transaction>,
    change: Change<'_>,
    rows: &mut TextRows,
    at: u64,
) -> Result<()> {
    let context = || format!("table {} at {}", config.qualified(), lsn_text(at));
    let ours = |id: u32| relation.as_ref().is_some_and(|(r, _, _)| *r == id);
    let row_of = |values: &[Value<'_>], positions: &[usize]| -> Vec<Option<Vec<u8>>> {
        positions
            .iter()
            .map(|&p| match values.get(p) {
                Some(Value::Text(t)) => Some(t.to_vec()),
                _ => None,
            })
            .collect()
    };
    let held = |key_row: &[Option<Vec<u8>>]| -> Result<bool> {
        let (Some(index), Some(t)) = (index, transaction) else {
            return Ok(false);
        };
        if !t.check {
            return Ok(false);
        }
        let key: Vec<Option<String>> = table
            .key
            .iter()
            .map(|&k| {
                key_row[k]
                    .as_ref()
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            })
            .collect();
        let rows = index.rows(&[key])?;
        Ok(rows.first().is_some_and(|r| index.holds(r, t.xid)))
    };
    let mut push = |kind: RowKind, row: &[Option<Vec<u8>>]| -> Result<()> {
        if !held(row)? {
            rows.push(kind, row.iter().map(|v| v.as_deref()));
        }
        Ok(())
    };
    match change {
        Change::Relation(r) => {
            if r.namespace != config.schema || r.name != config.pg_table {
                return Ok(());
            }
            let positions = table
                .columns
                .iter()
                .map(|c| {
                    r.columns.iter().position(|rc| rc.name == c.name).ok_or_else(|| {
                        ConnectorError::postgres(
                            context(),
                            format!(
                                "column '{}' is no longer in the table (dropped or renamed): the eddy table reads it; declare the table again and start the job without its state",
                                c.name
                            ),
                        )
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            *relation = Some((r.id, positions, r));
        }
        Change::Insert { relation: id, new } if ours(id) => {
            let positions = relation
                .as_ref()
                .map(|(_, p, _)| p.clone())
                .unwrap_or_default();
            push(RowKind::Insert, &row_of(&new, &positions))?;
        }
        Change::Update {
            relation: id,
            old,
            key_only,
            new,
        } if ours(id) => {
            let positions = relation
                .as_ref()
                .map(|(_, p, _)| p.clone())
                .unwrap_or_default();
            let mut after = row_of(&new, &positions);
            for (c, &p) in positions.iter().enumerate() {
                if new.get(p) == Some(&Value::Unchanged) {
                    match old.as_ref().and_then(|o| o.get(p)).filter(|_| !key_only) {
                        Some(Value::Text(t)) => after[c] = Some(t.to_vec()),
                        _ => {
                            return Err(ConnectorError::postgres(
                                context(),
                                format!(
                                    "an update left column '{}' (a large, TOASTed value) unchanged, and PostgreSQL sends such a value only under REPLICA IDENTITY FULL: run ALTER TABLE {} REPLICA IDENTITY FULL, then start the job without its state",
                                    table.columns[c].name,
                                    config.qualified()
                                ),
                            ))
                        }
                    }
                }
            }
            if let Some(old) = old {
                let before = row_of(&old, &positions);
                if table.key.iter().any(|&k| before[k] != after[k]) {
                    push(RowKind::Delete, &before)?;
                }
            }
            push(RowKind::UpdateAfter, &after)?;
        }
        Change::Delete {
            relation: id, old, ..
        } if ours(id) => {
            let positions = relation
                .as_ref()
                .map(|(_, p, _)| p.clone())
                .unwrap_or_default();
            push(RowKind::Delete, &row_of(&old, &positions))?;
        }
        Change::Truncate { relations } if relations.iter().any(|&id| ours(id)) => {
            return Err(ConnectorError::postgres(
                context(),
                "the table was truncated: eddy cannot tell which keys that deleted; start the job without its state to read the table again",
            ));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use datafusion::arrow::array::{Array, Int8Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use eddy_engine::graph::ConnectorSpec;

    use super::*;
    use crate::postgres::pgoutput::RelationColumn;
    use crate::postgres::table::PgColumn;

    fn config() -> CdcConfig {
        let options: BTreeMap<String, String> = [
            ("hostname", "db"),
            ("username", "u"),
            ("password", "p"),
            ("database-name", "d"),
            ("table-name", "t"),
            ("slot.name", "s"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        CdcConfig::of(&ConnectorSpec {
            table: "t".into(),
            connector: "postgres-cdc".into(),
            options,
            schema: Arc::new(Schema::empty()),
            declared_at: None,
            primary_key: vec!["id".into()],
            filter: None,
            unread_columns: vec![],
            explain: None,
        })
        .unwrap()
    }

    /// The eddy table (note, id) over a PostgreSQL table (id, extra, note).
    fn setup() -> (CdcConfig, PgTable, Option<MappedRelation>, TextRows) {
        let config = config();
        let table = PgTable {
            columns: vec![
                PgColumn {
                    name: "note".into(),
                    type_name: "text".into(),
                },
                PgColumn {
                    name: "id".into(),
                    type_name: "text".into(),
                },
            ],
            key: vec![1],
            key_order_comparable: true,
            replica_identity_full: false,
        };
        let mut relation = None;
        let describe = Change::Relation(Relation {
            id: 7,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: b'd',
            columns: ["id", "extra", "note"]
                .iter()
                .map(|n| RelationColumn {
                    key: *n == "id",
                    name: n.to_string(),
                    type_oid: 25,
                })
                .collect(),
        });
        let schema = Arc::new(Schema::new(vec![
            Field::new("note", DataType::Utf8, true),
            Field::new("id", DataType::Utf8, false),
            Field::new("_row_kind", DataType::Int8, false),
        ]));
        let mut rows = TextRows::new(schema);
        apply(
            &config,
            &table,
            None,
            &mut relation,
            None,
            describe,
            &mut rows,
            0,
        )
        .unwrap();
        (config, table, relation, rows)
    }

    fn taken(rows: &mut TextRows) -> Vec<(String, Option<String>, i8)> {
        let (batch, bad) = rows.finish().unwrap();
        assert!(bad.is_empty());
        let note = batch
            .column(0)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        let id = batch
            .column(1)
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap()
            .clone();
        let kind = batch
            .column(2)
            .as_any()
            .downcast_ref::<Int8Array>()
            .unwrap()
            .clone();
        (0..batch.num_rows())
            .map(|r| {
                (
                    id.value(r).to_string(),
                    note.is_valid(r).then(|| note.value(r).to_string()),
                    kind.value(r),
                )
            })
            .collect()
    }

    #[test]
    fn columns_map_by_name_and_a_moved_key_deletes_the_old_one() {
        let (config, table, mut relation, mut rows) = setup();
        let t = |s: &'static str| Value::Text(s.as_bytes());
        let changes = [
            Change::Insert {
                relation: 7,
                new: vec![t("1"), t("x"), t("a")],
            },
            Change::Update {
                relation: 7,
                old: Some(vec![t("1"), Value::Null, Value::Null]),
                key_only: true,
                new: vec![t("2"), t("x"), t("b")],
            },
            Change::Delete {
                relation: 7,
                old: vec![t("2"), Value::Null, Value::Null],
                key_only: true,
            },
            // Another table's change is not this table's.
            Change::Insert {
                relation: 8,
                new: vec![t("9"), t("x"), t("z")],
            },
        ];
        for change in changes {
            apply(
                &config,
                &table,
                None,
                &mut relation,
                None,
                change,
                &mut rows,
                0,
            )
            .unwrap();
        }
        assert_eq!(
            taken(&mut rows),
            vec![
                ("1".into(), Some("a".into()), RowKind::Insert.byte()),
                ("1".into(), None, RowKind::Delete.byte()),
                ("2".into(), Some("b".into()), RowKind::UpdateAfter.byte()),
                ("2".into(), None, RowKind::Delete.byte()),
            ]
        );
    }

    #[test]
    fn an_unchanged_toasted_value_is_taken_from_the_full_old_row() {
        // REPLICA IDENTITY FULL: the old row comes whole, the new one
        // leaves the large value out as unchanged.
        let (config, table, mut relation, mut rows) = setup();
        let t = |s: &'static str| Value::Text(s.as_bytes());
        let update = Change::Update {
            relation: 7,
            old: Some(vec![t("1"), t("x"), t("a long note")]),
            key_only: false,
            new: vec![t("1"), t("y"), Value::Unchanged],
        };
        apply(
            &config,
            &table,
            None,
            &mut relation,
            None,
            update,
            &mut rows,
            0,
        )
        .unwrap();
        assert_eq!(
            taken(&mut rows),
            vec![(
                "1".into(),
                Some("a long note".into()),
                RowKind::UpdateAfter.byte()
            )]
        );
    }

    #[test]
    fn unsent_toast_values_truncates_and_dropped_columns_are_errors_naming_the_fix() {
        let (config, table, mut relation, mut rows) = setup();
        let toast = Change::Update {
            relation: 7,
            old: None,
            key_only: false,
            new: vec![Value::Text(b"1"), Value::Null, Value::Unchanged],
        };
        let e = apply(
            &config,
            &table,
            None,
            &mut relation,
            None,
            toast,
            &mut rows,
            0,
        )
        .unwrap_err();
        assert!(e.to_string().contains("REPLICA IDENTITY FULL"), "{e}");
        let truncate = Change::Truncate { relations: vec![7] };
        let e = apply(
            &config,
            &table,
            None,
            &mut relation,
            None,
            truncate,
            &mut rows,
            0,
        )
        .unwrap_err();
        assert!(e.to_string().contains("truncated"), "{e}");
        let dropped = Change::Relation(Relation {
            id: 7,
            namespace: "public".into(),
            name: "t".into(),
            replica_identity: b'd',
            columns: vec![RelationColumn {
                key: true,
                name: "id".into(),
                type_oid: 25,
            }],
        });
        let e = apply(
            &config,
            &table,
            None,
            &mut relation,
            None,
            dropped,
            &mut rows,
            0x16_0000_0010,
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("'note' is no longer in the table")
                && e.to_string().contains("16/10"),
            "{e}"
        );
    }
}
