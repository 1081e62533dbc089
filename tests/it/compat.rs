//! Forward compatibility: envelopes "from a later 1.x" (`tests/data/compat/later-1x.jsonl`:
//! a newer minor version, new fields everywhere, a value this version does not know in
//! every field of a growable enum, new event types, new error codes) decode with this
//! version's decoder, and re-encoding them gives back every value it kept.
//!
//! The rule checked (docs/protocol.md, "Compatibility"): a field this version does not
//! know (named `later…` in the corpus) is dropped from a known payload; everything else
//! comes back as it was, unknown enum values and whole unknown events included. The
//! TypeScript client reads the same corpus (`hosts/electron/test/compat.test.ts`).

use std::collections::BTreeSet;
use std::path::Path;

use keel_envelope::codec::{decode_envelope, encode_line};
use keel_envelope::error::ErrorCode;
use keel_envelope::events::Event;
use keel_envelope::tools::{
    Decision, EntryKind, ListDirResult, PolicyVerdict, RunShellResult, SandboxKind,
};
use keel_envelope::types::PermissionMode;
use serde_json::{json, Value};

fn corpus() -> Vec<(usize, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/compat/later-1x.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.to_owned()))
        .collect()
}

/// `v` without the keys this version does not know (`later…`).
fn without_later(v: &Value) -> Value {
    match v {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| !k.starts_with("later"))
                .map(|(k, v)| (k.clone(), without_later(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_later).collect()),
        other => other.clone(),
    }
}

/// Whether a schema definition is a wire enum: its known values, or any other string.
fn known_values(def: &Value) -> Option<Vec<&str>> {
    let any = def.get("anyOf")?.as_array()?;
    let (known, fallback) = (any.first()?, any.get(1)?);
    if fallback.get("type")? != "string" {
        return None;
    }
    let values = known.get("oneOf")?.as_array()?;
    values.iter().map(|b| b.get("const")?.as_str()).collect()
}

