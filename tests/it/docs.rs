//! The documentation keeps up with the code: every command type, event type, error
//! code and codec reason appears in `docs/protocol.md`, and the examples there are
//! generated from real values.
//!
//! `KEEL_UPDATE_GENERATED=1 cargo test --workspace --test it docs` rewrites the generated
//! part of `docs/protocol.md`.

use std::path::{Path, PathBuf};

use keel_envelope::codec::{encode_command, encode_line};
use keel_envelope::{CommandType, ErrorCode, EventType};

use crate::samples::{sample_command, sample_envelopes};

const BEGIN: &str = "<!-- BEGIN GENERATED EXAMPLES: do not edit; see tests/it/docs.rs -->";
const END: &str = "<!-- END GENERATED EXAMPLES -->";

fn protocol_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/protocol.md")
}

fn read_protocol() -> String {
    std::fs::read_to_string(protocol_path()).unwrap()
}

fn one_line(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap().trim_end().to_owned()
}

/// The generated examples: one wire line per command type and per event type.
fn examples() -> String {
    let mut out = String::new();
    out.push_str("### Command examples\n\n");
    for &t in CommandType::ALL {
        out.push_str(&format!(
            "#### `{}`\n\n```json\n{}\n```\n\n",
            t.as_str(),
            one_line(encode_command(&sample_command(t)))
        ));
    }
    out.push_str("### Event examples\n\n");
    for env in sample_envelopes() {
        out.push_str(&format!(
            "#### `{}`\n\n```json\n{}\n```\n\n",
            env.type_name(),
            one_line(encode_line(&env))
        ));
    }
    out
}

fn splice(doc: &str, generated: &str) -> Option<String> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = doc.find(END)?;
    (start <= end).then(|| format!("{}\n\n{}{}", &doc[..start], generated, &doc[end..]))
}

#[test]
fn protocol_examples_are_fresh() {
    let doc = read_protocol();
    let want = splice(&doc, &examples()).expect("docs/protocol.md lacks the generated markers");
    if doc != want {
        if std::env::var_os("KEEL_UPDATE_GENERATED").is_some() {
            std::fs::write(protocol_path(), &want).unwrap();
        } else {
            panic!(
                "the examples in docs/protocol.md are stale; regenerate with:\n\
                 KEEL_UPDATE_GENERATED=1 cargo test --workspace --test it docs"
            );
        }
    }
}

/// The hand-written part of the document (outside the generated examples).
fn written_part(doc: &str) -> String {
    match (doc.find(BEGIN), doc.find(END)) {
        (Some(a), Some(b)) if a <= b => format!("{}{}", &doc[..a], &doc[b..]),
        _ => doc.to_owned(),
    }
}

fn missing<'a>(text: &str, names: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
    names
        .into_iter()
        .filter(|n| !text.contains(&format!("`{n}`")))
        .collect()
}

#[test]
fn protocol_describes_every_command_type() {
    let doc = written_part(&read_protocol());
    let m = missing(&doc, CommandType::ALL.iter().map(|t| t.as_str()));
    assert!(
        m.is_empty(),
        "command types missing from docs/protocol.md: {m:?}"
    );
}

#[test]
fn protocol_describes_every_event_type() {
    let doc = written_part(&read_protocol());
    let m = missing(&doc, EventType::ALL.iter().map(|t| t.as_str()));
    assert!(
        m.is_empty(),
        "event types missing from docs/protocol.md: {m:?}"
    );
}

#[test]
fn protocol_describes_every_error_code() {
    let doc = written_part(&read_protocol());
    let m = missing(&doc, ErrorCode::ALL.iter().map(|c| c.as_str()));
    assert!(
        m.is_empty(),
        "error codes missing from docs/protocol.md: {m:?}"
    );
}

#[test]
fn protocol_describes_every_codec_reason() {
    let doc = written_part(&read_protocol());
    let reasons = [
        "line_too_long",
        "empty_line",
        "invalid_utf8",
        "invalid_json",
        "not_an_object",
        "missing_field",
        "wrong_type",
        "invalid_value",
        "unknown_type",
        "version_mismatch",
    ];
    let m = missing(&doc, reasons);
    assert!(
        m.is_empty(),
        "codec reasons missing from docs/protocol.md: {m:?}"
    );
}

#[test]
fn protocol_has_an_example_of_every_type() {
    let doc = read_protocol();
    let generated = &doc[doc.find(BEGIN).unwrap_or(0)..];
    for t in CommandType::ALL {
        assert!(
            generated.contains(&format!("\"type\":\"{}\"", t.as_str())),
            "no example of command {}",
            t.as_str()
        );
    }
    for t in EventType::ALL {
        assert!(
            generated.contains(&format!("\"type\":\"{}\"", t.as_str())),
            "no example of event {}",
            t.as_str()
        );
    }
}

#[test]
fn readme_setup_is_two_commands_that_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|b| b.split("```").next())
        .map(str::trim)
        .collect();
    assert_eq!(
        blocks,
        ["cargo run --release -- demo", "bash .ci/run"],
        "the set-up commands in README.md changed"
    );
    assert!(root.join(".ci/test").is_file());
    assert!(root.join(".ci/run").is_file());
    for doc in [
        "docs/ARCHITECTURE.md",
        "docs/protocol.md",
        "docs/performance.md",
    ] {
        assert!(readme.contains(doc), "README.md does not link {doc}");
        assert!(root.join(doc).is_file(), "{doc} is missing");
    }
}
