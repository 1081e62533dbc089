//! The envelope on the wire: round trips of every event and command type, field
//! order, meta and payload rules, unknown types, the sequence rule, and validation
//! against the checked-in JSON Schemas.

use std::path::Path;

use keel_envelope::codec::{decode_command, decode_envelope, encode_command, encode_line, Limits};
use keel_envelope::events::AssistantDelta;
use keel_envelope::{
    CommandType, Envelope, Event, EventType, Meta, SequenceChecker, SequenceGap, Sequencer, Source,
};
use serde_json::Value;

use crate::samples::{sample_command, sample_envelopes, sample_event, SESSION, T0};

fn delta(request: &str, sequence: u64) -> Envelope {
    Envelope::new(
        Some(SESSION.into()),
        request.into(),
        format!("evt_{request}_{sequence}"),
        T0,
        Source::Runtime,
        sequence,
        Event::AssistantDelta(AssistantDelta::new("hi")),
    )
}

#[test]
fn every_event_type_has_a_sample_of_its_own_type() {
    for &t in EventType::ALL {
        let event = sample_event(t);
        assert_eq!(event.event_type(), Some(t), "sample for {}", t.as_str());
        assert_eq!(event.type_name(), t.as_str());
        assert_eq!(EventType::from_name(t.as_str()), Some(t));
    }
}

#[test]
fn every_event_type_round_trips() {
    let envs = sample_envelopes();
    assert_eq!(envs.len(), EventType::ALL.len());
    for env in envs {
        let line = encode_line(&env);
        assert_eq!(line.last(), Some(&b'\n'), "{}", env.type_name());
        assert_eq!(
            line.iter().filter(|b| **b == b'\n').count(),
            1,
            "one line per envelope: {}",
            env.type_name()
        );
        let back = decode_envelope(&line)
            .unwrap_or_else(|e| panic!("{} does not decode: {e}", env.type_name()));
        assert_eq!(back, env, "{}", env.type_name());
        // `payload_value` is the payload as written.
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(
            env.event.payload_value(),
            v["payload"],
            "{}",
            env.type_name()
        );
        assert_eq!(v["type"], env.type_name());
        // Encoding the decoded value again gives the same bytes.
        assert_eq!(encode_line(&back), line, "{}", env.type_name());
    }
}

#[test]
fn encoding_uses_the_documented_field_order() {
    let with_meta = delta("req_1", 1).with_meta(Meta {
        trace_id: Some("trace_1".into()),
        ..Meta::default()
    });
    let line = String::from_utf8(encode_line(&with_meta)).unwrap();
    let order = [
        "version",
        "sessionId",
        "requestId",
        "eventId",
        "type",
        "timestamp",
        "source",
        "sequence",
        "payload",
        "meta",
    ];
    let v: serde_json::Map<String, Value> = serde_json::from_str(&line).unwrap();
    assert_eq!(v.len(), order.len(), "{line}");
    let mut last = 0;
    for key in order {
        let pos = line
            .find(&format!("\"{key}\":"))
            .unwrap_or_else(|| panic!("{key} missing in {line}"));
        assert!(pos >= last, "{key} out of order in {line}");
        last = pos;
    }
    assert!(line
        .starts_with("{\"version\":\"1.0\",\"sessionId\":\"sess_0001\",\"requestId\":\"req_1\","));
}

#[test]
fn meta_is_omitted_when_empty() {
    let env = delta("req_1", 1).with_meta(Meta::default());
    assert_eq!(env.meta, None);
    let v: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
    assert!(v.get("meta").is_none(), "{v}");

    let env = delta("req_1", 1).with_meta(Meta {
        reply_to: Some("req_9".into()),
        ..Meta::default()
    });
    let v: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
    assert_eq!(v["meta"], serde_json::json!({ "replyTo": "req_9" }));
    assert_eq!(env.reply_to(), Some("req_9"));
}

