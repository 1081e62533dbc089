//! Questions for the client, asked as `session/request_permission`: tool approvals,
//! the model's questions (ACP has no question request) and plan approval.

use std::sync::Arc;

use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use keel_envelope::commands::{CommandPayload, SetRules};
use keel_envelope::events::{ApprovalRequested, AskRequested, PlanApprovalRequired};
use keel_envelope::types::{ApprovalDecision, PermissionMode};
use serde_json::{json, Value};

use crate::host::{Host, Sess};
use crate::tools::{preview_contents, text_content, tool_kind, tool_locations, tool_title};

/// The session deny rule a `reject_always` answer adds: the tool with the call's
/// canonical command (`FOO=1 rm  x` and `env rm x` give `run_shell(rm x)`, so every
/// spelling of the command is refused), or with its path, or the bare tool.
fn deny_rule(a: &ApprovalRequested) -> String {
    if let Some(cmd) = &a.command {
        let canonical = keel_tools::shell::canonical_command(cmd)
            .unwrap_or_else(|| cmd.split_whitespace().collect::<Vec<_>>().join(" "));
        return format!("{}({canonical})", a.tool_name);
    }
    match a.arguments.get("path").and_then(Value::as_str) {
        Some(path) => format!("{}({path})", a.tool_name),
        None => a.tool_name.clone(),
    }
}

fn keel_meta(v: Value) -> serde_json::Map<String, Value> {
    let mut meta = serde_json::Map::new();
    meta.insert("keel".into(), v);
    meta
}

fn option(id: &str, name: &str, kind: PermissionOptionKind) -> PermissionOption {
    PermissionOption::new(id.to_owned(), name.to_owned(), kind)
}

/// A pending tool call with a text as its content.
fn text_call(id: &str, title: &str, kind: ToolKind, text: String) -> ToolCallUpdate {
    ToolCallUpdate::new(
        id.to_owned(),
        ToolCallUpdateFields::new()
            .title(title.to_owned())
            .kind(kind)
            .status(ToolCallStatus::Pending)
            .content(vec![text_content(text)]),
    )
}

impl Host {
    /// Asks the client; `None` when it cancelled, answered with an error, or is gone.
    async fn ask(&self, request: RequestPermissionRequest) -> Option<String> {
        let cx = self.cx()?.clone();
        let answer = cx.send_request(request).block_task().await.ok()?;
        match answer.outcome {
            RequestPermissionOutcome::Selected(s) => Some(s.option_id.0.to_string()),
            _ => None,
        }
    }

    /// Answers an approval the kernel asked for, through the client.
    pub(crate) async fn ask_permission(self: Arc<Self>, sess: Arc<Sess>, a: ApprovalRequested) {
        let mut options = vec![option(
            "allow_once",
            "Allow once",
            PermissionOptionKind::AllowOnce,
        )];
        if a.decisions.contains(&ApprovalDecision::AllowSession) {
            options.push(option(
                "allow_session",
                "Allow for this session",
                PermissionOptionKind::AllowAlways,
            ));
        }
        options.push(option("deny", "Reject", PermissionOptionKind::RejectOnce));
        options.push(option(
            "deny_always",
            "Reject for this session",
            PermissionOptionKind::RejectAlways,
        ));
        let content = preview_contents(&sess.workspace, &a);
        let fields = ToolCallUpdateFields::new()
            .title(tool_title(&a.tool_name, &a.arguments))
            .kind(tool_kind(&a.tool_name))
            .status(ToolCallStatus::Pending)
            .raw_input(a.arguments.clone())
            .locations(tool_locations(&sess.workspace, &a.tool_name, &a.arguments))
            .content((!content.is_empty()).then_some(content));
        let request = RequestPermissionRequest::new(
            sess.handle.id().to_owned(),
            ToolCallUpdate::new(a.tool_call_id.clone(), fields),
            options,
        )
        .meta(keel_meta(json!({
            "approvalId": a.approval_id,
            "reason": a.reason,
            "riskLevel": a.risk_level,
            "actionType": a.action_type,
            "command": a.command,
            "expiresAt": a.expires_at,
        })));
        let decision = match self.ask(request).await.as_deref() {
            Some("allow_once") => ApprovalDecision::AllowOnce,
            Some("allow_session") => ApprovalDecision::AllowSession,
            Some("deny_always") => {
                // A session deny rule: the gate refuses the same command from now on,
                // however it is spelled, before anything is asked.
                let rules = {
                    let mut st = sess.st();
                    let rule = deny_rule(&a);
                    if !st.denies.contains(&rule) {
                        st.denies.push(rule);
                    }
                    st.denies.clone()
                };
                let current = sess.handle.state().rules;
                let _ = sess
                    .handle
                    .command(CommandPayload::SessionSetRules(
                        SetRules::new()
                            .always_allow_global(current.always_allow_global)
                            .always_allow_project(current.always_allow_project)
                            .always_deny_global(current.always_deny_global)
                            .always_deny_project(current.always_deny_project)
                            .deny(rules),
                    ))
                    .await;
                ApprovalDecision::Deny
            }
            // reject_once, cancelled, an unknown option or an error: deny.
            _ => ApprovalDecision::Deny,
        };
        // After an interrupt the approval is already released; the kernel then
        // answers APPROVAL_NOT_FOUND, which is expected.
        let _ = sess.handle.respond_approval(&a.approval_id, decision).await;
    }

