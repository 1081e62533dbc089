//! Several real processes on one store: writers of two sessions at once while garbage
//! collections run (under CPU load), and a collection killed at each of its steps.

use std::collections::HashSet;

use keel_tools::checkpoint::{prune_store_with_hook, CheckpointHome, PruneRules};

use super::*;

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"))
}

/// What a child process does (`KEEL_CP_CHILD`).
pub(super) fn run_role(role: &str) {
    match role {
        "unreadable" => super::faults::unreadable_scenario(
            Path::new(&env("KEEL_CP_WS")),
            Path::new(&env("KEEL_CP_STORE")),
        ),
        "writer" => writer(),
        "gc-abort" => {
            let step = env("KEEL_CP_STEP");
            let rules = PruneRules {
                delete_sessions: HashSet::from(["doomed".to_string()]),
                ..PruneRules::default()
            };
            let mut hook = |s: &str| {
                if s == step {
                    std::process::abort();
                }
            };
            prune_store_with_hook(Path::new(&env("KEEL_CP_DIR")), &rules, false, &mut hook)
                .expect("prune");
        }
        "gc-loop" => {
            let home = CheckpointHome::new(env("KEEL_CP_STORE"));
            let rounds: usize = env("KEEL_CP_ROUNDS").parse().expect("rounds");
            for _ in 0..rounds {
                home.prune(&PruneRules::default(), false).expect("prune");
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        other => panic!("unknown role {other}"),
    }
}

/// Writes files of its own and files shared with the other writer (same contents at
/// the same time), with a checkpoint after each round.
fn writer() {
    let root = PathBuf::from(env("KEEL_CP_WS"));
    let session = env("KEEL_CP_SESSION");
    let rounds: usize = env("KEEL_CP_ROUNDS").parse().expect("rounds");
    let mut cps = Checkpoints::open(
        &root,
        Path::new(&env("KEEL_CP_STORE")),
        &session,
        CheckpointConfig::default(),
    )
    .expect("open");
    for k in 0..rounds {
        let own = format!("{session}-{k}.txt");
        fs::write(root.join(&own), format!("{session} {k}\n").repeat(200)).expect("write");
        fs::write(
            root.join(format!("common-{k}.txt")),
            format!("common {k}\n"),
        )
        .expect("write");
        cps.checkpoint(&format!("{session}-c{k}"), json!(k))
            .expect("checkpoint");
    }
}

/// Two CPU hogs for the length of a test.
struct Load(Vec<std::process::Child>);

impl Load {
    fn start() -> Load {
        Load(
            (0..2)
                .map(|_| {
                    Command::new("yes")
                        .stdout(std::process::Stdio::null())
                        .spawn()
                        .expect("yes")
                })
                .collect(),
        )
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait_ok(child: std::process::Child) {
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn two_writers_and_collections_at_once_never_damage_the_store() {
    let w = ws();
    w.write("base.txt", "base\n");
    let _load = Load::start();
    let rounds = "25";
    let store = w.store.to_string_lossy().into_owned();
    let root = w.root.to_string_lossy().into_owned();
    let writers: Vec<_> = ["alpha", "beta"]
        .iter()
        .map(|s| {
            spawn_child(
                "writer",
                &[
                    ("KEEL_CP_WS", &root),
                    ("KEEL_CP_STORE", &store),
                    ("KEEL_CP_SESSION", s),
                    ("KEEL_CP_ROUNDS", rounds),
                ],
            )
        })
        .collect();
    let gc = spawn_child(
        "gc-loop",
        &[("KEEL_CP_STORE", &store), ("KEEL_CP_ROUNDS", "40")],
    );
    for c in writers {
        wait_ok(c);
    }
    wait_ok(gc);
    let home = CheckpointHome::new(&w.store);
    assert!(home.verify().expect("verify").is_empty());
    home.prune(&PruneRules::default(), false).expect("prune");
    assert!(home.verify().expect("verify").is_empty());
    for s in ["alpha", "beta"] {
        let mut cps =
            Checkpoints::open(&w.root, &w.store, s, CheckpointConfig::default()).expect("reopen");
        assert_eq!(cps.list().len(), 25, "{s}");
        for k in 0..25 {
            // Another session's restore may have removed it: write it either way.
            fs::write(w.root.join(format!("{s}-{k}.txt")), "overwritten\n").expect("write");
        }
        let report = cps.restore(&format!("{s}-c24")).expect("restore");
        assert!(report.not_restorable.is_empty(), "{report:?}");
        for k in 0..25 {
            assert_eq!(
                w.read(&format!("{s}-{k}.txt")),
                Some(format!("{s} {k}\n").repeat(200)),
                "{s} {k}"
            );
        }
    }
}

/// A store with a session to delete (so the sweep has records and objects to remove)
/// and one to keep, spread over many small packs (so packs are merged).
fn doomed_store(w: &Ws) -> PathBuf {
    let mut keep =
        Checkpoints::open(&w.root, &w.store, "keep", CheckpointConfig::default()).expect("keep");
    let mut doomed = Checkpoints::open(&w.root, &w.store, "doomed", CheckpointConfig::default())
        .expect("doomed");
    for k in 0..6 {
        w.write(&format!("keep-{k}.txt"), &format!("keep {k}\n"));
        keep.checkpoint(&format!("k{k}"), json!(null))
            .expect("keep");
        w.write(&format!("doomed-{k}.txt"), &format!("doomed {k}\n"));
        doomed
            .checkpoint(&format!("d{k}"), json!(null))
            .expect("doomed");
        fs::remove_file(w.root.join(format!("doomed-{k}.txt"))).expect("rm");
    }
    keep.checkpoint("k-last", json!(null)).expect("last");
    keep.store_dir().to_path_buf()
}

fn check_after_crash(w: &Ws, dir: &Path, what: &str) {
    let home = CheckpointHome::new(&w.store);
    assert!(home.verify().expect("verify").is_empty(), "{what}");
    // A later collection finishes the work.
    let report = prune_store_with_hook(
        dir,
        &PruneRules {
            delete_sessions: HashSet::from(["doomed".to_string()]),
            ..PruneRules::default()
        },
        false,
        &mut |_| {},
    )
    .expect("prune again");
    assert!(report.damaged.is_empty(), "{what}: {report:?}");
    assert!(home.verify().expect("verify").is_empty(), "{what}");
    let mut keep =
        Checkpoints::open(&w.root, &w.store, "keep", CheckpointConfig::default()).expect("reopen");
    assert_eq!(keep.list().len(), 7, "{what}");
    for k in 0..6 {
        fs::remove_file(w.root.join(format!("keep-{k}.txt"))).expect("rm");
    }
    let r = keep.restore("k-last").expect("restore");
    assert!(r.not_restorable.is_empty(), "{what}: {r:?}");
    for k in 0..6 {
        assert_eq!(
            w.read(&format!("keep-{k}.txt")),
            Some(format!("keep {k}\n")),
            "{what}"
        );
    }
    let leftover = fs::read_dir(dir.join("packs"))
        .expect("packs")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".pack"))
        .count();
    assert_eq!(leftover, 1, "{what}: packs merged, garbage gone");
}

#[test]
fn a_collection_that_crashes_at_any_step_leaves_a_sound_store() {
    for step in [
        "generation",
        "records",
        "packs",
        "write",
        "remove",
        "leftovers",
        "done",
    ] {
        let w = ws();
        let dir = doomed_store(&w);
        let child = spawn_child(
            "gc-abort",
            &[
                ("KEEL_CP_DIR", &dir.to_string_lossy()),
                ("KEEL_CP_STEP", step),
            ],
        );
        let out = child.wait_with_output().expect("wait");
        assert!(
            !out.status.success(),
            "{step}: the child should have crashed"
        );
        check_after_crash(&w, &dir, step);
    }
}

#[test]
fn a_collection_killed_at_a_random_moment_leaves_a_sound_store() {
    let _load = Load::start();
    for delay_ms in [0, 3, 8, 15, 30] {
        let w = ws();
        let dir = doomed_store(&w);
        let store = w.store.to_string_lossy().into_owned();
        let mut child = spawn_child(
            "gc-loop",
            &[("KEEL_CP_STORE", &store), ("KEEL_CP_ROUNDS", "50")],
        );
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        // SIGKILL: no destructor, no flush.
        let _ = child.kill();
        let _ = child.wait();
        check_after_crash(&w, &dir, &format!("killed after {delay_ms} ms"));
    }
}
