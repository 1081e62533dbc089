//! A bad store setting stops `keel exec`, `keel serve`, `keel bridge` and `keel acp`
//! at start-up with a message saying what is wrong and how to fix it, and `keel
//! doctor`'s `store` check fails the same way; never a panic or a hang. The cases: a
//! malformed URL, a wrong password, an unreachable host, a database that belongs to
//! something else, and a value that is no store at all (`--store`, `KEEL_STORE`,
//! `store` in config.toml). A good URL opens: the doctor reports its schema.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use keel_store_pg::testing::{PgServer, PASSWORD_USER};

fn keel(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.args(args)
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_STORE")
        .env_remove("KEEL_SOCKET")
        .env_remove("KEEL_LOG")
        .stdin(Stdio::null());
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// A script for `--model scripted:…` (the model is set up before the store).
fn script(dir: &Path) -> String {
    let p = dir.join("script.json");
    std::fs::write(&p, r#"{"turns": [{"text": "hi"}]}"#).unwrap();
    format!("scripted:{}", p.display())
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// What each bad setting must say.
struct Bad {
    url: String,
    says: Vec<String>,
}

fn bad_settings(server: &PgServer) -> Vec<Bad> {
    let good = server.create_database();
    let db = good.rsplit('/').next().unwrap().to_owned();
    let foreign = server.create_database();
    let foreign_db = foreign.rsplit('/').next().unwrap().to_owned();
    server
        .psql(&foreign_db, "CREATE TABLE invoices (id int)")
        .unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    vec![
        Bad {
            url: "postgres://keel@db.example:notaport/keel".into(),
            says: vec!["postgres://USER:PASSWORD@HOST".into()],
        },
        Bad {
            url: server.url_as(PASSWORD_USER, "not-the-password", &db),
            says: vec!["password".into(), PASSWORD_USER.into()],
        },
        Bad {
            url: format!("postgres://keel:pw@127.0.0.1:{port}/keel?connect_timeout=3"),
            says: vec![format!("127.0.0.1:{port}"), "start PostgreSQL".into()],
        },
        Bad {
            url: foreign,
            says: vec![
                "not Keel's".into(),
                "invoices".into(),
                "database of its own".into(),
            ],
        },
    ]
}

fn assert_clear(out: &Output, bad: &Bad, what: &str) {
    let all = text(out);
    assert!(
        !out.status.success(),
        "{what} {}: succeeded\n{all}",
        bad.url
    );
    assert!(!all.contains("panicked"), "{what}: {all}");
    for s in &bad.says {
        assert!(
            all.contains(s.as_str()),
            "{what} {}: does not say {s:?}\n{all}",
            bad.url
        );
    }
    assert!(
        !all.contains("not-the-password"),
        "{what}: the password shows\n{all}"
    );
}

#[test]
fn bad_store_settings_stop_every_command_at_start_up_with_the_fix() {
    let server = PgServer::shared();
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let model = script(ws.path());
    for bad in bad_settings(server) {
        let url = bad.url.as_str();
        let out = keel(
            home.path(),
            &[
                "exec", "--store", url, "-w", ws_arg, "--model", &model, "hi",
            ],
            &[],
        );
        assert_clear(&out, &bad, "exec --store");
        let out = keel(
            home.path(),
            &["exec", "-w", ws_arg, "--model", &model, "hi"],
            &[("KEEL_STORE", url)],
        );
        assert_clear(&out, &bad, "exec with KEEL_STORE");
        let socket = home.path().join("run").join("keel.sock");
        let out = keel(
            home.path(),
            &[
                "serve",
                "--socket",
                socket.to_str().unwrap(),
                "--idle-exit",
                "0",
                "--store",
                url,
                "-w",
                ws_arg,
            ],
            &[],
        );
        assert_clear(&out, &bad, "serve --store");
        for cmd in ["bridge", "acp"] {
            let out = keel(
                home.path(),
                &[cmd, "--store", url, "-w", ws_arg, "--model", &model],
                &[],
            );
            assert_clear(&out, &bad, cmd);
        }
        let out = keel(
            home.path(),
            &["doctor", "--json", "--timeout", "5"],
            &[("KEEL_STORE", url)],
        );
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let check = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "store")
            .unwrap()
            .clone();
        assert_eq!(check["status"], "fail", "{check}");
        let said = format!("{} {}", check["summary"], check["fix"]);
        for s in &bad.says {
            assert!(
                said.contains(s.as_str()),
                "doctor {url}: does not say {s:?}: {said}"
            );
        }
    }
}

#[test]
fn a_value_that_is_no_store_is_refused_where_it_was_given() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let ws_arg = ws.path().to_str().unwrap();
    let model = script(ws.path());
    let out = keel(
        home.path(),
        &[
            "exec",
            "--store",
            "mysql://u@h/db",
            "-w",
            ws_arg,
            "--model",
            &model,
            "hi",
        ],
        &[],
    );
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("--store") && all.contains("mysql://"),
        "{all}"
    );
    let out = keel(
        home.path(),
        &["exec", "-w", ws_arg, "--model", &model, "hi"],
        &[("KEEL_STORE", "relative/dir")],
    );
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("KEEL_STORE") && all.contains("absolute"),
        "{all}"
    );
    std::fs::write(
        home.path().join("config.toml"),
        "store = \"redis://cache\"\n",
    )
    .unwrap();
    let out = keel(
        home.path(),
        &["exec", "-w", ws_arg, "--model", &model, "hi"],
        &[],
    );
    let all = text(&out);
    assert!(
        !out.status.success() && all.contains("store") && all.contains("redis://"),
        "{all}"
    );
    assert!(!all.contains("panicked"), "{all}");
}

#[test]
fn the_doctor_reports_a_good_store_and_the_default() {
    let server = PgServer::shared();
    let url = server.create_database();
    let home = tempfile::tempdir().unwrap();
    let out = keel(home.path(), &["doctor", "--json", "--store", &url], &[]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "store")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["summary"]
            .as_str()
            .unwrap()
            .contains("schema version"),
        "{check}"
    );
    let out = keel(home.path(), &["doctor", "--json"], &[]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "store")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "ok", "{check}");
    assert!(
        check["summary"].as_str().unwrap().contains("KEEL_HOME"),
        "{check}"
    );
}
