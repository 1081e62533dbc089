//! The kernel's OpenTelemetry spans and metrics, exported over OTLP/HTTP to a real
//! receiver on loopback that decodes the protobuf (`keel_telemetry::testing`): the
//! parentage and attributes of a request with tool calls (a built-in tool, an MCP
//! server's tool, one that waits for an approval, one that spawns a sub-agent), hooks
//! and model calls; content left out by default and recorded with `logContent`; a
//! host's `traceparent` honoured, a bad one refused; `meta.traceId` on the request's
//! events; an endpoint that is down or slow never failing a request.
//!
//! The OpenTelemetry layer is installed once for the whole process (a global
//! subscriber, as a host installs it); the tests tell their spans apart by trace id.
//! The test of an endpoint that is down runs its kernel on a thread of its own with a
//! subscriber of its own.
#![allow(clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use futures::stream;
use keel_envelope::commands::{CommandPayload, RequestSend};
use keel_envelope::host::McpTrust;
use keel_envelope::types::{ApprovalDecision, PermissionMode, Usage};
use keel_envelope::{Command, Envelope, ErrorCode, Event};
use keel_kernel::hooks::{HookInput, Hooks, ToolVerdict};
use keel_kernel::mcp::{McpServerConfig, McpTransport};
use keel_kernel::model::{
    FinishReason, Model, ModelEvent, ModelRequest, ModelStream, ToolCallRequest,
};
use keel_kernel::{EventStream, Kernel, KernelConfig, SessionHandle, SessionOptions};
use keel_telemetry::testing::{closed_endpoint, ReceivedSpan, Receiver, ReceiverOptions};
use keel_telemetry::{Pipeline, Recorder, Settings};
use tokio_util::sync::CancellationToken;
use tracing_subscriber::layer::SubscriberExt;

/// One scripted model turn.
#[derive(Debug, Clone)]
enum Turn {
    Say(&'static str),
    Calls(Vec<(&'static str, &'static str, serde_json::Value)>),
}

/// A model that plays turns in order, reporting 10 input and 5 output tokens a call.
#[derive(Debug)]
struct Script(Mutex<VecDeque<Turn>>);

impl Model for Script {
    fn id(&self) -> String {
        "test:scripted-model".into()
    }
    fn context_window(&self) -> u64 {
        100_000
    }
    fn stream(&self, _: ModelRequest, _: CancellationToken) -> ModelStream {
        let turn = self
            .0
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Turn::Say("done"));
        let mut items = Vec::new();
        let finish = match turn {
            Turn::Say(t) => {
                items.push(ModelEvent::TextDelta(t.to_owned()));
                FinishReason::EndTurn
            }
            Turn::Calls(calls) => {
                for (id, name, arguments) in calls {
                    items.push(ModelEvent::ToolCall(ToolCallRequest {
                        id: id.into(),
                        name: name.into(),
                        arguments,
                    }));
                }
                FinishReason::ToolUse
            }
        };
        items.push(ModelEvent::Usage(Usage::new(10, 5, Default::default())));
        items.push(ModelEvent::Finished(finish));
        Box::pin(stream::iter(items.into_iter().map(Ok)))
    }
}

/// A `PreToolUse` hook that lets everything through.
#[derive(Debug)]
struct Nod;

#[async_trait::async_trait]
impl Hooks for Nod {
    async fn pre_tool_use(
        &self,
        _: &HookInput,
    ) -> Result<ToolVerdict, keel_kernel::hooks::HookError> {
        Ok(ToolVerdict::Continue)
    }
}

/// The process's receiver and the pipeline whose layer is the global subscriber.
fn otel() -> &'static (Receiver, Pipeline) {
    static OTEL: OnceLock<(Receiver, Pipeline)> = OnceLock::new();
    OTEL.get_or_init(|| {
        let receiver = Receiver::start().unwrap();
        let pipeline = Pipeline::start(&settings(&receiver.endpoint(), false)).unwrap();
        let subscriber = tracing_subscriber::registry().with(pipeline.layer());
        tracing::subscriber::set_global_default(subscriber).unwrap();
        (receiver, pipeline)
    })
}

fn settings(endpoint: &str, log_content: bool) -> Settings {
    let mut s = Settings::http(endpoint);
    s.batch_delay = Duration::from_millis(50);
    s.metrics_interval = Duration::from_millis(100);
    s.export_timeout = Duration::from_secs(2);
    s.log_content = log_content;
    s
}

struct Fixture {
    kernel: Kernel,
    _ws: tempfile::TempDir,
    _mcp: Option<keel_mcp::testing::HttpServer>,
}

