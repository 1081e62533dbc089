//! Streaming throughput through `keel bridge`, beside `cat` piping the same bytes.
//!
//! Run with `cargo bench -p keel-cli --bench bridge` (release profile; Cargo builds the
//! `keel` binary of this package with the same profile and passes its path as
//! `CARGO_BIN_EXE_keel`). About 5 s after the build. `KEEL_BENCH_BIN=<path>` runs
//! another `keel` binary instead, to compare two builds on the same machine.
//!
//! Each round starts a real `keel bridge` process with the scripted model (a turn of
//! `"text": "word ", "textRepeat": 100000`, so 100,000 `assistant.delta` events), opens
//! a session, sends one `request.send` and reads the envelopes from the bridge's stdout
//! until `session.completed`. It reports events per second over that stretch and the
//! time the bridge process spent on a CPU in it (all threads, from
//! `/proc/<pid>/task/*/schedstat`), per event. The first round's output is recorded to
//! a file; then `cat` pipes that file into the same reader, timed the same way, as the
//! floor a pipe of those bytes costs. Five rounds each; the highest rate and the least
//! CPU per event count.

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const DELTAS: u64 = 100_000;
const ROUNDS: usize = 5;

/// What one reader saw.
#[derive(Debug, Default, Clone, Copy)]
struct Seen {
    lines: u64,
    deltas: u64,
    bytes: u64,
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// The reader used for both sources: splits lines, counts them, their bytes and the
/// `assistant.delta` envelopes among them; stops after `session.completed` when
/// `until_completed`, else at EOF. Lines go to `record` when given.
fn read_stream(
    reader: &mut BufReader<ChildStdout>,
    until_completed: bool,
    mut record: Option<&mut BufWriter<File>>,
) -> Seen {
    let mut seen = Seen::default();
    let mut line = Vec::with_capacity(512);
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(n) => {
                seen.lines += 1;
                seen.bytes += n as u64;
            }
            Err(e) => panic!("reading the stream failed: {e}"),
        }
        if let Some(file) = record.as_deref_mut() {
            file.write_all(&line).expect("record");
        }
        // The type sits right after the ids; a short prefix is enough to find it.
        let head = &line[..line.len().min(200)];
        if contains(head, br#""type":"assistant.delta""#) {
            seen.deltas += 1;
        } else if until_completed && contains(head, br#""type":"session.completed""#) {
            break;
        }
    }
    seen
}

/// Time a process has spent on a CPU, all its threads together, in seconds (Linux:
/// the first field of `/proc/<pid>/task/*/schedstat`, nanoseconds).
fn cpu_seconds(pid: u32) -> f64 {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("read /proc tasks");
    let mut ns = 0u64;
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) {
            ns += text
                .split_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    ns as f64 / 1e9
}

/// Whether a process has ended (a zombie not yet reaped).
fn ended(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The state follows the command name, which is in parentheses and may hold spaces.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_none_or(|state| state == "Z")
}

/// The CPU time of a child that has ended, read before it is reaped.
fn final_cpu_seconds(child: &mut Child) -> f64 {
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ended(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let cpu = cpu_seconds(pid);
    child.wait().expect("wait");
    cpu
}

fn own_cpu_seconds() -> f64 {
    cpu_seconds(std::process::id())
}

struct Run {
    seconds: f64,
    /// CPU seconds of the producer (the bridge, or `cat`).
    producer_cpu: f64,
    /// CPU seconds of the reader (this process).
    reader_cpu: f64,
    seen: Seen,
}

impl Run {
    fn per_second(&self) -> f64 {
        self.seen.deltas as f64 / self.seconds
    }
    fn producer_us_per_event(&self) -> f64 {
        self.producer_cpu * 1e6 / self.seen.deltas as f64
    }
    fn reader_us_per_event(&self) -> f64 {
        self.reader_cpu * 1e6 / self.seen.deltas as f64
    }
}

fn send(stdin: &mut impl Write, line: &str) {
    stdin.write_all(line.as_bytes()).expect("write command");
    stdin.write_all(b"\n").expect("write command");
    stdin.flush().expect("flush command");
}

fn bridge_round(dir: &Path, script: &Path, round: usize, record: Option<&Path>) -> Run {
    let ws = dir.join("ws");
    let home = dir.join(format!("home-{round}"));
    std::fs::create_dir_all(&ws).expect("mkdir");
    std::fs::create_dir_all(&home).expect("mkdir");
    let stderr = File::create(dir.join(format!("bridge-{round}.stderr"))).expect("stderr file");
    let bin = std::env::var_os("KEEL_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_keel")));
    let mut child = Command::new(bin)
        .arg("bridge")
        .arg("--workspace")
        .arg(&ws)
        .arg("--model")
        .arg(format!("scripted:{}", script.display()))
        .env("KEEL_HOME", &home)
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .expect("spawn keel bridge");
    let mut stdin = child.stdin.take().expect("stdin");
    let mut out = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("stdout"));
    let mut file = record.map(|p| BufWriter::new(File::create(p).expect("record file")));

    // Open a session; its id comes back in `session.started`.
    send(
        &mut stdin,
        r#"{"version":"1.0","type":"session.start","requestId":"req_start","payload":{}}"#,
    );
    let mut session_id = None;
    let mut line = String::new();
    while session_id.is_none() {
        line.clear();
        if out.read_line(&mut line).expect("read") == 0 {
            panic!(
                "the bridge ended before session.started; see {}",
                dir.join(format!("bridge-{round}.stderr")).display()
            );
        }
        if let Some(f) = file.as_mut() {
            f.write_all(line.as_bytes()).expect("record");
        }
        let v: serde_json::Value = serde_json::from_str(&line).expect("an envelope");
        if v["type"] == "session.started" {
            session_id = v["sessionId"].as_str().map(str::to_owned);
        }
    }
    let session_id = session_id.unwrap_or_default();

    let bridge_before = cpu_seconds(child.id());
    let reader_before = own_cpu_seconds();
    let start = Instant::now();
    send(
        &mut stdin,
        &format!(
            r#"{{"version":"1.0","type":"request.send","requestId":"req_stream","sessionId":"{session_id}","payload":{{"message":"stream"}}}}"#
        ),
    );
    let seen = read_stream(&mut out, true, file.as_mut());
    let seconds = start.elapsed().as_secs_f64();
    let bridge_after = cpu_seconds(child.id());
    let reader_after = own_cpu_seconds();

    // End of input: the bridge closes the session, says `runtime.stopped` and exits.
    drop(stdin);
    let rest = read_stream(&mut out, false, file.as_mut());
    if let Some(mut f) = file {
        f.flush().expect("record");
    }
    let _ = final_cpu_seconds(&mut child);
    assert_eq!(seen.deltas, DELTAS, "every delta arrives");
    assert_eq!(rest.deltas, 0);
    Run {
        seconds,
        producer_cpu: bridge_after - bridge_before,
        reader_cpu: reader_after - reader_before,
        seen,
    }
}

