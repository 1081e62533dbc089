//! The facade's examples (`examples/`), run as tests: the code a Rust developer copies
//! first must work.

#[allow(dead_code)]
#[path = "../../examples/minimal.rs"]
mod minimal;
#[allow(dead_code)]
#[path = "../../examples/own_tool.rs"]
mod own_tool;
#[allow(dead_code)]
#[path = "../../examples/resume.rs"]
mod resume;

use keel_envelope::codec::decode_envelope;

#[tokio::test]
async fn the_minimal_host_prints_the_events_of_one_request() {
    let mut out = Vec::new();
    let answer = minimal::run(&mut out).await.unwrap();
    assert_eq!(answer, "Hello! I am Keel on a scripted model.");
    let text = String::from_utf8(out).unwrap();
    let types: Vec<String> = text
        .lines()
        .map(|l| {
            decode_envelope(l.as_bytes())
                .unwrap()
                .type_name()
                .to_owned()
        })
        .collect();
    for t in [
        "session.started",
        "request.accepted",
        "assistant.final",
        "session.completed",
    ] {
        assert!(types.iter().any(|x| x == t), "{t} missing from {types:?}");
    }
}

#[tokio::test]
async fn the_host_tool_runs_after_the_approval_callback() {
    let (result, answer) = own_tool::run().await.unwrap();
    assert_eq!(result["words"], 3);
    assert_eq!(answer, "The text has three words.");
}

#[tokio::test]
async fn a_stored_session_is_resumed_by_a_second_kernel() {
    let (id, messages, answer) = resume::run().await.unwrap();
    assert!(id.starts_with("sess_"), "{id}");
    assert!(messages >= 2, "the history of the first run: {messages}");
    assert_eq!(answer, "You told me the build is green.");
}