async fn kernel(turns: Vec<Turn>, recorder: Recorder, mcp: bool) -> Fixture {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello").unwrap();
    let server = if mcp {
        Some(keel_mcp::testing::serve_http(None).await.unwrap())
    } else {
        None
    };
    let mut config = KernelConfig {
        workspace: Some(ws.path().to_owned()),
        permission_mode: PermissionMode::Ask,
        checkpoints: false,
        ..KernelConfig::default()
    };
    if let Some(s) = &server {
        config.mcp_servers.push(McpServerConfig {
            name: "t".into(),
            transport: McpTransport::Http {
                url: s.url(),
                headers: Vec::new(),
            },
            trust: McpTrust::Read,
            startup_timeout: None,
            call_timeout: None,
        });
    }
    let kernel = Kernel::builder()
        .config(config)
        .memory_store()
        .model(Arc::new(Script(Mutex::new(turns.into()))))
        .hooks(Arc::new(Nod))
        .telemetry(recorder)
        .build()
        .unwrap();
    Fixture {
        kernel,
        _ws: ws,
        _mcp: server,
    }
}

async fn session(f: &Fixture) -> (SessionHandle, EventStream) {
    f.kernel
        .start_session(SessionOptions::default())
        .await
        .unwrap()
}

/// The events of request `rid` up to its terminal event, approving every approval.
async fn run_to_end(s: &SessionHandle, events: &mut EventStream, rid: &str) -> Vec<Envelope> {
    let mut out = Vec::new();
    loop {
        let env = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("the request ends")
            .expect("the stream stays open");
        if let Event::ApprovalRequested(a) = &env.event {
            s.respond_approval(&a.approval_id, ApprovalDecision::AllowOnce)
                .await
                .unwrap();
        }
        let terminal = env.request_id == rid
            && matches!(
                env.event,
                Event::SessionCompleted(_) | Event::SessionInterrupted(_)
            );
        if env.request_id == rid {
            out.push(env);
        }
        if terminal {
            return out;
        }
    }
}

/// Waits until the request's root span (it ends last) reached the receiver; returns
/// every span of its trace.
fn trace_of(receiver: &Receiver, trace_id: &str) -> Vec<ReceivedSpan> {
    let done = receiver.wait_until(Duration::from_secs(20), |r| {
        r.spans()
            .iter()
            .any(|s| s.trace_id == trace_id && s.name == "invoke_agent keel")
    });
    assert!(done, "the request's spans were exported");
    receiver
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == trace_id)
        .collect()
}

fn one(spans: &[ReceivedSpan], pred: impl Fn(&ReceivedSpan) -> bool) -> &ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pred(s)).collect();
    assert_eq!(found.len(), 1, "{found:#?}");
    found[0]
}

fn tool<'a>(spans: &'a [ReceivedSpan], call_id: &str) -> &'a ReceivedSpan {
    one(spans, |s| {
        s.name.starts_with("execute_tool ") && s.str("gen_ai.tool.call.id") == Some(call_id)
    })
}

fn children<'a>(spans: &'a [ReceivedSpan], parent: &ReceivedSpan) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|s| s.parent_span_id.as_deref() == Some(parent.span_id.as_str()))
        .collect()
}

