//! Command hooks: a shell command that reads the hook's input as one JSON object on
//! stdin and answers with its exit status and output, as Claude Code's hooks do.
//!
//! - exit 0: success. Empty stdout changes nothing. Stdout that starts with `{` must be
//!   one JSON object (see [`parse_json`]); other text is context for `UserPromptSubmit`
//!   and `SessionStart`, and ignored elsewhere.
//! - exit 2: block. Stderr is the reason: `PreToolUse` denies the call,
//!   `UserPromptSubmit` blocks the prompt, `PostToolUse` gives stderr to the model as a
//!   note, `Stop` asks the model to go on; for `SessionStart` it is a failure.
//! - any other status, a kill by a signal, no start: a failure (a `warning`).
//!
//! The command runs with `/bin/sh -c` in the workspace, unsandboxed (it is the user's
//! own command, like a git hook), through `keel_tools::exec` in its own process group:
//! at its time limit, on interrupt or when the session closes, it and everything it
//! started are killed. Its input is a private temporary file opened as its stdin; the
//! environment adds `KEEL_HOOK_EVENT`, `KEEL_SESSION_ID` and `KEEL_PROJECT_DIR`.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_envelope::ErrorCode;
use keel_tools::exec::{self, ExecSpec};
use keel_tools::ToolContext;
use regex::Regex;
use serde_json::Value;

use super::{
    CommandHookConfig, HookError, HookEvent, HookFailure, HookInput, Hooks, PromptVerdict,
    StopVerdict, ToolVerdict,
};

/// How much of a failed hook's stderr a warning keeps.
const STDERR_KEPT: usize = 2000;

/// Compiles a tool-name matcher: the whole name must match; `""` and `"*"` match
/// every tool.
pub fn compile_matcher(matcher: &str) -> Result<Option<Regex>, String> {
    let m = matcher.trim();
    if m.is_empty() || m == "*" {
        return Ok(None);
    }
    Regex::new(&format!("^(?:{m})$")).map(Some).map_err(|e| {
        // The parser's message spans lines (the pattern, a caret, the error).
        let text = e.to_string();
        let why = text.lines().last().unwrap_or_default().trim();
        let why = why.strip_prefix("error: ").unwrap_or(why);
        format!("matcher {m:?} is not a valid regular expression ({why})")
    })
}

/// One configured command hook.
#[derive(Debug)]
pub struct CommandHook {
    event: HookEvent,
    command: String,
    matcher: Option<Regex>,
    timeout: Duration,
}

impl CommandHook {
    /// A hook at `event`; fails when its matcher is not a regular expression, is given
    /// for a point without tools, or the command is empty.
    pub fn new(
        event: HookEvent,
        config: &CommandHookConfig,
        default_timeout: Duration,
    ) -> Result<Self, String> {
        if config.command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        let matcher = match &config.matcher {
            Some(m) if !event.takes_matcher() => {
                return Err(format!(
                    "`matcher` ({m:?}) only applies to PreToolUse and PostToolUse hooks"
                ))
            }
            Some(m) => compile_matcher(m)?,
            None => None,
        };
        if config.timeout == Some(Duration::ZERO) {
            return Err("`timeoutSecs` must be at least 1".into());
        }
        Ok(Self {
            event,
            command: config.command.clone(),
            matcher,
            timeout: config.timeout.unwrap_or(default_timeout),
        })
    }

