//! Hostile hosts: every case under tests/data/hostile/ is sent to a real `keel bridge`
//! by one `check` function. After each case the bridge must still answer (a probe
//! command), every line it wrote must be an envelope, whatever it refused must have
//! been refused with a structured error, nothing may panic, and at the end the
//! sessions that were waiting (an approval, a question, a plan) are answered in their
//! own sessions and complete, with readable logs of contiguous sequences.
//!
//! Case files: `{"about", "bridge": "shared" | "fresh", "steps": [...]}`; a step sends
//! (`send`, `sendHex`, `sendRandom`, `sendRepeat`, `sendNested`), expects
//! (`expect`, `expectStopped`) or generates cases from the schema (`generate`:
//! `wrongTypes`, `closedSession`). `{name}` in a string is replaced by a value of the
//! fixture (`s1`, `a1`, …) or one bound by an `expect` with `bind`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use keel_envelope::{Envelope, ErrorCode, Event};
use serde_json::{json, Value};

use crate::common::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Fixture {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
    vars: HashMap<String, String>,
}

impl Fixture {
    fn new() -> Fixture {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join("config.toml"), "approvalTimeoutSecs = 0\n").unwrap();
        let h = home.path();
        let mut vars = HashMap::new();
        let mut model = |name: &str, body: Value| {
            vars.insert(name.to_owned(), script(h, &format!("{name}.json"), body));
        };
        model(
            "approvalModel",
            json!({"turns": [
                {"toolCalls": [{"name": "write_file", "arguments": {"path": "notes.md", "content": "notes\n"}}]},
                {"text": "Written."}
            ]}),
        );
        model(
            "askModel",
            json!({"turns": [
                {"toolCalls": [{"name": "ask_user", "arguments": {"question": "Which database?", "candidates": ["sqlite", "postgres"]}}]},
                {"text": "Noted."}
            ]}),
        );
        model(
            "planModel",
            json!({"turns": [
                {"toolCalls": [{"name": "propose_plan", "arguments": {"summary": "Two steps", "steps": [{"title": "one"}, {"title": "two"}]}}]},
                {"text": "Planned."}
            ]}),
        );
        model(
            "slowModel",
            json!({"turns": [{"delayMs": 600000, "text": "late"}]}),
        );
        model("quickModel", json!({"turns": [{"text": "Quick."}]}));
        Fixture { home, ws, vars }
    }

    fn bridge(&self) -> Bridge {
        self.bridge_in(self.home.path())
    }

    fn bridge_in(&self, home: &Path) -> Bridge {
        Bridge::start(Setup {
            bin: KEEL,
            home,
            workspace: self.ws.path(),
            model: &self.vars["quickModel"],
            max_files: None,
            extra_args: &[],
            env: &[],
        })
    }

    fn fill(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for (k, v) in &self.vars {
            out = out.replace(&format!("{{{k}}}"), v);
        }
        out
    }
}

/// Starts a session on `model` in `mode`, sends one request and waits for the event
/// of type `wait`; returns the session, the request and that event.
fn waiting(
    b: &mut Bridge,
    f: &Fixture,
    tag: &str,
    model: &str,
    mode: &str,
    wait: &str,
) -> (String, String, Envelope) {
    let start = format!("{tag}-start");
    b.send(&command(
        "session.start",
        &start,
        None,
        json!({"model": f.vars[model], "permissionMode": mode}),
    ));
    let sid = session_of(b.until_on(&start, "session.started").last().unwrap());
    let rid = format!("{tag}-go");
    b.send(&command(
        "request.send",
        &rid,
        Some(&sid),
        json!({"message": "go"}),
    ));
    let env = b.until_on(&rid, wait).pop().unwrap();
    (sid, rid, env)
}

/// Sets up the shared bridge: three sessions waiting (approval, question, plan) and
/// a closed one.
fn shared(f: &mut Fixture) -> Bridge {
    let mut b = f.bridge();
    let (s1, r1, a) = waiting(
        &mut b,
        f,
        "s1",
        "approvalModel",
        "ask",
        "approval.requested",
    );
    let Event::ApprovalRequested(a) = a.event else {
        panic!()
    };
    let (s2, _, q) = waiting(&mut b, f, "s2", "askModel", "ask", "ask.requested");
    let Event::AskRequested(q) = q.event else {
        panic!()
    };
    let (s3, _, p) = waiting(
        &mut b,
        f,
        "s3",
        "planModel",
        "plan",
        "plan.approval_required",
    );
    let Event::PlanApprovalRequired(p) = p.event else {
        panic!()
    };
    b.send(&command("session.start", "c-start", None, json!({})));
    let closed = session_of(b.until_on("c-start", "session.started").last().unwrap());
    b.send(&command(
        "session.close",
        "c-close",
        Some(&closed),
        json!({}),
    ));
    b.until_on("c-close", "session.closed");
    for (k, v) in [
        ("s1", s1),
        ("r1", r1),
        ("a1", a.approval_id),
        ("s2", s2),
        ("q2", q.ask_id),
        ("s3", s3),
        ("p3", p.plan_id),
        ("closed", closed),
    ] {
        f.vars.insert(k.to_owned(), v);
    }
    b
}

