//! A stream under construction while a logical plan is translated.
//!
//! Stateless steps (filters, projections) accumulate on a [`Stream`] without
//! creating nodes; they become one fused `calc` node when a stateful
//! operator, a union or a sink consumes the stream ([`Stream::materialize`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Schema, SchemaRef};
use datafusion::common::{DFSchema, DFSchemaRef, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use datafusion::physical_expr::expressions::Column;
use eddy_engine::changelog;
use eddy_engine::graph::{Edge, JobGraph, Node, NodeId, NodeKind};
use eddy_engine::operators::calc::{CalcPlan, CalcStep};

use crate::functions::windows::{interval_expr_ms, strip_casts};

/// The event-time attribute of a stream: which column, and the lateness its
/// source tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeAttr {
    /// Column index in the stream's schema.
    pub column: usize,
    /// Allowed lateness of the source(s).
    pub allowed_lateness_ms: i64,
    /// When the column is a window struct of tumbling or hopping windows:
    /// their width (a `window.start` is its time less this, plus 1 ms).
    pub window_ms: Option<i64>,
}

/// A producer's output port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    /// The node.
    pub node: NodeId,
    /// Its output port.
    pub port: usize,
}

/// A stream: an endpoint plus pending stateless steps.
#[derive(Debug, Clone)]
pub struct Stream {
    /// Where the rows come from.
    pub endpoint: Endpoint,
    /// Schema at the endpoint.
    pub endpoint_schema: SchemaRef,
    /// Pending filter/projection steps.
    pub steps: Vec<CalcStep>,
    /// Logical schema after the steps.
    pub schema: DFSchemaRef,
    /// Event time, if the stream has one.
    pub time: Option<TimeAttr>,
    /// Columns holding the bounds of a tumbling window around each row's
    /// event time (a window table function without aggregation).
    pub windows: Vec<WindowColumn>,
    /// Where the event time went, when an input had one and this stream
    /// has none (for "needs event time" errors).
    pub time_lost: Option<String>,
    /// Set when the stream is updating (its endpoint's rows carry a row
    /// kind, see `eddy_engine::changelog`); `None` when append-only.
    pub changelog: Option<Changelog>,
}

/// What the planner knows of an updating stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changelog {
    /// What made it updating, for messages: "the GROUP BY without a window
    /// at q.sql:3:1".
    pub origin: String,
    /// Columns (indices in the stream's schema) no two current rows share,
    /// when known.
    pub upsert_key: Option<Vec<usize>>,
}

/// A column whose value is a bound (start, end or time) of the tumbling
/// window holding the row's event time: two rows with equal values are less
/// than `width_ms` apart in event time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowColumn {
    /// Column index in the stream's schema.
    pub column: usize,
    /// The window's width.
    pub width_ms: i64,
    /// The value plus this is the window's end.
    pub to_end_ms: i64,
}

/// Why a stream cannot be the input of an operator.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamRefusal {
    /// The operator takes appends only; the stream is updating.
    #[error(
        "{operator} takes only an append-only input, but its input is updating (its rows change: {origin} emits updates and retractions); \
         aggregate it without a window, or put the windowed step before the updating one"
    )]
    Updating { operator: String, origin: String },
    /// The operator matches retractions by value, and a column is a change
    /// feed's metadata.
    #[error(
        "{operator} matches each retraction of its updating input to the row it takes out by its values, but column '{column}' holds each change's own metadata ('{key}' of {origin}: a -U or -D carries the time of the update or delete, not the row's); leave it out of {operator} (it can go to a sink as it is, or be the WATERMARK of a temporal join's versioned table)"
    )]
    ChangeMetadata {
        operator: String,
        column: String,
        key: String,
        origin: String,
    },
}

impl Stream {
    /// The stream an operator node yields on its port 0: no pending steps,
    /// logical schema `schema`, event time `time`.
    pub fn of_node(
        node: NodeId,
        graph: &JobGraph,
        schema: DFSchemaRef,
        time: Option<TimeAttr>,
    ) -> Stream {
        Stream {
            endpoint: Endpoint { node, port: 0 },
            endpoint_schema: graph.nodes[node].schema.clone(),
            steps: Vec::new(),
            schema,
            time,
            windows: Vec::new(),
            time_lost: None,
            changelog: None,
        }
    }

    /// Refuses an updating stream as the input of `operator`, which takes
    /// only appends: the message names what made the stream updating.
    pub fn append_only(&self, operator: &str) -> Result<(), StreamRefusal> {
        match &self.changelog {
            None => Ok(()),
            Some(changelog) => Err(StreamRefusal::Updating {
                operator: operator.to_string(),
                origin: changelog.origin.clone(),
            }),
        }
    }