    /// Runs the command; returns its exit status (`None` when killed), stdout and
    /// stderr.
    async fn run(&self, input: &HookInput) -> Result<(Option<i32>, String, String), HookError> {
        let json = serde_json::to_vec(input).map_err(|e| HookError {
            reason: HookFailure::Spawn,
            message: format!("could not encode its input: {e}"),
            exit_code: None,
            stderr: None,
        })?;
        let file = InputFile::write(&json).map_err(|e| HookError {
            reason: HookFailure::Spawn,
            message: format!("could not write its input: {e}"),
            exit_code: None,
            stderr: None,
        })?;
        let cwd = PathBuf::from(&input.cwd);
        let spec = ExecSpec {
            program: "/bin/sh".into(),
            args: vec![
                "-c".into(),
                format!("exec <\"$KEEL_HOOK_INPUT\"\n{}", self.command),
            ],
            cwd: cwd.clone(),
            env: vec![
                ("KEEL_HOOK_INPUT".into(), file.0.display().to_string()),
                ("KEEL_HOOK_EVENT".into(), self.event.as_str().into()),
                ("KEEL_SESSION_ID".into(), input.session_id.clone()),
                ("KEEL_PROJECT_DIR".into(), input.cwd.clone()),
            ],
            timeout: self.timeout,
        };
        let ctx = ToolContext {
            workspace: cwd,
            cancel: input.cancel.clone(),
            progress: Arc::new(|_, _| {}),
            elevated: false,
            sandbox: keel_tools::SandboxConfig::default(),
            roots: keel_tools::jail::Roots::none(),
        };
        let r = exec::run(spec, &ctx).await.map_err(|e| HookError {
            reason: if e.code == ErrorCode::Interrupted {
                HookFailure::Failed
            } else {
                HookFailure::Spawn
            },
            message: e.message,
            exit_code: None,
            stderr: None,
        })?;
        drop(file);
        if r.timed_out {
            return Err(HookError {
                reason: HookFailure::Timeout,
                message: format!(
                    "passed its time limit of {} s and was killed",
                    self.timeout.as_secs_f64()
                ),
                exit_code: None,
                stderr: Some(tail(&r.stderr)),
            });
        }
        Ok((r.exit_code, r.stdout, r.stderr))
    }

    /// Runs the command and reads its answer.
    async fn answer(&self, input: &HookInput) -> Result<Answer, HookError> {
        let (code, stdout, stderr) = self.run(input).await?;
        match code {
            Some(0) => parse_stdout(self.event, &stdout),
            Some(2) if self.event != HookEvent::SessionStart => {
                let reason = stderr.trim();
                Ok(Answer {
                    block: Some(if reason.is_empty() {
                        "blocked by a hook (exit status 2, no message)".to_owned()
                    } else {
                        reason.to_owned()
                    }),
                    ..Answer::default()
                })
            }
            other => Err(HookError {
                reason: HookFailure::Failed,
                message: match other {
                    Some(c) => format!("exited with status {c}"),
                    None => "was killed by a signal".to_owned(),
                },
                exit_code: other,
                stderr: Some(tail(&stderr)),
            }),
        }
    }
}

fn tail(s: &str) -> String {
    let s = s.trim();
    let n = s.chars().count();
    if n <= STDERR_KEPT {
        return s.to_owned();
    }
    s.chars().skip(n - STDERR_KEPT).collect()
}

/// The hook's input, in a private file removed when dropped.
struct InputFile(PathBuf);

impl InputFile {
    fn write(json: &[u8]) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        static N: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let path = std::env::temp_dir().join(format!(
            "keel-hook-{}-{}-{nanos:x}.json",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)?;
        let file = InputFile(path);
        f.write_all(json)?;
        Ok(file)
    }

    #[cfg(test)]
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for InputFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// What a command answered, whatever the point.
#[derive(Debug, Default, PartialEq)]
struct Answer {
    /// Deny, block, or (PostToolUse, Stop) a message for the model.
    block: Option<String>,
    /// Rewritten arguments.
    updated_input: Option<Value>,
    /// Context or note.
    context: Option<String>,
}

fn bad(message: String) -> HookError {
    HookError {
        reason: HookFailure::BadOutput,
        message,
        exit_code: Some(0),
        stderr: None,
    }
}

/// Reads stdout after exit 0.
fn parse_stdout(event: HookEvent, stdout: &str) -> Result<Answer, HookError> {
    let text = stdout.trim();
    if text.is_empty() {
        return Ok(Answer::default());
    }
    if text.starts_with('{') {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| bad(format!("printed output that is not valid JSON ({e})")))?;
        return parse_json(event, &value);
    }
    Ok(match event {
        HookEvent::UserPromptSubmit | HookEvent::SessionStart => Answer {
            context: Some(text.to_owned()),
            ..Answer::default()
        },
        _ => Answer::default(),
    })
}