/// Reads until `pred`; every envelope before the match must be a structured error
/// of the bridge (an answer to a refused line).
fn until_past_errors(
    b: &mut Bridge,
    what: &str,
    mut pred: impl FnMut(&Envelope) -> bool,
) -> Envelope {
    loop {
        let env = b
            .next()
            .unwrap_or_else(|| panic!("output ended waiting for {what}; {}", b.stderr_text()));
        if pred(&env) {
            return env;
        }
        match &env.event {
            Event::Error(e) => assert!(
                matches!(
                    e.code,
                    ErrorCode::RequestInvalid | ErrorCode::VersionMismatch
                ),
                "unexpected error while waiting for {what}: {e:?}"
            ),
            other => panic!(
                "unexpected {} while waiting for {what}: {other:?}",
                env.type_name()
            ),
        }
    }
}

/// Checks the bridge still answers.
fn probe(b: &mut Bridge, n: &mut usize) {
    *n += 1;
    let rid = format!("probe-{n}");
    b.send(&command("session.list", &rid, None, json!({})));
    until_past_errors(b, "the probe", |e| {
        e.request_id == rid && e.type_name() == "session.list"
    });
}

fn error_of(env: &Envelope) -> Option<&keel_envelope::ErrorPayload> {
    match &env.event {
        Event::Error(e) | Event::RequestRejected(e) => Some(e),
        _ => None,
    }
}

fn expect(b: &mut Bridge, f: &mut Fixture, spec: &Value) {
    let rid = f.fill(spec["requestId"].as_str().unwrap());
    let ty = spec["type"].as_str().unwrap();
    let env = loop {
        let e = b
            .next()
            .unwrap_or_else(|| panic!("output ended waiting for {rid}; {}", b.stderr_text()));
        if e.request_id == rid && (ty == "error" || e.type_name() == ty || error_of(&e).is_some()) {
            break e;
        }
        match error_of(&e) {
            // Events of a running request come before the one awaited.
            None if ty != "error" => {}
            Some(x)
                if matches!(
                    x.code,
                    ErrorCode::RequestInvalid | ErrorCode::VersionMismatch
                ) => {}
            _ => panic!(
                "unexpected {} while waiting for {rid}: {e:?}",
                e.type_name()
            ),
        }
    };
    assert_eq!(env.type_name(), ty, "{rid}: {env:?}");
    if let Some(code) = spec.get("code").and_then(Value::as_str) {
        let e = error_of(&env).unwrap();
        assert_eq!(e.code.as_str(), code, "{rid}: {e:?}");
    }
    if let Some(reason) = spec.get("reason").and_then(Value::as_str) {
        let e = error_of(&env).unwrap();
        assert_eq!(e.details["reason"], reason, "{rid}: {e:?}");
    }
    if let Some(var) = spec.get("bind").and_then(Value::as_str) {
        f.vars
            .insert(var.to_owned(), env.session_id.clone().unwrap());
    }
}

/// Reads to the end: `runtime.stopped` answering `requestId` is the last line, no
/// command in `never` was answered, and the process exits 0.
fn expect_stopped(b: &mut Bridge, f: &Fixture, home: &Path, spec: &Value) {
    let rid = spec["requestId"].as_str().unwrap();
    let never: Vec<String> = spec["never"]
        .as_array()
        .map(|a| a.iter().map(|v| f.fill(v.as_str().unwrap())).collect())
        .unwrap_or_default();
    assert!(b.wait(), "the bridge did not exit 0: {}", b.stderr_text());
    let last = b.seen.last().unwrap();
    assert_eq!(
        (last.type_name(), last.request_id.as_str()),
        ("runtime.stopped", rid)
    );
    for e in &b.seen {
        assert!(
            !never.contains(&e.request_id),
            "a command after runtime.shutdown was answered: {e:?}"
        );
    }
    if let Some(n) = spec.get("closed").and_then(Value::as_u64) {
        let closed = b
            .seen
            .iter()
            .filter(|e| e.type_name() == "session.closed")
            .count();
        assert_eq!(closed as u64, n);
    }
    // Every session's log is readable, holds what was delivered, and ends closed.
    let sessions: std::collections::BTreeSet<String> =
        b.seen.iter().filter_map(|e| e.session_id.clone()).collect();
    for sid in sessions {
        let log = assert_log_holds(home, &sid, &b.seen);
        assert_eq!(log.last().unwrap().type_name(), "session.closed");
    }
}

