//! Tool benchmarks: `search_files` (content mode, a literal and a regular expression)
//! against `rg` on the same generated tree of 50,000 files, and `edit_file` on a
//! 10 MB file. Plain std timing; prints a table.
//!
//! Run: `cargo bench --bench search`

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools::{CancellationToken, SandboxConfig, ToolContext};
use serde_json::json;

const DIRS: usize = 500;
const FILES_PER_DIR: usize = 100;
const RUNS: usize = 5;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

const WORDS: &[&str] = &[
    "let", "value", "config", "return", "match", "impl", "struct", "error", "result", "self",
    "buffer", "stream", "token", "parse", "write", "read", "index", "cache", "state", "event",
];

fn generate(root: &Path) -> usize {
    let mut rng = Lcg(42);
    let mut files = 0;
    for d in 0..DIRS {
        let dir = root.join(format!("pkg{:03}/src/mod{}", d, d % 7));
        std::fs::create_dir_all(&dir).expect("mkdir");
        for f in 0..FILES_PER_DIR {
            let mut text = String::with_capacity(1200);
            for line in 0..30 {
                let n = 3 + (rng.next() % 6) as usize;
                let words: Vec<&str> = (0..n)
                    .map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize])
                    .collect();
                text.push_str(&words.join(" "));
                if rng.next() % 1500 == 0 {
                    text.push_str(" needle_marker_7731");
                }
                if line == 10 && rng.next() % 50 == 0 {
                    text.push_str(&format!("\nfn request_{f}_handler(ctx: &Ctx) {{"));
                }
                text.push('\n');
            }
            std::fs::write(dir.join(format!("file{f:03}.rs")), text).expect("write");
            files += 1;
        }
    }
    files
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ctx(root: &Path) -> ToolContext {
    ToolContext {
        workspace: root.to_path_buf(),
        cancel: CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    }
}

fn keel_search(root: &Path, query: &str, regex: bool) -> (Duration, usize) {
    let args = serde_json::from_value(json!({"query": query, "regex": regex, "maxResults": 5000}))
        .expect("args");
    let start = Instant::now();
    let r = keel_tools::search::search_files(args, &ctx(root)).expect("search");
    (start.elapsed(), r.matches.len())
}

fn rg_search(root: &Path, query: &str, regex: bool) -> (Duration, usize) {
    let mut cmd = Command::new("rg");
    cmd.args(["--no-config", "-n", "-S"]);
    if !regex {
        cmd.arg("-F");
    }
    cmd.arg("--")
        .arg(query)
        .arg(root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let start = Instant::now();
    let out = cmd.output().expect("rg (install ripgrep)");
    let elapsed = start.elapsed();
    (elapsed, out.stdout.iter().filter(|b| **b == b'\n').count())
}

fn main() {
    if Command::new("rg").arg("--version").output().is_err() {
        eprintln!("ripgrep (`rg`) is required for this benchmark");
        std::process::exit(1);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::fs::canonicalize(dir.path()).expect("canonical");
    let t = Instant::now();
    let files = generate(&root);
    println!(
        "generated {files} files in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    let cases = [
        ("literal", "needle_marker_7731", false),
        ("regex", r"fn\s+request_\d+_handler\(", true),
    ];
    println!();
    println!("| search ({files} files) | keel search_files | rg | ratio | matches keel / rg |");
    println!("|---|---|---|---|---|");
    for (name, query, regex) in cases {
        // Warm the page cache and check both find the same lines.
        let (_, kn) = keel_search(&root, query, regex);
        let (_, rn) = rg_search(&root, query, regex);
        let mut k = Vec::new();
        let mut r = Vec::new();
        for _ in 0..RUNS {
            k.push(keel_search(&root, query, regex).0);
            r.push(rg_search(&root, query, regex).0);
        }
        let (km, rm) = (median(k), median(r));
        println!(
            "| {name} `{query}` | {:.1} ms | {:.1} ms | {:.2}x | {kn} / {rn} |",
            km.as_secs_f64() * 1e3,
            rm.as_secs_f64() * 1e3,
            km.as_secs_f64() / rm.as_secs_f64()
        );
    }

    // edit_file on a 10 MB file.
    let big = root.join("big.txt");
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&big).expect("create"));
        let mut i = 0u64;
        let mut written = 0usize;
        while written < 10 * 1024 * 1024 {
            let line = format!("line {i}: the quick brown fox jumps over the lazy dog\n");
            written += line.len();
            f.write_all(line.as_bytes()).expect("write");
            i += 1;
        }
    }
    let size = std::fs::metadata(&big).expect("meta").len();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let tool = keel_tools::builtin_tools()
        .into_iter()
        .find(|t| t.spec().name == "edit_file")
        .expect("edit_file");
    let mut times = Vec::new();
    for n in 0..RUNS {
        let (old, new) = if n % 2 == 0 {
            ("line 100000: the", "line 100000: THE")
        } else {
            ("line 100000: THE", "line 100000: the")
        };
        let args = json!({"path": "big.txt", "edits": [{"oldText": old, "newText": new}]});
        let start = Instant::now();
        runtime.block_on(tool.run(args, ctx(&root))).expect("edit");
        times.push(start.elapsed());
    }
    println!();
    println!("| edit_file | median of {RUNS} |");
    println!("|---|---|");
    println!(
        "| one replacement in a {:.1} MB file (read, replace, diff, atomic write) | {:.1} ms |",
        size as f64 / 1048576.0,
        median(times).as_secs_f64() * 1e3
    );
}
