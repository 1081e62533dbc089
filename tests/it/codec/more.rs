//! More codec cases: versions, payload fields, round trips.

use keel_testsupport::Rng;

use super::*;

#[test]
fn unknown_fields_are_ignored() {
    let cmd = accept(
        br#"{"version":"1.0","type":"session.set_mode","requestId":"r","sessionId":"s","payload":{"mode":"plan","reason":"later"},"traceparent":"00-abc","extra":{"a":[1,2]}}"#,
    );
    assert_eq!(cmd.request_id, "r");
    assert_eq!(cmd.session_id.as_deref(), Some("s"));
    match cmd.payload {
        CommandPayload::SessionSetMode(p) => assert_eq!(p.mode, PermissionMode::Plan),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_newer_minor_version_is_accepted() {
    let cmd = accept(br#"{"version":"1.7","type":"session.list","requestId":"r"}"#);
    assert_eq!(cmd.version, "1.7");
    assert_eq!(cmd.command_type(), CommandType::SessionList);
}

#[test]
fn crlf_line_ending_is_accepted() {
    let cmd = accept(b"{\"version\":\"1.0\",\"type\":\"session.list\",\"requestId\":\"r\"}\r\n");
    assert_eq!(cmd.command_type(), CommandType::SessionList);
    let cmd = accept(b"{\"version\":\"1.0\",\"type\":\"session.list\",\"requestId\":\"r\"}\n");
    assert_eq!(cmd.command_type(), CommandType::SessionList);
}

#[test]
fn payload_may_be_omitted_for_a_command_without_required_fields() {
    let cmd =
        accept(br#"{"version":"1.0","type":"request.interrupt","requestId":"r","sessionId":"s"}"#);
    assert_eq!(cmd.command_type(), CommandType::RequestInterrupt);
    let cmd = accept(br#"{"version":"1.0","type":"session.start","requestId":"r"}"#);
    assert_eq!(cmd.session_id, None);
    match cmd.payload {
        CommandPayload::SessionStart(p) => {
            assert_eq!(p.workspace_path, None);
            assert_eq!(p.permission_mode, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn escaped_keys_and_values_decode() {
    // A key written with an escape cannot be borrowed from the line.
    let cmd = accept(
        br#"{"version":"1.0","type":"session.resume","request\u0049d":"r\"1","payload":{"sessionId":"s","afterSequence":{"requestId":"q","sequence":4}}}"#,
    );
    assert_eq!(cmd.request_id, "r\"1");
    match cmd.payload {
        CommandPayload::SessionResume(p) => assert_eq!(p.after_sequence, Some(Cursor::new("q", 4))),
        other => panic!("{other:?}"),
    }
    // An escaped key still gets a field error with the requestId echoed.
    check(
        br#"{"versio\u006e":"1.0","type":"session.set_mode","requestId":"r15","sessionId":"s","payload":{}}"#,
        invalid("missing_field", Some("payload.mode"), Some("r15")),
    );
}

#[test]
fn duplicate_keys_take_the_last_value() {
    let cmd = accept(
        br#"{"version":"1.0","type":"session.list","requestId":"first","requestId":"second"}"#,
    );
    assert_eq!(cmd.request_id, "second");
    check(
        br#"{"version":"1.0","type":"session.set_mode","requestId":"r","requestId":"r17","sessionId":"s","payload":{"mode":"plan"},"payload":{}}"#,
        invalid("missing_field", Some("payload.mode"), Some("r17")),
    );
}

#[test]
fn deeply_nested_json_neither_crashes_nor_leaks_into_typed_fields() {
    // Deep nesting in an unknown field is skipped without recursion: accepted.
    let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    let line = format!(
        r#"{{"version":"1.0","type":"session.list","requestId":"r","x":{}}}"#,
        deep(1_000_000)
    );
    assert!(decode(line.as_bytes()).is_ok());
    // In a free-form JSON field the parser's depth limit answers with a field error.
    let line = format!(
        r#"{{"version":"1.0","type":"task-graph.update-node","requestId":"r16","sessionId":"s","payload":{{"nodeId":"a","updates":{{"result":{}}}}}}}"#,
        deep(100_000)
    );
    let err = decode(line.as_bytes()).unwrap_err();
    assert_eq!(err.error.details["reason"], "invalid_value");
    assert_eq!(err.request_id.as_deref(), Some("r16"));
    let field = err.error.details["field"].as_str().unwrap();
    assert!(field.starts_with("payload.updates.result[0]"), "{field}");
}

// ---- the data-driven corpus --------------------------------------------------------

fn from_hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Runs one corpus case; returns its mismatches.
fn run_case(case: &Value) -> Vec<String> {
    let line: Vec<u8> = match (case.get("line"), case.get("lineHex")) {
        (Some(Value::String(s)), None) => s.as_bytes().to_vec(),
        (None, Some(Value::String(h))) => from_hex(h),
        _ => return vec!["case needs `line` (string) or `lineHex`".into()],
    };
    let limits = match case.get("maxLineBytes").and_then(Value::as_u64) {
        Some(n) => Limits {
            max_line_bytes: n as usize,
        },
        None => Limits::default(),
    };
    let result = decode_command(&line, limits);
    match (case.get("expect"), case.get("accept")) {
        (Some(expect), None) => {
            let code = match serde_json::from_value::<ErrorCode>(expect["code"].clone()) {
                Ok(c) => c,
                Err(e) => return vec![format!("bad expect.code: {e}")],
            };
            let Some(reason) = expect["reason"].as_str() else {
                return vec!["expect.reason missing".into()];
            };
            let want = Expect {
                code,
                reason,
                field: expect.get("field").and_then(Value::as_str),
                request_id: expect.get("requestId").and_then(Value::as_str),
            };
            match result {
                Ok(cmd) => vec![format!("decoded to {cmd:?}")],
                Err(err) => mismatches(&err, want),
            }
        }
        (None, Some(Value::String(ty))) => match result {
            Ok(cmd) if cmd.command_type().as_str() == ty => Vec::new(),
            Ok(cmd) => vec![format!(
                "decoded to {}, expected {ty}",
                cmd.command_type().as_str()
            )],
            Err(err) => vec![format!(
                "expected to decode, got {}",
                serde_json::to_string(&err.error).unwrap()
            )],
        },
        _ => vec!["case needs `expect` or `accept` (a type name)".into()],
    }
}

#[test]
fn codec_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/codec");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus in {}", dir.display());
    let mut failures = Vec::new();
    let mut count = 0;
    let mut seen = std::collections::BTreeSet::new();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(file).unwrap();
        for (i, raw) in text.lines().enumerate() {
            if raw.trim().is_empty() || raw.starts_with("//") {
                continue;
            }
            count += 1;
            let case: Value = match serde_json::from_str(raw) {
                Ok(v) => v,
                Err(e) => {
                    failures.push(format!("{name}:{}: not a case: {e}", i + 1));
                    continue;
                }
            };
            if let Some(reason) = case["expect"]["reason"].as_str() {
                seen.insert(reason.to_owned());
            }
            let label = case["name"].as_str().unwrap_or("?").to_owned();
            for m in run_case(&case) {
                failures.push(format!("{name}:{} ({label}): {m}", i + 1));
            }
        }
    }
    assert!(count >= 30, "corpus too small: {count} cases");
    let unseen: Vec<_> = REASONS.iter().filter(|r| !seen.contains(**r)).collect();
    assert!(
        unseen.is_empty(),
        "reasons without a corpus case: {unseen:?}"
    );
    assert!(
        failures.is_empty(),
        "{} corpus mismatch(es):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---- randomised: the decoder never panics ------------------------------------------

const TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b":",
    b",",
    b"\"",
    b"\\",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"\"requestId\"",
    b"\"version\"",
    b"\"1.0\"",
    b"\"2.0\"",
    b"\"type\"",
    b"\"payload\"",
    b"\"sessionId\"",
    b"\"request.send\"",
    b"\\u0000",
    b"\\ud800",
    b"\xff",
    b"\xc3",
    b"\r",
    b"\n",
    b" ",
];

fn mutate(rng: &mut Rng, line: &mut Vec<u8>) {
    match rng.below(6) {
        0 if !line.is_empty() => {
            let i = rng.below(line.len());
            line[i] = rng.next() as u8;
        }
        1 if !line.is_empty() => {
            let i = rng.below(line.len());
            let j = (i + rng.below(16)).min(line.len());
            line.drain(i..j);
        }
        2 => {
            let i = rng.below(line.len() + 1);
            let t = TOKENS[rng.below(TOKENS.len())];
            line.splice(i..i, t.iter().copied());
        }
        3 if !line.is_empty() => {
            let n = rng.below(line.len());
            line.truncate(n);
        }
        4 if line.len() > 2 => {
            let i = rng.below(line.len());
            let j = rng.below(line.len());
            line.swap(i, j);
        }
        _ => {
            let i = rng.below(line.len() + 1);
            let n = rng.below(8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            line.splice(i..i, bytes);
        }
    }
}

fn show(line: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(line))
}

/// Checks the invariants of one decode; panics with the input on a violation.
fn decode_never_panics(line: &[u8], limits: Limits) {
    let result = std::panic::catch_unwind(|| decode_command(line, limits));
    let Ok(result) = result else {
        panic!("decode_command panicked on {}", show(line));
    };
    match result {
        Ok(cmd) => {
            // Whatever decodes re-encodes to a line that decodes to the same command.
            let again = decode_command(&encode_command(&cmd), Limits::default());
            assert_eq!(again.as_ref().ok(), Some(&cmd), "{}", show(line));
            assert!(!cmd.request_id.is_empty(), "{}", show(line));
        }
        Err(err) => {
            let at = show(line);
            assert!(
                matches!(
                    err.error.code,
                    ErrorCode::RequestInvalid | ErrorCode::VersionMismatch
                ),
                "{at}: {}",
                err.error.code
            );
            let reason = err.error.details["reason"].as_str().unwrap_or("");
            assert!(REASONS.contains(&reason), "{at}: reason {reason:?}");
            if let Some(field) = err.error.details.get("field") {
                assert!(field.is_string(), "{at}");
            }
            if let Some(id) = &err.request_id {
                assert!(!id.is_empty(), "{at}: empty requestId echoed");
            }
        }
    }
}

#[test]
fn decode_never_panics_on_random_bytes() {
    let mut rng = Rng(0x5eed_0001_cafe_f00d);
    let limits = Limits {
        max_line_bytes: 512,
    };
    for _ in 0..20_000 {
        let n = rng.below(300);
        let mut line = Vec::with_capacity(n);
        while line.len() < n {
            if rng.below(3) == 0 {
                line.push(rng.next() as u8);
            } else {
                line.extend_from_slice(TOKENS[rng.below(TOKENS.len())]);
            }
        }
        decode_never_panics(&line, limits);
    }
}

#[test]
fn decode_never_panics_on_mutated_valid_lines() {
    let mut rng = Rng(0x5eed_0002_dead_beef);
    let seeds: Vec<Vec<u8>> = CommandType::ALL
        .iter()
        .map(|&t| encode_command(&sample_command(t)))
        .collect();
    let mut accepted = 0;
    let mut rejected = 0;
    for round in 0..20_000 {
        let mut line = seeds[round % seeds.len()].clone();
        for _ in 0..=rng.below(4) {
            mutate(&mut rng, &mut line);
        }
        decode_never_panics(&line, Limits::default());
        match decode(&line) {
            Ok(_) => accepted += 1,
            Err(_) => rejected += 1,
        }
    }
    // The mutations exercise both paths.
    assert!(accepted > 100, "only {accepted} mutated lines decoded");
    assert!(rejected > 100, "only {rejected} mutated lines were refused");
}
