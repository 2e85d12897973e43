//! A stream under construction while a logical plan is translated.
//!
//! Stateless steps (filters, projections) accumulate on a [`Stream`] without
//! creating nodes; they become one fused `calc` node when a stateful
//! operator, a union or a sink consumes the stream ([`Stream::materialize`]).

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::common::DFSchemaRef;
use eddy_engine::graph::{Edge, JobGraph, Node, NodeId, NodeKind, Partitioning};
use eddy_engine::operators::calc::{CalcPlan, CalcStep};

/// The event-time attribute of a stream: which column, and the lateness its
/// source tolerates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeAttr {
    /// Column index in the stream's schema.
    pub column: usize,
    /// Allowed lateness of the source(s).
    pub allowed_lateness_ms: i64,
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
}

impl Stream {
    /// Creates the fused calc node for pending steps (if any) and returns the
    /// endpoint that yields this stream's rows.
    pub fn materialize(&mut self, graph: &mut JobGraph) -> Endpoint {
        if self.steps.is_empty() {
            return self.endpoint;
        }
        let mut plan = CalcPlan::new(self.endpoint_schema.clone());
        for step in self.steps.drain(..) {
            plan.push(step);
        }
        let schema = Arc::new(self.schema.as_arrow().clone());
        let id = graph.nodes.len();
        let node = graph.add(Node {
            name: format!("calc#{id}"),
            kind: NodeKind::Operator(Arc::new(plan)),
            inputs: vec![Edge {
                from: self.endpoint.node,
                port: self.endpoint.port,
                partitioning: Partitioning::Forward,
            }],
            schema: schema.clone(),
        });
        self.endpoint = Endpoint { node, port: 0 };
        self.endpoint_schema = schema;
        self.endpoint
    }
}