/// Reads a JSON answer. Keys (at the top level, or in `hookSpecificOutput` as Claude
/// Code writes them): `decision` / `permissionDecision` (`allow` or `approve`: no
/// objection; `deny` or `block`: deny, block, or for `Stop` go on), `reason` /
/// `permissionDecisionReason`, `updatedInput` (`PreToolUse`: an object),
/// `additionalContext` (text). Other keys are ignored.
fn parse_json(event: HookEvent, v: &Value) -> Result<Answer, HookError> {
    let Value::Object(top) = v else {
        return Err(bad("printed JSON that is not an object".into()));
    };
    let specific = top.get("hookSpecificOutput").and_then(Value::as_object);
    let get = |keys: &[&str]| -> Option<&Value> {
        keys.iter()
            .find_map(|k| top.get(*k).or_else(|| specific.and_then(|s| s.get(*k))))
            .filter(|v| !v.is_null())
    };
    let text = |keys: &[&str]| -> Result<Option<String>, HookError> {
        match get(keys) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(bad(format!("answered `{}` = {other}, not text", keys[0]))),
        }
    };
    let decision = text(&["decision", "permissionDecision"])?;
    let reason = text(&["reason", "permissionDecisionReason"])?;
    let context = text(&["additionalContext"])?;
    let mut a = Answer {
        context,
        ..Answer::default()
    };
    if let Some(u) = get(&["updatedInput"]) {
        if event != HookEvent::PreToolUse {
            return Err(bad(format!(
                "answered `updatedInput`, which only a PreToolUse hook may give (not {})",
                event.as_str()
            )));
        }
        if !u.is_object() {
            return Err(bad(format!("answered `updatedInput` = {u}, not an object")));
        }
        a.updated_input = Some(u.clone());
    }
    match decision.as_deref() {
        None | Some("allow") | Some("approve") => {}
        Some("deny") | Some("block") => {
            let reason = reason.unwrap_or_default();
            if event == HookEvent::Stop && reason.trim().is_empty() {
                return Err(bad(
                    "answered decision \"block\" without a `reason` for the model".into(),
                ));
            }
            if event == HookEvent::SessionStart {
                return Err(bad(
                    "answered a decision, which a SessionStart hook cannot give".into(),
                ));
            }
            a.block = Some(if reason.trim().is_empty() {
                "no reason given".into()
            } else {
                reason
            });
        }
        Some(other) => {
            return Err(bad(format!(
                "answered decision {other:?} (expected \"allow\", \"deny\" or \"block\")"
            )))
        }
    }
    Ok(a)
}

#[async_trait]
impl Hooks for CommandHook {
    fn name(&self) -> String {
        self.command.clone()
    }

