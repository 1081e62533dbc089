//! Envelope codec throughput beside plain `serde_json` on equivalent structs.
//!
//! Run with `cargo bench --bench envelope`. Each case runs for a fixed time budget a few
//! times, taking turns, and the best round is kept; the whole run takes about 20 s. Encoding is
//! measured three ways on the same envelope, after asserting that all three write the
//! same bytes:
//!
//! - `keel`: `codec::encode_line` / `codec::encode_into` (the direct encoder);
//! - `serde`: `serde_json` driving the envelope's hand-written `Serialize` (the
//!   encoder's reference, and what `encode_into` did before it wrote JSON directly);
//! - `plain`: `serde_json` on a plain `#[derive(Serialize)]` struct with the same fields.
//!
//! Targets: at least 5 M envelopes/s for `assistant.delta` and 2.5 M/s for
//! `tool.call.completed` with a structured result, on one core.
//!
//! `-- --profile <keel|serde> <delta|completed> <n>` encodes one envelope `n` times
//! with one encoder and prints nothing: run the bench binary that way under
//! `valgrind --tool=callgrind` to count instructions per envelope.

use std::hint::black_box;
use std::time::{Duration, Instant};

use keel_envelope::codec::{decode_command, encode_into, encode_line, Limits};
use keel_envelope::commands::WhenBusy;
use keel_envelope::events::{AssistantDelta, ToolCallCompleted};
use keel_envelope::types::{ApprovalDecision, PermissionLevel};
use keel_envelope::{Envelope, Event, Meta, Source};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The plain equivalent of an envelope: the same fields, derived.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainEnvelope<P> {
    version: String,
    session_id: Option<String>,
    request_id: String,
    event_id: String,
    #[serde(rename = "type")]
    ty: String,
    timestamp: u64,
    source: Source,
    sequence: u64,
    payload: P,
    #[serde(skip_serializing_if = "Option::is_none")]
    meta: Option<Meta>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainDelta {
    text: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PlainToolCompleted {
    tool_call_id: String,
    tool_name: String,
    result: serde_json::Value,
    duration_ms: u64,
}

/// The plain equivalent of a command line.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct PlainCommand<P> {
    version: String,
    #[serde(rename = "type")]
    ty: String,
    request_id: String,
    session_id: Option<String>,
    payload: P,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct PlainRequestSend {
    message: String,
    #[serde(default)]
    images: Option<Vec<String>>,
    #[serde(default)]
    when_busy: Option<WhenBusy>,
    #[serde(default)]
    patch_preview: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)]
struct PlainApprovalRespond {
    approval_id: String,
    decision: ApprovalDecision,
}

const ROUNDS: usize = 12;
const ROUND_TIME: Duration = Duration::from_millis(100);

/// Time this thread has spent running on a CPU (Linux: `/proc/thread-self/schedstat`,
/// nanoseconds), or `None` where that is not available.
fn thread_cpu_time() -> Option<Duration> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: u64 = text.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// Operations per second of each of `fs`: the best of several timed rounds. The
/// functions take turns round by round, so load from other processes falls on all of
/// them alike and their ratios hold even when absolute rates drift. Seconds are the
/// thread's time on a CPU where the system reports it (time spent descheduled by
/// other processes on shared cores does not count), else wall-clock time.
fn rates(fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    // Warm up.
    for f in fs.iter_mut() {
        let start = Instant::now();
        while start.elapsed() < ROUND_TIME / 2 {
            f();
        }
    }
    let mut best = vec![0.0f64; fs.len()];
    for _ in 0..ROUNDS {
        for (f, best) in fs.iter_mut().zip(best.iter_mut()) {
            let mut n = 0u64;
            let cpu_start = thread_cpu_time();
            let start = Instant::now();
            loop {
                for _ in 0..64 {
                    f();
                }
                n += 64;
                if start.elapsed() >= ROUND_TIME {
                    break;
                }
            }
            let wall = start.elapsed();
            let seconds = match (cpu_start, thread_cpu_time()) {
                (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
                _ => wall.as_secs_f64(),
            };
            *best = best.max(n as f64 / seconds);
        }
    }
    best
}

struct Row {
    case: String,
    keel: f64,
    /// The reference encoder (`serde_json` through the envelope's `Serialize`).
    serde: Option<f64>,
    plain: f64,
}

fn envelope_of(event: Event, meta: Meta) -> Envelope {
    Envelope::new(
        Some("sess_01JQ3Z5W8K4V2N6M9P0R7T1X3Y".into()),
        "req_01JQ3Z5W8K4V2N6M9P0R7T1X3Z".into(),
        "evt_01JQ3Z5W8K4V2N6M9P0R7T1X40".into(),
        1_775_600_000_000,
        Source::Runtime,
        12,
        event,
    )
    .with_meta(meta)
}

fn plain_of<P>(env: &Envelope, payload: P) -> PlainEnvelope<P> {
    PlainEnvelope {
        version: env.version.clone(),
        session_id: env.session_id.clone(),
        request_id: env.request_id.clone(),
        event_id: env.event_id.clone(),
        ty: env.type_name().to_owned(),
        timestamp: env.timestamp,
        source: env.source.clone(),
        sequence: env.sequence,
        payload,
        meta: env.meta.clone(),
    }
}

fn encode_rows<P: Serialize>(name: &str, env: &Envelope, plain: &PlainEnvelope<P>) -> Vec<Row> {
    // Same bytes, or the comparison means nothing.
    let mut want = serde_json::to_vec(plain).expect("plain encodes");
    want.push(b'\n');
    assert_eq!(
        encode_line(env),
        want,
        "{name}: encoder and plain struct differ"
    );
    let mut reference = serde_json::to_vec(env).expect("envelope encodes");
    reference.push(b'\n');
    assert_eq!(reference, want, "{name}: encoder and serde_json differ");

    let mut rows = Vec::new();
    let r = rates(&mut [
        &mut || {
            black_box(encode_line(black_box(env)));
        },
        &mut || {
            let mut v = serde_json::to_vec(black_box(env)).unwrap_or_default();
            v.push(b'\n');
            black_box(v);
        },
        &mut || {
            let mut v = serde_json::to_vec(black_box(plain)).unwrap_or_default();
            v.push(b'\n');
            black_box(v);
        },
    ]);
    rows.push(Row {
        case: format!("encode {name} (new Vec per line)"),
        keel: r[0],
        serde: Some(r[1]),
        plain: r[2],
    });

    let (mut a, mut b, mut c) = (
        Vec::with_capacity(4096),
        Vec::with_capacity(4096),
        Vec::with_capacity(4096),
    );
    let r = rates(&mut [
        &mut || {
            a.clear();
            encode_into(black_box(env), &mut a);
            black_box(&a);
        },
        &mut || {
            b.clear();
            if serde_json::to_writer(&mut b, black_box(env)).is_ok() {
                b.push(b'\n');
            }
            black_box(&b);
        },
        &mut || {
            c.clear();
            if serde_json::to_writer(&mut c, black_box(plain)).is_ok() {
                c.push(b'\n');
            }
            black_box(&c);
        },
    ]);
    rows.push(Row {
        case: format!("encode {name} (reused buffer)"),
        keel: r[0],
        serde: Some(r[1]),
        plain: r[2],
    });
    rows
}

fn decode_row<P: for<'de> Deserialize<'de>>(name: &str, line: &[u8]) -> Row {
    assert!(decode_command(line, Limits::default()).is_ok(), "{name}");
    assert!(
        serde_json::from_slice::<PlainCommand<P>>(line).is_ok(),
        "{name}"
    );
    let r = rates(&mut [
        &mut || {
            black_box(decode_command(black_box(line), Limits::default()).is_ok());
        },
        &mut || {
            black_box(serde_json::from_slice::<PlainCommand<P>>(black_box(line)).is_ok());
        },
    ]);
    Row {
        case: format!("decode {name}"),
        keel: r[0],
        serde: None,
        plain: r[1],
    }
}

/// `--profile <keel|serde> <delta|completed> <n>`: encodes one envelope `n` times and
/// nothing else, for an instruction count under `valgrind --tool=callgrind` (repeatable
/// on a loaded machine, unlike a clock).
fn profile_mode() -> Option<(bool, bool, u64)> {
    let args: Vec<String> = std::env::args().collect();
    let at = args.iter().position(|a| a == "--profile")?;
    let keel = args.get(at + 1)? == "keel";
    let delta = args.get(at + 2)? == "delta";
    let n = args.get(at + 3)?.parse().ok()?;
    Some((keel, delta, n))
}

fn profile((keel, delta, n): (bool, bool, u64), d: &Envelope, c: &Envelope) {
    let env = if delta { d } else { c };
    let mut buf = Vec::with_capacity(4096);
    for _ in 0..n {
        buf.clear();
        if keel {
            encode_into(black_box(env), &mut buf);
        } else if serde_json::to_writer(&mut buf, black_box(env)).is_ok() {
            buf.push(b'\n');
        }
        black_box(&buf);
    }
}

fn main() {
    let started = Instant::now();
    let mut rows = Vec::new();

    let delta = envelope_of(
        Event::AssistantDelta(AssistantDelta::new(
            "Reading the test file to find the failing assertion. ",
        )),
        Meta::default(),
    );
    let plain = plain_of(
        &delta,
        PlainDelta {
            text: "Reading the test file to find the failing assertion. ".into(),
        },
    );

    let result = json!({
        "path": "src/parser.rs",
        "content": "pub fn parse(input: &str) -> Result<Ast, Error> {\n    let tokens = lex(input)?;\n    Parser::new(tokens).parse()\n}\n",
        "startLine": 1,
        "lineCount": 4,
        "totalLines": 212,
        "sizeBytes": 6841,
        "truncated": true
    });
    let completed = envelope_of(
        Event::ToolCallCompleted(ToolCallCompleted::new(
            "tool_01JQ3Z5W8K4V2N6M9P0R7T1X41",
            "read_file",
            result.clone(),
            3,
        )),
        Meta {
            duration_ms: Some(3),
            permission_level: Some(PermissionLevel::Read),
            ..Meta::default()
        },
    );
    let plain_completed = plain_of(
        &completed,
        PlainToolCompleted {
            tool_call_id: "tool_01JQ3Z5W8K4V2N6M9P0R7T1X41".into(),
            tool_name: "read_file".into(),
            result,
            duration_ms: 3,
        },
    );
    if let Some(mode) = profile_mode() {
        profile(mode, &delta, &completed);
        return;
    }
    rows.extend(encode_rows("assistant.delta", &delta, &plain));
    rows.extend(encode_rows(
        "tool.call.completed",
        &completed,
        &plain_completed,
    ));

    rows.push(decode_row::<PlainRequestSend>(
        "request.send",
        br#"{"version":"1.0","type":"request.send","requestId":"req_01JQ3Z5W8K4V2N6M9P0R7T1X42","sessionId":"sess_01JQ3Z5W8K4V2N6M9P0R7T1X3Y","payload":{"message":"Why does the parser test fail on empty input?","whenBusy":"queue"}}
"#,
    ));
    rows.push(decode_row::<PlainApprovalRespond>(
        "approval.respond",
        br#"{"version":"1.0","type":"approval.respond","requestId":"req_01JQ3Z5W8K4V2N6M9P0R7T1X43","sessionId":"sess_01JQ3Z5W8K4V2N6M9P0R7T1X3Y","payload":{"approvalId":"appr_01JQ3Z5W8K4V2N6M9P0R7T1X44","decision":"allow_once"}}
"#,
    ));

    println!(
        "{:<50} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "case", "keel ops/s", "serde ops/s", "plain ops/s", "vs serde", "vs plain"
    );
    for r in &rows {
        let (serde, speedup) = match r.serde {
            Some(s) => (format!("{s:.0}"), format!("{:.2}x", r.keel / s)),
            None => ("-".to_owned(), "-".to_owned()),
        };
        println!(
            "{:<50} {:>12.0} {:>12} {:>12.0} {:>9} {:>8.2}x",
            r.case,
            r.keel,
            serde,
            r.plain,
            speedup,
            r.plain / r.keel
        );
    }
    println!(
        "\nops/s = operations per second of {} (best of {ROUNDS} rounds of {} ms)\nvs serde = speed-up of keel over serde_json driving the envelope's Serialize \
         (higher is better)\nvs plain = time per operation of keel / time of plain \
         serde_json on a derived struct (lower is better)\ntargets: encode assistant.delta \
         >= 5 M/s, tool.call.completed >= 2.5 M/s\ntotal {:.1} s",
        if thread_cpu_time().is_some() {
            "the thread's time on a CPU"
        } else {
            "wall-clock time"
        },
        ROUND_TIME.as_millis(),
        started.elapsed().as_secs_f64()
    );
}
