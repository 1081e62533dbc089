//! The persistent task graph (seed 002 §12.5): a DAG of nodes, each with a status.
//!
//! Pure state transitions over the wire type [`TaskGraph`]; the caller supplies ids and
//! the time, emits the events and persists the result.
//!
//! Rules:
//! - node ids are unique (`DUPLICATE_NODE`); every dependency names a node of the graph
//!   (`INVALID_DEPENDENCY`); the graph stays acyclic (`CYCLE_DETECTED`, with the cycle);
//! - a node is `ready`, `running` or `completed` only once all its dependencies are
//!   `completed` or `skipped`; `completed` and `skipped` are final; a `failed` node may
//!   be retried (back to `pending`, `ready` or `running`);
//! - [`advance`] first fails every pending node downstream of a failed node (error code
//!   `DEPENDENCY_FAILED`; such nodes are never promoted), then promotes every pending
//!   node whose dependencies are all done to `ready`;
//! - the graph is `completed` (no failure) or `failed` exactly when it has nodes and all
//!   of them are terminal; it goes back to `active` when that stops being true.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use keel_envelope::commands::{NewTaskNode, NodeUpdates};
use keel_envelope::ext::{GraphStatus, NodeStatus, TaskGraph, TaskNode};
use keel_envelope::{ErrorCode, ErrorPayload};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::Direction;

/// Whether a status is terminal.
pub(crate) fn is_terminal(s: NodeStatus) -> bool {
    matches!(
        s,
        NodeStatus::Completed | NodeStatus::Failed | NodeStatus::Skipped
    )
}

/// Whether a status counts as done for the node's dependents.
pub(crate) fn is_done(s: NodeStatus) -> bool {
    matches!(s, NodeStatus::Completed | NodeStatus::Skipped)
}

/// Whether a status needs every dependency done.
fn needs_deps_done(s: NodeStatus) -> bool {
    matches!(
        s,
        NodeStatus::Ready | NodeStatus::Running | NodeStatus::Completed
    )
}

fn invalid(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message)
}

/// Checks ids, dependencies and acyclicity; returns a topological order (dependencies
/// first; ties in id order).
pub(crate) fn order_of(nodes: &BTreeMap<String, TaskNode>) -> Result<Vec<String>, ErrorPayload> {
    let mut g: DiGraph<&str, ()> = DiGraph::new();
    let mut index: HashMap<&str, NodeIndex> = HashMap::new();
    for id in nodes.keys() {
        index.insert(id.as_str(), g.add_node(id.as_str()));
    }
    for (id, node) in nodes {
        for dep in &node.depends_on {
            let Some(&from) = index.get(dep.as_str()) else {
                return Err(ErrorPayload::new(
                    ErrorCode::InvalidDependency,
                    format!("node {id:?} depends on {dep:?}, which is not in the graph"),
                )
                .with_detail("nodeId", id.clone())
                .with_detail("dependency", dep.clone()));
            };
            // Edge: dependency → dependent.
            g.update_edge(from, index[id.as_str()], ());
        }
    }
    if petgraph::algo::is_cyclic_directed(&g) {
        let cycle = find_cycle(nodes);
        let mut shown = cycle.join(" → ");
        if let Some(first) = cycle.first() {
            shown.push_str(" → ");
            shown.push_str(first);
        }
        return Err(ErrorPayload::new(
            ErrorCode::CycleDetected,
            format!(
                "the task graph would contain a cycle: {shown} (each node depends on the next)"
            ),
        )
        .with_detail("cycle", cycle));
    }
    // Kahn's algorithm; among nodes free at the same time, the smallest id first.
    let mut indegree: HashMap<NodeIndex, usize> = g
        .node_indices()
        .map(|i| (i, g.neighbors_directed(i, Direction::Incoming).count()))
        .collect();
    let mut free: BTreeSet<(&str, NodeIndex)> = indegree
        .iter()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| (g[*i], *i))
        .collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some((id, i)) = free.pop_first() {
        order.push(id.to_owned());
        for next in g.neighbors_directed(i, Direction::Outgoing) {
            if let Some(d) = indegree.get_mut(&next) {
                *d -= 1;
                if *d == 0 {
                    free.insert((g[next], next));
                }
            }
        }
    }
    Ok(order)
}