fn send_step(b: &Bridge, f: &Fixture, step: &Value) -> bool {
    if let Some(line) = step.get("send").and_then(Value::as_str) {
        b.send(&f.fill(line));
    } else if let Some(hex) = step.get("sendHex").and_then(Value::as_str) {
        let bytes = hex
            .split_whitespace()
            .map(|h| u8::from_str_radix(h, 16).unwrap())
            .collect();
        b.send_bytes(bytes);
    } else if let Some(r) = step.get("sendRandom") {
        let mut rng = Rng::new(r["seed"].as_u64().unwrap());
        let mut bytes = rng.bytes(r["bytes"].as_u64().unwrap() as usize);
        if r["printable"] == true {
            for b in &mut bytes {
                *b = if *b % 61 == 0 { b'\n' } else { b' ' + *b % 95 };
            }
        }
        bytes.push(b'\n');
        b.send_bytes(bytes);
    } else if let Some(r) = step.get("sendRepeat") {
        b.send_bytes(f.fill(r["prefix"].as_str().unwrap()).into_bytes());
        let byte = r["byte"].as_str().unwrap().as_bytes()[0];
        let mut left = r["count"].as_u64().unwrap() as usize;
        while left > 0 {
            let n = left.min(1 << 20);
            b.send_bytes(vec![byte; n]);
            left -= n;
        }
        b.send_bytes(f.fill(r["suffix"].as_str().unwrap()).into_bytes());
    } else if let Some(r) = step.get("sendNested") {
        let depth = r["depth"].as_u64().unwrap() as usize;
        let mut line = f.fill(r["prefix"].as_str().unwrap());
        line.push_str(&r["open"].as_str().unwrap().repeat(depth));
        line.push_str(r.get("inner").and_then(Value::as_str).unwrap_or(""));
        line.push_str(&r["close"].as_str().unwrap().repeat(depth));
        line.push_str(&f.fill(r["suffix"].as_str().unwrap()));
        b.send_bytes(line.into_bytes());
    } else {
        return false;
    }
    true
}

/// Runs one case file.
fn check(path: &Path, b: &mut Option<Bridge>, f: &mut Fixture, probes: &mut usize) {
    let case: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let fresh = case["bridge"] == "fresh";
    let mut own = None;
    // A fresh bridge may have a configuration of its own (then its own store).
    let own_home = tempfile::tempdir().unwrap();
    let home = match case.get("config").and_then(Value::as_str) {
        Some(config) => {
            std::fs::write(own_home.path().join("config.toml"), config).unwrap();
            own_home.path().to_path_buf()
        }
        None => f.home.path().to_path_buf(),
    };
    if fresh {
        own = Some(f.bridge_in(&home));
    }
    let bridge = if fresh {
        own.as_mut().unwrap()
    } else {
        b.as_mut().unwrap()
    };
    for step in case["steps"].as_array().unwrap() {
        if send_step(bridge, f, step) {
            continue;
        }
        if let Some(spec) = step.get("expect") {
            expect(bridge, f, spec);
        } else if let Some(spec) = step.get("expectStopped") {
            expect_stopped(bridge, f, &home, spec);
        } else if let Some(kind) = step.get("generate").and_then(Value::as_str) {
            let n = match kind {
                "wrongTypes" => wrong_types(bridge, f),
                "closedSession" => closed_session(bridge, f),
                other => panic!("unknown generator {other}"),
            };
            eprintln!("{}: {n} generated commands", path.display());
        } else {
            panic!("{}: unknown step {step}", path.display());
        }
    }
    if !fresh {
        probe(bridge, probes);
    }
    bridge.assert_no_panic();
}