    /// Refuses `operator`, which matches each retraction to the row it
    /// takes out by its values, from using `columns` (indices into this
    /// stream's schema) where one is a change feed's metadata column: its
    /// `-U`/`-D` rows carry the change's own value (an update's or delete's
    /// time), not the row's.
    pub fn no_change_metadata(
        &self,
        operator: &str,
        columns: impl IntoIterator<Item = usize>,
    ) -> Result<(), StreamRefusal> {
        let Some(changelog) = &self.changelog else {
            return Ok(());
        };
        for c in columns {
            let Some(field) = self.schema.fields().get(c) else {
                continue;
            };
            if let Some(key) = eddy_engine::source::metadata_key(field) {
                return Err(StreamRefusal::ChangeMetadata {
                    operator: operator.to_string(),
                    column: field.name().clone(),
                    key: key.to_string(),
                    origin: changelog.origin.clone(),
                });
            }
        }
        Ok(())
    }

    /// The upsert key's column names, if known.
    fn upsert_key_names(&self) -> Vec<String> {
        self.changelog
            .as_ref()
            .and_then(|c| c.upsert_key.as_ref())
            .map(|key| {
                key.iter()
                    .map(|&i| self.schema.field(i).name().clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Why this stream has no event time, for an operator that needs it.
    pub fn why_no_time(&self) -> String {
        match &self.time_lost {
            Some(lost) if lost.contains("SELECT list") => format!("{lost}; eddy keeps event time in a column, so select it in every step between the source and here"),
            Some(lost) => lost.clone(),
            None => "its source declares none: add `WATERMARK FOR <column> AS <column> - INTERVAL ...` to the source table".to_string(),
        }
    }

    /// Creates the fused calc node for pending steps (if any) and returns the
    /// endpoint that yields this stream's rows.
    pub fn materialize(&mut self, graph: &mut JobGraph) -> Endpoint {
        if self.steps.is_empty() {
            return self.endpoint;
        }
        let mut plan = CalcPlan::new(self.endpoint_schema.clone());
        // An updating stream's row kind rides along as its last column:
        // filters keep it, projections pass it on.
        let updating = changelog::is_updating(&self.endpoint_schema);
        let key_names = self.upsert_key_names();
        let mut width = self.endpoint_schema.fields().len();
        for step in self.steps.drain(..) {
            let step = match step {
                CalcStep::Project { mut exprs, schema } if updating => {
                    exprs.push(Arc::new(Column::new(changelog::ROW_KIND, width - 1)));
                    width = exprs.len();
                    CalcStep::Project {
                        exprs,
                        schema: changelog::updating_schema(&schema, &[]),
                    }
                }
                other => other,
            };
            plan.push(step);
        }
        let schema = if updating {
            let origin = self
                .changelog
                .as_ref()
                .map(|c| c.origin.as_str())
                .unwrap_or_default();
            changelog::with_origin(
                &changelog::updating_schema(self.schema.as_arrow(), &key_names),
                origin,
            )
        } else {
            Arc::new(self.schema.as_arrow().clone())
        };
        let id = graph.nodes.len();
        let node = graph.add(Node {
            name: format!("calc#{id}"),
            kind: NodeKind::Operator(Arc::new(plan)),
            inputs: vec![Edge::new(self.endpoint.node, self.endpoint.port)],
            schema: schema.clone(),
            uid: None,
        });
        self.endpoint = Endpoint { node, port: 0 };
        self.endpoint_schema = schema;
        self.endpoint
    }
}

/// Which output of a projection carries the input's event time (column
/// `time` of `schema`), if any.
///
/// A column passed through keeps it. A window aggregate's time is its window
/// struct; of the values taken from it, `window_time` (`end - 1 ms`) and
/// `window_end` can carry event time (a result row fires no earlier than
/// either, so neither makes it late downstream); `window_start` cannot.
pub fn projected_time(exprs: &[Expr], schema: &DFSchema, time: usize) -> Option<usize> {
    let passed = exprs
        .iter()
        .position(|e| column_index(e, schema) == Some(time));
    if passed.is_some() {
        return passed;
    }
    if !matches!(schema.field(time).data_type(), DataType::Struct(_)) {
        return None;
    }
    let window_time = exprs.iter().position(|e| match strip_casts(e) {
        Expr::BinaryExpr(BinaryExpr {
            left,
            op: Operator::Minus,
            right,
        }) => window_end_of(left, schema) == Some(time) && is_one_millisecond(right),
        _ => false,
    });
    window_time.or_else(|| {
        exprs
            .iter()
            .position(|e| window_end_of(e, schema) == Some(time))
    })
}

/// Where `columns` of `schema` are in a projection's output, when every
/// one is passed through unchanged (an upsert key survives only so).
pub fn projected_columns(
    exprs: &[Expr],
    schema: &DFSchema,
    columns: &[usize],
) -> Option<Vec<usize>> {
    columns
        .iter()
        .map(|&c| {
            exprs
                .iter()
                .position(|e| column_index(e, schema) == Some(c))
        })
        .collect()
}

/// The input column an expression passes through unchanged, if any.
fn column_index(expr: &Expr, schema: &DFSchema) -> Option<usize> {
    match expr {
        Expr::Alias(alias) => column_index(&alias.expr, schema),
        Expr::Column(column) => schema.index_of_column(column).ok(),
        _ => None,
    }
}

/// `get_field(window, 'end')`: the column index of `window`.
fn window_end_of(expr: &Expr, schema: &DFSchema) -> Option<usize> {
    let Expr::ScalarFunction(call) = strip_casts(expr) else {
        return None;
    };
    if call.func.name() != "get_field" {
        return None;
    }
    match call.args.as_slice() {
        [window, Expr::Literal(ScalarValue::Utf8(Some(field)), _)] if field == "end" => {
            column_index(window, schema)
        }
        _ => None,
    }
}

fn is_one_millisecond(expr: &Expr) -> bool {
    interval_expr_ms(expr) == Some(1)
}

/// The window columns of a projection's output: those passed through, and
/// `date_bin(width, <event time>)` (a window's start), possibly plus or
/// minus a constant interval (its end, its time).
pub fn projected_windows(
    exprs: &[Expr],
    schema: &DFSchema,
    time: Option<usize>,
    windows: &[WindowColumn],
) -> Vec<WindowColumn> {
    exprs
        .iter()
        .enumerate()
        .filter_map(|(i, expr)| {
            let passed = column_index(expr, schema)
                .and_then(|c| windows.iter().find(|w| w.column == c))
                .map(|w| (w.width_ms, w.to_end_ms));
            passed
                .or_else(|| shifted_window(strip_casts(expr), schema, windows))
                .or_else(|| window_bound(strip_casts(expr), schema, time?))
                .map(|(width_ms, to_end_ms)| WindowColumn {
                    column: i,
                    width_ms,
                    to_end_ms,
                })
        })
        .collect()
}

/// `w (+|-) interval` of a window column `w` (a window table function's
/// `window_start + size AS window_end`): rows sharing its value share `w`'s.
fn shifted_window(expr: &Expr, schema: &DFSchema, windows: &[WindowColumn]) -> Option<(i64, i64)> {
    let Expr::BinaryExpr(BinaryExpr { left, op, right }) = expr else {
        return None;
    };
    let shift = match op {
        Operator::Plus => interval_expr_ms(right)?,
        Operator::Minus => -interval_expr_ms(right)?,
        _ => return None,
    };
    let column = column_index(strip_casts(left), schema)?;
    let w = windows.iter().find(|w| w.column == column)?;
    Some((w.width_ms, w.to_end_ms - shift))
}

/// The window columns after `WHERE predicate`: a conjunct `time < w` (a
/// window table function's rows keep only those before their window's
/// end) narrows `w`'s rows to times before its value.
pub fn filtered_windows(
    predicate: &Expr,
    schema: &DFSchema,
    time: Option<usize>,
    windows: &[WindowColumn],
) -> Vec<WindowColumn> {
    let Some(time) = time else {
        return windows.to_vec();
    };
    let mut windows = windows.to_vec();
    for conjunct in datafusion::logical_expr::utils::split_conjunction(predicate) {
        let Expr::BinaryExpr(BinaryExpr { left, op, right }) = conjunct else {
            continue;
        };
        let (earlier, later) = match op {
            Operator::Lt => (left, right),
            Operator::Gt => (right, left),
            _ => continue,
        };
        if column_index(strip_casts(earlier), schema) != Some(time) {
            continue;
        }
        let Some(bound) = column_index(strip_casts(later), schema) else {
            continue;
        };
        for w in windows.iter_mut().filter(|w| w.column == bound) {
            // Times in [v + to_end - width, min(v + to_end, v)).
            let from = w.to_end_ms - w.width_ms;
            let to_end = w.to_end_ms.min(0);
            if to_end > from {
                *w = WindowColumn {
                    column: w.column,
                    width_ms: to_end - from,
                    to_end_ms: to_end,
                };
            }
        }
    }
    windows
}

/// `date_bin(width, time) [(+|-) interval]...`: the width, and what to add
/// to the value to get the window's end.
fn window_bound(expr: &Expr, schema: &DFSchema, time: usize) -> Option<(i64, i64)> {
    match expr {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::Plus | Operator::Minus) =>
        {
            let shift = interval_expr_ms(right)?;
            let (width, to_end) = window_bound(strip_casts(left), schema, time)?;
            Some(match op {
                Operator::Plus => (width, to_end - shift),
                _ => (width, to_end + shift),
            })
        }
        Expr::ScalarFunction(call) if call.func.name() == "date_bin" => {
            match call.args.as_slice() {
                [width, column] | [width, column, _]
                    if column_index(column, schema) == Some(time) =>
                {
                    interval_expr_ms(width).filter(|w| *w > 0).map(|w| (w, w))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The physical schema of an updating operator's output whose columns are
/// `schema`'s (all nullable), with the row kind naming `upsert_key` and
/// `origin` (what made the stream updating).
pub fn updating_output(schema: &DFSchema, upsert_key: &[String], origin: &str) -> SchemaRef {
    let fields: Vec<datafusion::arrow::datatypes::Field> = schema
        .fields()
        .iter()
        .map(|f| f.as_ref().clone().with_nullable(true))
        .collect();
    changelog::with_origin(
        &changelog::updating_schema(
            &datafusion::arrow::datatypes::Schema::new(fields),
            upsert_key,
        ),
        origin,
    )
}

/// The columns of `schema` as projection expressions, in order.
fn column_exprs(schema: &Schema) -> Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>> {
    schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| Arc::new(Column::new(f.name(), i)) as _)
        .collect()
}

/// A calc node projecting what `from` emits (`input`) into `output`.
fn add_projection(
    graph: &mut JobGraph,
    from: Endpoint,
    input: SchemaRef,
    exprs: Vec<Arc<dyn datafusion::physical_expr::PhysicalExpr>>,
    output: SchemaRef,
) -> Endpoint {
    let mut plan = CalcPlan::new(input);
    plan.push(CalcStep::Project {
        exprs,
        schema: output.clone(),
    });
    let id = graph.nodes.len();
    let node = graph.add(Node {
        name: format!("calc#{id}"),
        kind: NodeKind::Operator(Arc::new(plan)),
        inputs: vec![Edge::new(from.node, from.port)],
        schema: output,
        uid: None,
    });
    Endpoint { node, port: 0 }
}

/// An updating stream that only ever inserts, as an append-only one (a
/// calc dropping the row kind).
pub fn without_row_kind(graph: &mut JobGraph, from: Endpoint) -> Endpoint {
    let schema = graph.port_schema(from.node, from.port);
    let width = schema.fields().len().saturating_sub(1);
    let data: SchemaRef = Arc::new(Schema::new(
        schema.fields()[..width]
            .iter()
            .map(|f| f.as_ref().clone())
            .collect::<Vec<_>>(),
    ));
    let exprs = column_exprs(&data);
    add_projection(graph, from, schema, exprs, data)
}

/// An append-only stream's rows as the inserts of an updating stream (a
/// calc appending the row kind `+I`), for a union with an updating stream.
pub fn as_inserts(graph: &mut JobGraph, from: Endpoint, schema: &SchemaRef) -> Endpoint {
    let mut exprs = column_exprs(schema);
    exprs.push(Arc::new(
        datafusion::physical_expr::expressions::Literal::new(ScalarValue::Int8(Some(
            changelog::RowKind::Insert.byte(),
        ))),
    ));
    let output = changelog::updating_schema(schema, &[]);
    add_projection(graph, from, schema.clone(), exprs, output)
}

/// Adds an operator node, named after its kind and id, reading `inputs`.
/// How their rows reach the operator's instances is the operator's own
/// declaration (`OperatorPlan::required_input_distribution`): the planner
/// does not key edges.
pub fn add_operator(
    graph: &mut JobGraph,
    plan: std::sync::Arc<dyn eddy_engine::operator::OperatorPlan>,
    inputs: Vec<Endpoint>,
) -> NodeId {
    let id = graph.nodes.len();
    let schema = plan.output_schema();
    graph.add(Node {
        name: format!("{}#{id}", plan.kind()),
        kind: NodeKind::Operator(plan),
        inputs: inputs
            .into_iter()
            .map(|from| Edge::new(from.node, from.port))
            .collect(),
        schema,
        uid: None,
    })
}