/// A cycle as node ids in order, each depending on the next (and the last on the
/// first). Empty if there is none.
fn find_cycle(nodes: &BTreeMap<String, TaskNode>) -> Vec<String> {
    // Iterative DFS over "depends on" edges with colours; a grey successor closes a cycle.
    #[derive(Clone, Copy, PartialEq)]
    enum Colour {
        White,
        Grey,
        Black,
    }
    let mut colour: HashMap<&str, Colour> =
        nodes.keys().map(|k| (k.as_str(), Colour::White)).collect();
    for start in nodes.keys() {
        if colour[start.as_str()] != Colour::White {
            continue;
        }
        let mut path: Vec<&str> = vec![start.as_str()];
        let mut next_dep: Vec<usize> = vec![0];
        colour.insert(start.as_str(), Colour::Grey);
        while let Some(&top) = path.last() {
            let deps = nodes
                .get(top)
                .map(|n| n.depends_on.as_slice())
                .unwrap_or(&[]);
            let i = next_dep.last().copied().unwrap_or(0);
            if i >= deps.len() {
                colour.insert(top, Colour::Black);
                path.pop();
                next_dep.pop();
                continue;
            }
            if let Some(n) = next_dep.last_mut() {
                *n += 1;
            }
            let dep = deps[i].as_str();
            match colour.get(dep).copied() {
                Some(Colour::White) => {
                    colour.insert(dep, Colour::Grey);
                    path.push(dep);
                    next_dep.push(0);
                }
                Some(Colour::Grey) => {
                    let pos = path.iter().position(|p| *p == dep).unwrap_or(0);
                    return path[pos..].iter().map(|s| (*s).to_owned()).collect();
                }
                _ => {}
            }
        }
    }
    Vec::new()
}

fn new_node(n: &NewTaskNode, now: u64) -> Result<TaskNode, ErrorPayload> {
    if n.id.trim().is_empty() {
        return Err(invalid("a node id is empty").with_detail("field", "id"));
    }
    let mut deps: Vec<String> = Vec::new();
    for d in &n.depends_on {
        if !deps.contains(d) {
            deps.push(d.clone());
        }
    }
    Ok(TaskNode::new(
        n.id.clone(),
        n.title.clone(),
        NodeStatus::Pending,
        deps,
        n.metadata.clone().unwrap_or_default(),
        now,
        now,
        serde_json::Value::Null,
        serde_json::Value::Null,
    )
    .description(n.description.clone()))
}

/// A new graph from `nodes`, or the first problem found.
pub(crate) fn create(
    graph_id: String,
    title: Option<String>,
    description: Option<String>,
    nodes: &[NewTaskNode],
    now: u64,
) -> Result<TaskGraph, ErrorPayload> {
    let mut map = BTreeMap::new();
    for n in nodes {
        if map.contains_key(&n.id) {
            return Err(duplicate(&n.id));
        }
        map.insert(n.id.clone(), new_node(n, now)?);
    }
    let order = order_of(&map)?;
    Ok(
        TaskGraph::new(graph_id, GraphStatus::Active, order, map, now, now)
            .title(title)
            .description(description),
    )
}

fn duplicate(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::DuplicateNode,
        format!("node id {id:?} is already used in the graph"),
    )
    .with_detail("nodeId", id)
}

/// Adds a node; the graph is unchanged on error.
pub(crate) fn add_node(
    g: &mut TaskGraph,
    node: &NewTaskNode,
    now: u64,
) -> Result<TaskNode, ErrorPayload> {
    if g.nodes.contains_key(&node.id) {
        return Err(duplicate(&node.id));
    }
    let n = new_node(node, now)?;
    let mut nodes = g.nodes.clone();
    nodes.insert(n.id.clone(), n.clone());
    let order = order_of(&nodes)?;
    g.nodes = nodes;
    g.order = order;
    g.updated_at = now;
    Ok(n)
}

/// The unknown node error.
pub(crate) fn node_not_found(id: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::GraphNotFound,
        format!("the task graph has no node {id:?}"),
    )
    .with_detail("nodeId", id)
}

/// Dependencies of `id` that are not done yet.
fn waiting_for(g: &TaskGraph, id: &str) -> Vec<String> {
    g.nodes
        .get(id)
        .map(|n| {
            n.depends_on
                .iter()
                .filter(|d| g.nodes.get(*d).is_none_or(|dn| !is_done(dn.status.clone())))
                .cloned()
                .collect()
        })
        .unwrap_or_default()
}

