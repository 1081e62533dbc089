//! Checkpoint cost: a workspace of 50,000 files (and 5,000, to show what grows with the
//! tree) where 3 files changed, with the inotify watcher and with the stat scan, beside
//! a full copy of the tree measured in the same run.
//!
//! Run: `cargo bench --bench checkpoint` (about a minute after the build).

use std::fs;
use std::path::Path;
use std::time::{Duration, Instant};

use keel_tools::checkpoint::{CheckpointConfig, Checkpoints, Detection};
use serde_json::json;

const ROUNDS: usize = 9;

fn generate(root: &Path, dirs: usize, files: usize) {
    let line = "fn handler() { let value = compute(input, options); return value; }\n";
    for d in 0..dirs {
        let dir = root.join(format!("pkg{d:03}/src"));
        fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..files {
            let body = format!("// file {d}/{f}\n{}", line.repeat(14));
            fs::write(dir.join(format!("mod{f:03}.rs")), body).expect("write");
        }
    }
    fs::write(root.join(".gitignore"), "target/\n").expect("write");
}

/// Copies every file of the tree (what a checkpoint that copies everything would do).
fn full_copy(from: &Path, to: &Path) -> u64 {
    fs::create_dir_all(to).expect("mkdir");
    let mut n = 0;
    for entry in fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let dest = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            n += full_copy(&entry.path(), &dest);
        } else {
            fs::copy(entry.path(), &dest).expect("copy");
            n += 1;
        }
    }
    n
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

struct Row {
    files: usize,
    copy: Duration,
    baseline: Duration,
    watch3: Duration,
    watch_examined: u64,
    scan3: Duration,
    scan_examined: u64,
    watch0: Duration,
    restore3: Duration,
}

fn measure(dirs: usize, per_dir: usize) -> Row {
    let tmp = tempfile::tempdir().expect("tempdir");
    let ws = tmp.path().join("ws");
    generate(&ws, dirs, per_dir);
    let files = dirs * per_dir;

    // Warm the page cache, then time a full copy.
    full_copy(&ws, &tmp.path().join("warm"));
    let _ = fs::remove_dir_all(tmp.path().join("warm"));
    let mut copies = Vec::new();
    for i in 0..3 {
        let dest = tmp.path().join(format!("copy{i}"));
        let t = Instant::now();
        let n = full_copy(&ws, &dest);
        copies.push(t.elapsed());
        assert_eq!(n as usize, files + 1);
        let _ = fs::remove_dir_all(&dest);
    }
    // Files of a real workspace were not written a moment ago.
    std::thread::sleep(Duration::from_millis(1100));

    let open = |name: &str, watch: bool| {
        let config = CheckpointConfig {
            watch,
            ..CheckpointConfig::default()
        };
        Checkpoints::open(&ws, &tmp.path().join(name), config).expect("open")
    };
    let mut watch = open("store-watch", true);
    assert_eq!(watch.detection(), Detection::Watch, "inotify unavailable");
    let mut scan = open("store-scan", false);
    let t = Instant::now();
    watch.checkpoint("base", json!(null)).expect("baseline");
    let baseline = t.elapsed();
    scan.checkpoint("base", json!(null)).expect("baseline");

    let mut w3 = Vec::new();
    let mut s3 = Vec::new();
    let mut w0 = Vec::new();
    let (mut we, mut se) = (0, 0);
    for round in 0..ROUNDS {
        for k in 0..3 {
            let p = ws.join(format!(
                "pkg{:03}/src/mod{:03}.rs",
                (round * 7 + k * 31) % dirs,
                k
            ));
            let mut body = fs::read_to_string(&p).expect("read");
            body.push_str(&format!("// round {round}\n"));
            fs::write(&p, body).expect("write");
        }
        let t = Instant::now();
        let cp = watch
            .checkpoint(&format!("w{round}"), json!(null))
            .expect("cp");
        w3.push(t.elapsed());
        assert_eq!(cp.changed.len(), 3);
        we = watch.last_stats().examined;
        let t = Instant::now();
        let cp = scan
            .checkpoint(&format!("s{round}"), json!(null))
            .expect("cp");
        s3.push(t.elapsed());
        assert_eq!(cp.changed.len(), 3);
        se = scan.last_stats().examined;
        let t = Instant::now();
        watch
            .checkpoint(&format!("z{round}"), json!(null))
            .expect("cp");
        w0.push(t.elapsed());
    }
    // Restore: back over the last round's 3 changes.
    let t = Instant::now();
    let report = watch.restore(&format!("z{}", ROUNDS - 2)).expect("restore");
    let restore3 = t.elapsed();
    assert_eq!(report.files.len(), 3);
    Row {
        files,
        copy: median(copies),
        baseline,
        watch3: median(w3),
        watch_examined: we,
        scan3: median(s3),
        scan_examined: se,
        watch0: median(w0),
        restore3,
    }
}

fn main() {
    let rows = [measure(50, 100), measure(500, 100)];
    println!("| files | full copy | baseline checkpoint | 3 changed, watcher | paths looked at | 3 changed, stat scan | paths looked at | nothing changed, watcher | restore of 3 files |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {:.1} ms | {:.1} ms | {:.2} ms ({:.4}× copy) | {} | {:.1} ms ({:.3}× copy) | {} | {:.2} ms | {:.1} ms |",
            r.files,
            ms(r.copy),
            ms(r.baseline),
            ms(r.watch3),
            r.watch3.as_secs_f64() / r.copy.as_secs_f64(),
            r.watch_examined,
            ms(r.scan3),
            r.scan3.as_secs_f64() / r.copy.as_secs_f64(),
            r.scan_examined,
            ms(r.watch0),
            ms(r.restore3),
        );
    }
}
