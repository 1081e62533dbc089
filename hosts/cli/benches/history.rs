//! CPU per model call as the history grows: one request of N sequential tool calls
//! against a provider on loopback speaking OpenAI's Chat Completions wire format.
//!
//! Run with `cargo bench -p keel-cli --bench history` (release; about a minute).
//! `KEEL_BENCH_BIN=<path>` runs another `keel` binary instead.
//!
//! For N = 50, 200 and 1,000, a real `keel exec` process runs one request whose model
//! (the in-bench provider) asks for `read_file` N times, one call per turn, then
//! answers. The bench reports the CPU time the `keel` process used (user + system, from
//! the rusage of the reaped child) divided by the number of model calls, the least of
//! five runs, and the same beyond a one-call request (N = 0: the process's start, the
//! session and one model call), which shows what each further call costs. The target:
//! CPU per call at N = 1,000 within 1.3× of N = 50. As a baseline in the same run, it
//! times `serde_json` serialising the same conversation (as OpenAI messages) once per
//! call, which is what a kernel that re-encodes the whole history on every call pays at
//! the least.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_testsupport::model_server::openai;
use nix::sys::resource::{getrusage, UsageWho};

const SIZES: [usize; 3] = [50, 200, 1000];
/// Runs per size; the least CPU counts.
const RUNS: usize = 5;
/// Bytes of each file the model reads (its result joins the history).
const FILE_BYTES: usize = 400;

fn binary() -> PathBuf {
    std::env::var_os("KEEL_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_keel")))
}

/// Answers one HTTP/1.1 connection until it closes: reads each request (head and
/// `Content-Length` body, discarded), answers with the next scripted SSE body; a `GET`
/// (the context-window probe: `/props`, `/v1/models`) gets a 404 and is not counted.
fn serve(stream: TcpStream, calls: Arc<AtomicUsize>, n: usize) {
    // The answer goes out as it is written: no wait for the client's delayed ACK.
    let _ = stream.set_nodelay(true);
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut out = stream;
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut get = None;
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            get.get_or_insert_with(|| l.starts_with("GET "));
            if let Some(v) = l
                .to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().to_owned())
            {
                length = v.parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if get == Some(true) {
            if out
                .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                .is_err()
            {
                return;
            }
            continue;
        }
        let i = calls.fetch_add(1, Ordering::SeqCst);
        let sse = if i < n {
            let args = format!(r#"{{"path":"f{i}.txt"}}"#);
            openai::tool_calls_stream(&[(&format!("call_{i}"), "read_file", &args)])
        } else {
            openai::text_stream(&["done"])
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
            sse.len()
        );
        if out.write_all(head.as_bytes()).is_err() || out.write_all(sse.as_bytes()).is_err() {
            return;
        }
    }
}

fn children_cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
    };
    t(u.user_time()) + t(u.system_time())
}

/// Runs one request of `n` tool calls; returns the keel process's CPU and the number
/// of model calls it made.
fn run(n: usize) -> (Duration, usize, Duration) {
    let ws = tempfile::tempdir().expect("tempdir");
    let home = tempfile::tempdir().expect("tempdir");
    let content = "x".repeat(FILE_BYTES - 1) + "\n";
    for i in 0..n {
        std::fs::write(ws.path().join(format!("f{i}.txt")), &content).expect("write");
    }
    std::fs::write(
        home.path().join("config.toml"),
        format!("maxTurns = {}\n", n + 10),
    )
    .expect("config");
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let calls = Arc::new(AtomicUsize::new(0));
    let served = calls.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let c = served.clone();
            std::thread::spawn(move || serve(s, c, n));
        }
    });
    let before = children_cpu();
    let started = Instant::now();
    let status = Command::new(binary())
        .args([
            "exec",
            "read them all",
            "--json",
            "--mode",
            "auto",
            "--workspace",
        ])
        .arg(ws.path())
        .args(["--model", "openai:bench-model"])
        .env("KEEL_HOME", home.path())
        .env("OPENAI_BASE_URL", format!("http://127.0.0.1:{port}/v1"))
        .env("OPENAI_API_KEY", "bench")
        .env_remove("KEEL_MODEL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("keel exec");
    let wall = started.elapsed();
    assert!(status.success(), "keel exec failed: {status}");
    let cpu = children_cpu() - before;
    (cpu, calls.load(Ordering::SeqCst), wall)
}

/// `serde_json` serialising the conversation once per call, as OpenAI messages.
fn baseline(n: usize) -> Duration {
    let content = "x".repeat(FILE_BYTES - 1) + "\n";
    let mut messages = vec![
        serde_json::json!({"role": "system", "content": "You are Keel."}),
        serde_json::json!({"role": "user", "content": "read them all"}),
    ];
    let started = Instant::now();
    for i in 0..=n {
        let body =
            serde_json::json!({"model": "bench-model", "stream": true, "messages": messages});
        std::hint::black_box(serde_json::to_vec(&body).expect("encode"));
        messages.push(serde_json::json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{i}"), "type": "function",
             "function": {"name": "read_file", "arguments": format!(r#"{{"path":"f{i}.txt"}}"#)}}]}));
        messages.push(serde_json::json!({"role": "tool", "tool_call_id": format!("call_{i}"),
            "content": serde_json::json!({"path": format!("f{i}.txt"), "content": content}).to_string()}));
    }
    started.elapsed()
}

fn main() {
    println!("keel binary: {}", binary().display());
    // A request the model answers at once: the process's start, the session, one
    // model call and the exit. Subtracted below to show what each further call costs.
    let (fixed, _, _) = (0..RUNS).map(|_| run(0)).min_by_key(|r| r.0).expect("runs");
    println!(
        "one-call request (N = 0): {:.1} ms CPU\n",
        fixed.as_secs_f64() * 1e3
    );
    println!(
        "| N tool calls | model calls | keel CPU | keel CPU per call | per further call | wall | serde_json re-encoding per call |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    let mut per_call = Vec::new();
    let mut further = Vec::new();
    for n in SIZES {
        // Best of five runs: the least CPU (a run at N = 50 uses a few tens of ms,
        // which other work on the machine easily disturbs).
        let (cpu, calls, wall) = (0..RUNS).map(|_| run(n)).min_by_key(|r| r.0).expect("runs");
        let base = (0..RUNS).map(|_| baseline(n)).min().expect("runs");
        let each = cpu / calls as u32;
        let more = cpu.saturating_sub(fixed) / (calls as u32 - 1);
        per_call.push(each);
        further.push(more);
        println!(
            "| {n} | {calls} | {:.1} ms | {:.1} µs | {:.1} µs | {:.0} ms | {:.1} µs |",
            cpu.as_secs_f64() * 1e3,
            each.as_secs_f64() * 1e6,
            more.as_secs_f64() * 1e6,
            wall.as_secs_f64() * 1e3,
            (base / calls as u32).as_secs_f64() * 1e6
        );
    }
    let ratio = per_call[2].as_secs_f64() / per_call[0].as_secs_f64();
    let ratio_further = further[2].as_secs_f64() / further[0].as_secs_f64();
    println!("\nCPU per call at N = 1000 / N = 50: {ratio:.2}× (target ≤ 1.3×)");
    println!("CPU per further call at N = 1000 / N = 50: {ratio_further:.2}×");
}
