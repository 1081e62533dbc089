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
//! CPU time the bridge process spent in it (utime + stime from `/proc/<pid>/stat`, all
//! threads), per event. The first round's output is recorded to a file; then `cat`
//! pipes that file into the same reader, timed the same way, as the floor a pipe of
//! those bytes costs. The best of five rounds counts for each.

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

fn clock_ticks_per_second() -> f64 {
    Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|t| *t > 0.0)
        .unwrap_or(100.0)
}

/// utime + stime of a process (all its threads), in clock ticks, and its state letter.
fn cpu_ticks(pid: u32) -> (u64, char) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read /proc stat");
    // Fields after the command name, which is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields[0].chars().next().unwrap_or('?');
    let utime: u64 = fields[11].parse().expect("utime");
    let stime: u64 = fields[12].parse().expect("stime");
    (utime + stime, state)
}

/// The CPU ticks of a child that has ended, read before it is reaped.
fn final_cpu_ticks(child: &mut Child) -> u64 {
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (ticks, state) = cpu_ticks(pid);
        if state == 'Z' || Instant::now() > deadline {
            child.wait().expect("wait");
            return ticks;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn own_cpu_ticks() -> u64 {
    cpu_ticks(std::process::id()).0
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

fn bridge_round(dir: &Path, script: &Path, round: usize, record: Option<&Path>, tck: f64) -> Run {
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

    let bridge_before = cpu_ticks(child.id()).0;
    let reader_before = own_cpu_ticks();
    let start = Instant::now();
    send(
        &mut stdin,
        &format!(
            r#"{{"version":"1.0","type":"request.send","requestId":"req_stream","sessionId":"{session_id}","payload":{{"message":"stream"}}}}"#
        ),
    );
    let seen = read_stream(&mut out, true, file.as_mut());
    let seconds = start.elapsed().as_secs_f64();
    let bridge_after = cpu_ticks(child.id()).0;
    let reader_after = own_cpu_ticks();

    // End of input: the bridge closes the session, says `runtime.stopped` and exits.
    drop(stdin);
    let rest = read_stream(&mut out, false, file.as_mut());
    if let Some(mut f) = file {
        f.flush().expect("record");
    }
    let _ = final_cpu_ticks(&mut child);
    assert_eq!(seen.deltas, DELTAS, "every delta arrives");
    assert_eq!(rest.deltas, 0);
    Run {
        seconds,
        producer_cpu: (bridge_after - bridge_before) as f64 / tck,
        reader_cpu: (reader_after - reader_before) as f64 / tck,
        seen,
    }
}

fn cat_round(recorded: &Path, tck: f64) -> Run {
    let reader_before = own_cpu_ticks();
    let start = Instant::now();
    let mut child = Command::new("cat")
        .arg(recorded)
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn cat");
    let mut out = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("stdout"));
    let seen = read_stream(&mut out, false, None);
    let seconds = start.elapsed().as_secs_f64();
    let reader_after = own_cpu_ticks();
    let mut rest = Vec::new();
    let _ = out.read_to_end(&mut rest);
    let cat_cpu = final_cpu_ticks(&mut child);
    assert_eq!(seen.deltas, DELTAS, "cat pipes every delta");
    Run {
        seconds,
        producer_cpu: cat_cpu as f64 / tck,
        reader_cpu: (reader_after - reader_before) as f64 / tck,
        seen,
    }
}

fn best(runs: Vec<Run>) -> Run {
    runs.into_iter()
        .min_by(|a, b| a.seconds.total_cmp(&b.seconds))
        .expect("at least one round")
}

fn main() {
    let started = Instant::now();
    let tck = clock_ticks_per_second();
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
        bridge.push(bridge_round(dir.path(), &script, round, record, tck));
    }
    let cat: Vec<Run> = (0..ROUNDS).map(|_| cat_round(&recorded, tck)).collect();
    let bridge_rounds: Vec<String> = bridge
        .iter()
        .map(|r| format!("{:.0}", r.per_second()))
        .collect();
    let cat_rounds: Vec<String> = cat
        .iter()
        .map(|r| format!("{:.0}", r.per_second()))
        .collect();
    let bridge = best(bridge);
    let cat = best(cat);

    println!(
        "{DELTAS} assistant.delta events, {} lines, {:.1} MB through the pipe\n",
        bridge.seen.lines,
        bridge.seen.bytes as f64 / 1e6
    );
    println!(
        "{:<14} {:>12} {:>10} {:>22} {:>22}",
        "source", "events/s", "wall s", "producer CPU µs/event", "reader CPU µs/event"
    );
    for (name, r) in [("keel bridge", &bridge), ("cat", &cat)] {
        println!(
            "{:<14} {:>12.0} {:>10.3} {:>22.2} {:>22.2}",
            name,
            r.per_second(),
            r.seconds,
            r.producer_us_per_event(),
            r.reader_us_per_event()
        );
    }
    println!(
        "\nrounds (events/s): bridge {}, cat {}",
        bridge_rounds.join(", "),
        cat_rounds.join(", ")
    );
    println!(
        "bridge / cat: {:.1}x the wall time; bridge CPU per event {:.2} µs (clock tick {:.0} µs)\ntotal {:.1} s",
        bridge.seconds / cat.seconds,
        bridge.producer_us_per_event(),
        1e6 / tck,
        started.elapsed().as_secs_f64()
    );
}