#[test]
fn session_id_is_null_not_absent_for_runtime_events() {
    let env = sample_envelopes()
        .into_iter()
        .find(|e| e.type_name() == "runtime.ready")
        .unwrap();
    let v: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
    assert_eq!(v.get("sessionId"), Some(&Value::Null));
}

#[test]
fn payload_is_always_an_object() {
    for env in sample_envelopes() {
        let v: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
        assert!(
            v["payload"].is_object(),
            "{}: {}",
            env.type_name(),
            v["payload"]
        );
    }
    // A decoder refuses a payload that is not an object, even for unknown types.
    for payload in ["[]", "\"x\"", "1", "null"] {
        let line = format!(
            r#"{{"version":"1.0","sessionId":null,"requestId":"r","eventId":"e","type":"x.new","timestamp":1,"source":"runtime","sequence":1,"payload":{payload}}}"#
        );
        assert!(decode_envelope(line.as_bytes()).is_err(), "{payload}");
    }
}

#[test]
fn unknown_event_types_decode_to_unknown_and_round_trip() {
    let line = br#"{"version":"1.3","sessionId":"sess_1","requestId":"req_1","eventId":"evt_1","type":"voice.chunk","timestamp":5,"source":"runtime","sequence":3,"payload":{"bytes":"AAAA","n":1},"meta":{"replay":true,"newMetaField":1},"newTopField":true}"#;
    let env = decode_envelope(line).unwrap();
    match &env.event {
        Event::Unknown {
            event_type,
            payload,
        } => {
            assert_eq!(event_type, "voice.chunk");
            assert_eq!(payload, &serde_json::json!({ "bytes": "AAAA", "n": 1 }));
        }
        other => panic!("expected Event::Unknown, got {other:?}"),
    }
    assert_eq!(env.event.event_type(), None);
    assert_eq!(env.type_name(), "voice.chunk");
    assert_eq!(env.version, "1.3");
    assert_eq!(env.meta.as_ref().and_then(|m| m.replay), Some(true));
    let again = decode_envelope(&encode_line(&env)).unwrap();
    assert_eq!(again, env);
}

#[test]
fn a_known_type_with_a_bad_payload_is_an_error() {
    let line = br#"{"version":"1.0","sessionId":"s","requestId":"r","eventId":"e","type":"assistant.delta","timestamp":1,"source":"runtime","sequence":1,"payload":{"text":5}}"#;
    let err = decode_envelope(line).unwrap_err();
    assert_eq!(err.code, keel_envelope::ErrorCode::RequestInvalid);
    assert_eq!(err.details["reason"], "invalid_envelope");
}

#[test]
fn every_command_type_round_trips() {
    for &t in CommandType::ALL {
        let cmd = sample_command(t);
        assert_eq!(cmd.command_type(), t);
        let line = encode_command(&cmd);
        assert_eq!(line.last(), Some(&b'\n'));
        let back = decode_command(&line, Limits::default())
            .unwrap_or_else(|e| panic!("{} does not decode: {e}", t.as_str()));
        assert_eq!(back, cmd, "{}", t.as_str());
        assert_eq!(CommandType::from_name(t.as_str()), Some(t));
    }
}

#[test]
fn sequencer_and_checker_agree_on_interleaved_requests() {
    let mut seq = Sequencer::new();
    let mut check = SequenceChecker::new();
    for request in ["a", "b", "a", "a", "c", "b"] {
        let n = seq.next(request);
        assert_eq!(check.check(&delta(request, n)), Ok(()));
    }
    assert_eq!(seq.last("a"), 3);
    assert_eq!(seq.last("b"), 2);
    assert_eq!(seq.last("zzz"), 0);
}

