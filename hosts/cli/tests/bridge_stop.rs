//! The bridge process stopping while a request runs — end of input or
//! `runtime.shutdown`, at several moments of the request — leaves no process behind and
//! exits promptly.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use keel_envelope::codec;

fn script(dir: &std::path::Path, command: &str) -> String {
    let p = dir.join("script.json");
    let body = serde_json::json!({"turns": [
        {"toolCalls": [{"name": "run_shell", "arguments": {"command": command}}]},
        {"text": "done"}
    ]});
    std::fs::write(&p, body.to_string()).unwrap();
    format!("scripted:{}", p.display())
}

/// Processes (not zombies) whose command line mentions `marker`.
fn alive_with(marker: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let zombie = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z');
        if String::from_utf8_lossy(&cmd).contains(marker) && !zombie && !stat.is_empty() {
            out.push(pid);
        }
    }
    out
}

fn wait_exit(child: &mut Child) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the bridge did not exit");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[derive(Debug, Clone, Copy)]
enum How {
    Eof,
    Shutdown,
}

/// Starts a request whose shell command is `sleep <marker>` (with an approval first in
/// `ask` mode), waits for `moment`, then stops the bridge `how`.
fn stop_during(moment: &str, mode: &str, how: How, n: usize) {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let marker = format!("30.{}{n:03}", std::process::id());
    let command = if mode == "ask" {
        format!("touch made && sleep {marker}")
    } else {
        format!("sleep {marker}")
    };
    let model = script(home.path(), &command);
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(["bridge", "--mode", mode, "--workspace"])
        .arg(ws.path())
        .args(["--model", &model])
        .env("KEEL_HOME", home.path())
        .env_remove("KEEL_MODEL")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"session.start","requestId":"r1"}}"#
    )
    .unwrap();
    let sid = loop {
        let env = codec::decode_envelope(lines.next().unwrap().unwrap().as_bytes()).unwrap();
        if env.type_name() == "session.started" {
            break env.session_id.unwrap();
        }
    };
    writeln!(
        stdin,
        r#"{{"version":"1.0","type":"request.send","requestId":"r2","sessionId":"{sid}","payload":{{"message":"go"}}}}"#
    )
    .unwrap();
    loop {
        let env = codec::decode_envelope(lines.next().unwrap().unwrap().as_bytes()).unwrap();
        if env.type_name() == moment {
            break;
        }
    }
    match how {
        How::Eof => drop(stdin),
        How::Shutdown => {
            writeln!(
                stdin,
                r#"{{"version":"1.0","type":"runtime.shutdown","requestId":"r9"}}"#
            )
            .unwrap();
        }
    }
    // Read to the end so the bridge never blocks on a full pipe.
    let reader = std::thread::spawn(move || lines.map_while(Result::ok).count());
    assert_eq!(wait_exit(&mut child), Some(0), "{moment} {how:?}");
    reader.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut left = alive_with(&marker);
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        left = alive_with(&marker);
    }
    for pid in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(
        left.is_empty(),
        "{moment} {how:?}: processes survived: {left:?}"
    );
}

#[test]
fn eof_or_shutdown_during_a_request_leaves_no_process() {
    let moments = [
        ("request.accepted", "auto"),
        ("turn.started", "auto"),
        ("tool.call.started", "auto"),
        ("approval.requested", "ask"),
    ];
    let mut n = 0;
    for (moment, mode) in moments {
        for how in [How::Eof, How::Shutdown] {
            n += 1;
            stop_during(moment, mode, how, n);
        }
    }
}
