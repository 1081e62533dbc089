//! Portable sessions with PostgreSQL stores (a real server from Debian's `postgresql`
//! package, in a temporary cluster): a session made by `keel exec --store` in one
//! database is exported from it, imported into another database with `--workspace`
//! (its workspace made from the newest checkpoint), refused a second time, and resumed
//! there by a bridge, where it lists its checkpoints and rewinds.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use keel_store_pg::testing::PgServer;
use keel_testsupport::bridge::{command, Bridge, Setup};
use serde_json::{json, Value};

fn keel(home: &Path, store: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .current_dir(home)
        .env("KEEL_HOME", home)
        .env("KEEL_STORE", store)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env("KEEL_SOCKET", home.join("no-daemon.sock"))
        .output()
        .unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {} {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

#[test]
fn a_session_in_postgresql_moves_to_another_database_with_its_checkpoints() {
    let server = PgServer::shared();
    let (db1, db2) = (server.create_database(), server.create_database());
    let root = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(root.path()).unwrap();
    let (home1, home2, ws1) = (root.join("home1"), root.join("home2"), root.join("ws1"));
    for d in [&home1, &home2, &ws1] {
        std::fs::create_dir_all(d).unwrap();
    }
    for h in [&home1, &home2] {
        std::fs::write(h.join("config.toml"), "sandbox = \"off\"\n").unwrap();
    }
    let script = root.join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"toolCalls": [{"name": "write_file", "arguments": {"path": "a.txt", "content": "pg"}}]},
            {"text": "wrote"}
        ]})
        .to_string(),
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let out = keel(
        &home1,
        &db1,
        &[
            "exec",
            "write",
            "--json",
            "--mode",
            "auto",
            "--model",
            &model,
            "-w",
            ws1.to_str().unwrap(),
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = String::from_utf8(out.stdout).unwrap();
    let env =
        keel_envelope::codec::decode_envelope(first.lines().next().unwrap().as_bytes()).unwrap();
    let sid = env.session_id.unwrap();

    let file = root.join("s.keel");
    let out = keel(
        &home1,
        &db1,
        &["sessions", "export", &sid, file.to_str().unwrap(), "--json"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out);
    // The request's, the write_file call's, and the workspace as exported.
    assert_eq!(r["checkpoints"], 3, "{r}");
    assert_eq!(r["messages"], 4, "{r}");

    let ws2 = root.join("ws2");
    let out = keel(
        &home2,
        &db2,
        &[
            "sessions",
            "import",
            file.to_str().unwrap(),
            "--workspace",
            ws2.to_str().unwrap(),
            "--json",
        ],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json_of(&out);
    assert_eq!(r["sessionId"], sid.as_str());
    assert_eq!(r["checkpoints"], 3, "{r}");
    assert_eq!(std::fs::read_to_string(ws2.join("a.txt")).unwrap(), "pg");
    // The database has it now: a second import is refused.
    let out = keel(
        &home2,
        &db2,
        &["sessions", "import", file.to_str().unwrap(), "--json"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json_of(&out)["error"]["details"]["reason"],
        "session_exists"
    );
    let out = keel(&home2, &db2, &["sessions", "list", "--json"]);
    let listed = json_of(&out);
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["workspace"], ws2.to_str().unwrap());

    let mut b = Bridge::start(Setup {
        extra_args: &["--store", &db2],
        ..Setup::new(env!("CARGO_BIN_EXE_keel"), &home2, &ws2, &model)
    });
    b.send(&command(
        "session.resume",
        "r1",
        None,
        json!({"sessionId": sid}),
    ));
    let resumed = b.answer("r1");
    assert_eq!(resumed.type_name(), "session.resumed", "{resumed:?}");
    b.send(&command("checkpoint.list", "l1", Some(&sid), json!({})));
    let l = serde_json::to_value(b.answer("l1")).unwrap()["payload"].clone();
    assert_eq!(l["checkpoints"].as_array().unwrap().len(), 3, "{l}");
    // Back to before the request: a.txt did not exist.
    let first = l["checkpoints"][0]["checkpointId"]
        .as_str()
        .unwrap()
        .to_owned();
    b.send(&command(
        "session.rewind",
        "w1",
        Some(&sid),
        json!({"toRequestId": first, "conversation": false}),
    ));
    let w = b.answer("w1");
    assert_eq!(w.type_name(), "session.rewound", "{w:?}");
    assert!(!ws2.join("a.txt").exists());
    b.stop();
}
