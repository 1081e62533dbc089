//! A session's Agent Skills and custom commands: found in its workspace and the
//! configured folders when it opens (`keel_skills`, with [`crate::SkillsConfig`]),
//! each one left out a `warning` `SKILL_SKIPPED` naming its file; and the
//! `activate_skill` tool, an entry of the session's own tools only when it has
//! skills, which returns a skill's instructions or one file of its folder (read
//! level, under the normal gate; a path is resolved inside the skill's folder).
//!
//! Progressive disclosure: the system prompt lists only each skill's name and
//! description ([`crate::session::skills`]); the body is read when the model
//! activates the skill, never before.

use std::sync::Arc;

use async_trait::async_trait;
use keel_envelope::error::Severity;
use keel_envelope::kernel_tools::ActivateSkillArgs;
use keel_envelope::{ErrorCode, ErrorPayload, Event};
use serde_json::{json, Value};

use crate::session::registry::{
    args_mismatch, kernel_args, Args, CallCx, Decoder, Entry, Handler, KernelHandler, Origin,
};
use crate::session::Session;

/// The tool's name.
pub(crate) const ACTIVATE_SKILL: &str = "activate_skill";

/// How many sessions of the process look for their skills at once.
static DISCOVERIES: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(4);

/// The largest file of a skill's folder `activate_skill {file}` returns.
pub(crate) const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// Finds the session's skills and commands (on the blocking pool), reports each one
/// left out as a `warning` on `rid`, and gives the session `activate_skill` when it
/// has skills. Never fails: a problem is a warning.
pub(crate) async fn load(session: &Arc<Session>, rid: &str) {
    let Some(config) = session.services.config().skills.clone() else {
        return;
    };
    let workspace = session.workspace.clone();
    // A few discoveries at a time: each holds directory handles while it reads, and a
    // host may start thousands of sessions at once under a low limit of open files.
    let _turn = DISCOVERIES.acquire().await;
    let found = tokio::task::spawn_blocking(move || {
        let reserved: Vec<&str> = config
            .reserved_commands
            .iter()
            .map(String::as_str)
            .collect();
        config.settings.catalog(&workspace, &reserved)
    })
    .await;
    let catalog = match found {
        Ok(c) => c,
        Err(e) => {
            let w = ErrorPayload::new(
                ErrorCode::SkillSkipped,
                format!("the session's skills could not be read: {e}"),
            )
            .severity(Severity::Warning);
            session.emitter.emit(rid, Event::Warning(w)).await;
            return;
        }
    };
    for w in catalog.warnings() {
        let warning = ErrorPayload::new(ErrorCode::SkillSkipped, w.to_string())
            .severity(Severity::Warning)
            .with_detail("path", w.path.display().to_string())
            .with_detail("reason", w.kind.as_str());
        session.emitter.emit(rid, Event::Warning(warning)).await;
    }
    tracing::debug!(
        skills = catalog.skills.items.len(),
        commands = catalog.commands.items.len(),
        "skills and commands found"
    );
    if !catalog.skills.items.is_empty() {
        if let Err(e) = session.tools.add_own(session.services.registry(), entry()) {
            // A host tool already has the name: the skills stay listed, and the host
            // learns why the model cannot activate them.
            let w = e.severity(Severity::Warning);
            session.emitter.emit(rid, Event::Warning(w)).await;
        }
    }
    session.skills.set(catalog);
}

/// The entry of `activate_skill`: its row of the kernel's table.
fn entry() -> Entry {
    let spec = keel_tools::spec::kernel_specs()
        .into_iter()
        .find(|s| s.name == ACTIVATE_SKILL)
        .unwrap_or_else(|| {
            keel_tools::ToolSpec::custom(
                ACTIVATE_SKILL,
                "",
                json!({"type": "object"}),
                keel_envelope::types::PermissionLevel::Read,
                keel_tools::PlanBehavior::Allowed,
                keel_tools::ApprovalRequirement::Never,
            )
        });
    Entry {
        spec,
        origin: Origin::Kernel,
        handler: Handler::Kernel(Arc::new(ActivateSkill)),
        decoder: Decoder::Kernel(kernel_args::<ActivateSkillArgs>),
    }
}

/// `activate_skill {name, file?}`.
#[derive(Debug)]
struct ActivateSkill;

#[async_trait]
impl KernelHandler for ActivateSkill {
    async fn run(&self, cx: &CallCx<'_>, args: Args) -> Result<Value, ErrorPayload> {
        let Args::ActivateSkill(a) = args else {
            return Err(args_mismatch(&cx.call.name));
        };
        let catalog = cx.session.skills.catalog();
        let found = catalog.as_ref().and_then(|c| c.skill(&a.name)).cloned();
        let Some(skill) = found else {
            let names: Vec<&str> = catalog
                .iter()
                .flat_map(|c| c.skills.items.iter())
                .map(|s| s.name.as_str())
                .collect();
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                format!(
                    "there is no skill named {:?}; the skills are: {}",
                    a.name,
                    names.join(", ")
                ),
            )
            .with_detail("field", "name"));
        };
        let name = skill.name.clone();
        let file = a.file.clone();
        let read = tokio::task::spawn_blocking(move || match &file {
            None => skill
                .activate()
                .map(|act| {
                    json!({
                        "skill": act.name,
                        "path": act.path.display().to_string(),
                        "files": act.files,
                        "message": act.text(),
                    })
                })
                .map_err(|w| {
                    ErrorPayload::new(ErrorCode::ToolExecutionFailed, w.to_string())
                        .with_detail("path", w.path.display().to_string())
                        .with_detail("reason", w.kind.as_str())
                }),
            Some(rel) => skill
                .read_file(rel, MAX_SKILL_FILE_BYTES)
                .map(|text| json!({"skill": skill.name, "file": rel, "message": text}))
                .map_err(|m| {
                    ErrorPayload::new(ErrorCode::ToolExecutionFailed, m)
                        .with_detail("file", rel.clone())
                }),
        })
        .await
        .map_err(|e| {
            ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                format!("the skill {name:?} could not be read: {e}"),
            )
        })?;
        read.map_err(|e| e.with_detail("skill", name))
    }
}
