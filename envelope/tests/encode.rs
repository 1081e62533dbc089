//! The envelope encoder writes exactly what `serde_json` writes for the same
//! envelope: random strings (control characters, quotes, backslashes, non-ASCII,
//! U+2028/U+2029, astral characters) in every string field, random JSON values in the
//! tool payloads and unknown events, random meta.

// Tests may unwrap: a panic is a failed test with its reason.
#![allow(clippy::unwrap_used)]

use keel_envelope::codec::{encode_into, encode_line};
use keel_envelope::error::ErrorCategory;
use keel_envelope::events::{
    AssistantDelta, AssistantFinal, AssistantMessage, AssistantThoughtSummary, RequestAccepted,
    ToolCallCompleted, ToolCallProgress, ToolCallStarted,
};
use keel_envelope::types::PermissionLevel;
use keel_envelope::{Envelope, ErrorCode, ErrorPayload, Event, Meta, Source};
use proptest::prelude::*;
use serde_json::{Map, Number, Value};

/// Characters that exercise every branch of the escaper, plus plain text.
fn tricky_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => proptest::char::range('a', 'z'),
        1 => proptest::char::range('\u{0}', '\u{1f}'),
        1 => Just('"'),
        1 => Just('\\'),
        1 => Just('/'),
        1 => Just('\u{7f}'),
        1 => prop_oneof![Just('\u{2028}'), Just('\u{2029}')],
        1 => prop_oneof![Just('é'), Just('ß'), Just('一'), Just('😀'), Just('\u{ffff}')],
        1 => any::<char>(),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(tricky_char(), 0..48).prop_map(|cs| cs.into_iter().collect())
}

fn number() -> impl Strategy<Value = Number> {
    prop_oneof![
        any::<u64>().prop_map(Number::from),
        any::<i64>().prop_map(Number::from),
        any::<f64>().prop_filter_map("finite", Number::from_f64),
        Just(Number::from_f64(-0.0).unwrap()),
        Just(Number::from_f64(1e300).unwrap()),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        number().prop_map(Value::Number),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((text(), inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn level() -> impl Strategy<Value = PermissionLevel> {
    prop_oneof![
        Just(PermissionLevel::Read),
        Just(PermissionLevel::Write),
        Just(PermissionLevel::Execute),
        Just(PermissionLevel::Elevated),
    ]
}

fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        Just(Source::Runtime),
        Just(Source::Tool),
        Just(Source::Bridge),
        Just(Source::Host),
        Just(Source::Renderer),
        Just(Source::DesktopMain),
        Just(Source::CliRuntime),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        text().prop_map(|text| Event::AssistantDelta(AssistantDelta::new(text))),
        text().prop_map(|text| Event::AssistantMessage(AssistantMessage::new(text))),
        text().prop_map(|text| Event::AssistantThoughtSummary(AssistantThoughtSummary::new(text))),
        text().prop_map(|text| Event::AssistantFinal(AssistantFinal::new(text))),
        (text(), text(), value(), any::<u64>()).prop_map(|(id, name, result, ms)| {
            Event::ToolCallCompleted(ToolCallCompleted::new(id, name, result, ms))
        }),
        (text(), text(), value(), level()).prop_map(|(id, name, arguments, level)| {
            Event::ToolCallStarted(ToolCallStarted::new(id, name, arguments, level))
        }),
        (text(), text(), text()).prop_map(|(id, stream, chunk)| {
            Event::ToolCallProgress(ToolCallProgress::new(id, stream, chunk))
        }),
        (text(), value()).prop_map(|(event_type, payload)| Event::Unknown {
            event_type,
            payload
        }),
        // Payloads that take the general (derived `Serialize`) path.
        (text(), any::<bool>()).prop_map(|(message, from_queue)| {
            Event::RequestAccepted(RequestAccepted::new(message, from_queue))
        }),
        (text(), value()).prop_map(|(message, details)| {
            let mut e = ErrorPayload::new(ErrorCode::ToolExecutionFailed, message)
                .category(ErrorCategory::Runtime);
            e.details = details;
            Event::Error(e)
        }),
    ]
}

fn meta() -> impl Strategy<Value = Option<Meta>> {
    proptest::option::of(
        (
            proptest::option::of(text()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(text()),
            proptest::option::of(text()),
            proptest::option::of(level()),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(
                |(reply_to, duration_ms, trace_id, model, permission_level, replay)| Meta {
                    reply_to,
                    duration_ms,
                    trace_id,
                    model,
                    permission_level,
                    replay,
                },
            ),
    )
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (
        (text(), proptest::option::of(text()), text(), text()),
        (any::<u64>(), source(), any::<u64>(), event(), meta()),
    )
        .prop_map(
            |(
                (version, session_id, request_id, event_id),
                (timestamp, source, sequence, event, meta),
            )| {
                // `meta` is set directly so that an empty `Some(Meta)` is covered too.
                Envelope {
                    version,
                    session_id,
                    request_id,
                    event_id,
                    timestamp,
                    source,
                    sequence,
                    event,
                    meta,
                }
            },
        )
}

fn with_serde_json(env: &Envelope) -> Vec<u8> {
    let mut want = serde_json::to_vec(env).unwrap();
    want.push(b'\n');
    want
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn encoder_writes_what_serde_json_writes(env in envelope(), prefix in text()) {
        let want = with_serde_json(&env);
        prop_assert_eq!(String::from_utf8(encode_line(&env)).unwrap(), String::from_utf8(want.clone()).unwrap());
        // Appending to a buffer that already holds bytes keeps them.
        let mut buf = prefix.clone().into_bytes();
        encode_into(&env, &mut buf);
        prop_assert_eq!(&buf[..prefix.len()], prefix.as_bytes());
        prop_assert_eq!(&buf[prefix.len()..], &want[..]);
    }
}

#[test]
fn long_strings_with_escapes_at_every_position() {
    for len in 0..40 {
        for pos in 0..len {
            for special in ['"', '\\', '\n', '\u{1}', '\u{1f}', 'é', '\u{2028}'] {
                let mut text: String = "x".repeat(len);
                text.replace_range(pos..=pos, &special.to_string());
                let env = Envelope::new(
                    Some("sess_1".into()),
                    "req_1".into(),
                    "evt_1".into(),
                    1,
                    Source::Runtime,
                    1,
                    Event::AssistantDelta(AssistantDelta::new(text.clone())),
                );
                assert_eq!(encode_line(&env), with_serde_json(&env), "{text:?}");
            }
        }
    }
}
