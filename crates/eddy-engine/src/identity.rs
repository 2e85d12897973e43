//! How a node of a job graph is known across versions of its query, so
//! that a changed query can resume with the state of what it still
//! computes ([`crate::checkpoint::evolve`]).
//!
//! In: a planned [`JobGraph`]. Out: each node's identity, derived or
//! named, recorded in every checkpoint's manifest.
//!
//! - The **derived identity** ([`JobGraph::identities`]) is what a node
//!   computes from what: its description with its inputs named by a hash of
//!   their identities, so it survives queries added or removed around it
//!   and changes when the node or anything upstream of it changes.
//! - The **named identity** ([`JobGraph::named_identities`]) is one the
//!   user gave: a source or sink is named by its table, an operator by the
//!   query it was planned for when that query has a name (a
//!   `/*+ uid('...') */` hint, or a view's name) and its place among that
//!   query's operators of its kind. Where the derived identity no longer
//!   matches (a threshold upstream changed, a sink gained a column), the
//!   state moves by name if it still fits the node ([`NamedIdentity::fits`]):
//!   an operator's own definition and schema must be unchanged (or only
//!   aggregates appended, where the operator can take them:
//!   [`crate::operator::OperatorPlan::earlier_layouts`]), a connector's
//!   options unchanged and its columns only added (nullable).

use std::collections::HashMap;

use datafusion::arrow::datatypes::Schema;
use serde::{Deserialize, Serialize};

use crate::graph::{JobGraph, Node, NodeId, NodeKind};

impl JobGraph {
    /// Each node's identity: what it computes, from what. A node's
    /// [`JobGraph::fingerprint`] less its place in the graph: its inputs
    /// are named by their identities (a hash of them), not by their
    /// numbers, so a node keeps its identity when queries are added to or
    /// removed from the job around it, and loses it when it or anything
    /// upstream of it changes. A resumed job whose query changed maps
    /// state by identity ([`crate::checkpoint::evolve`]).
    pub fn identities(&self) -> Vec<String> {
        self.identities_as(Form::Shape)
    }

    /// [`JobGraph::identities`] as checkpoints written before shapes
    /// recorded them (`eddy explain`'s text), to map their state.
    pub fn legacy_identities(&self) -> Vec<String> {
        self.identities_as(Form::Legacy)
    }

    fn identities_as(&self, form: Form) -> Vec<String> {
        let mut identities: Vec<String> = Vec::with_capacity(self.nodes.len());
        for id in 0..self.nodes.len() {
            let text = {
                let known = &identities;
                let input = |from: NodeId| {
                    let of = known.get(from).map(String::as_bytes).unwrap_or_default();
                    format!("<{:08x}>", crc32fast::hash(of))
                };
                format!(
                    "{}{}",
                    self.form_text(form, &self.nodes[id], &input),
                    self.options_text(id)
                )
            };
            identities.push(text);
        }
        identities
    }

    /// A node's text in `form`.
    fn form_text(&self, form: Form, node: &Node, input: &dyn Fn(NodeId) -> String) -> String {
        match form {
            Form::Shape => self.shape_of(node, input),
            Form::Legacy => self.text_of(node, input),
        }
    }

    /// Each node's named identity, where it has one (see the module docs):
    /// sources and sinks by table, operators of a named query by the name,
    /// their kind and their place among the query's operators of that
    /// kind (`uid fraud: window_aggregate 0`).
    ///
    /// ```
    /// use eddy_engine::graph::JobGraph;
    /// assert!(JobGraph::default().named_identities().is_empty());
    /// ```
    pub fn named_identities(&self) -> Vec<Option<NamedIdentity>> {
        self.named_identities_as(Form::Shape)
    }

    /// [`JobGraph::named_identities`] as checkpoints written before shapes
    /// recorded them, to map their state.
    pub fn legacy_named_identities(&self) -> Vec<Option<NamedIdentity>> {
        self.named_identities_as(Form::Legacy)
    }

