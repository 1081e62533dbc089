//! The permission gate: the session's mode and rules applied to one call.
//!
//! Every call is decided by `keel_tools::policy` from the tool's row of the
//! permission matrix, on the arguments the pipeline decoded; this module only gathers
//! the session's mode and rules.

use std::path::Path;

use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::policy::{self, DecisionInput, Rules};
use keel_tools::{ToolArgs, ToolSpec};

use crate::base::verdict::GateVerdict;
use crate::session::{Data, Session};

pub(crate) fn rules_of(d: &Data) -> Rules {
    let mut allow = d.state.rules.always_allow_global.clone();
    allow.extend(d.state.rules.always_allow_project.iter().cloned());
    let mut deny = d.state.rules.always_deny_global.clone();
    deny.extend(d.state.rules.always_deny_project.iter().cloned());
    deny.extend(d.state.session_deny.iter().cloned());
    Rules {
        allow,
        deny,
        session_keys: d.state.session_keys.iter().cloned().collect(),
    }
}

/// Decides one call with the session's current mode and rules, from the tool's row
/// of the permission matrix (built-in or host-registered).
/// `args` are the call's arguments decoded once by the pipeline; `raw` the JSON they
/// came from; `workspace` the folder the call works in (the session's, or a
/// sub-agent's own worktree).
pub(crate) fn decide(
    session: &Session,
    d: &Data,
    workspace: &Path,
    spec: &ToolSpec,
    raw: &serde_json::Value,
    args: &ToolArgs,
) -> GateVerdict {
    let rules = rules_of(d);
    let workspace = workspace.to_path_buf();
    let input = DecisionInput {
        tool: &spec.name,
        args: raw,
        mode: d.state.mode.clone(),
        rules: &rules,
        workspace: &workspace,
        roots: d.roots.clone(),
        shell: &session.services.config().shell,
    };
    GateVerdict(policy::decide_decoded(&input, args, Some(spec)))
}

/// Checks every rule of a `session.set_rules`: each must be `tool` or
/// `tool(pattern)`. A malformed rule refuses the whole command (`REQUEST_INVALID`,
/// naming the field), so a typo never leaves a deny rule silently unmatched.
pub(crate) fn check_rules(p: &keel_envelope::commands::SetRules) -> Result<(), ErrorPayload> {
    let lists: [(&str, &[String]); 5] = [
        ("alwaysAllowGlobal", &p.always_allow_global),
        ("alwaysAllowProject", &p.always_allow_project),
        ("alwaysDenyGlobal", &p.always_deny_global),
        ("alwaysDenyProject", &p.always_deny_project),
        ("deny", p.deny.as_deref().unwrap_or_default()),
    ];
    for (field, rules) in lists {
        for (i, rule) in rules.iter().enumerate() {
            if policy::Rule::parse(rule).is_none() {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!("{rule:?} is not a rule: write `tool` or `tool(pattern)`, e.g. run_shell(rm *)"),
                )
                .with_detail("field", format!("payload.{field}[{i}]")));
            }
        }
    }
    Ok(())
}
