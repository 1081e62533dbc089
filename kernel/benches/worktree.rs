//! Starting a session in a worktree (`session.start {isolation: "worktree"}` through
//! `Kernel::start_session`, up to its `session.started`) at 10k and 50k files, beside
//! `git worktree add` alone on the same repository in the same run (the floor: the
//! checkout git does), and a session start without isolation.
//!
//! Run: `cargo bench -p keel-kernel --bench worktree` (`KEEL_BENCH_FILES=10000` picks
//! the sizes; default 10000,50000).

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_envelope::commands::SessionStart;
use keel_envelope::worktree::Isolation;
use keel_kernel::config::WorktreeConfig;
use keel_kernel::{Kernel, KernelConfig};

const ROUNDS: usize = 7;

fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=b",
            "-c",
            "user.email=b@b",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(root)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn generate(root: &Path, files: usize) {
    let line = "fn handler() { let value = compute(input, options); return value; }\n";
    for f in 0..files {
        let dir = root.join(format!("pkg{:03}/src", f / 100));
        if f % 100 == 0 {
            std::fs::create_dir_all(&dir).expect("mkdir");
        }
        std::fs::write(
            dir.join(format!("mod{:03}.rs", f % 100)),
            format!("// {f}\n{line}"),
        )
        .expect("write");
    }
    git(root, &["init", "-q"]);
    git(root, &["add", "-A"]);
    git(root, &["commit", "-qm", "tree"]);
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A model the sessions never call.
#[derive(Debug)]
struct Idle;

impl keel_kernel::model::Model for Idle {
    fn id(&self) -> String {
        "bench:idle".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(
        &self,
        _: keel_kernel::model::ModelRequest,
        _: tokio_util::sync::CancellationToken,
    ) -> keel_kernel::model::ModelStream {
        Box::pin(futures::stream::empty())
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::var("KEEL_BENCH_FILES")
        .unwrap_or_else(|_| "10000,50000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    println!("| files | `git worktree add` | session start in a worktree | ratio | session start, no isolation |");
    println!("|---:|---:|---:|---:|---:|");
    for files in sizes {
        let tmp = tempfile::tempdir().expect("tmp");
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).expect("mkdir");
        generate(&repo, files);
        let folder = tmp.path().join("worktrees");
        let kernel = rt.block_on(async {
            Kernel::builder()
                .config(KernelConfig {
                    worktrees: WorktreeConfig {
                        dir: Some(folder.clone()),
                        ..WorktreeConfig::default()
                    },
                    ..KernelConfig::default()
                })
                .workspace(&repo)
                .model(Arc::new(Idle))
                .store_dir(tmp.path().join("store"))
                .build()
                .expect("kernel")
        });
        let (mut alone, mut isolated, mut plain) = (Vec::new(), Vec::new(), Vec::new());
        for round in 0..ROUNDS {
            let path = tmp.path().join(format!("plain-{round}"));
            let t = Instant::now();
            git(
                &repo,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("b/{round}"),
                    path.to_str().expect("path"),
                ],
            );
            alone.push(t.elapsed());
            let t = Instant::now();
            rt.block_on(kernel.start_session(SessionStart::new().isolation(Isolation::Worktree)))
                .expect("isolated start");
            isolated.push(t.elapsed());
            let t = Instant::now();
            rt.block_on(kernel.start_session(SessionStart::new()))
                .expect("start");
            plain.push(t.elapsed());
        }
        let (a, i, p) = (median(alone), median(isolated), median(plain));
        println!(
            "| {files} | {:.1} ms | {:.1} ms | {:.2}× | {:.1} ms |",
            ms(a),
            ms(i),
            i.as_secs_f64() / a.as_secs_f64(),
            ms(p)
        );
        rt.block_on(kernel.shutdown("bench"));
    }
}
