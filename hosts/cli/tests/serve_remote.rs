//! `keel serve --listen` and `keel serve token …` as real processes: tokens made,
//! listed and revoked in a temporary KEEL_HOME, a session over WebSocket from a Rust
//! client, `keel attach --remote` in a pseudo-terminal, and the logs searched for the
//! tokens afterwards. Every wait has a hang guard; nothing asserts on timing.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "repl/support.rs"]
mod support;

use keel_envelope::commands::{CommandPayload, RequestSend, SessionStart};
use keel_envelope::Event;
use support::{dirs, Term};

const HANG_GUARD: Duration = Duration::from_secs(60);

fn keel(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_keel"))
        .args(args)
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_SOCKET")
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Makes a token; returns it as printed.
fn create(home: &Path, args: &[&str]) -> String {
    let mut all = vec!["serve", "token", "create"];
    all.extend_from_slice(args);
    let out = keel(home, &all);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let token = text(&out.stdout).trim().to_owned();
    assert_eq!(
        text(&out.stdout).lines().count(),
        1,
        "the token alone on stdout"
    );
    token
}

#[test]
fn tokens_are_made_listed_and_revoked_and_bad_input_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let out = keel(
        h,
        &[
            "serve",
            "token",
            "create",
            "--role",
            "observer",
            "--name",
            "phone",
            "--expires",
            "7d",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let token = text(&out.stdout).trim().to_owned();
    assert!(token.starts_with("keel_") && token.len() == 69, "{token}");
    assert!(token[5..].chars().all(|c| c.is_ascii_hexdigit()));
    assert!(
        text(&out.stderr).contains("shown only this once"),
        "{}",
        text(&out.stderr)
    );
    let store = h.join("serve-tokens.json");
    assert_eq!(
        std::fs::metadata(&store).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert!(!std::fs::read_to_string(&store)
        .unwrap()
        .contains(&token[5..]));

    let other = create(h, &["--role", "controller", "--session", "sess_01ABC"]);
    assert_ne!(other, token);

    let list = keel(h, &["serve", "token", "list"]);
    let shown = text(&list.stdout);
    assert!(
        shown.contains("observer") && shown.contains("phone") && shown.contains("active"),
        "{shown}"
    );
    assert!(shown.contains("session sess_01ABC"), "{shown}");
    assert!(
        !shown.contains(&token[5..]) && !shown.contains(&other[5..]),
        "{shown}"
    );
    let json: serde_json::Value =
        serde_json::from_slice(&keel(h, &["serve", "token", "list", "--json"]).stdout).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 2);
    assert_eq!(json[0]["role"], "observer");
    assert!(json[0].get("hash").is_none() && json[0].get("token").is_none());

    for bad in [
        vec!["--role", "admin"],
        vec![],
        vec!["--role", "observer", "--expires", "5y"],
        vec!["--role", "observer", "--expires", "0d"],
        vec!["--role", "observer", "--session", "not an id!"],
        vec!["--role", "observer", "--name", ""],
    ] {
        let mut args = vec!["serve", "token", "create"];
        args.extend_from_slice(&bad);
        let out = keel(h, &args);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", text(&out.stderr));
        assert!(out.stdout.is_empty(), "{bad:?}");
    }
    let dup = keel(
        h,
        &[
            "serve", "token", "create", "--role", "observer", "--name", "phone",
        ],
    );
    assert_eq!(dup.status.code(), Some(1));
    assert!(text(&dup.stderr).contains("phone"), "{}", text(&dup.stderr));
    // Token commands take no daemon flags.
    let mixed = keel(
        h,
        &["serve", "--listen", "ws://127.0.0.1:0", "token", "list"],
    );
    assert_eq!(mixed.status.code(), Some(2));

    let revoked = keel(h, &["serve", "token", "revoke", "phone"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", text(&revoked.stderr));
    assert!(text(&keel(h, &["serve", "token", "list"]).stdout).contains("revoked"));
    let unknown = keel(h, &["serve", "token", "revoke", "tok_nothing"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("tok_nothing"));
}

#[test]
fn a_bad_listen_address_or_serve_table_is_a_usage_error() {
    let d = dirs(&serde_json::json!({"turns": []}));
    let socket = d.home.join("run").join("keel.sock");
    let serve = |extra: &[&str]| {
        let mut args = vec![
            "serve",
            "--socket",
            socket.to_str().unwrap(),
            "-w",
            d.workspace.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        keel(&d.home, &args)
    };
    let out = serve(&["--listen", "http://127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("ws://HOST:PORT"),
        "{}",
        text(&out.stderr)
    );
    let out = serve(&["--listen", "wss://127.0.0.1:0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("serve.tlsCert"),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(
        d.home.join("config.toml"),
        "[serve]\nlisten = \"ws://127.0.0.1:0\"\nport = 7\n",
    )
    .unwrap();
    let out = serve(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("port"), "{}", text(&out.stderr));
    assert!(!socket.exists(), "nothing was bound");
}

/// A daemon with a remote listener on a free port; returns it and its URL.
fn serve_remote(
    d: &support::Dirs,
    socket: &Path,
) -> (Child, String, std::thread::JoinHandle<String>) {
    serve_remote_on(d, socket, "ws://127.0.0.1:0")
}

fn serve_remote_on(
    d: &support::Dirs,
    socket: &Path,
    listen: &str,
) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_keel"))
        .arg("serve")
        .arg("--socket")
        .arg(socket)
        .arg("--listen")
        .arg(listen)
        .arg("-w")
        .arg(&d.workspace)
        .arg("--model")
        .arg(format!("scripted:{}", d.script.display()))
        .env("KEEL_HOME", &d.home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let start = Instant::now();
    let url = loop {
        assert!(
            start.elapsed() < HANG_GUARD,
            "the daemon did not say where it listens"
        );
        let line = lines.next().expect("the daemon's stderr ended").unwrap();
        assert!(!line.contains("cannot"), "{line}");
        if let Some(rest) = line.strip_prefix("keel serve: remote clients on ") {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    // The rest of stderr, for the end of the test.
    let rest =
        std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>().join("\n"));
    (child, url, rest)
}

fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

#[test]
fn a_remote_daemon_serves_sessions_over_websocket_and_no_token_reaches_a_log() {
    // Every session replays the script from its start.
    let d = dirs(&serde_json::json!({"turns": [{ "text": "Answer over the wire." }]}));
    let socket = d.home.join("run").join("keel.sock");
    let controller = create(&d.home, &["--role", "controller"]);
    let observer = create(&d.home, &["--role", "observer"]);
    let (mut daemon, url, stderr) = serve_remote(&d, &socket);
    assert!(url.starts_with("ws://127.0.0.1:"), "{url}");
    let mut wrong = controller.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == '0' { '1' } else { '0' });

    let rt = tokio::runtime::Runtime::new().unwrap();
    let sid = rt.block_on(async {
        let refused = keel_serve::Client::connect_remote(&url, &wrong, None)
            .await
            .err()
            .unwrap();
        assert!(refused.to_string().contains("token_unknown"), "{refused}");
        let (c, _, mut rx) = keel_serve::Client::connect_remote(&url, &controller, None)
            .await
            .unwrap();
        let started = c
            .request(None, CommandPayload::SessionStart(SessionStart::default()))
            .await
            .unwrap();
        let sid = started.session_id.unwrap();
        let sent = c
            .request(
                Some(&sid),
                CommandPayload::RequestSend(RequestSend::new("over the wire")),
            )
            .await
            .unwrap();
        let mut said = String::new();
        loop {
            let e = tokio::time::timeout(HANG_GUARD, rx.recv())
                .await
                .unwrap()
                .unwrap();
            if let Event::AssistantDelta(p) = &e.event {
                said.push_str(&p.text);
            }
            if e.request_id == sent.request_id && e.type_name() == "session.completed" {
                break;
            }
        }
        assert_eq!(said, "Answer over the wire.");
        sid
    });

    // The REPL on the remote daemon: a controller works, an observer is told its role.
    let token_file = d.home.join("controller.token");
    std::fs::write(&token_file, format!("{controller}\n")).unwrap();
    std::fs::set_permissions(&token_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let file = token_file.to_str().unwrap();
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &["attach", "--remote", &url, "--token-file", file],
    );
    t.expect("› ");
    t.line("hello from afar");
    t.expect("Answer over the wire.");
    t.expect("› ");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "{}", t.screen());

    let observer_file = d.home.join("observer.token");
    std::fs::write(&observer_file, &observer).unwrap();
    std::fs::set_permissions(&observer_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ofile = observer_file.to_str().unwrap();
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &["attach", "--remote", &url, "--token-file", ofile],
    );
    t.expect("needs the controller role");
    assert_ne!(t.exit_code(), 0);
    // It may watch an existing session, and is told why it may not prompt there.
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &["attach", "--remote", &url, "--token-file", ofile, &sid],
    );
    t.expect("› ");
    t.line("may I?");
    t.expect("needs the controller role");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "{}", t.screen());
    // A missing or empty token file is a usage error, and says so.
    std::fs::write(&observer_file, "\n").unwrap();
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &["attach", "--remote", &url, "--token-file", ofile],
    );
    t.expect("does not hold one token");
    assert_eq!(t.exit_code(), 2);

    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(daemon.id().to_string())
        .status();
    let start = Instant::now();
    while daemon.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < HANG_GUARD, "the daemon did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let stderr = stderr.join().unwrap();
    // Tokens never appear in a log (the daemon's, the clients'), nor on the daemon's stderr.
    let mut files = Vec::new();
    files_under(&d.home.join("logs"), &mut files);
    assert!(!files.is_empty(), "the processes wrote logs");
    let logs: String = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap_or_default())
        .collect();
    assert!(
        logs.contains("remote client authenticated"),
        "the log covers the connections"
    );
    for secret in [&controller, &observer, &wrong] {
        assert!(!logs.contains(&secret[5..]), "a token reached the logs");
        assert!(!stderr.contains(&secret[5..]), "a token reached stderr");
    }
}

/// A certificate authority and a certificate for 127.0.0.1 signed by it, as PEM files.
fn certificates(dir: &Path) -> (PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), key.serialize_pem()).unwrap();
    (dir.join("ca.pem"), dir.join("cert.pem"))
}

#[test]
fn attach_over_wss_trusts_the_certificates_given_and_no_others() {
    let d = dirs(&serde_json::json!({"turns": [{ "text": "Answer over TLS." }]}));
    let (ca, cert) = certificates(&d.home);
    // An absolute path, and one relative to KEEL_HOME.
    std::fs::write(
        d.home.join("config.toml"),
        format!(
            "[serve]\ntlsCert = {:?}\ntlsKey = \"key.pem\"\n",
            cert.display().to_string()
        ),
    )
    .unwrap();
    let socket = d.home.join("run").join("keel.sock");
    let token = create(&d.home, &["--role", "controller"]);
    let (mut daemon, url, _stderr) = serve_remote_on(&d, &socket, "wss://127.0.0.1:0");
    assert!(url.starts_with("wss://127.0.0.1:"), "{url}");
    let file = d.home.join("t.token");
    std::fs::write(&file, &token).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let (f, c) = (file.to_str().unwrap(), ca.to_str().unwrap());
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &[
            "attach",
            "--remote",
            &url,
            "--token-file",
            f,
            "--ca-cert",
            c,
        ],
    );
    t.expect("› ");
    t.line("secure?");
    t.expect("Answer over TLS.");
    t.line("/quit");
    assert_eq!(t.exit_code(), 0, "{}", t.screen());
    let mut t = Term::start(
        &d.workspace,
        &d.home,
        &d.script,
        &["attach", "--remote", &url, "--token-file", f],
    );
    t.expect("TLS failed");
    assert_eq!(t.exit_code(), 1);
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(daemon.id().to_string())
        .status();
    let _ = daemon.wait();
}