/// Applies `updates` to node `id`; the graph is unchanged on error. Returns the node.
pub(crate) fn update_node(
    g: &mut TaskGraph,
    id: &str,
    updates: &NodeUpdates,
    now: u64,
) -> Result<TaskNode, ErrorPayload> {
    let Some(current) = g.nodes.get(id) else {
        return Err(node_not_found(id));
    };
    let from = current.status.clone();
    if let Some(to) = updates.status.clone() {
        if to != from {
            if is_done(from.clone()) {
                return Err(invalid(format!(
                    "node {id:?} is {} and stays so",
                    status_str(from.clone())
                ))
                .with_detail("nodeId", id)
                .with_detail("status", status_str(from)));
            }
            if needs_deps_done(to.clone()) {
                let waiting = waiting_for(g, id);
                if !waiting.is_empty() {
                    return Err(invalid(format!(
                        "node {id:?} cannot be {} before its dependencies are done: {}",
                        status_str(to),
                        waiting.join(", ")
                    ))
                    .with_detail("nodeId", id)
                    .with_detail("waitingFor", waiting));
                }
            }
        }
    }
    let Some(node) = g.nodes.get_mut(id) else {
        return Err(node_not_found(id));
    };
    if let Some(to) = updates.status.clone() {
        if to != from {
            node.status = to.clone();
            if to == NodeStatus::Running && node.started_at.is_none() {
                node.started_at = Some(now);
            }
            if is_terminal(to) {
                node.completed_at = Some(now);
            } else {
                node.completed_at = None;
                if from == NodeStatus::Failed && updates.error.is_none() {
                    node.error = serde_json::Value::Null;
                }
            }
        }
    }
    if let Some(t) = &updates.title {
        node.title = t.clone();
    }
    if let Some(r) = &updates.result {
        node.result = r.clone();
    }
    if let Some(e) = &updates.error {
        node.error = e.clone();
    }
    if let Some(m) = &updates.metadata {
        for (k, v) in m {
            node.metadata.insert(k.clone(), v.clone());
        }
    }
    node.updated_at = now;
    let out = node.clone();
    g.updated_at = now;
    Ok(out)
}

/// Fails pending nodes downstream of a failed node, then promotes every pending node
/// whose dependencies are all done to `ready`. Returns the promoted ids (in `order`).
pub(crate) fn advance(g: &mut TaskGraph, now: u64) -> Vec<String> {
    let order = g.order.clone();
    // Failure propagation, in topological order so it reaches every descendant.
    for id in &order {
        let failed_dep = {
            let Some(n) = g.nodes.get(id) else { continue };
            if n.status != NodeStatus::Pending {
                continue;
            }
            n.depends_on
                .iter()
                .find(|d| {
                    g.nodes
                        .get(*d)
                        .is_some_and(|dn| dn.status == NodeStatus::Failed)
                })
                .cloned()
        };
        if let (Some(dep), Some(n)) = (failed_dep, g.nodes.get_mut(id)) {
            n.status = NodeStatus::Failed;
            n.error = serde_json::json!({
                "code": "DEPENDENCY_FAILED",
                "message": format!("dependency {dep:?} failed"),
                "dependency": dep,
            });
            n.completed_at = Some(now);
            n.updated_at = now;
        }
    }
    let mut became_ready = Vec::new();
    for id in &order {
        let promote = g
            .nodes
            .get(id)
            .is_some_and(|n| n.status == NodeStatus::Pending)
            && waiting_for(g, id).is_empty();
        if promote {
            if let Some(n) = g.nodes.get_mut(id) {
                n.status = NodeStatus::Ready;
                n.updated_at = now;
                became_ready.push(id.clone());
            }
        }
    }
    g.updated_at = now;
    became_ready
}

/// Brings the graph status in line with its nodes. Returns `true` when the graph just
/// became terminal (`task-graph.completed` is due).
pub(crate) fn settle(g: &mut TaskGraph, now: u64) -> bool {
    let all_terminal =
        !g.nodes.is_empty() && g.nodes.values().all(|n| is_terminal(n.status.clone()));
    if all_terminal {
        let status = if g.nodes.values().any(|n| n.status == NodeStatus::Failed) {
            GraphStatus::Failed
        } else {
            GraphStatus::Completed
        };
        let was_active = g.status == GraphStatus::Active;
        if was_active || g.status != status {
            g.status = status;
            g.completed_at = Some(now);
            g.updated_at = now;
        }
        was_active
    } else {
        if g.status != GraphStatus::Active {
            g.status = GraphStatus::Active;
            g.completed_at = None;
            g.updated_at = now;
        }
        false
    }
}

/// The wire spelling of a node status.
pub(crate) fn status_str(s: NodeStatus) -> String {
    s.as_str().to_owned()
}

