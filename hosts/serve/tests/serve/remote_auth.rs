//! Who may connect over WebSocket: tokens (in the header or a first `auth` message;
//! missing, wrong, expired, revoked), origins, size limits, TLS, revocation and expiry
//! of open connections, pings and the idle timeout.

use super::remote::*;
use super::*;
use keel_serve::roles::Role;
use keel_serve::tokens::NewToken;
use keel_serve::Client;
use tokio_tungstenite::tungstenite::Message;

async fn refused_before_anything(ws: &mut Ws) -> (u16, String) {
    match ws.frame().await {
        Frame::Close(Some(c)) => c,
        other => panic!("expected a close before any envelope, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_the_header_connects_to_the_same_protocol_with_runtime_ready_first() {
    let r = remote(vec![say(3)], ConnectionOptions::default(), |_| {}).await;
    let (token, _) = r.token(Role::Controller, None);
    let mut ws = open_with(&r.url, &token).await;
    let started = ws.ask("session.start", None, serde_json::json!({})).await;
    assert_eq!(started.type_name(), "session.started");
    let sid = started.session_id.clone().unwrap();
    let rid = ws
        .command(
            "request.send",
            Some(&sid),
            serde_json::json!({"message": "hi"}),
        )
        .await;
    let events = ws.until("completion", completed(&rid)).await;
    let t = types(&events);
    assert_eq!(t.first().map(String::as_str), Some("request.accepted"));
    assert_eq!(t.iter().filter(|x| *x == "assistant.delta").count(), 3);
    // The Unix socket's client sees the same session.
    let (c, mut rx) = connect(&r.socket).await;
    let w = watch(&c, &sid, None).await;
    assert_eq!(w.type_name(), "session.watched");
    drop(rx.try_recv());
    ws.send_text(r#"{"version":"1.0","type":"runtime.shutdown","requestId":"bye"}"#.into())
        .await;
    let (rest, close) = ws.rest().await;
    assert_eq!(stopped_reason(rest.last().unwrap()), Some("disconnect"));
    assert_eq!(close.map(|c| c.0), Some(1000));
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_wrong_expired_and_revoked_tokens_are_refused_with_their_reason_and_nothing_else() {
    let r = remote(vec![], ConnectionOptions::default(), |o| {
        o.auth_timeout = Duration::from_millis(300);
    })
    .await;
    let (good, _) = r.token(Role::Controller, None);
    let (revoked, rec) = r.token(Role::Observer, None);
    r.store.revoke(&rec.id).unwrap();
    let (expiring, _) = r
        .store
        .create(NewToken {
            role: Role::Observer,
            session: None,
            expires_in: Some(Duration::from_secs(1)),
            name: None,
        })
        .unwrap();
    let mut wrong = good.expose().to_owned();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'a' { 'b' } else { 'a' });

    // In the header: the upgrade is refused, HTTP 401 with the reason.
    let header = |t: &str| vec![("authorization", format!("Bearer {t}"))];
    for (token, reason) in [
        (wrong.as_str(), "token_unknown"),
        (revoked.expose(), "token_revoked"),
        ("", "token_missing"),
    ] {
        let (status, body) = open(&r.url, &header(token)).await.err().unwrap();
        assert_eq!(status, 401, "{body}");
        assert!(body.contains(reason), "{reason}: {body}");
        assert!(body.contains("Bearer realm=\"keel\""), "{body}");
        assert!(!body.contains(good.expose()));
    }
    let (status, _) = open(&r.url, &[("authorization", "Basic dTpw".to_owned())])
        .await
        .err()
        .unwrap();
    assert_eq!(status, 401);

    // As a first message (a browser): closed with 4401 and the reason, before any envelope.
    for (first, reason) in [
        (
            format!(r#"{{"type":"auth","token":"{wrong}"}}"#),
            "token_unknown",
        ),
        (
            format!(r#"{{"type":"auth","token":"{}"}}"#, revoked.expose()),
            "token_revoked",
        ),
        (
            r#"{"version":"1.0","type":"session.list","requestId":"x"}"#.to_owned(),
            "token_missing",
        ),
        ("not json".to_owned(), "token_missing"),
    ] {
        let mut ws = open(&r.url, &[]).await.unwrap();
        ws.send_text(first).await;
        assert_eq!(
            refused_before_anything(&mut ws).await,
            (4401, reason.to_owned())
        );
    }
    let mut silent = open(&r.url, &[]).await.unwrap();
    assert_eq!(
        refused_before_anything(&mut silent).await,
        (4401, "auth_timeout".to_owned())
    );
    let mut ws = open(&r.url, &[]).await.unwrap();
    ws.send_text(format!(r#"{{"type":"auth","token":"{}"}}"#, good.expose()))
        .await;
    assert_eq!(ws.envelope().await.type_name(), "runtime.ready");
    let list = ws.ask("session.list", None, serde_json::json!({})).await;
    assert_eq!(list.type_name(), "session.list");

    // An expired token: refused once its time is over.
    let mut live = open_with(&r.url, &expiring).await;
    let (rest, close) = live.rest().await;
    assert_eq!(stopped_reason(rest.last().unwrap()), Some("token_expired"));
    assert_eq!(close, Some((4401, "token_expired".to_owned())));
    let (status, body) = open(&r.url, &bearer(&expiring)).await.err().unwrap();
    assert_eq!(
        (status, body.contains("token_expired")),
        (401, true),
        "{body}"
    );
    // The client of `keel attach --remote` says why.
    let e = Client::connect_remote(&r.url, &wrong, None)
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("token_unknown"), "{e}");
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_token_closes_its_connections_within_a_second_and_not_the_others() {
    let _load = cpu_load();
    let r = remote(vec![], ConnectionOptions::default(), |_| {}).await;
    let (doomed, rec) = r.token(Role::Observer, None);
    let (kept, _) = r.token(Role::Controller, None);
    let mut a = open_with(&r.url, &doomed).await;
    let mut b = open_with(&r.url, &doomed).await;
    let mut c = open_with(&r.url, &kept).await;
    let sid = c
        .ask("session.start", None, serde_json::json!({}))
        .await
        .session_id
        .unwrap();
    assert_eq!(
        a.ask("session.watch", None, serde_json::json!({"sessionId": sid}))
            .await
            .type_name(),
        "session.watched"
    );
    let revoked_at = std::time::Instant::now();
    r.store.revoke(&rec.id).unwrap();
    for ws in [&mut a, &mut b] {
        let (rest, close) = ws.rest().await;
        let took = revoked_at.elapsed();
        assert_eq!(stopped_reason(rest.last().unwrap()), Some("token_revoked"));
        assert_eq!(close, Some((4401, "token_revoked".to_owned())));
        assert!(
            took < Duration::from_secs(1),
            "a revoked token's connection must close within 1 s; it took {took:?}"
        );
    }
    let list = c.ask("session.list", None, serde_json::json!({})).await;
    assert_eq!(list.type_name(), "session.list");
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cross_origin_upgrade_is_refused_and_an_allowed_one_or_none_is_not() {
    let r = remote(vec![], ConnectionOptions::default(), |o| {
        o.allowed_origins = vec!["https://app.example".into()];
    })
    .await;
    let (t, _) = r.token(Role::Observer, None);
    let with_origin = |o: &str| {
        let mut h = bearer(&t);
        h.push(("origin", o.to_owned()));
        h
    };
    for bad in ["https://evil.example", "null", "http://app.example"] {
        let (status, body) = open(&r.url, &with_origin(bad)).await.err().unwrap();
        assert_eq!(status, 403, "{bad}: {body}");
        assert!(body.contains("origin_refused"), "{body}");
    }
    // Refused before the token is even looked at.
    let (status, _) = open(&r.url, &[("origin", "https://evil.example".into())])
        .await
        .err()
        .unwrap();
    assert_eq!(status, 403);
    let mut ok = open(&r.url, &with_origin("https://APP.example"))
        .await
        .unwrap();
    assert_eq!(ok.envelope().await.type_name(), "runtime.ready");
    let mut native = open_with(&r.url, &t).await;
    assert_eq!(
        native
            .ask("session.list", None, serde_json::json!({}))
            .await
            .type_name(),
        "session.list"
    );
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_and_ends_the_connection_bad_ones_do_not() {
    let limit = 64 * 1024;
    let options = ConnectionOptions {
        max_line_bytes: Some(limit),
        ..ConnectionOptions::default()
    };
    let r = remote(vec![], options, |_| {}).await;
    let (t, _) = r.token(Role::Controller, None);
    let mut ws = open_with(&r.url, &t).await;
    ws.send_message(Message::binary(vec![1u8, 2, 3])).await;
    let e = ws.envelope().await;
    assert_eq!(reason_of(error_of(&e)), "binary_message");
    ws.send_text("{not json".into()).await;
    let e = ws.envelope().await;
    assert_eq!(reason_of(error_of(&e)), "invalid_json");
    let answer = ws.ask("session.list", None, serde_json::json!({})).await;
    assert_eq!(answer.type_name(), "session.list");
    // Just under the limit: an ordinary refusal (the payload is wrong), and it goes on.
    let filler = "x".repeat(limit - 200);
    let near = format!(
        r#"{{"version":"1.0","type":"session.set_title","requestId":"near","sessionId":"sess_none","payload":{{"title":"{filler}"}}}}"#
    );
    assert!(near.len() <= limit);
    ws.send_text(near).await;
    let e = ws
        .until("near", |e| e.request_id == "near")
        .await
        .pop()
        .unwrap();
    assert_eq!(e.type_name(), "error");
    // Over it: refused with the sizes, then the connection ends with 1009.
    ws.send_text("y".repeat(limit + 1)).await;
    let (rest, close) = ws.rest().await;
    let refused = error_of(&rest[0]);
    assert_eq!(refused.code, ErrorCode::RequestInvalid);
    assert_eq!(reason_of(refused), "message_too_long");
    assert_eq!(refused.details["limit"], limit as u64);
    assert_eq!(refused.details["size"], (limit + 1) as u64);
    assert_eq!(
        stopped_reason(rest.last().unwrap()),
        Some("message_too_big")
    );
    assert_eq!(close.map(|c| c.0), Some(1009));
    // The daemon goes on.
    let mut again = open_with(&r.url, &t).await;
    assert_eq!(
        again
            .ask("session.list", None, serde_json::json!({}))
            .await
            .type_name(),
        "session.list"
    );
    r.stop().await;
}

/// A certificate authority and a certificate for 127.0.0.1 signed by it, as PEM files.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "keel test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &issuer)
        .unwrap();
    let (ca_path, cert_path, key_path) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_path, ca.pem()).unwrap();
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca_path, cert_path, key_path)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_with_a_certificate_made_in_the_test() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificates(certs.path());
    let r = remote(vec![say(2)], ConnectionOptions::default(), |o| {
        o.listen = ListenAddr::parse("wss://127.0.0.1:0").unwrap();
        o.tls = Some((cert.clone(), key.clone()));
    })
    .await;
    assert!(r.url.starts_with("wss://127.0.0.1:"), "{}", r.url);
    let (t, _) = r.token(Role::Controller, None);
    let (c, ready, mut rx) = Client::connect_remote(&r.url, t.expose(), Some(&ca))
        .await
        .unwrap();
    assert_eq!(ready.protocol_version, keel_envelope::PROTOCOL_VERSION);
    let sid = start_session(&c).await;
    let rid = send(&c, &sid, "over tls").await;
    until(&mut rx, "completion", completed(&rid)).await;
    // A client that does not trust the authority cannot connect; plain ws:// neither.
    let e = Client::connect_remote(&r.url, t.expose(), None)
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("TLS"), "{e}");
    let plain = r.url.replace("wss://", "ws://");
    assert!(Client::connect_remote(&plain, t.expose(), None)
        .await
        .is_err());
    r.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_watching_connection_open_and_one_that_watches_nothing_goes_idle() {
    let options = ConnectionOptions {
        idle: Duration::from_millis(1500),
        ..ConnectionOptions::default()
    };
    let r = remote(vec![], options, |o| {
        o.ping_interval = Duration::from_millis(100);
    })
    .await;
    let (t, _) = r.token(Role::Controller, None);
    let mut watching = open_with(&r.url, &t).await;
    let sid = watching
        .ask("session.start", None, serde_json::json!({}))
        .await
        .session_id
        .unwrap();
    let mut idle = open_with(&r.url, &t).await;
    // The idle one is closed; the watching one, whose client answers the pings while
    // it reads, is still there afterwards.
    let reading = tokio::spawn(async move {
        // Reading (and so answering pings) for twice the idle time, sending nothing.
        let until = tokio::time::Instant::now() + Duration::from_millis(3000);
        tokio::select! {
            f = watching.frame() => panic!("the watching connection got {f:?}"),
            _ = tokio::time::sleep_until(until) => {}
        }
        let state = watching
            .ask("session.state", Some(&sid), serde_json::json!({}))
            .await;
        state.type_name().to_owned()
    });
    let (rest, close) = idle.rest().await;
    assert_eq!(stopped_reason(rest.last().unwrap()), Some("idle"));
    assert_eq!(close.map(|c| c.0), Some(1001));
    assert_eq!(reading.await.unwrap(), "session.state");
    r.stop().await;
}
