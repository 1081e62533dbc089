//! Entry points for the fuzz targets in `fuzz/`: thin public wrappers around state
//! machines that are otherwise private. Not part of the kernel's API; no stability
//! promise.

/// The task graph's pure operations (`ext::graph`).
pub mod graph {
    use keel_envelope::commands::{NewTaskNode, NodeUpdates};
    use keel_envelope::ext::{TaskGraph, TaskNode};
    use keel_envelope::ErrorPayload;

    /// A new graph from `nodes`, or the first problem found.
    pub fn create(
        graph_id: String,
        title: Option<String>,
        nodes: &[NewTaskNode],
        now: u64,
    ) -> Result<TaskGraph, ErrorPayload> {
        crate::session::ext::graph::create(graph_id, title, None, nodes, now)
    }

    /// Adds a node; the graph is unchanged on error.
    pub fn add_node(
        g: &mut TaskGraph,
        node: &NewTaskNode,
        now: u64,
    ) -> Result<TaskNode, ErrorPayload> {
        crate::session::ext::graph::add_node(g, node, now)
    }

    /// Applies `updates` to node `id`; the graph is unchanged on error.
    pub fn update_node(
        g: &mut TaskGraph,
        id: &str,
        updates: &NodeUpdates,
        now: u64,
    ) -> Result<TaskNode, ErrorPayload> {
        crate::session::ext::graph::update_node(g, id, updates, now)
    }

    /// Fails pending nodes downstream of a failure, promotes ready ones.
    pub fn advance(g: &mut TaskGraph, now: u64) -> Vec<String> {
        crate::session::ext::graph::advance(g, now)
    }

    /// Brings the graph status in line with its nodes.
    pub fn settle(g: &mut TaskGraph, now: u64) -> bool {
        crate::session::ext::graph::settle(g, now)
    }

    /// The model's text view of the graph.
    pub fn describe(g: &TaskGraph) -> String {
        crate::session::ext::graph::describe(g)
    }
}