#[test]
fn sequence_checker_reports_gaps_repeats_and_bad_starts() {
    let mut check = SequenceChecker::new();
    assert_eq!(check.check(&delta("r", 1)), Ok(()));
    assert_eq!(check.check(&delta("r", 2)), Ok(()));
    // A gap: 3 is missing.
    assert_eq!(
        check.check(&delta("r", 4)),
        Err(SequenceGap {
            request_id: "r".into(),
            expected: 3,
            got: 4
        })
    );
    // The checker resynchronises on the highest sequence seen.
    assert_eq!(check.check(&delta("r", 5)), Ok(()));
    // A repeat.
    assert_eq!(
        check.check(&delta("r", 5)),
        Err(SequenceGap {
            request_id: "r".into(),
            expected: 6,
            got: 5
        })
    );
    // A stream must start at 1.
    assert_eq!(
        check.check(&delta("other", 2)),
        Err(SequenceGap {
            request_id: "other".into(),
            expected: 1,
            got: 2
        })
    );
    // Streams are independent.
    assert_eq!(check.check(&delta("third", 1)), Ok(()));
}

#[test]
fn sequencer_restore_never_goes_backwards() {
    let mut seq = Sequencer::new();
    seq.restore("r", 7);
    seq.restore("r", 3);
    assert_eq!(seq.next("r"), 8);
}

fn validator(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/schema")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::validator_for(&schema).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

#[test]
fn every_event_line_validates_against_the_envelope_schema() {
    let v = validator("envelope.schema.json");
    for env in sample_envelopes() {
        let instance: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
        let errs = errors(&v, &instance);
        assert!(errs.is_empty(), "{}: {errs:#?}", env.type_name());
    }
}

#[test]
fn the_envelope_schema_rejects_broken_events() {
    let v = validator("envelope.schema.json");
    let env = sample_envelopes().remove(0);
    let good: Value = serde_json::from_slice(&encode_line(&env)).unwrap();
    assert!(v.is_valid(&good));
    let mut cases = Vec::new();
    for key in ["requestId", "sequence", "payload", "version"] {
        let mut bad = good.clone();
        bad.as_object_mut().unwrap().remove(key);
        cases.push((format!("without {key}"), bad));
    }
    let mut bad = good.clone();
    bad["sequence"] = serde_json::json!(0);
    cases.push(("sequence 0".into(), bad));
    let mut bad = good.clone();
    bad["version"] = serde_json::json!("2.0");
    cases.push(("version 2.0".into(), bad));
    let mut bad = good.clone();
    bad["payload"] = serde_json::json!({ "protocolVersion": 1 });
    cases.push(("mistyped payload".into(), bad));
    for (name, bad) in cases {
        assert!(!v.is_valid(&bad), "{name} should not validate");
    }
}

#[test]
fn every_command_line_validates_against_the_command_schema() {
    let v = validator("command.schema.json");
    for &t in CommandType::ALL {
        let instance: Value = serde_json::from_slice(&encode_command(&sample_command(t))).unwrap();
        let errs = errors(&v, &instance);
        assert!(errs.is_empty(), "{}: {errs:#?}", t.as_str());
    }
}

#[test]
fn the_command_schema_rejects_what_the_codec_rejects() {
    let v = validator("command.schema.json");
    let good: Value = serde_json::from_slice(&encode_command(&sample_command(
        CommandType::SessionSetMode,
    )))
    .unwrap();
    assert!(v.is_valid(&good));
    let mut no_session = good.clone();
    no_session.as_object_mut().unwrap().remove("sessionId");
    let mut bad_mode = good.clone();
    bad_mode["payload"]["mode"] = serde_json::json!("yolo");
    let mut empty_request = good.clone();
    empty_request["requestId"] = serde_json::json!("");
    for (name, bad) in [
        ("no sessionId", no_session),
        ("mode yolo", bad_mode),
        ("empty requestId", empty_request),
    ] {
        assert!(!v.is_valid(&bad), "{name} should not validate");
        let line = serde_json::to_vec(&bad).unwrap();
        assert!(
            decode_command(&line, Limits::default()).is_err(),
            "{name} should not decode"
        );
    }
}