#[test]
fn hostile_inputs_get_structured_errors_and_the_bridge_goes_on() {
    let mut f = Fixture::new();
    let mut b = Some(shared(&mut f));
    let mut probes = 0;
    let dir = repo().join("tests/data/hostile");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    cases.sort();
    assert!(cases.len() >= 7, "{cases:?}");
    for case in &cases {
        eprintln!("case {}", case.display());
        check(case, &mut b, &mut f, &mut probes);
    }
    let mut b = b.unwrap();
    // The waits were untouched: each is answered in its own session and completes.
    let answers = [
        (
            "approval.respond",
            "s1",
            json!({"approvalId": f.vars["a1"], "decision": "allow_once"}),
        ),
        (
            "ask.respond",
            "s2",
            json!({"askId": f.vars["q2"], "answer": "sqlite"}),
        ),
        (
            "plan.approve",
            "s3",
            json!({"planId": f.vars["p3"], "mode": "auto"}),
        ),
    ];
    for (ty, s, payload) in answers {
        let rid = format!("final-{s}");
        b.send(&command(ty, &rid, Some(&f.vars[s]), payload));
        let go = format!("{s}-go");
        b.until_on(&go, "session.completed");
    }
    assert_eq!(
        std::fs::read_to_string(f.ws.path().join("notes.md")).unwrap(),
        "notes\n"
    );
    b.send(&command("runtime.shutdown", "bye", None, json!({})));
    assert!(b.wait());
    b.assert_no_panic();
    for s in ["s1", "s2", "s3", "closed"] {
        assert_saw_all(f.home.path(), &f.vars[s], &b.seen);
    }
}

// ---- generated from docs/schema/command.schema.json ----

/// Each command's example line in docs/protocol.md, by type.
fn examples() -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(repo().join("docs/protocol.md")).unwrap();
    let schema = command_schema();
    let mut out = Vec::new();
    for variant in schema["oneOf"].as_array().unwrap() {
        let ty = variant["properties"]["type"]["const"].as_str().unwrap();
        let prefix = format!("{{\"version\":\"1.0\",\"type\":\"{ty}\",");
        let line = text
            .lines()
            .find(|l| l.starts_with(&prefix) && !l.contains("\"eventId\""))
            .unwrap_or_else(|| panic!("no example of command {ty} in docs/protocol.md"));
        out.push((ty.to_owned(), serde_json::from_str(line).unwrap()));
    }
    assert!(out.len() >= 30, "{}", out.len());
    out
}

fn command_schema() -> Value {
    serde_json::from_str(
        &std::fs::read_to_string(repo().join("docs/schema/command.schema.json")).unwrap(),
    )
    .unwrap()
}

fn resolve<'s>(schema: &'s Value, root: &'s Value) -> &'s Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let name = r.trim_start_matches("#/$defs/");
            resolve(&root["$defs"][name], root)
        }
        None => schema,
    }
}

/// The JSON types a schema allows, or `None` when it allows anything.
fn allowed(schema: &Value, root: &Value) -> Option<Vec<String>> {
    let s = resolve(schema, root);
    if let Some(c) = s.get("const") {
        return Some(vec![json_type(c).to_owned()]);
    }
    if s.get("enum").is_some() {
        return Some(vec!["string".into()]);
    }
    match s.get("type") {
        Some(Value::String(t)) => return Some(vec![t.clone()]),
        Some(Value::Array(ts)) => {
            return Some(ts.iter().map(|t| t.as_str().unwrap().to_owned()).collect())
        }
        _ => {}
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            let mut all = Vec::new();
            for b in branches {
                all.extend(allowed(b, root)?);
            }
            return Some(all);
        }
    }
    None
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value of a type `types` does not allow.
fn wrong_value(types: &[String]) -> Value {
    let has = |t: &str| types.iter().any(|x| x == t);
    if !has("integer") && !has("number") {
        json!(7)
    } else if !has("string") {
        json!("wrong")
    } else if !has("boolean") {
        json!(true)
    } else {
        json!([1])
    }
}

/// The object (or array item) branch of a schema, for looking inside.
fn structured<'s>(schema: &'s Value, root: &'s Value) -> &'s Value {
    let s = resolve(schema, root);
    for key in ["anyOf", "oneOf"] {
        if let Some(branches) = s.get(key).and_then(Value::as_array) {
            if let Some(b) = branches
                .iter()
                .map(|b| resolve(b, root))
                .find(|b| b.get("properties").is_some() || b.get("items").is_some())
            {
                return b;
            }
        }
    }
    s
}

