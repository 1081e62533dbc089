//! `keel sessions prune` and `keel doctor`'s checkpoints check through the real binary:
//! checkpoints made by `keel exec` (a closed session) beside a session a bridge holds
//! open, a dry run that changes nothing, a pruning that spares the open session, and
//! bad `--older-than` values.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use keel_testsupport::bridge::{command, Bridge, Setup};
use serde_json::{json, Value};

fn keel(home: &Path, args: &[&str]) -> Output {
    keel_in(home, home, args)
}

/// `keel args` run in folder `cwd`.
fn keel_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(cwd)
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY")
        .env("KEEL_SOCKET", home.join("no-daemon.sock"))
        .output()
        .unwrap()
}

fn script(home: &Path, name: &str, turns: Value) -> String {
    let p = home.join(name);
    std::fs::write(&p, json!({ "turns": turns }).to_string()).unwrap();
    format!("scripted:{}", p.display())
}

fn prune(home: &Path, ws: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["sessions", "prune", "--json"];
    args.extend_from_slice(extra);
    let out = keel_in(home, ws, &args);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn records(home: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![home.join("checkpoints")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p
                .parent()
                .and_then(|q| q.parent())
                .is_some_and(|q| q.ends_with("sessions"))
                && p.extension().is_some_and(|x| x == "json")
            {
                n += 1;
            }
        }
    }
    n
}

fn dropped_sessions(report: &Value) -> Vec<String> {
    let mut v: Vec<String> = report["dropped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["sessionId"].as_str().unwrap().to_owned())
        .collect();
    v.dedup();
    v
}

#[test]
fn prune_drops_a_closed_sessions_checkpoints_and_spares_an_open_one() {
    let ws = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "sandbox = \"off\"\n").unwrap();
    // A closed session: `keel exec` writes a file (two checkpoints) and exits.
    let model = script(
        home.path(),
        "exec.json",
        json!([
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
            {"text": "wrote"}
        ]),
    );
    let out = keel(
        home.path(),
        &[
            "exec",
            "write",
            "--json",
            "--mode",
            "auto",
            "--model",
            &model,
            "--workspace",
        ]
        .into_iter()
        .chain([ws.path().to_str().unwrap()])
        .collect::<Vec<_>>(),
    );
    assert_eq!(out.status.code(), Some(0));
    let closed = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .find_map(|l| {
            keel_envelope::codec::decode_envelope(l.as_bytes())
                .ok()?
                .session_id
        })
        .unwrap();
    // An open session in a bridge, with one checkpoint.
    let model = script(home.path(), "open.json", json!([{"text": "hi"}]));
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        home.path(),
        ws.path(),
        &model,
    ));
    let open = b.start_session("s1", "{}");
    b.request(&open, "o1", r#"{"message":"hi"}"#);
    b.until_on("o1", "session.completed");
    assert_eq!(records(home.path()), 3);

    // A dry run says what would go and changes nothing.
    let dry = prune(home.path(), ws.path(), &["--older-than", "0m", "--dry-run"]);
    assert_eq!(dry["dryRun"], true);
    assert_eq!(dropped_sessions(&dry), vec![closed.clone()], "{dry}");
    assert_eq!(records(home.path()), 3);
    // The configured limits (30 days, 2 GB) leave everything.
    let by_config = prune(home.path(), ws.path(), &["--dry-run"]);
    assert_eq!(by_config["dropped"], json!([]), "{by_config}");

    let done = prune(home.path(), ws.path(), &["--older-than", "0m"]);
    assert_eq!(done["dryRun"], false);
    assert_eq!(dropped_sessions(&done), vec![closed.clone()], "{done}");
    assert_eq!(done["sessionsRemoved"], json!([closed]), "{done}");
    assert_eq!(records(home.path()), 1);
    // The open session's checkpoint still rewinds.
    std::fs::write(ws.path().join("later.txt"), "l").unwrap();
    b.send(&command(
        "session.rewind",
        "w1",
        Some(&open),
        json!({"toRequestId": "o1", "conversation": false}),
    ));
    let r = b.answer("w1");
    assert_eq!(r.type_name(), "session.rewound", "{r:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("a.txt")).unwrap(),
        "a"
    );
    assert!(!ws.path().join("later.txt").exists());

    // Human output, and the doctor's view of the store.
    let out = keel_in(home.path(), ws.path(), &["sessions", "prune", "--dry-run"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("would drop 0 checkpoint(s)"), "{text}");
    let out = keel(
        home.path(),
        &["doctor", "--json", "-w", ws.path().to_str().unwrap()],
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "checkpoints")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    assert_eq!(check["status"], "ok", "{check}");
    let summary = check["summary"].as_str().unwrap();
    assert!(summary.starts_with("on; "), "{summary}");
    assert!(
        summary.contains("1 workspace store(s), 2 checkpoint(s)"),
        "{summary}"
    );
    assert!(summary.contains("pruning now would free "), "{summary}");
    assert!(summary.ends_with("(0 checkpoint(s))"), "{summary}");
    b.stop();
}

#[test]
fn bad_older_than_values_are_refused_with_the_reason() {
    let home = tempfile::tempdir().unwrap();
    for (bad, says) in [
        ("abc", "not an age"),
        ("7x", "the unit must be"),
        ("-1d", "not an age"),
        ("", "not an age"),
        ("d", "not an age"),
        ("99999999999999999999d", "too large"),
        ("40000d", "more than 100 years"),
    ] {
        let flag = format!("--older-than={bad}");
        let out = keel(home.path(), &["sessions", "prune", &flag]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--older-than"), "{bad:?}: {err}");
        assert!(err.contains(says), "{bad:?}: {err}");
    }
    let out = keel(home.path(), &["sessions", "prune", "--older-than"]);
    assert_eq!(out.status.code(), Some(2));
    let out = keel(home.path(), &["sessions", "prune", "--dry"]);
    assert_eq!(out.status.code(), Some(2));
    // Nothing was created by the refused commands.
    assert!(!home.path().join("checkpoints").exists());
}

#[test]
fn a_bad_checkpoints_table_stops_the_command_with_its_key() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[checkpoints]\nmaxBytes = 10\n",
    )
    .unwrap();
    let out = keel(home.path(), &["sessions", "prune", "--dry-run"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("checkpoints.maxBytes") && err.contains("1 MiB"),
        "{err}"
    );
    // Off: a session takes no checkpoint, and says why.
    std::fs::write(
        home.path().join("config.toml"),
        "[checkpoints]\nenabled = false\n",
    )
    .unwrap();
    let ws = tempfile::tempdir().unwrap();
    let model = script(home.path(), "s.json", json!([{"text": "hi"}]));
    let mut b = Bridge::start(Setup::new(
        env!("CARGO_BIN_EXE_keel"),
        home.path(),
        ws.path(),
        &model,
    ));
    let sid = b.start_session("s1", "{}");
    b.request(&sid, "e1", r#"{"message":"hi"}"#);
    b.until_on("e1", "session.completed");
    b.send(&command("checkpoint.list", "l1", Some(&sid), json!({})));
    let l = serde_json::to_value(b.answer("l1")).unwrap();
    assert_eq!(l["payload"]["checkpoints"], json!([]));
    assert!(
        l["payload"]["disabledReason"]
            .as_str()
            .unwrap()
            .contains("off in the configuration"),
        "{l}"
    );
    b.stop();
    assert_eq!(records(home.path()), 0);
}
