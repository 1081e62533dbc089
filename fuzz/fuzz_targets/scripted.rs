//! The scripted model's script format: any JSON either loads or is refused with
//! `MODEL_UNAVAILABLE`; a loaded script answers every call with a stream that ends
//! (`Finished` or one error) without panicking, also when cancelled. Time is paused,
//! so scripted delays cost nothing.
#![no_main]

use futures::StreamExt;
use keel_adapters::scripted::ScriptedModel;
use keel_envelope::ErrorCode;
use keel_kernel::model::{Message, Model, ModelEvent, ModelRequest};
use libfuzzer_sys::fuzz_target;
use tokio_util::sync::CancellationToken;

fn request(tool_result: &str) -> ModelRequest {
    ModelRequest {
        system: "system".into(),
        messages: vec![
            Message::User {
                text: "go".into(),
                images: Vec::new(),
            },
            Message::Tool {
                tool_call_id: "call_1".into(),
                name: "run_shell".into(),
                content: tool_result.into(),
                is_error: false,
            },
        ]
        .into(),
        tools: Vec::new().into(),
        max_output_tokens: None,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let model = match ScriptedModel::from_json(value) {
        Ok(m) => m,
        Err(e) => {
            assert_eq!(e.code, ErrorCode::ModelUnavailable, "{e:?}");
            return;
        }
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    else {
        return;
    };
    rt.block_on(async {
        let calls = model.remaining_turns() + 2;
        for i in 0..calls {
            let cancel = CancellationToken::new();
            if i == 1 {
                cancel.cancel();
            }
            let mut stream =
                model.stream(request(if i % 2 == 0 { "ok" } else { "error: x" }), cancel);
            let mut ended = false;
            let mut n = 0usize;
            while let Some(item) = stream.next().await {
                assert!(!ended, "an item after the end");
                n += 1;
                assert!(n < 1_000_000, "the stream does not end");
                match item {
                    Ok(ModelEvent::Finished(_)) | Err(_) => ended = true,
                    Ok(_) => {}
                }
            }
        }
    });
});
