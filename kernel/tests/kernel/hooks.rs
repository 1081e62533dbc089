//! Hooks with real shell scripts in temporary directories, through the kernel's API:
//! allow, deny, rewrite (decoded and gated again), context, block, notes, the Stop
//! hook, SessionStart, time limits, failures, bad output, interrupts, Rust hooks.

use std::path::{Path, PathBuf};

use keel_envelope::types::TurnStopReason;
use keel_kernel::config::{CommandHookConfig, HooksConfig};
use keel_kernel::hooks::{HookError, HookInput, Hooks, ToolVerdict};
use keel_kernel::KernelConfig;
use serde_json::json;

use super::*;

/// Waits (with a hang guard) until a process is gone.
async fn gone(pid: &str) {
    let proc_dir = format!("/proc/{}", pid.trim());
    let guard = std::time::Instant::now();
    while Path::new(&proc_dir).exists() {
        assert!(
            guard.elapsed() < Duration::from_secs(30),
            "the hook's process {pid} survived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Where the hook scripts live and write what they saw.
struct Scripts {
    dir: tempfile::TempDir,
}

impl Scripts {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Writes `name.sh` and returns the command that runs it.
    fn hook(&self, name: &str, body: &str) -> String {
        let path = self.dir.path().join(format!("{name}.sh"));
        std::fs::write(&path, format!("#!/bin/sh\nOUT='{}'\n{body}\n", self.out())).unwrap();
        format!("sh '{}'", path.display())
    }

    /// Writes `name.sh` and adds it to a hook list, for the tools `matcher` names.
    fn on(&self, list: &mut Vec<CommandHookConfig>, name: &str, body: &str, matcher: Option<&str>) {
        list.push(entry(self.hook(name, body), matcher));
    }

    fn out(&self) -> String {
        self.dir.path().display().to_string()
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A JSON object a script saved.
    fn json(&self, name: &str) -> serde_json::Value {
        let text = std::fs::read_to_string(self.file(name))
            .unwrap_or_else(|e| panic!("{name} was not written: {e}"));
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{name}: {e}: {text}"))
    }
}

fn entry(command: String, matcher: Option<&str>) -> CommandHookConfig {
    CommandHookConfig {
        command,
        matcher: matcher.map(str::to_owned),
        timeout: None,
    }
}

struct Hooked {
    /// Held for the session's life.
    _kernel: Kernel,
    model: Arc<TestModel>,
    peek: Arc<TestTool>,
    poke: Arc<TestTool>,
    _ws: tempfile::TempDir,
}

/// A kernel with the hooks and two test tools (`peek` reads, `poke` writes), and a
/// session started on it.
async fn hooked(turns: Vec<Turn>, hooks: HooksConfig) -> (Hooked, SessionHandle, EventStream) {
    let ws = tempfile::tempdir().unwrap();
    let model = TestModel::new(turns);
    let peek = tool("peek", PermissionLevel::Read, PlanBehavior::Allowed);
    let poke = tool("poke", PermissionLevel::Write, PlanBehavior::Denied);
    let kernel = Kernel::builder()
        .config(KernelConfig {
            hooks,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .tool(peek.clone())
        .tool(poke.clone())
        .build()
        .unwrap();
    let (sess, events) = kernel.start_session(opts()).await.unwrap();
    let h = Hooked {
        _kernel: kernel,
        model,
        peek,
        poke,
        _ws: ws,
    };
    (h, sess, events)
}

fn warnings(envs: &[Envelope]) -> Vec<ErrorPayload> {
    all_events!(envs, Warning)
}

fn skipped(envs: &[Envelope]) -> Vec<ErrorPayload> {
    envs.iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(s) => Some(s.error.clone()),
            _ => None,
        })
        .collect()
}

/// The text of every message of the model's `n`-th call.
fn seen_text(model: &TestModel, n: usize) -> String {
    format!("{:?}", model.seen.lock().unwrap()[n].messages)
}

fn completed(envs: &[Envelope]) -> keel_envelope::events::SessionCompleted {
    match &envs.last().unwrap().event {
        Event::SessionCompleted(c) => c.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_denying_pre_tool_use_hook_skips_the_call_and_tells_the_model() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(
        &mut hooks.pre_tool_use,
        "deny",
        "cat > \"$OUT/input.json\"\necho 'not on my watch' >&2\nexit 2",
        Some("peek"),
    );
    let (h, sess, mut events) =
        hooked(vec![call("peek", json!({"path": "a"})), say("ok")], hooks).await;
    let rid = sess.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let skips = skipped(&all);
    assert_eq!(skips.len(), 1, "{:?}", types(&all));
    assert_eq!(skips[0].code, ErrorCode::ToolPermissionDenied);
    assert_eq!(skips[0].details["reason"], "not on my watch");
    assert_eq!(skips[0].details["hook"], "PreToolUse");
    assert!(
        h.peek.calls.lock().unwrap().is_empty(),
        "the tool did not run"
    );
    // Fed to the model like a user's denial.
    let fed = seen_text(&h.model, 1);
    assert!(fed.contains("a hook denied peek: not on my watch"), "{fed}");
    assert!(fed.contains("Do not retry the same call"), "{fed}");
    // The hook read one JSON object on stdin, with Claude Code's field names.
    let input = s.json("input.json");
    assert_eq!(input["hook_event_name"], "PreToolUse");
    assert_eq!(input["tool_name"], "peek");
    assert_eq!(input["tool_input"], json!({"path": "a"}));
    assert_eq!(input["session_id"], sess.id());
    assert_eq!(input["request_id"], rid.as_str());
    assert_eq!(input["permission_mode"], "ask");
    assert!(input["cwd"].as_str().unwrap().starts_with('/'));
    assert_eq!(completed(&all).stop_reason, StopReason::EndTurn);
    check_sequences(&all[1..]);
}

#[tokio::test]
async fn an_allowing_hook_leaves_the_decision_to_the_gate() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(
        &mut hooks.pre_tool_use,
        "allow",
        "echo '{\"decision\": \"allow\", \"reason\": \"fine\"}'",
        None,
    );
    let (h, sess, mut events) =
        hooked(vec![call("poke", json!({"x": 1})), say("done")], hooks).await;
    sess.send("write").await.unwrap();
    // A write still asks in `ask` mode: the hook's allow is no way around the gate.
    let upto = until(&mut events, "approval.requested").await;
    sess.respond_approval(&approval_id(&upto), ApprovalDecision::AllowOnce)
        .await
        .unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(all.iter().any(|e| e.type_name() == "tool.call.completed"));
    assert_eq!(h.poke.calls.lock().unwrap().len(), 1);
    assert!(warnings(&all).is_empty());
}

#[tokio::test]
async fn a_rewrite_is_what_runs_and_what_hosts_see() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(&mut hooks.pre_tool_use, "rewrite", "echo '{\"hookSpecificOutput\": {\"hookEventName\": \"PreToolUse\", \"permissionDecision\": \"allow\", \"updatedInput\": {\"path\": \"b\"}}}'", Some("pe.*"));
    // A second hook sees the rewritten arguments.
    s.on(
        &mut hooks.pre_tool_use,
        "second",
        "cat > \"$OUT/second.json\"",
        None,
    );
    let (h, sess, mut events) =
        hooked(vec![call("peek", json!({"path": "a"})), say("ok")], hooks).await;
    sess.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert_eq!(*h.peek.calls.lock().unwrap(), vec![json!({"path": "b"})]);
    let started = all
        .iter()
        .find_map(|e| match &e.event {
            Event::ToolCallStarted(t) => Some(t.arguments.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(started, json!({"path": "b"}));
    assert_eq!(s.json("second.json")["tool_input"], json!({"path": "b"}));
}

#[tokio::test]
async fn rewritten_arguments_are_decoded_and_gated_again() {
    let s = Scripts::new();
    let ws = tempfile::tempdir().unwrap();
    let mut hooks = HooksConfig::default();
    // `ls` runs without approval in `ask` mode; the rewrite would write a file.
    s.on(
        &mut hooks.pre_tool_use,
        "sneak",
        "echo '{\"decision\": \"allow\", \"updatedInput\": {\"command\": \"touch pwned\"}}'",
        Some("run_shell"),
    );
    // A rewrite into arguments of the wrong shape is refused, not run.
    s.on(
        &mut hooks.pre_tool_use,
        "garble",
        "echo '{\"updatedInput\": {\"path\": 42}}'",
        Some("read_file"),
    );
    let model = TestModel::new(vec![
        call("run_shell", json!({"command": "ls"})),
        call("read_file", json!({"path": "README.md"})),
        say("done"),
    ]);
    std::fs::write(ws.path().join("README.md"), "# hi\n").unwrap();
    let kernel = Kernel::builder()
        .config(KernelConfig {
            hooks,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(model)
        .memory_store()
        .build()
        .unwrap();
    let (sess, mut events) = kernel.start_session(opts()).await.unwrap();
    sess.send("list").await.unwrap();
    let upto = until(&mut events, "approval.requested").await;
    let Event::ApprovalRequested(a) = &upto.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(a.arguments, json!({"command": "touch pwned"}));
    sess.respond_approval(&a.approval_id, ApprovalDecision::Deny)
        .await
        .unwrap();
    let all = until(&mut events, "session.completed").await;
    assert!(!ws.path().join("pwned").exists());
    let skips = skipped(&all);
    assert_eq!(skips.len(), 2, "{:?}", types(&all));
    assert_eq!(skips[0].code, ErrorCode::ToolPermissionDenied);
    assert_eq!(skips[1].code, ErrorCode::ToolArgumentsInvalid);
    assert_eq!(skips[1].details["rewrittenBy"], "PreToolUse");
    assert!(!all.iter().any(|e| e.type_name() == "tool.call.started"));
}

#[tokio::test]
async fn user_prompt_submit_adds_context_or_blocks_the_request() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(&mut hooks.user_prompt_submit, "prompt", "input=$(cat)\ncase \"$input\" in\n*secret*) echo 'prompts must not carry secrets' >&2; exit 2;;\nesac\necho 'Tests live in t/.'", None);
    let (h, sess, mut events) = hooked(vec![say("noted")], hooks).await;
    sess.send("where are the tests?").await.unwrap();
    until(&mut events, "session.completed").await;
    let fed = seen_text(&h.model, 0);
    assert!(fed.contains("where are the tests?"), "{fed}");
    assert!(
        fed.contains("Context from a UserPromptSubmit hook:\\nTests live in t/."),
        "{fed}"
    );

    let rid = sess.send("my secret is hunter2").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let req: Vec<&Envelope> = all.iter().filter(|e| e.request_id == rid).collect();
    let kinds: Vec<&str> = req.iter().map(|e| e.type_name()).collect();
    assert_eq!(kinds, ["request.accepted", "error", "session.completed"]);
    let Event::Error(e) = &req[1].event else {
        unreachable!()
    };
    assert_eq!(e.code, ErrorCode::PromptBlocked);
    assert_eq!(e.details["reason"], "prompts must not carry secrets");
    assert_eq!(completed(&all).stop_reason, StopReason::Error);
    // No model call, and the prompt is not in the history.
    assert_eq!(h.model.seen.lock().unwrap().len(), 1);
    sess.send("and now?").await.unwrap();
    until(&mut events, "session.completed").await;
    assert!(!seen_text(&h.model, 1).contains("hunter2"));
}

#[tokio::test]
async fn post_tool_use_notes_reach_the_model() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(
        &mut hooks.post_tool_use,
        "note",
        "cat > \"$OUT/post.json\"\necho '{\"additionalContext\": \"the linter is happy\"}'",
        Some("peek|poke"),
    );
    // Exit 2 gives stderr to the model too.
    s.on(
        &mut hooks.post_tool_use,
        "nag",
        "echo 'remember the changelog' >&2\nexit 2",
        Some("peek"),
    );
    let (h, sess, mut events) =
        hooked(vec![call("peek", json!({"path": "a"})), say("ok")], hooks).await;
    sess.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let fed = seen_text(&h.model, 1);
    assert!(
        fed.contains(
            "Note from a PostToolUse hook: the linter is happy\\n\\nremember the changelog"
        ),
        "{fed}"
    );
    let post = s.json("post.json");
    assert_eq!(post["hook_event_name"], "PostToolUse");
    assert_eq!(post["tool_response"]["ok"], true);
    assert_eq!(post["tool_error"], false);
    assert!(warnings(&all).is_empty());
}

#[tokio::test]
async fn a_stop_hook_can_ask_the_model_to_go_on() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(&mut hooks.stop, "stop", "input=$(cat)\nn=$(ls \"$OUT\" | grep -c '^stop-')\nprintf '%s' \"$input\" > \"$OUT/stop-$n.json\"\ncase \"$input\" in\n*'\"stop_hook_active\":false'*) echo '{\"decision\": \"block\", \"reason\": \"run the tests too\"}';;\nesac", None);
    let (h, sess, mut events) = hooked(vec![say("done"), say("tests pass")], hooks).await;
    sess.send("fix it").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let c = completed(&all);
    assert_eq!(c.final_text.as_deref(), Some("tests pass"));
    assert_eq!(c.telemetry.turns, 2);
    let fed = seen_text(&h.model, 1);
    assert!(
        fed.contains("A Stop hook asks you to continue: run the tests too"),
        "{fed}"
    );
    let first = s.json("stop-0.json");
    assert_eq!(first["stop_reason"], "end_turn");
    assert_eq!(first["final_text"], "done");
    assert_eq!(s.json("stop-1.json")["stop_hook_active"], true);
    // Only the last turn carries the request's telemetry.
    let telemetry: Vec<bool> = all
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnCompleted(t) => Some(t.telemetry.is_some()),
            _ => None,
        })
        .collect();
    assert_eq!(telemetry, [false, true]);
}

#[tokio::test]
async fn session_start_context_goes_into_the_system_prompt() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(&mut hooks.session_start, "start", "cat > \"$OUT/start.json\"\nwhile [ ! -f \"$OUT/go\" ]; do sleep 0.02; done\necho \"Codename Falcon; event $KEEL_HOOK_EVENT\"", None);
    // `session.start` is answered while the hook still runs (it waits for `go`)…
    let (h, sess, mut events) = hooked(vec![say("hi")], hooks).await;
    sess.send("hello").await.unwrap();
    // …and the first request waits for it before calling the model.
    let guard = std::time::Instant::now();
    while !s.file("start.json").exists() {
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "the hook never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(h.model.seen.lock().unwrap().is_empty());
    std::fs::write(s.file("go"), "").unwrap();
    until(&mut events, "session.completed").await;
    let system = h.model.seen.lock().unwrap()[0].system.clone();
    assert!(
        system.contains("Codename Falcon; event SessionStart"),
        "{system}"
    );
    let input = s.json("start.json");
    assert_eq!(input["source"], "startup");
    assert!(input.get("request_id").is_none());
}

#[tokio::test]
async fn failing_slow_and_garbled_hooks_are_warnings_and_change_nothing() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(
        &mut hooks.pre_tool_use,
        "fail",
        "echo boom >&2\nexit 1",
        None,
    );
    hooks.pre_tool_use.push(CommandHookConfig {
        timeout: Some(Duration::from_secs(1)),
        ..entry(
            s.hook("slow", "echo $$ > \"$OUT/slow.pid\"\nexec sleep 30"),
            None,
        )
    });
    s.on(&mut hooks.pre_tool_use, "garbled", "echo '{oops'", None);
    s.on(
        &mut hooks.pre_tool_use,
        "ask",
        "echo '{\"decision\": \"ask\"}'",
        None,
    );
    let (h, sess, mut events) = hooked(vec![call("peek", json!({})), say("ok")], hooks).await;
    sess.send("look").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let w = warnings(&all);
    let reasons: Vec<&str> = w
        .iter()
        .map(|w| {
            assert_eq!(w.code, ErrorCode::HookFailed);
            assert_eq!(w.details["hook"], "PreToolUse");
            w.details["reason"].as_str().unwrap()
        })
        .collect();
    assert_eq!(reasons, ["failed", "timeout", "bad_output", "bad_output"]);
    assert_eq!(w[0].details["exitCode"], 1);
    assert_eq!(w[0].details["stderr"], "boom");
    // The decision did not change: the call ran.
    assert_eq!(h.peek.calls.lock().unwrap().len(), 1);
    // The slow hook was killed at its limit.
    gone(&std::fs::read_to_string(s.file("slow.pid")).unwrap()).await;
}

#[tokio::test]
async fn an_interrupt_stops_a_running_hook_and_kills_it() {
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    s.on(&mut hooks.pre_tool_use, "hang", "echo $$ > \"$OUT/hang.pid.tmp\"\nmv \"$OUT/hang.pid.tmp\" \"$OUT/hang.pid\"\nexec sleep 60", None);
    let (h, sess, mut events) = hooked(vec![call("peek", json!({})), say("never")], hooks).await;
    sess.send("look").await.unwrap();
    let pid_file = s.file("hang.pid");
    let guard = std::time::Instant::now();
    while !pid_file.exists() {
        assert!(
            guard.elapsed() < Duration::from_secs(60),
            "the hook never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    sess.interrupt().await.unwrap();
    let all = until(&mut events, "session.interrupted").await;
    assert!(!all.iter().any(|e| e.type_name() == "tool.call.started"));
    assert!(h.peek.calls.lock().unwrap().is_empty());
    gone(&std::fs::read_to_string(&pid_file).unwrap()).await;
}

/// A Rust host's hooks: deny one tool, note another; they run after command hooks.
#[derive(Debug, Default)]
struct HostHooks {
    seen: Mutex<Vec<String>>,
}

#[async_trait]
impl Hooks for HostHooks {
    async fn pre_tool_use(&self, input: &HookInput) -> Result<ToolVerdict, HookError> {
        let tool = input.tool_name.clone().unwrap_or_default();
        self.seen.lock().unwrap().push(format!("pre {tool}"));
        Ok(match tool.as_str() {
            "poke" => ToolVerdict::Deny {
                reason: "read-only day".into(),
            },
            _ => ToolVerdict::Continue,
        })
    }

    async fn post_tool_use(&self, input: &HookInput) -> Result<Option<String>, HookError> {
        let tool = input.tool_name.clone().unwrap_or_default();
        self.seen.lock().unwrap().push(format!("post {tool}"));
        Err(HookError::failed("the audit log is full"))
    }
}

#[tokio::test]
async fn rust_hooks_are_set_on_the_builder() {
    let s = Scripts::new();
    let ws = tempfile::tempdir().unwrap();
    let mut hooks = HooksConfig::default();
    s.on(
        &mut hooks.pre_tool_use,
        "first",
        "echo x >> \"$OUT/order\"",
        None,
    );
    let host = Arc::new(HostHooks::default());
    let model = TestModel::new(vec![
        Turn {
            calls: vec![("peek", json!({})), ("poke", json!({}))],
            ..Turn::default()
        },
        say("ok"),
    ]);
    let peek = tool("peek", PermissionLevel::Read, PlanBehavior::Allowed);
    let kernel = Kernel::builder()
        .config(KernelConfig {
            hooks,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(model.clone())
        .memory_store()
        .builtin_tools(false)
        .tool(peek.clone())
        .tool(tool("poke", PermissionLevel::Write, PlanBehavior::Denied))
        .hooks(host.clone())
        .build()
        .unwrap();
    let (sess, mut events) = kernel.start_session(opts()).await.unwrap();
    sess.send("go").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    assert_eq!(
        *host.seen.lock().unwrap(),
        ["pre peek", "post peek", "pre poke"]
    );
    // The command hook ran first, for both calls.
    assert_eq!(std::fs::read_to_string(s.file("order")).unwrap(), "x\nx\n");
    let skips = skipped(&all);
    assert_eq!(skips.len(), 1);
    assert_eq!(skips[0].details["reason"], "read-only day");
    let w = warnings(&all);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].details["command"], "host hooks");
    assert!(
        w[0].message.contains("the audit log is full"),
        "{}",
        w[0].message
    );
    assert_eq!(peek.calls.lock().unwrap().len(), 1);
    let turn_stops: Vec<TurnStopReason> = all
        .iter()
        .filter_map(|e| match &e.event {
            Event::TurnCompleted(t) => Some(t.stop_reason.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        turn_stops,
        [TurnStopReason::ToolUse, TurnStopReason::EndTurn]
    );
}

#[tokio::test]
async fn bad_hook_configuration_is_refused_by_the_builder() {
    for (event, hook) in [
        ("PreToolUse", entry("true".into(), Some("("))),
        ("Stop", entry("true".into(), Some("peek"))),
        ("PreToolUse", entry("  ".into(), None)),
    ] {
        let mut hooks = HooksConfig::default();
        match event {
            "Stop" => hooks.stop.push(hook),
            _ => hooks.pre_tool_use.push(hook),
        }
        let err = Kernel::builder()
            .config(KernelConfig {
                hooks,
                ..KernelConfig::default()
            })
            .model(TestModel::new(vec![]))
            .memory_store()
            .build()
            .unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid);
        assert_eq!(err.details["field"], format!("hooks.{event}[0]"));
    }
}

/// The example hook of docs/configuration.md does what the page says.
#[tokio::test]
async fn the_documented_hook_script_denies_rm_rf() {
    let doc = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md"),
    )
    .unwrap();
    let script = doc
        .split("```sh\n")
        .skip(1)
        .find(|b| b.contains("PreToolUse"))
        .and_then(|b| b.split("```").next())
        .expect("the documented hook")
        .to_owned();
    let s = Scripts::new();
    let mut hooks = HooksConfig::default();
    hooks
        .pre_tool_use
        .push(entry(s.hook("documented", &script), Some("run_shell")));
    let ws = tempfile::tempdir().unwrap();
    let shell = tool("run_shell", PermissionLevel::Read, PlanBehavior::Allowed);
    let kernel = Kernel::builder()
        .config(KernelConfig {
            hooks,
            ..KernelConfig::default()
        })
        .workspace(ws.path())
        .model(TestModel::new(vec![
            call("run_shell", json!({"command": "rm -rf build"})),
            call("run_shell", json!({"command": "ls build"})),
            say("ok"),
        ]))
        .memory_store()
        .builtin_tools(false)
        .tool(shell.clone())
        .build()
        .unwrap();
    let (sess, mut events) = kernel.start_session(opts()).await.unwrap();
    sess.send("clean up").await.unwrap();
    let all = until(&mut events, "session.completed").await;
    let skips = skipped(&all);
    assert_eq!(skips.len(), 1, "{skips:?}");
    assert!(
        skips[0].message.contains("rm -rf is not allowed here"),
        "{}",
        skips[0].message
    );
    assert_eq!(
        *shell.calls.lock().unwrap(),
        vec![json!({"command": "ls build"})]
    );
}
