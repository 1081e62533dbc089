//! Task-graph operations in any order, on any input: never a panic, a failed
//! operation leaves the graph unchanged, and after every step the graph keeps its
//! invariants (order is a topological permutation of the nodes, dependencies exist,
//! only nodes whose dependencies are done are ready, running or completed, completed
//! and skipped are final, the graph status follows its nodes after `settle`).
#![no_main]

use std::collections::HashMap;

use arbitrary::Arbitrary;
use keel_envelope::commands::{NewTaskNode, NodeUpdates};
use keel_envelope::ext::{GraphStatus, NodeStatus, TaskGraph};
use keel_kernel::fuzzing::graph;
use libfuzzer_sys::fuzz_target;

#[derive(Debug, Arbitrary)]
struct Node {
    id: u8,
    deps: Vec<u8>,
}

#[derive(Debug, Arbitrary)]
enum Op {
    Add(Node),
    Update {
        id: u8,
        status: Option<u8>,
        title: bool,
    },
    Advance,
    Settle,
    Describe,
}

#[derive(Debug, Arbitrary)]
struct Input {
    nodes: Vec<Node>,
    ops: Vec<Op>,
}

fn id(n: u8) -> String {
    // A small id space, so dependencies and duplicates meet; one empty id.
    if n % 17 == 16 {
        String::new()
    } else {
        format!("n{}", n % 16)
    }
}

fn new_node(n: &Node) -> NewTaskNode {
    NewTaskNode::new(id(n.id), format!("task {}", n.id))
        .depends_on(n.deps.iter().take(8).map(|d| id(*d)).collect::<Vec<_>>())
}

fn status(n: u8) -> NodeStatus {
    match n % 6 {
        0 => NodeStatus::Pending,
        1 => NodeStatus::Ready,
        2 => NodeStatus::Running,
        3 => NodeStatus::Completed,
        4 => NodeStatus::Failed,
        _ => NodeStatus::Skipped,
    }
}

fn done(s: &NodeStatus) -> bool {
    matches!(s, NodeStatus::Completed | NodeStatus::Skipped)
}

fn check(g: &TaskGraph) {
    let pos: HashMap<&str, usize> = g
        .order
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    assert_eq!(pos.len(), g.order.len(), "order repeats a node: {g:?}");
    assert_eq!(
        g.order.len(),
        g.nodes.len(),
        "order is not a permutation: {g:?}"
    );
    for (id, n) in &g.nodes {
        assert_eq!(&n.id, id);
        let Some(&p) = pos.get(id.as_str()) else {
            panic!("{id} missing from order: {g:?}");
        };
        for d in &n.depends_on {
            let Some(&q) = pos.get(d.as_str()) else {
                panic!("{id} depends on unknown {d}: {g:?}");
            };
            assert!(q < p, "{d} after its dependent {id}: {g:?}");
        }
        if matches!(
            n.status,
            NodeStatus::Ready | NodeStatus::Running | NodeStatus::Completed
        ) {
            for d in &n.depends_on {
                assert!(
                    done(&g.nodes[d].status),
                    "{id} is {:?} before {d} is done: {g:?}",
                    n.status
                );
            }
        }
    }
}

fn check_settled(g: &TaskGraph) {
    let all_terminal = !g.nodes.is_empty()
        && g.nodes.values().all(|n| {
            matches!(
                n.status,
                NodeStatus::Completed | NodeStatus::Failed | NodeStatus::Skipped
            )
        });
    let want = if !all_terminal {
        GraphStatus::Active
    } else if g.nodes.values().any(|n| n.status == NodeStatus::Failed) {
        GraphStatus::Failed
    } else {
        GraphStatus::Completed
    };
    assert_eq!(g.status, want, "{g:?}");
}

fuzz_target!(|input: Input| {
    let nodes: Vec<NewTaskNode> = input.nodes.iter().take(32).map(new_node).collect();
    let mut now = 1u64;
    let Ok(mut g) = graph::create("graph_1".into(), None, &nodes, now) else {
        return;
    };
    check(&g);
    for op in input.ops.iter().take(64) {
        now += 1;
        let before = g.clone();
        match op {
            Op::Add(n) => {
                if graph::add_node(&mut g, &new_node(n), now).is_err() {
                    assert_eq!(g, before, "a failed add changed the graph");
                }
            }
            Op::Update {
                id: n,
                status: s,
                title,
            } => {
                let updates = NodeUpdates::new()
                    .status(s.map(status))
                    .title(title.then(|| "renamed".to_owned()));
                let target = id(*n);
                match graph::update_node(&mut g, &target, &updates, now) {
                    Err(_) => assert_eq!(g, before, "a failed update changed the graph"),
                    Ok(node) => {
                        if let Some(old) = before.nodes.get(&target) {
                            if done(&old.status) {
                                assert_eq!(node.status, old.status, "a final status changed");
                            }
                        }
                    }
                }
            }
            Op::Advance => {
                let promoted = graph::advance(&mut g, now);
                for p in &promoted {
                    assert_eq!(g.nodes[p].status, NodeStatus::Ready);
                }
            }
            Op::Settle => {
                graph::settle(&mut g, now);
                check_settled(&g);
            }
            Op::Describe => {
                let text = graph::describe(&g);
                assert!(text.starts_with("Task graph graph_1"));
            }
        }
        check(&g);
    }
});