fn the_script() -> Vec<Turn> {
    use serde_json::json;
    vec![
        Turn::Calls(vec![
            ("call_read", "read_file", json!({"path": "a.txt"})),
            ("call_mcp", "mcp__t__echo", json!({"text": "secret words"})),
            (
                "call_write",
                "write_file",
                json!({"path": "b.txt", "content": "secret content"}),
            ),
        ]),
        Turn::Calls(vec![(
            "call_sub",
            "spawn_sub_agent",
            json!({"task": "read a.txt", "tools": ["read_file"]}),
        )]),
        // The sub-agent's two model calls.
        Turn::Calls(vec![("call_child", "read_file", json!({"path": "a.txt"}))]),
        Turn::Say("a.txt says hello"),
        Turn::Say("All done."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_is_one_trace_whose_spans_follow_the_work() {
    let (receiver, pipeline) = otel();
    let f = kernel(the_script(), pipeline.recorder(), true).await;
    let (s, mut events) = session(&f).await;
    let rid = s.send("do the work").await.unwrap();
    let envs = run_to_end(&s, &mut events, &rid).await;
    assert!(matches!(
        envs.last().unwrap().event,
        Event::SessionCompleted(_)
    ));

    // Every event of the request names its trace.
    let trace_id = envs[0]
        .meta
        .as_ref()
        .and_then(|m| m.trace_id.clone())
        .expect("meta.traceId");
    assert_eq!(trace_id.len(), 32);
    for e in &envs {
        let t = e.meta.as_ref().and_then(|m| m.trace_id.as_deref());
        assert_eq!(t, Some(trace_id.as_str()), "{}", e.type_name());
    }

    let spans = trace_of(receiver, &trace_id);
    // The request: the root, with the session, the model and the tokens of its
    // four model calls (the sub-agent's two are its own).
    let root = one(&spans, |s| s.name == "invoke_agent keel");
    assert_eq!(root.parent_span_id, None);
    assert_eq!(root.str("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(root.str("gen_ai.conversation.id"), Some(s.id()));
    assert_eq!(root.str("keel.request.id"), Some(rid.as_str()));
    assert_eq!(root.str("gen_ai.provider.name"), Some("test"));
    assert_eq!(root.str("gen_ai.request.model"), Some("scripted-model"));
    assert_eq!(root.int("gen_ai.usage.input_tokens"), Some(30));
    assert_eq!(root.int("gen_ai.usage.output_tokens"), Some(15));
    assert_eq!(root.status, "unset");
    assert_eq!(root.scope, "keel");

    // Its model calls.
    let chats: Vec<_> = children(&spans, root)
        .into_iter()
        .filter(|s| s.name == "chat scripted-model")
        .collect();
    assert_eq!(chats.len(), 3, "{spans:#?}");
    for c in &chats {
        assert_eq!(c.kind, "client");
        assert_eq!(c.str("gen_ai.operation.name"), Some("chat"));
        assert_eq!(c.int("gen_ai.usage.input_tokens"), Some(10));
        assert_eq!(c.int("gen_ai.usage.output_tokens"), Some(5));
        assert!(c
            .attributes
            .contains_key("keel.response.time_to_first_chunk"));
    }
    let reasons: Vec<_> = chats
        .iter()
        .map(|c| c.str("gen_ai.response.finish_reasons").unwrap())
        .collect();
    assert_eq!(reasons.iter().filter(|r| **r == "tool_calls").count(), 2);
    assert!(reasons.contains(&"stop"));

    // Its tool calls, under it, with the gate's decision.
    let read = tool(&spans, "call_read");
    assert_eq!(read.parent_span_id.as_deref(), Some(root.span_id.as_str()));
    assert_eq!(read.str("gen_ai.tool.name"), Some("read_file"));
    assert_eq!(read.str("gen_ai.tool.type"), Some("function"));
    assert_eq!(read.str("keel.permission.decision"), Some("allow"));
    assert_eq!(read.str("keel.permission.level"), Some("read"));
    assert_eq!(read.str("keel.tool.outcome"), Some("ok"));

    // The write waited for an approval: a span under the call, with the answer.
    let write = tool(&spans, "call_write");
    assert_eq!(write.parent_span_id.as_deref(), Some(root.span_id.as_str()));
    assert_eq!(write.str("keel.permission.decision"), Some("ask"));
    assert_eq!(write.str("keel.tool.outcome"), Some("ok"));
    let approval = one(&spans, |s| s.name == "approval write_file");
    assert_eq!(
        approval.parent_span_id.as_deref(),
        Some(write.span_id.as_str())
    );
    assert_eq!(approval.str("keel.permission.decision"), Some("allow_once"));

    // The MCP tool: the call, and the client's `tools/call` under it.
    let mcp = tool(&spans, "call_mcp");
    assert_eq!(mcp.str("gen_ai.tool.type"), Some("extension"));
    let client = one(&spans, |s| s.name == "tools/call echo");
    assert_eq!(client.parent_span_id.as_deref(), Some(mcp.span_id.as_str()));
    assert_eq!(client.kind, "client");
    assert_eq!(client.str("keel.mcp.server"), Some("t"));
    assert_eq!(client.str("mcp.method.name"), Some("tools/call"));
    assert_eq!(client.str("network.transport"), Some("tcp"));

    // Each tool call ran its PreToolUse hook under it.
    for call in [read, write, mcp] {
        let hooks: Vec<_> = children(&spans, call)
            .into_iter()
            .filter(|s| s.name == "hook PreToolUse")
            .collect();
        assert_eq!(hooks.len(), 1, "{}", call.name);
        assert_eq!(hooks[0].str("keel.hook.outcome"), Some("ok"));
    }

    // The sub-agent: a run of its own under the call that spawned it, its model
    // calls and tool call under it.
    let spawn = tool(&spans, "call_sub");
    let sub = one(&spans, |s| s.name == "invoke_agent sub-agent");
    assert_eq!(sub.parent_span_id.as_deref(), Some(spawn.span_id.as_str()));
    assert!(sub.str("gen_ai.agent.id").unwrap().starts_with("sub_"));
    assert_eq!(sub.int("gen_ai.usage.input_tokens"), Some(20));
    let under_sub = children(&spans, sub);
    assert_eq!(
        under_sub
            .iter()
            .filter(|s| s.name == "chat scripted-model")
            .count(),
        2
    );
    let child = tool(&spans, "call_child");
    assert_eq!(child.parent_span_id.as_deref(), Some(sub.span_id.as_str()));
    assert_eq!(child.str("keel.tool.outcome"), Some("ok"));

    // No content by default: no prompt, no arguments, no results, no answer.
    for s in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(!s.attributes.contains_key(key), "{} has {key}", s.name);
        }
        let text = format!("{:?}", s.attributes);
        assert!(!text.contains("secret"), "{}: {text}", s.name);
    }

    // Metrics: tool calls by outcome, tokens, model-call latency and time to the
    // first chunk, approvals by decision.
    let metrics_in = receiver.wait_until(Duration::from_secs(20), |r| {
        let points = r.points();
        let has = |name: &str| points.iter().any(|p| p.metric == name);
        has("keel.tool.calls")
            && has("gen_ai.client.token.usage")
            && has("gen_ai.client.operation.duration")
            && has("gen_ai.client.operation.time_to_first_chunk")
            && has("keel.approvals")
    });
    assert!(metrics_in, "{:#?}", receiver.points());
    let points = receiver.points();
    assert!(points.iter().any(|p| p.metric == "keel.tool.calls"
        && p.attributes
            .get("gen_ai.tool.name")
            .and_then(|v| v.as_str())
            == Some("read_file")
        && p.attributes
            .get("keel.tool.outcome")
            .and_then(|v| v.as_str())
            == Some("ok")));
    assert!(points.iter().any(|p| p.metric == "keel.approvals"
        && p.attributes
            .get("keel.permission.decision")
            .and_then(|v| v.as_str())
            == Some("allow_once")));
    assert_eq!(receiver.bad_requests(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_is_recorded_with_log_content() {
    let (receiver, _) = otel();
    // A pipeline made with `logContent` gives a recorder that records content; the
    // spans still go through the process's layer.
    let content = Pipeline::start(&settings(&receiver.endpoint(), true)).unwrap();
    let f = kernel(
        vec![
            Turn::Calls(vec![(
                "call_read",
                "read_file",
                serde_json::json!({"path": "a.txt"}),
            )]),
            Turn::Say("It says hello."),
        ],
        content.recorder(),
        false,
    )
    .await;
    let (s, mut events) = session(&f).await;
    let rid = s.send("what does a.txt say?").await.unwrap();
    let envs = run_to_end(&s, &mut events, &rid).await;
    let trace_id = envs[0].meta.as_ref().unwrap().trace_id.clone().unwrap();
    let spans = trace_of(receiver, &trace_id);
    let root = one(&spans, |s| s.name == "invoke_agent keel");
    assert!(root
        .str("gen_ai.input.messages")
        .unwrap()
        .contains("what does a.txt say?"));
    assert!(root
        .str("gen_ai.output.messages")
        .unwrap()
        .contains("It says hello."));
    let read = tool(&spans, "call_read");
    assert!(read
        .str("gen_ai.tool.call.arguments")
        .unwrap()
        .contains("a.txt"));
    assert!(read
        .str("gen_ai.tool.call.result")
        .unwrap()
        .contains("hello"));
    let chat = spans.iter().find(|s| s.name.starts_with("chat ")).unwrap();
    assert!(chat
        .str("gen_ai.input.messages")
        .unwrap()
        .contains("what does a.txt say?"));
    assert!(chat.attributes.contains_key("gen_ai.system_instructions"));
    let _ = content.shutdown(Duration::from_secs(1));
}

const HOST_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const HOST_SPAN: &str = "00f067aa0ba902b7";

fn send_cmd(
    s: &SessionHandle,
    rid: &str,
    traceparent: Option<&str>,
    tracestate: Option<&str>,
) -> Command {
    Command::new(
        rid,
        Some(s.id().to_owned()),
        CommandPayload::RequestSend(
            RequestSend::new("hello")
                .traceparent(traceparent.map(str::to_owned))
                .tracestate(tracestate.map(str::to_owned)),
        ),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hosts_traceparent_is_honoured_and_a_bad_one_refused() {
    let (receiver, pipeline) = otel();
    let f = kernel(vec![Turn::Say("Hi.")], pipeline.recorder(), false).await;
    let (s, mut events) = session(&f).await;
    let tp = format!("00-{HOST_TRACE}-{HOST_SPAN}-01");
    f.kernel
        .execute(send_cmd(&s, "req_traced", Some(&tp), Some("vendor=1")))
        .await
        .unwrap();
    let envs = run_to_end(&s, &mut events, "req_traced").await;
    for e in &envs {
        assert_eq!(
            e.meta.as_ref().and_then(|m| m.trace_id.as_deref()),
            Some(HOST_TRACE)
        );
    }
    let spans = trace_of(receiver, HOST_TRACE);
    let root = one(&spans, |s| s.name == "invoke_agent keel");
    assert_eq!(root.parent_span_id.as_deref(), Some(HOST_SPAN));
    assert!(spans.iter().all(|s| s.trace_id == HOST_TRACE));

    // Bad trace context: refused before anything runs, naming the field.
    let mut all = f.kernel.subscribe();
    let bad = [
        (
            Some("00-zz-00f067aa0ba902b7-01"),
            None,
            "payload.traceparent",
        ),
        (
            Some("00-00000000000000000000000000000000-00f067aa0ba902b7-01"),
            None,
            "payload.traceparent",
        ),
        (
            Some(tp.as_str()),
            Some(&*"x".repeat(600)),
            "payload.traceparent",
        ),
        (None, Some("vendor=1"), "payload.tracestate"),
    ];
    for (i, (tp, ts, field)) in bad.into_iter().enumerate() {
        let rid = format!("req_bad_{i}");
        let cmd = send_cmd(&s, &rid, tp, ts);
        let _ = f.kernel.execute(cmd).await;
        let rejected = loop {
            let env = tokio::time::timeout(Duration::from_secs(10), all.recv())
                .await
                .unwrap()
                .unwrap();
            if env.request_id == rid {
                break env;
            }
        };
        let Event::RequestRejected(r) = &rejected.event else {
            panic!("{rejected:?}");
        };
        assert_eq!(r.code, ErrorCode::RequestInvalid);
        assert_eq!(r.details["field"], field);
    }
}

#[test]
fn an_endpoint_that_is_down_or_slow_never_fails_a_request() {
    let slow = Receiver::start_with(ReceiverOptions {
        delay: Duration::from_secs(30),
        status: None,
    })
    .unwrap();
    for endpoint in [closed_endpoint().unwrap(), slow.endpoint()] {
        let mut s = settings(&endpoint, false);
        s.export_timeout = Duration::from_millis(200);
        s.queue_size = 4;
        s.max_batch = 4;
        let pipeline = Pipeline::start(&s).unwrap();
        let dispatch =
            tracing::Dispatch::new(tracing_subscriber::registry().with(pipeline.layer()));
        // The kernel runs on this thread alone, under this thread's subscriber.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let trace_ids: Vec<String> = tracing::dispatcher::with_default(&dispatch, || {
            rt.block_on(async {
                let turns = (0..5)
                    .flat_map(|_| {
                        [
                            Turn::Calls(vec![(
                                "call_read",
                                "read_file",
                                serde_json::json!({"path": "a.txt"}),
                            )]),
                            Turn::Say("Read."),
                        ]
                    })
                    .collect();
                let f = kernel(turns, pipeline.recorder(), false).await;
                let (s, mut events) = session(&f).await;
                let mut ids = Vec::new();
                for _ in 0..5 {
                    let rid = s.send("read it").await.unwrap();
                    let envs = run_to_end(&s, &mut events, &rid).await;
                    let Event::SessionCompleted(done) = &envs.last().unwrap().event else {
                        panic!("{:?}", envs.last());
                    };
                    assert_eq!(done.final_text.as_deref(), Some("Read."));
                    ids.push(envs[0].meta.as_ref().unwrap().trace_id.clone().unwrap());
                }
                ids
            })
        });
        // Spans were made (each request has a trace of its own), whatever became of
        // them.
        let mut distinct = trace_ids.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), 5);
        // Nothing was exported, the failures were counted and logged once.
        let done = pipeline.shutdown(Duration::from_secs(5));
        assert_eq!(done.health.exports_ok, 0, "{endpoint}: {done:?}");
        assert!(done.health.exports_failed >= 1, "{endpoint}: {done:?}");
        assert_eq!(done.health.warnings, 1, "{endpoint}: {done:?}");
    }
}