    fn named_identities_as(&self, form: Form) -> Vec<Option<NamedIdentity>> {
        let mut seen: HashMap<(String, &str), usize> = HashMap::new();
        (0..self.nodes.len())
            .map(|id| {
                let node = &self.nodes[id];
                match &node.kind {
                    NodeKind::Source { spec, .. } | NodeKind::Sink { spec } => {
                        let role = if matches!(node.kind, NodeKind::Sink { .. }) {
                            "sink"
                        } else {
                            "source"
                        };
                        Some(NamedIdentity {
                            name: format!("{role} {}", spec.table),
                            shape: format!("connector={}{}", spec.connector, self.options_text(id)),
                            columns: columns(&spec.schema),
                            earlier: Vec::new(),
                        })
                    }
                    NodeKind::Operator(plan) => {
                        let uid = node.uid.as_ref()?;
                        let kind = plan.kind();
                        let place = seen.entry((uid.clone(), kind)).or_default();
                        let name = format!("{uid}: {kind} {place}");
                        *place += 1;
                        let blank = |_| "<input>".to_string();
                        let earlier = plan
                            .earlier_layouts()
                            .into_iter()
                            .map(|earlier| {
                                let was = Node {
                                    schema: earlier.output_schema(),
                                    kind: NodeKind::Operator(earlier),
                                    ..node.clone()
                                };
                                self.form_text(form, &was, &blank)
                            })
                            .collect();
                        Some(NamedIdentity {
                            name,
                            shape: self.form_text(form, node, &blank),
                            columns: Vec::new(),
                            earlier,
                        })
                    }
                }
            })
            .collect()
    }
}

/// How identities are written: as shapes ([`crate::shape`]), or as
/// `eddy explain`'s text (checkpoints written before shapes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Shape,
    Legacy,
}

/// Whether identities (or fingerprints) were written as shapes; those of
/// checkpoints written before are `eddy explain`'s text.
pub(crate) fn written_as_shapes<'a>(texts: impl IntoIterator<Item = &'a str>) -> bool {
    texts
        .into_iter()
        .next()
        .is_none_or(|t| t.starts_with(crate::shape::SHAPE_MARK))
}

/// A node's identity as the user named it, and what its state is shaped
/// by (see the module docs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamedIdentity {
    /// `source payments`, `sink alerts`, `uid fraud: window_aggregate 0`,
    /// `view enriched: interval_join 0`.
    pub name: String,
    /// What the node's state depends on besides its columns: an operator's
    /// definition and schema (inputs left out), a connector's options.
    pub shape: String,
    /// A connector's columns (`name: type`, `NOT NULL` where so); empty for
    /// an operator, whose schema is part of its shape.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub columns: Vec<String>,
    /// An operator's shapes before aggregates were appended to it, whose
    /// state it can resume ([`crate::operator::OperatorPlan::earlier_layouts`]);
    /// not recorded (only the node resuming needs them).
    #[serde(skip)]
    pub earlier: Vec<String>,
}

/// Why state a node took cannot be resumed by the node of the same name
/// now ([`NamedIdentity::fits`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misfit {
    /// The node is another operator, or the same with other parameters:
    /// the first line that differs, then and now.
    #[error("it was `{was}`, it is now `{is}`")]
    Shape { was: String, is: String },
    /// A connector's column changed type or nullability.
    #[error("column `{was}` is now `{is}`")]
    ColumnChanged { was: String, is: String },
    /// A connector's column went.
    #[error("column `{was}` is gone (a connector keeps its state while columns are only added)")]
    ColumnGone { was: String },
    /// A connector gained a NOT NULL column.
    #[error("column `{column}` is new and NOT NULL (a column added to a connector with state must be nullable)")]
    NewNotNull { column: String },
}

