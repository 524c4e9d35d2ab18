//! Ratchet's graph renderer: flow graphs of workflow definitions and executed histories, laid
//! out in layers and drawn as standalone SVG.
//!
//! A [`Graph`] is one level of a flow: nodes and the edges between them. A node may hold a
//! graph of its own (a parallel block, a loop body, a sub-workflow), drawn as a box around it.
//! [`layout`] places every level Sugiyama-style (cycles broken, nodes ranked in layers, the
//! order in each layer chosen to cut crossings, coordinates that keep chains straight, edges
//! routed orthogonally between the layers, never through a node), innermost levels first so a
//! box is sized by what it holds. [`svg`] draws a layout; the same graph always gives the same
//! bytes.
//!
//! ```
//! use ratchet_graph::{Graph, Node, Status};
//!
//! let mut g = Graph::default();
//! let a = g.node(Node::new("a", "quote").detail("call quote").status(Status::Completed));
//! let b = g.node(Node::new("b", "approve").detail("listen approval").status(Status::Running));
//! g.edge(a, b, None);
//! let svg = ratchet_graph::render(&g);
//! assert!(svg.starts_with("<svg"));
//! ```
#![deny(missing_docs)]

mod history;
mod layout;
mod svg;

pub use history::{from_history, HistoryGraph};
pub use layout::{layout, Layout, PlacedBox, PlacedEdge};
pub use svg::svg;

/// How far a step got: the colour it is drawn in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// No run behind it (a definition's step).
    #[default]
    None,
    /// Done.
    Completed,
    /// Under way.
    Running,
    /// Failed (or was cancelled).
    Failed,
    /// Not reached yet.
    Pending,
    /// Will not run (the run ended first, or its branch was not taken).
    Skipped,
}

impl Status {
    /// The status's name, as its SVG class says it (`status-completed`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Status::None => "none",
            Status::Completed => "completed",
            Status::Running => "running",
            Status::Failed => "failed",
            Status::Pending => "pending",
            Status::Skipped => "skipped",
        }
    }
}

/// How a node is drawn.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A step: a rounded box.
    #[default]
    Step,
    /// Where the flow begins or ends: a pill.
    Terminal,
    /// A choice between edges (a `switch`): a box with pointed sides.
    Decision,
    /// A small join or exit point.
    Point,
    /// Another workflow: a box with a double border.
    Workflow,
}

/// One node of a [`Graph`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Node {
    /// Unique in the whole graph, nested levels included: the SVG element's `id`.
    pub id: String,
    /// The first line: the step's name.
    pub label: String,
    /// The second line, smaller: what the step does.
    pub detail: Option<String>,
    /// Shown on hover.
    pub tooltip: Option<String>,
    /// How it is drawn.
    pub shape: Shape,
    /// Its colour.
    pub status: Status,
    /// Where a click on it goes.
    pub link: Option<String>,
    /// What it holds, drawn inside it.
    pub body: Option<Graph>,
}

impl Node {
    /// A step node.
    pub fn new(id: impl Into<String>, label: impl Into<String>) -> Node {
        Node {
            id: id.into(),
            label: label.into(),
            ..Node::default()
        }
    }

    /// Sets the second line.
    pub fn detail(mut self, detail: impl Into<String>) -> Node {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the hover text.
    pub fn tooltip(mut self, tooltip: impl Into<String>) -> Node {
        self.tooltip = Some(tooltip.into());
        self
    }

    /// Sets the shape.
    pub fn shape(mut self, shape: Shape) -> Node {
        self.shape = shape;
        self
    }

    /// Sets the status.
    pub fn status(mut self, status: Status) -> Node {
        self.status = status;
        self
    }

    /// Sets the link.
    pub fn link(mut self, link: impl Into<String>) -> Node {
        self.link = Some(link.into());
        self
    }

    /// Sets what the node holds.
    pub fn body(mut self, body: Graph) -> Node {
        self.body = Some(body);
        self
    }
}

/// An edge: `from` and `to` index the nodes of the same [`Graph`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The source node's index.
    pub from: usize,
    /// The target node's index.
    pub to: usize,
    /// Written beside the edge (a switch case, `on error`).
    pub label: Option<String>,
}

/// One level of a flow: nodes, and edges between them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Graph {
    /// The nodes.
    pub nodes: Vec<Node>,
    /// The edges.
    pub edges: Vec<Edge>,
}

impl Graph {
    /// Adds a node; returns its index.
    pub fn node(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// Adds an edge between two nodes of this level (indexes out of range are ignored when
    /// laid out).
    pub fn edge(&mut self, from: usize, to: usize, label: Option<String>) {
        self.edges.push(Edge { from, to, label });
    }

    /// Nodes in this level and every level inside it.
    pub fn len(&self) -> usize {
        self.nodes
            .iter()
            .map(|n| 1 + n.body.as_ref().map_or(0, Graph::len))
            .sum()
    }

    /// Whether the graph has no node.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }
}

/// Lays out and draws a graph: [`layout`] then [`svg`].
pub fn render(graph: &Graph) -> String {
    svg(&layout(graph))
}