/// Walks `v` along `schema`, noting every wire enum that holds a value it does not know.
fn unknown_enums(v: &Value, schema: &Value, defs: &Value, found: &mut BTreeSet<String>) {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or_default();
        let def = &defs[name];
        if let (Some(known), Some(s)) = (known_values(def), v.as_str()) {
            if !known.contains(&s) {
                found.insert(name.to_owned());
            }
            return;
        }
        return unknown_enums(v, def, defs, found);
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            for o in options {
                unknown_enums(v, o, defs, found);
            }
        }
    }
    match v {
        Value::Object(map) => {
            if let Some(props) = schema.get("properties") {
                for (k, x) in map {
                    if let Some(s) = props.get(k) {
                        unknown_enums(x, s, defs, found);
                    }
                }
            }
            if let Some(s) = schema.get("additionalProperties").filter(|s| s.is_object()) {
                for x in map.values() {
                    unknown_enums(x, s, defs, found);
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for x in items {
                    unknown_enums(x, s, defs, found);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn envelopes_of_a_later_minor_decode_and_keep_their_unknown_values() {
    let schema = keel_envelope::generate::events_schema();
    let defs = &schema["$defs"];
    let branches: Vec<(&str, &Value)> = schema["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["properties"]["type"]["const"].as_str().unwrap(),
                &b["properties"]["payload"],
            )
        })
        .collect();
    let mut found = BTreeSet::new();
    let mut unknown_types = 0;
    let mut failures = Vec::new();
    for (n, line) in corpus() {
        let original: Value = serde_json::from_str(&line).unwrap();
        let env = match decode_envelope(line.as_bytes()) {
            Ok(env) => env,
            Err(e) => {
                failures.push(format!("line {n}: does not decode: {e}"));
                continue;
            }
        };
        let again: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
        let mut want = without_later(&original);
        if let Event::Unknown { event_type, .. } = &env.event {
            // An unknown event keeps its whole payload, new fields too.
            unknown_types += 1;
            assert_eq!(event_type, original["type"].as_str().unwrap());
            want["payload"] = original["payload"].clone();
        }
        if again != want {
            failures.push(format!(
                "line {n} ({}): re-encoded\n  {again}\nexpected\n  {want}",
                original["type"]
            ));
        }
        unknown_enums(
            &original["source"],
            &schema["properties"]["source"],
            defs,
            &mut found,
        );
        if let Some(meta) = original.get("meta") {
            unknown_enums(meta, &schema["properties"]["meta"], defs, &mut found);
        }
        if let Some((_, payload_schema)) = branches.iter().find(|(t, _)| *t == original["type"]) {
            unknown_enums(&original["payload"], payload_schema, defs, &mut found);
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(unknown_types >= 3, "the corpus has new event types");
    // Every wire enum an event can carry holds an unknown value somewhere in the corpus.
    let wire: BTreeSet<String> = defs
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, d)| known_values(d).is_some())
        .map(|(k, _)| k.clone())
        .collect();
    let missing: Vec<&String> = wire.difference(&found).collect();
    assert!(
        missing.is_empty(),
        "no unknown value in the corpus for {missing:?}"
    );
}

#[test]
fn an_unknown_error_code_is_kept_and_reads_as_unknown() {
    let line = corpus()
        .into_iter()
        .map(|(_, l)| l)
        .find(|l| l.contains("\"type\":\"error\""))
        .unwrap();
    let env = decode_envelope(line.as_bytes()).unwrap();
    let Event::Error(e) = &env.event else {
        panic!("{env:?}")
    };
    assert!(e.code.is_unknown());
    assert_eq!(e.code, ErrorCode::Unknown("later_errorcode".into()));
    assert_eq!(e.code.to_string(), "later_errorcode");
    // A host's match needs a wildcard arm, which is where unknown codes go.
    let generic = !matches!(e.code, ErrorCode::SessionNotFound | ErrorCode::ModelError);
    assert!(generic);
}

#[test]
fn tool_results_of_a_later_minor_keep_their_unknown_values() {
    let shell = json!({"exitCode": 0, "stdout": "", "stderr": "", "timedOut": false,
        "truncated": false, "durationMs": 3, "sandboxed": true, "sandbox": "later_jail",
        "laterField": 1});
    let r: RunShellResult = serde_json::from_value(shell.clone()).unwrap();
    assert_eq!(r.sandbox, SandboxKind::Unknown("later_jail".into()));
    assert_eq!(serde_json::to_value(&r).unwrap(), without_later(&shell));

    let list = json!({"path": ".", "truncated": false, "entries": [
        {"path": "a", "kind": "later_kind", "size": 0, "depth": 1}]});
    let r: ListDirResult = serde_json::from_value(list.clone()).unwrap();
    assert_eq!(r.entries[0].kind, EntryKind::Unknown("later_kind".into()));
    assert_eq!(serde_json::to_value(&r).unwrap(), list);

    let verdict = json!({"decision": "later_decision", "level": "later_level",
        "riskLevel": "later_risk", "reason": "r", "actionType": "a", "scope": []});
    let v: PolicyVerdict = serde_json::from_value(verdict.clone()).unwrap();
    assert_eq!(v.decision, Decision::Unknown("later_decision".into()));
    assert_eq!(serde_json::to_value(&v).unwrap(), verdict);
}

#[test]
fn what_the_kernel_receives_accepts_the_known_values_only() {
    // A host built against a later 1.x may send a mode this kernel does not know: it is
    // refused (`invalid_value`), never taken for another mode.
    let line = br#"{"version":"1.0","type":"session.set_mode","requestId":"r","sessionId":"s","payload":{"mode":"later_mode"}}"#;
    let err = keel_envelope::codec::decode_command(line, Default::default()).unwrap_err();
    assert_eq!(err.error.details["reason"], "invalid_value");
    assert_eq!(err.error.details["field"], "payload.mode");
    // The same value in an event is kept.
    let mode: PermissionMode = serde_json::from_value(json!("later_mode")).unwrap();
    assert_eq!(mode.as_str(), "later_mode");
}
