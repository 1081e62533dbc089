//! Checkpoint cost at 1k, 10k, 50k and 200k files, in a plain directory and in a
//! clean git checkout: the first session's baseline (an empty store), a second
//! session's baseline of the unchanged tree (a stat scan against the store's head),
//! the store's growth for each, and beside them a walk that only stats every path (the
//! floor any scan pays) measured in the same run. Then, at 50k files, a checkpoint
//! after 3 changed files and the restore of those 3 files, with the watcher.
//!
//! Run: `cargo bench --bench checkpoint` (a few minutes after the build, most of it
//! making the trees; `KEEL_BENCH_FILES=1000,10000,50000` leaves out the 200k tree).

use std::fs;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use keel_tools::checkpoint::{CheckpointConfig, Checkpoints, Detection};
use serde_json::json;

const ROUNDS: usize = 9;

fn generate(root: &Path, files: usize) {
    let line = "fn handler() { let value = compute(input, options); return value; }\n";
    for f in 0..files {
        let dir = root.join(format!("pkg{:03}/src", f / 100));
        if f % 100 == 0 {
            fs::create_dir_all(&dir).expect("mkdir");
        }
        let body = format!("// file {f}\n{}", line.repeat(4));
        fs::write(dir.join(format!("mod{:03}.rs", f % 100)), body).expect("write");
    }
    fs::write(root.join(".gitignore"), "target/\n").expect("write");
}

fn git(root: &Path, args: &[&str]) {
    let ok = Command::new("git")
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
        .expect("git")
        .status
        .success();
    assert!(ok, "git {args:?}");
}

fn bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs::read_dir(&d) else { continue };
        for e in rd.flatten() {
            let m = e.metadata().expect("meta");
            if m.is_dir() {
                stack.push(e.path());
            } else {
                total += m.len();
            }
        }
    }
    total
}

/// Stats every path of the tree (no reading, no hashing).
fn stat_walk(root: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).expect("read_dir").flatten() {
            let m = fs::symlink_metadata(e.path()).expect("lstat");
            n += 1;
            if m.is_dir() && e.file_name() != ".git" {
                stack.push(e.path());
            }
        }
    }
    n
}

/// One small file written and synced to the disk: what the disk's latency is.
fn one_sync(dir: &Path) -> Duration {
    let mut v = Vec::new();
    for i in 0..9 {
        let t = Instant::now();
        let f = fs::File::create(dir.join(format!("sync{i}"))).expect("create");
        std::io::Write::write_all(&mut &f, b"x").expect("write");
        f.sync_all().expect("sync");
        v.push(t.elapsed());
    }
    median(v)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mb(b: u64) -> f64 {
    b as f64 / 1_000_000.0
}

/// Checkpoint and restore of 3 files, the paths looked at, one disk sync, and how
/// changes were found (the watcher needs a free inotify instance).
type Restore = (Duration, Duration, u64, Duration, Detection);

struct Row {
    files: usize,
    git: bool,
    walk: Duration,
    first: Duration,
    first_bytes: u64,
    second: Duration,
    second_bytes: u64,
    copied: u64,
}

fn measure(files: usize, git_repo: bool) -> (Row, Option<Restore>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    let home = tmp.path().join("home");
    generate(&ws, files);
    if git_repo {
        git(&ws, &["init", "-q", "."]);
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", "tree"]);
    }
    // Files of a real workspace were not written a moment ago.
    std::thread::sleep(Duration::from_millis(1100));
    let mut walks = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        stat_walk(&ws);
        walks.push(t.elapsed());
    }
    let config = CheckpointConfig {
        max_files: 1_000_000,
        ..CheckpointConfig::default()
    };
    let t = Instant::now();
    let mut a = Checkpoints::open(&ws, &home, "first", config.clone()).expect("open");
    a.checkpoint("a1", json!(null)).expect("baseline");
    let first = t.elapsed();
    // The tree holds `files` files and `.gitignore`.
    let copied = (files as u64 + 1).saturating_sub(a.last_stats().git);
    let first_bytes = bytes(&home);
    drop(a);
    let t = Instant::now();
    let mut b = Checkpoints::open(&ws, &home, "second", config).expect("open");
    b.checkpoint("b1", json!(null)).expect("baseline");
    let second = t.elapsed();
    assert_eq!(b.last_stats().changed, 0, "{:?}", b.last_stats());
    let second_bytes = bytes(&home) - first_bytes;
    // 3 files changed, then restored, with the watcher (50k only).
    let restore = (files == 50_000).then(|| {
        let detection = b.detection();
        let mut cps = Vec::new();
        let mut restores = Vec::new();
        let mut examined = 0;
        for round in 0..ROUNDS {
            for k in 0..3 {
                let p = ws.join(format!(
                    "pkg{:03}/src/mod{:03}.rs",
                    (round * 7 + k * 31) % (files / 100),
                    k
                ));
                let mut body = fs::read_to_string(&p).expect("read");
                body.push_str(&format!("// round {round}\n"));
                fs::write(&p, body).expect("write");
            }
            let t = Instant::now();
            let cp = b.checkpoint(&format!("w{round}"), json!(null)).expect("cp");
            cps.push(t.elapsed());
            assert_eq!(cp.changed.len(), 3);
            let t = Instant::now();
            let before = match round {
                0 => "b1".to_string(),
                r => format!("w{}", r - 1),
            };
            let report = b.restore(&before).expect("restore");
            restores.push(t.elapsed());
            assert_eq!(report.files.len(), 3, "{report:?}");
            examined = b.last_stats().examined;
            // Back to the round's state for the next one.
            b.restore(&format!("w{round}")).expect("forward");
        }
        (
            median(cps),
            median(restores),
            examined,
            one_sync(tmp.path()),
            detection,
        )
    });
    (
        Row {
            files,
            git: git_repo,
            walk: median(walks),
            first,
            first_bytes,
            second,
            second_bytes,
            copied,
        },
        restore,
    )
}

fn main() {
    let sizes: Vec<usize> = std::env::var("KEEL_BENCH_FILES")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1_000, 10_000, 50_000, 200_000]);
    let mut rows = Vec::new();
    let mut restore = None;
    for files in sizes {
        for git_repo in [false, true] {
            let (row, r) = measure(files, git_repo);
            eprintln!("measured {files} files, git {git_repo}");
            if r.is_some() && !git_repo {
                restore = r;
            }
            rows.push(row);
        }
    }
    println!("| files | git | stat walk | 1st baseline | store growth | files copied | 2nd baseline (unchanged tree) | 2nd / walk | store growth |");
    println!("|---:|:---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.1} ms | {:.1} ms | {:.2} MB | {} | {:.1} ms | {:.2}× | {:.1} KB |",
            r.files,
            if r.git { "yes" } else { "no" },
            ms(r.walk),
            ms(r.first),
            mb(r.first_bytes),
            r.copied,
            ms(r.second),
            r.second.as_secs_f64() / r.walk.as_secs_f64(),
            r.second_bytes as f64 / 1000.0,
        );
    }
    if let Some((cp, rs, examined, sync, detection)) = restore {
        println!();
        println!("| 50,000 files, {detection:?} | median of {ROUNDS} |");
        println!("|---|---:|");
        println!(
            "| (reference) one small file written and synced | {:.2} ms |",
            ms(sync)
        );
        println!("| checkpoint after 3 changed files | {:.2} ms |", ms(cp));
        println!("| restore of those 3 files | {:.2} ms |", ms(rs));
        println!("| paths the restore's refresh looked at | {examined} |");
    }
}