/// Every (path, wrong value) of `value` under `schema`.
fn mutations(
    schema: &Value,
    root: &Value,
    value: &Value,
    path: &str,
    out: &mut Vec<(String, Value)>,
) {
    let s = structured(schema, root);
    if let (Some(props), Some(obj)) = (
        s.get("properties").and_then(Value::as_object),
        value.as_object(),
    ) {
        for (name, sub) in props {
            let p = format!("{path}.{name}");
            if let Some(types) = allowed(sub, root) {
                out.push((p.clone(), wrong_value(&types)));
            }
            if let Some(v) = obj.get(name) {
                mutations(sub, root, v, &p, out);
            }
        }
    }
    if let (Some(items), Some(first)) = (s.get("items"), value.as_array().and_then(|a| a.first())) {
        let p = format!("{path}[0]");
        if let Some(types) = allowed(items, root) {
            out.push((p.clone(), wrong_value(&types)));
        }
        mutations(items, root, first, &p, out);
    }
}

/// Sets the value at a path like `payload.messages[0].role`.
fn set_path(v: &mut Value, path: &str, new: Value) {
    let mut cur = v;
    let parts: Vec<&str> = path.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let (name, index) = match part.split_once('[') {
            Some((n, rest)) => (
                n,
                Some(rest.trim_end_matches(']').parse::<usize>().unwrap()),
            ),
            None => (*part, None),
        };
        let last = i == parts.len() - 1;
        if last && index.is_none() {
            cur[name] = new;
            return;
        }
        cur = &mut cur[name];
        if let Some(ix) = index {
            if last {
                cur[ix] = new;
                return;
            }
            cur = &mut cur[ix];
        }
    }
}

fn wrong_types(b: &mut Bridge, f: &Fixture) -> usize {
    let root = command_schema();
    let mut n = 0;
    for (ty, example) in examples() {
        let variant = root["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["properties"]["type"]["const"] == ty.as_str())
            .unwrap();
        let mut cases = Vec::new();
        // The envelope's own fields, then the payload's.
        for (name, sub) in root["properties"].as_object().unwrap() {
            if let Some(types) = allowed(sub, &root) {
                cases.push((name.clone(), wrong_value(&types)));
            }
        }
        mutations(
            &variant["properties"]["payload"],
            &root,
            &example["payload"],
            "payload",
            &mut cases,
        );
        for (path, value) in cases {
            n += 1;
            let rid = format!("wt{n}");
            let mut cmd = example.clone();
            cmd["requestId"] = json!(rid);
            if !cmd["sessionId"].is_null() {
                cmd["sessionId"] = json!(f.vars["s1"]);
            }
            set_path(&mut cmd, &path, value);
            b.send(&cmd.to_string());
            if path == "requestId" {
                // Unreadable: the answer carries a minted requestId.
                let env = b.next().unwrap();
                assert!(
                    matches!(&env.event, Event::Error(e) if e.code == ErrorCode::RequestInvalid),
                    "{ty} {path}: {env:?}"
                );
                continue;
            }
            let env = until_past_errors(b, &rid, |e| e.request_id == rid);
            let Some(e) = error_of(&env) else {
                panic!("{ty} with a wrong-typed {path} was accepted: {cmd} → {env:?}");
            };
            assert!(
                matches!(
                    e.code,
                    ErrorCode::RequestInvalid | ErrorCode::VersionMismatch
                ),
                "{ty} {path}: {e:?}"
            );
            if path.starts_with("payload") || path == "sessionId" {
                assert_eq!(
                    e.details["field"].as_str(),
                    Some(path.as_str()),
                    "{ty}: the error names another field: {e:?}"
                );
            }
        }
    }
    n
}

fn closed_session(b: &mut Bridge, f: &Fixture) -> usize {
    let mut n = 0;
    for (ty, example) in examples() {
        if example["sessionId"].is_null() {
            continue;
        }
        for target in [f.vars["closed"].as_str(), "sess_never_existed", "../../etc"] {
            n += 1;
            let rid = format!("cs{n}");
            let mut cmd = example.clone();
            cmd["requestId"] = json!(rid);
            cmd["sessionId"] = json!(target);
            b.send(&cmd.to_string());
            let env = until_past_errors(b, &rid, |e| e.request_id == rid);
            let e =
                error_of(&env).unwrap_or_else(|| panic!("{ty} on {target} was accepted: {env:?}"));
            assert_eq!(e.code, ErrorCode::SessionNotFound, "{ty}: {e:?}");
        }
    }
    n
}