/// A short text view of the graph for the model.
pub(crate) fn describe(g: &TaskGraph) -> String {
    let status = g.status.as_str();
    let mut s = format!("Task graph {} ({status})", g.graph_id);
    if let Some(t) = &g.title {
        s.push_str(&format!(": {t}"));
    }
    s.push('\n');
    for id in &g.order {
        if let Some(n) = g.nodes.get(id) {
            s.push_str(&format!(
                "- {id} [{}] {}",
                status_str(n.status.clone()),
                n.title
            ));
            if !n.depends_on.is_empty() {
                s.push_str(&format!(" (after {})", n.depends_on.join(", ")));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
/// Checks the invariants listed in the module documentation; returns the first
/// violation.
pub(crate) fn check_invariants(g: &TaskGraph) -> Result<(), String> {
    // `order` is a permutation of the nodes and a topological order.
    let pos: HashMap<&str, usize> = g
        .order
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    if pos.len() != g.order.len() || g.order.len() != g.nodes.len() {
        return Err(format!(
            "order {:?} is not a permutation of the nodes",
            g.order
        ));
    }
    let ids: std::collections::HashSet<&str> = g.nodes.keys().map(String::as_str).collect();
    for (id, n) in &g.nodes {
        if n.id != *id {
            return Err(format!("node key {id:?} holds id {:?}", n.id));
        }
        let Some(&p) = pos.get(id.as_str()) else {
            return Err(format!("{id:?} is missing from order"));
        };
        for d in &n.depends_on {
            if !ids.contains(d.as_str()) {
                return Err(format!("{id:?} depends on unknown {d:?}"));
            }
            if pos.get(d.as_str()).is_none_or(|&dp| dp >= p) {
                return Err(format!("order puts {id:?} before its dependency {d:?}"));
            }
            let ds = g.nodes[d.as_str()].status.clone();
            if needs_deps_done(n.status.clone()) && !is_done(ds.clone()) {
                return Err(format!(
                    "{id:?} is {} while its dependency {d:?} is {}",
                    status_str(n.status.clone()),
                    status_str(ds)
                ));
            }
        }
    }
    let all_terminal =
        !g.nodes.is_empty() && g.nodes.values().all(|n| is_terminal(n.status.clone()));
    let any_failed = g.nodes.values().any(|n| n.status == NodeStatus::Failed);
    let expected = match (all_terminal, any_failed) {
        (false, _) => GraphStatus::Active,
        (true, false) => GraphStatus::Completed,
        (true, true) => GraphStatus::Failed,
    };
    if g.status != expected {
        return Err(format!(
            "graph status {:?}, expected {expected:?}",
            g.status
        ));
    }
    if (g.status == GraphStatus::Active) != g.completed_at.is_none() {
        return Err("completedAt does not match the status".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn nn(id: &str, deps: &[&str]) -> NewTaskNode {
        NewTaskNode::new(id, format!("task {id}"))
            .depends_on(deps.iter().map(|d| (*d).to_owned()).collect::<Vec<_>>())
    }

    fn st(s: NodeStatus) -> NodeUpdates {
        NodeUpdates::new().status(s)
    }

    #[test]
    fn create_checks_duplicates_dependencies_and_cycles() {
        let e = create("g".into(), None, None, &[nn("a", &[]), nn("a", &[])], 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::DuplicateNode);
        let e = create("g".into(), None, None, &[nn("a", &["zz"])], 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidDependency);
        let e = create(
            "g".into(),
            None,
            None,
            &[
                nn("a", &["c"]),
                nn("b", &["a"]),
                nn("c", &["b"]),
                nn("d", &[]),
            ],
            1,
        )
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::CycleDetected);
        let cycle: Vec<String> =
            serde_json::from_value(e.details.get("cycle").cloned().unwrap()).unwrap();
        assert_eq!(cycle, ["a", "c", "b"]);
        let e = create("g".into(), None, None, &[nn("a", &["a"])], 1).unwrap_err();
        assert_eq!(e.code, ErrorCode::CycleDetected);
    }

    #[test]
    fn advance_promotes_fails_downstream_and_completes() {
        let mut g = create(
            "g".into(),
            None,
            None,
            &[nn("a", &[]), nn("b", &["a"]), nn("c", &["b"]), nn("d", &[])],
            1,
        )
        .unwrap();
        assert_eq!(advance(&mut g, 2), ["a", "d"]);
        update_node(&mut g, "a", &st(NodeStatus::Completed), 3).unwrap();
        assert_eq!(advance(&mut g, 4), ["b"]);
        update_node(&mut g, "b", &st(NodeStatus::Failed), 5).unwrap();
        assert!(!settle(&mut g, 5));
        update_node(&mut g, "d", &st(NodeStatus::Skipped), 6).unwrap();
        assert!(advance(&mut g, 7).is_empty());
        assert_eq!(g.nodes["c"].status, NodeStatus::Failed);
        assert!(settle(&mut g, 7));
        assert_eq!(g.status, GraphStatus::Failed);
        check_invariants(&g).unwrap();
        // Completed stays completed; dependencies gate ready/running/completed.
        assert!(update_node(&mut g, "a", &st(NodeStatus::Pending), 8).is_err());
        let mut h = create("h".into(), None, None, &[nn("a", &[]), nn("b", &["a"])], 1).unwrap();
        let e = update_node(&mut h, "b", &st(NodeStatus::Running), 2).unwrap_err();
        assert!(e.details.get("waitingFor").is_some());
        assert_eq!(
            update_node(&mut h, "zz", &st(NodeStatus::Running), 2)
                .unwrap_err()
                .code,
            ErrorCode::GraphNotFound
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Add(usize, Vec<usize>),
        Set(usize, NodeStatus),
        Advance,
    }

    fn status() -> impl Strategy<Value = NodeStatus> {
        prop_oneof![
            Just(NodeStatus::Pending),
            Just(NodeStatus::Ready),
            Just(NodeStatus::Running),
            Just(NodeStatus::Completed),
            Just(NodeStatus::Failed),
            Just(NodeStatus::Skipped),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            2 => (0usize..12, proptest::collection::vec(0usize..12, 0..4)).prop_map(|(i, d)| Op::Add(i, d)),
            4 => (0usize..12, status()).prop_map(|(i, s)| Op::Set(i, s)),
            2 => Just(Op::Advance),
        ]
    }

    fn id(i: usize) -> String {
        format!("n{i}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Random operation sequences never break the invariants; failed operations
        /// leave the graph unchanged; failure never lets a dependent be promoted.
        #[test]
        fn random_operations_keep_the_invariants(
            initial in proptest::collection::vec((0usize..12, proptest::collection::vec(0usize..12, 0..3)), 0..8),
            ops in proptest::collection::vec(op(), 0..60),
        ) {
            let nodes: Vec<NewTaskNode> = initial
                .iter()
                .map(|(i, d)| {
                    let deps: Vec<String> = d.iter().map(|x| id(*x)).collect();
                    NewTaskNode::new(id(*i), String::new()).depends_on(deps)
                })
                .collect();
            let mut g = match create("g".into(), None, None, &nodes, 0) {
                Ok(g) => g,
                Err(e) => {
                    prop_assert!(matches!(e.code, ErrorCode::DuplicateNode | ErrorCode::InvalidDependency | ErrorCode::CycleDetected));
                    create("g".into(), None, None, &[], 0).unwrap()
                }
            };
            let mut now = 1;
            for op in ops {
                now += 1;
                let before = g.clone();
                match op {
                    Op::Add(i, d) => {
                        let n = NewTaskNode::new(id(i), String::new()).depends_on(d.iter().map(|x| id(*x)).collect::<Vec<_>>());
                        if add_node(&mut g, &n, now).is_err() {
                            prop_assert_eq!(&g, &before);
                        }
                    }
                    Op::Set(i, s) => {
                        if update_node(&mut g, &id(i), &st(s), now).is_err() {
                            prop_assert_eq!(&g, &before);
                        }
                    }
                    Op::Advance => {
                        let ready = advance(&mut g, now);
                        for r in &ready {
                            // Never promote a node with a failed dependency.
                            let deps = &g.nodes[r].depends_on;
                            prop_assert!(deps.iter().all(|d| is_done(g.nodes[d].status.clone())));
                            prop_assert_eq!(before.nodes[r].status.clone(), NodeStatus::Pending);
                        }
                        // After an advance, nothing pending has a failed dependency.
                        for n in g.nodes.values() {
                            if n.status == NodeStatus::Pending {
                                prop_assert!(n.depends_on.iter().all(|d| g.nodes[d].status != NodeStatus::Failed));
                            }
                        }
                    }
                }
                settle(&mut g, now);
                if let Err(e) = check_invariants(&g) {
                    prop_assert!(false, "{}", e);
                }
                // Completed and skipped nodes stay so.
                for (k, n) in &before.nodes {
                    if is_done(n.status.clone()) {
                        prop_assert_eq!(g.nodes[k].status.clone(), n.status.clone());
                    }
                }
            }
        }
    }
}
