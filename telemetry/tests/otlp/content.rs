//! Content (prompts, outputs, tool arguments and results) is left out unless the
//! pipeline was started with `log_content`, and is then recorded as the conventions
//! name it.

use std::cell::Cell;

use keel_telemetry::semconv as sc;
use keel_telemetry::testing::Receiver;

use super::common::{finish, one, run, settings, start};
use super::spans::a_request;

const CONTENT_KEYS: [&str; 5] = [
    sc::GEN_AI_INPUT_MESSAGES,
    sc::GEN_AI_OUTPUT_MESSAGES,
    sc::GEN_AI_SYSTEM_INSTRUCTIONS,
    sc::GEN_AI_TOOL_CALL_ARGUMENTS,
    sc::GEN_AI_TOOL_CALL_RESULT,
];

#[test]
fn content_is_left_out_by_default() {
    let r = Receiver::start().unwrap();
    let (p, dispatch) = start(&settings(&r.endpoint()));
    let rec = p.recorder();
    assert!(!rec.logs_content());
    run(&dispatch, a_request(&rec));
    // Not even computed.
    let called = Cell::new(false);
    run(&dispatch, async {
        let call = rec.execute_tool(keel_telemetry::ToolStart {
            name: "read_file",
            call_id: "c",
            ..Default::default()
        });
        call.arguments(|| {
            called.set(true);
            "{}".to_owned()
        });
        call.finish(keel_telemetry::ToolOutcome::Ok, None);
    });
    assert!(!called.get());
    let (spans, _) = finish(p, &r);
    assert_eq!(spans.len(), 11);
    for s in &spans {
        for key in CONTENT_KEYS {
            assert!(!s.attributes.contains_key(key), "{}: {key}", s.name);
        }
    }
}

#[test]
fn log_content_records_prompts_outputs_arguments_and_results() {
    let r = Receiver::start().unwrap();
    let mut s = settings(&r.endpoint());
    s.log_content = true;
    let (p, dispatch) = start(&s);
    let rec = p.recorder();
    assert!(rec.logs_content());
    run(&dispatch, a_request(&rec));
    let (spans, _) = finish(p, &r);

    let req = one(&spans, "invoke_agent keel");
    let input: serde_json::Value =
        serde_json::from_str(req.str(sc::GEN_AI_INPUT_MESSAGES).unwrap()).unwrap();
    assert_eq!(
        input,
        serde_json::json!([{"role": "user", "parts": [{"type": "text", "content": "list the files"}]}])
    );
    let output: serde_json::Value =
        serde_json::from_str(req.str(sc::GEN_AI_OUTPUT_MESSAGES).unwrap()).unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["content"], "two files");

    let chat = one(&spans, "chat gpt-x");
    assert!(chat
        .str(sc::GEN_AI_INPUT_MESSAGES)
        .unwrap()
        .contains("list the files"));

    let shell = one(&spans, "execute_tool run_shell");
    assert_eq!(
        shell.str(sc::GEN_AI_TOOL_CALL_ARGUMENTS),
        Some(r#"{"command":"ls"}"#)
    );
    assert_eq!(shell.str(sc::GEN_AI_TOOL_CALL_RESULT), Some("a.txt\nb.txt"));
}

#[test]
fn huge_content_is_cut() {
    let r = Receiver::start().unwrap();
    let mut s = settings(&r.endpoint());
    s.log_content = true;
    let (p, dispatch) = start(&s);
    let rec = p.recorder();
    run(&dispatch, async {
        let call = rec.execute_tool(keel_telemetry::ToolStart {
            name: "read_file",
            call_id: "c",
            ..Default::default()
        });
        call.result(|| "x".repeat(1 << 20));
        call.finish(keel_telemetry::ToolOutcome::Ok, None);
    });
    let (spans, _) = finish(p, &r);
    let result = one(&spans, "execute_tool read_file")
        .str(sc::GEN_AI_TOOL_CALL_RESULT)
        .unwrap()
        .to_owned();
    assert!(result.ends_with("…[truncated]"));
    assert!(result.len() < keel_telemetry::MAX_CONTENT_BYTES + 32);
}