    fn applies(&self, event: HookEvent, tool: Option<&str>) -> bool {
        event == self.event
            && match (&self.matcher, tool) {
                (Some(m), Some(t)) => m.is_match(t),
                _ => true,
            }
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.timeout)
    }

    async fn session_start(&self, input: &HookInput) -> Result<Option<String>, HookError> {
        Ok(self.answer(input).await?.context)
    }

    async fn user_prompt_submit(&self, input: &HookInput) -> Result<PromptVerdict, HookError> {
        let a = self.answer(input).await?;
        Ok(match a.block {
            Some(reason) => PromptVerdict::Block { reason },
            None => PromptVerdict::Continue { context: a.context },
        })
    }

    async fn pre_tool_use(&self, input: &HookInput) -> Result<ToolVerdict, HookError> {
        let a = self.answer(input).await?;
        Ok(match (a.block, a.updated_input) {
            (Some(reason), _) => ToolVerdict::Deny { reason },
            (None, Some(arguments)) => ToolVerdict::Rewrite { arguments },
            (None, None) => ToolVerdict::Continue,
        })
    }

    async fn post_tool_use(&self, input: &HookInput) -> Result<Option<String>, HookError> {
        let a = self.answer(input).await?;
        let notes: Vec<String> = a.block.into_iter().chain(a.context).collect();
        Ok((!notes.is_empty()).then(|| notes.join("\n")))
    }

    async fn stop(&self, input: &HookInput) -> Result<StopVerdict, HookError> {
        let a = self.answer(input).await?;
        Ok(match a.block {
            Some(reason) => StopVerdict::Continue { reason },
            None => StopVerdict::Stop,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn matchers_match_whole_names() {
        let m = compile_matcher("run_shell|edit_file").unwrap().unwrap();
        assert!(m.is_match("run_shell"));
        assert!(m.is_match("edit_file"));
        assert!(!m.is_match("run_shell_x"));
        assert!(!m.is_match("xedit_file"));
        let m = compile_matcher("mcp__.*").unwrap().unwrap();
        assert!(m.is_match("mcp__git__status"));
        assert!(compile_matcher("*").unwrap().is_none());
        assert!(compile_matcher("").unwrap().is_none());
        assert!(compile_matcher("(")
            .unwrap_err()
            .contains("regular expression"));
    }

    #[test]
    fn answers_are_read_as_claude_code_writes_them() {
        let pre = HookEvent::PreToolUse;
        assert_eq!(parse_stdout(pre, "").unwrap(), Answer::default());
        assert_eq!(
            parse_stdout(pre, "some log line").unwrap(),
            Answer::default()
        );
        let a = parse_stdout(pre, r#"{"decision":"deny","reason":"no"}"#).unwrap();
        assert_eq!(a.block.as_deref(), Some("no"));
        let a = parse_json(
            pre,
            &json!({"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": "nope"}}),
        )
        .unwrap();
        assert_eq!(a.block.as_deref(), Some("nope"));
        let a = parse_json(
            pre,
            &json!({"decision": "allow", "updatedInput": {"path": "b"}}),
        )
        .unwrap();
        assert_eq!(a.updated_input, Some(json!({"path": "b"})));
        assert!(a.block.is_none());
        let ctx = parse_stdout(HookEvent::UserPromptSubmit, "remember the tests\n").unwrap();
        assert_eq!(ctx.context.as_deref(), Some("remember the tests"));
    }

    #[test]
    fn bad_answers_are_failures() {
        let pre = HookEvent::PreToolUse;
        for (event, out) in [
            (pre, "{not json"),
            (pre, r#"{"decision":"ask"}"#),
            (pre, r#"{"decision":5}"#),
            (pre, r#"{"updatedInput":"rm -rf /"}"#),
            (HookEvent::PostToolUse, r#"{"updatedInput":{}}"#),
            (HookEvent::Stop, r#"{"decision":"block"}"#),
            (
                HookEvent::SessionStart,
                r#"{"decision":"block","reason":"x"}"#,
            ),
            (pre, r#"{"additionalContext":["a"]}"#),
        ] {
            let e = parse_stdout(event, out).unwrap_err();
            assert_eq!(e.reason, HookFailure::BadOutput, "{out}: {e}");
        }
        assert_eq!(
            parse_json(pre, &json!([1])).unwrap_err().reason,
            HookFailure::BadOutput
        );
    }

    #[test]
    fn configuration_mistakes_are_refused() {
        let c = |command: &str, matcher: Option<&str>| CommandHookConfig {
            command: command.into(),
            matcher: matcher.map(str::to_owned),
            timeout: None,
        };
        let t = Duration::from_secs(1);
        assert!(
            CommandHook::new(HookEvent::Stop, &c("x", Some("run_shell")), t)
                .unwrap_err()
                .contains("only applies")
        );
        assert!(CommandHook::new(HookEvent::PreToolUse, &c(" ", None), t)
            .unwrap_err()
            .contains("empty"));
        assert!(CommandHook::new(HookEvent::PreToolUse, &c("x", Some("[")), t).is_err());
        let h = CommandHook::new(HookEvent::PreToolUse, &c("x", Some("read_.*")), t).unwrap();
        assert!(h.applies(HookEvent::PreToolUse, Some("read_file")));
        assert!(!h.applies(HookEvent::PreToolUse, Some("write_file")));
        assert!(!h.applies(HookEvent::PostToolUse, Some("read_file")));
    }

    #[test]
    fn the_input_file_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let f = InputFile::write(b"{}").unwrap();
        let path = f.path().to_owned();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        drop(f);
        assert!(!path.exists());
    }
}