fn cat_round(recorded: &Path) -> Run {
    let reader_before = own_cpu_seconds();
    let start = Instant::now();
    let mut child = Command::new("cat")
        .arg(recorded)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn cat");
    let mut out = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("stdout"));
    let seen = read_stream(&mut out, false, None);
    let seconds = start.elapsed().as_secs_f64();
    let reader_after = own_cpu_seconds();
    let mut rest = Vec::new();
    let _ = out.read_to_end(&mut rest);
    let cat_cpu = final_cpu_seconds(&mut child);
    assert_eq!(seen.deltas, DELTAS, "cat pipes every delta");
    Run {
        seconds,
        producer_cpu: cat_cpu,
        reader_cpu: reader_after - reader_before,
        seen,
    }
}

/// The best of several rounds: the highest rate and, separately, the least CPU per
/// event (the rounds least disturbed by other processes).
struct Best {
    per_second: f64,
    seconds: f64,
    producer_us: f64,
    reader_us: f64,
}

fn best(runs: &[Run]) -> Best {
    let fold = |f: &dyn Fn(&Run) -> f64, max: bool| {
        runs.iter()
            .map(f)
            .fold(if max { 0.0 } else { f64::INFINITY }, |a, b| {
                if max {
                    a.max(b)
                } else {
                    a.min(b)
                }
            })
    };
    Best {
        per_second: fold(&Run::per_second, true),
        seconds: fold(&|r: &Run| r.seconds, false),
        producer_us: fold(&Run::producer_us_per_event, false),
        reader_us: fold(&Run::reader_us_per_event, false),
    }
}

fn rounds(runs: &[Run]) -> String {
    runs.iter()
        .map(|r| {
            format!(
                "{:.0}/s {:.2} µs",
                r.per_second(),
                r.producer_us_per_event()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() {
    let started = Instant::now();
    let dir = tempfile::tempdir().expect("tempdir");
    let script: PathBuf = dir.path().join("stream.json");
    std::fs::write(
        &script,
        format!(r#"{{"turns":[{{"text":"word ","textRepeat":{DELTAS}}}]}}"#),
    )
    .expect("write script");
    let recorded = dir.path().join("bridge-output.jsonl");

    let mut bridge = Vec::new();
    for round in 0..ROUNDS {
        let record = (round == 0).then_some(recorded.as_path());
        bridge.push(bridge_round(dir.path(), &script, round, record));
    }
    let cat: Vec<Run> = (0..ROUNDS).map(|_| cat_round(&recorded)).collect();
    let (lines, bytes) = (bridge[0].seen.lines, bridge[0].seen.bytes);
    let (b, c) = (best(&bridge), best(&cat));

    println!(
        "{DELTAS} assistant.delta events, {lines} lines, {:.1} MB through the pipe\n",
        bytes as f64 / 1e6
    );
    println!(
        "{:<12} {:>10} {:>8} {:>23} {:>21}",
        "source", "events/s", "wall s", "producer CPU µs/event", "reader CPU µs/event"
    );
    for (name, r) in [("keel bridge", &b), ("cat", &c)] {
        println!(
            "{:<12} {:>10.0} {:>8.3} {:>23.3} {:>21.3}",
            name, r.per_second, r.seconds, r.producer_us, r.reader_us
        );
    }
    println!("\nrounds, bridge: {}", rounds(&bridge));
    println!("rounds, cat:    {}", rounds(&cat));
    println!(
        "\nbest of {ROUNDS} rounds (highest rate; least CPU per event); CPU is time on a CPU \
         from /proc/<pid>/task/*/schedstat\nbridge / cat: {:.1}x the wall time, {:.0}x the \
         producer CPU per event\ntotal {:.1} s",
        b.seconds / c.seconds,
        b.producer_us / c.producer_us,
        started.elapsed().as_secs_f64()
    );
}
