//! `request.send` → the first model request, on a workspace of 50,000 files beside an
//! empty one, in the same run. Each round is what one `keel exec` does: a new kernel
//! on the file store, a new session, one request; the time runs from the
//! `request.send` command to the moment the model is asked (its `stream` is called).
//! The request's checkpoint is taken beside the model call, so the figure should not
//! grow with the tree; the request's end still waits for it, shown beside it
//! (`request.send` → `session.completed`).
//!
//! Three cases: the empty workspace (the reference), the 50,000-file tree with an
//! empty checkpoint store (the first session ever: its checkpoint reads every file),
//! and the same tree with the store a previous session left (a stat scan).
//!
//! Run: `cargo bench --bench first_request` (a minute or two after the build;
//! `KEEL_BENCH_FILES=N` changes the size, `KEEL_BENCH_ROUNDS=N` the rounds).

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::stream;
use keel_kernel::model::{FinishReason, Model, ModelEvent, ModelRequest, ModelStream};
use keel_kernel::{Kernel, SessionOptions};
use tokio_util::sync::CancellationToken;

/// Answers at once, noting when it was first asked.
#[derive(Debug, Default)]
struct Stamp {
    asked: Mutex<Option<Instant>>,
}

impl Model for Stamp {
    fn id(&self) -> String {
        "bench:stamp".into()
    }
    fn context_window(&self) -> u64 {
        1 << 20
    }
    fn stream(&self, _request: ModelRequest, _cancel: CancellationToken) -> ModelStream {
        let mut asked = self.asked.lock().unwrap();
        if asked.is_none() {
            *asked = Some(Instant::now());
        }
        Box::pin(stream::iter(vec![
            Ok(ModelEvent::TextDelta("done".into())),
            Ok(ModelEvent::Finished(FinishReason::EndTurn)),
        ]))
    }
}

fn generate(root: &Path, files: usize) {
    let line = "fn handler() { let value = compute(input, options); return value; }\n";
    for f in 0..files {
        let dir = root.join(format!("pkg{:03}/src", f / 100));
        if f % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        let body = format!("// file {f}\n{}", line.repeat(4));
        std::fs::write(dir.join(format!("mod{:03}.rs", f % 100)), body).unwrap();
    }
}

/// One `keel exec`: (send → first model request, send → session.completed).
async fn round(ws: &Path, store: &Path) -> (Duration, Duration) {
    let model = Arc::new(Stamp::default());
    let kernel = Kernel::builder()
        .workspace(ws)
        .model(model.clone())
        .store_dir(store)
        .build()
        .unwrap();
    let opts = SessionOptions {
        workspace_path: None,
        permission_mode: None,
        model: None,
        title: None,
    };
    let (s, mut events) = kernel.start_session(opts).await.unwrap();
    let t = Instant::now();
    s.send("go").await.unwrap();
    while let Some(e) = events.recv().await {
        if e.type_name() == "session.completed" {
            break;
        }
    }
    let done = t.elapsed();
    let asked = model.asked.lock().unwrap().expect("the model was asked");
    kernel.shutdown("bench").await;
    (asked - t, done)
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

struct Case {
    name: String,
    first: Vec<Duration>,
    done: Vec<Duration>,
}

async fn case(name: &str, ws: &Path, fresh_store: bool, rounds: usize) -> Case {
    let keep = tempfile::tempdir().unwrap();
    if !fresh_store {
        // A previous session left the store (its head).
        round(ws, keep.path()).await;
    }
    let mut c = Case {
        name: name.into(),
        first: Vec::new(),
        done: Vec::new(),
    };
    for _ in 0..rounds {
        let fresh = tempfile::tempdir().unwrap();
        let store = if fresh_store {
            fresh.path()
        } else {
            keep.path()
        };
        let (first, done) = round(ws, store).await;
        c.first.push(first);
        c.done.push(done);
    }
    c
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let files: usize = std::env::var("KEEL_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000);
    let rounds: usize = std::env::var("KEEL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let tree = tempfile::tempdir().unwrap();
    eprintln!("making {files} files…");
    generate(tree.path(), files);
    let cases = rt.block_on(async {
        vec![
            case("empty workspace (reference)", empty.path(), true, rounds).await,
            case(
                &format!("{files} files, empty checkpoint store"),
                tree.path(),
                true,
                rounds,
            )
            .await,
            case(
                &format!("{files} files, store of a previous session"),
                tree.path(),
                false,
                rounds,
            )
            .await,
        ]
    });
    let mut reference = None;
    println!(
        "| workspace | send → first model request, p50 | p95 | p95 / reference | send → session.completed, p50 |"
    );
    println!("|---|---:|---:|---:|---:|");
    for mut c in cases {
        let p50 = pct(&mut c.first, 0.5);
        let p95 = pct(&mut c.first, 0.95);
        let done = pct(&mut c.done, 0.5);
        let base = *reference.get_or_insert(p95);
        println!(
            "| {} | {} | {} | {:.2}× | {} |",
            c.name,
            ms(p50),
            ms(p95),
            p95.as_secs_f64() / base.as_secs_f64().max(1e-9),
            ms(done)
        );
    }
    println!("({rounds} rounds per case)");
}