impl NamedIdentity {
    /// Whether state taken by the node `self` describes can be resumed by
    /// the node `now` describes (same name); `Err` says why not.
    pub fn fits(&self, now: &NamedIdentity) -> std::result::Result<(), Misfit> {
        if self.shape != now.shape && !now.earlier.contains(&self.shape) {
            let (was, is) = first_difference(&self.shape, &now.shape);
            return Err(Misfit::Shape {
                was: was.to_string(),
                is: is.to_string(),
            });
        }
        let column_name = |c: &str| c.split_once(':').map_or(c, |(n, _)| n).to_string();
        for old in &self.columns {
            if !now.columns.contains(old) {
                let name = column_name(old);
                return Err(match now.columns.iter().find(|c| column_name(c) == name) {
                    Some(new) => Misfit::ColumnChanged {
                        was: old.clone(),
                        is: new.clone(),
                    },
                    None => Misfit::ColumnGone { was: old.clone() },
                });
            }
        }
        if let Some(added) = now
            .columns
            .iter()
            .find(|c| !self.columns.contains(c) && c.ends_with("NOT NULL"))
        {
            return Err(Misfit::NewNotNull {
                column: added.clone(),
            });
        }
        Ok(())
    }
}

/// A schema's columns as [`NamedIdentity::columns`] lists them (a
/// changelog's row kind left out).
fn columns(schema: &Schema) -> Vec<String> {
    schema
        .fields()
        .iter()
        .filter(|f| !crate::changelog::is_row_kind_field(f))
        .map(|f| {
            let null = if f.is_nullable() { "" } else { " NOT NULL" };
            format!("{}: {}{null}", f.name(), f.data_type())
        })
        .collect()
}

/// The first line where `was` and `is` differ, from each.
fn first_difference<'a>(was: &'a str, is: &'a str) -> (&'a str, &'a str) {
    was.lines()
        .zip(is.lines())
        .find(|(a, b)| a != b)
        .unwrap_or_else(|| {
            (
                was.lines().last().unwrap_or(""),
                is.lines().last().unwrap_or(""),
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn connector(columns: &[&str]) -> NamedIdentity {
        NamedIdentity {
            name: "sink alerts".into(),
            shape: "connector=ndjson\n     options: path=out.ndjson".into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            earlier: Vec::new(),
        }
    }

    #[test]
    fn a_connector_fits_while_it_only_gains_nullable_columns() {
        let was = connector(&["id: Int64 NOT NULL", "amount: Float64"]);
        assert_eq!(was.fits(&was), Ok(()));
        assert_eq!(
            was.fits(&connector(&[
                "id: Int64 NOT NULL",
                "amount: Float64",
                "note: Utf8"
            ])),
            Ok(())
        );
        let gone = was.fits(&connector(&["id: Int64 NOT NULL"])).unwrap_err();
        assert_eq!(
            gone,
            Misfit::ColumnGone {
                was: "amount: Float64".into()
            }
        );
        assert!(
            gone.to_string().contains("`amount: Float64` is gone"),
            "{gone}"
        );
        let retyped = was
            .fits(&connector(&["id: Int64 NOT NULL", "amount: Utf8"]))
            .unwrap_err();
        assert!(
            retyped.to_string().contains("is now `amount: Utf8`"),
            "{retyped}"
        );
        let strict = was
            .fits(&connector(&[
                "id: Int64 NOT NULL",
                "amount: Float64",
                "n: Int64 NOT NULL",
            ]))
            .unwrap_err();
        assert!(matches!(strict, Misfit::NewNotNull { .. }), "{strict}");
        assert!(strict.to_string().contains("must be nullable"), "{strict}");
    }

    #[test]
    fn a_changed_shape_does_not_fit_and_says_where() {
        let was = NamedIdentity {
            name: "uid fraud: window_aggregate 0".into(),
            shape: "window_aggregate tumble 60000ms\n     schema: n: Int64".into(),
            columns: Vec::new(),
            earlier: Vec::new(),
        };
        let now = NamedIdentity {
            shape: "window_aggregate tumble 120000ms\n     schema: n: Int64".into(),
            ..was.clone()
        };
        let why = was.fits(&now).unwrap_err().to_string();
        assert_eq!(
            why,
            "it was `window_aggregate tumble 60000ms`, it is now `window_aggregate tumble 120000ms`"
        );
    }
}