    /// Offers a question's candidate answers as permission options; declining
    /// answers that nobody answered.
    pub(crate) async fn ask_question(self: Arc<Self>, sess: Arc<Sess>, q: AskRequested) {
        let mut options: Vec<PermissionOption> = q
            .candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                PermissionOption::new(
                    format!("answer_{i}"),
                    c.clone(),
                    PermissionOptionKind::AllowOnce,
                )
            })
            .collect();
        options.push(option(
            "decline",
            "Do not answer",
            PermissionOptionKind::RejectOnce,
        ));
        let call = text_call(
            &q.tool_call_id,
            &q.question,
            ToolKind::Other,
            q.question.clone(),
        );
        let request = RequestPermissionRequest::new(sess.handle.id().to_owned(), call, options)
            .meta(keel_meta(
                json!({"askId": q.ask_id, "expiresAt": q.expires_at}),
            ));
        let chosen = self.ask(request).await.and_then(|id| {
            let i: usize = id.strip_prefix("answer_")?.parse().ok()?;
            q.candidates.get(i).cloned()
        });
        let text = chosen.unwrap_or_else(|| "(The user did not answer.)".to_owned());
        let _ = sess.handle.answer_ask(&q.ask_id, text).await;
    }

    /// Asks the client to approve a plan proposed in plan mode.
    pub(crate) async fn ask_plan(
        self: Arc<Self>,
        sess: Arc<Sess>,
        tool_call_id: String,
        p: PlanApprovalRequired,
    ) {
        let mut content = String::new();
        if let Some(summary) = &p.summary {
            content.push_str(summary);
            content.push_str("\n\n");
        }
        for (i, step) in p.steps.iter().enumerate() {
            content.push_str(&format!("{}. {}\n", i + 1, step.title));
        }
        let options = vec![
            option(
                "approve_auto_edit",
                "Approve, and accept edits automatically",
                PermissionOptionKind::AllowAlways,
            ),
            option(
                "approve_ask",
                "Approve, and ask before edits",
                PermissionOptionKind::AllowOnce,
            ),
            option("reject", "Keep planning", PermissionOptionKind::RejectOnce),
        ];
        let call = text_call(
            &tool_call_id,
            "Approve the plan",
            ToolKind::SwitchMode,
            content,
        );
        let request = RequestPermissionRequest::new(sess.handle.id().to_owned(), call, options)
            .meta(keel_meta(json!({"planId": p.plan_id})));
        let _ = match self.ask(request).await.as_deref() {
            Some("approve_auto_edit") => {
                sess.handle
                    .approve_plan(&p.plan_id, Some(PermissionMode::AutoEdit))
                    .await
            }
            Some("approve_ask") => {
                sess.handle
                    .approve_plan(&p.plan_id, Some(PermissionMode::Ask))
                    .await
            }
            _ => sess.handle.reject_plan(&p.plan_id, None).await,
        };
    }
}
