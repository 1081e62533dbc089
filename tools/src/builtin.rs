//! The seven built-in tools as [`Tool`] objects.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use keel_envelope::tools::{
    EditFileArgs, GitArgs, ListDirArgs, ReadFileArgs, RunShellArgs, SearchFilesArgs, WriteFileArgs,
};
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::Serialize;

use crate::exec::{self, ExecSpec, ShellCommand};
use crate::fs::parse_args;
use crate::spec::{builtin_spec, ToolSpec};
use crate::{jail, ProgressStream, Tool, ToolArgs, ToolContext};

/// Default `run_shell` and `git` time limit.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// Largest time limit.
pub const MAX_TIMEOUT_MS: u64 = 3_600_000;

fn to_json<T: Serialize>(v: T) -> Result<serde_json::Value, ErrorPayload> {
    serde_json::to_value(v).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::RuntimeInternalError,
            format!("cannot encode the result: {e}"),
        )
    })
}

async fn blocking<T, F>(f: F) -> Result<T, ErrorPayload>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ErrorPayload> + Send + 'static,
{
    tokio::task::spawn_blocking(f).await.map_err(|e| {
        ErrorPayload::new(
            ErrorCode::RuntimeInternalError,
            format!("the tool task failed: {e}"),
        )
    })?
}

/// Runs a read-only blocking job; a cancellation returns at once (nothing is left
/// half-written, so the job may finish in the background).
async fn read_only<T, F>(
    cancel: tokio_util::sync::CancellationToken,
    f: F,
) -> Result<T, ErrorPayload>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ErrorPayload> + Send + 'static,
{
    tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(ErrorPayload::new(ErrorCode::Interrupted, "the call was cancelled")),
        r = blocking(f) => r,
    }
}

/// A built-in tool: its struct with its row of the matrix, and its `Tool` impl, whose
/// typed `call` is reached from JSON arguments (decoded here) or from arguments the
/// caller decoded once (`ToolArgs::$variant`).
macro_rules! tool {
    ($ty:ident, $name:literal, $variant:ident, $doc:literal) => {
        #[doc = $doc]
        #[derive(Debug)]
        pub struct $ty {
            spec: ToolSpec,
        }

        impl $ty {
            /// Creates the tool with its row of the matrix.
            pub fn new() -> Self {
                Self {
                    spec: builtin_spec($name).unwrap_or_else(|| {
                        ToolSpec::custom(
                            $name,
                            "",
                            serde_json::Value::Null,
                            keel_envelope::types::PermissionLevel::Execute,
                            crate::PlanBehavior::Denied,
                            crate::ApprovalRequirement::Always,
                        )
                    }),
                }
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        #[async_trait]
        impl Tool for $ty {
            fn spec(&self) -> &ToolSpec {
                &self.spec
            }
            async fn run(
                &self,
                args: serde_json::Value,
                ctx: ToolContext,
            ) -> Result<serde_json::Value, ErrorPayload> {
                self.call(parse_args($name, args)?, ctx).await
            }
            async fn run_decoded(
                &self,
                args: ToolArgs,
                raw: &serde_json::Value,
                ctx: ToolContext,
            ) -> Result<serde_json::Value, ErrorPayload> {
                match args {
                    ToolArgs::$variant(a) => self.call(a, ctx).await,
                    _ => self.run(raw.clone(), ctx).await,
                }
            }
        }
    };
}

tool!(ReadFile, "read_file", ReadFile, "`read_file`.");
tool!(ListDir, "list_dir", ListDir, "`list_dir`.");
tool!(SearchFiles, "search_files", SearchFiles, "`search_files`.");
tool!(EditFile, "edit_file", EditFile, "`edit_file`.");
tool!(WriteFile, "write_file", WriteFile, "`write_file`.");
tool!(RunShell, "run_shell", RunShell, "`run_shell`.");
tool!(Git, "git", Git, "`git`.");

/// The seven built-in tools, in matrix order.
pub fn builtin_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadFile::new()),
        Arc::new(ListDir::new()),
        Arc::new(SearchFiles::new()),
        Arc::new(EditFile::new()),
        Arc::new(WriteFile::new()),
        Arc::new(RunShell::new()),
        Arc::new(Git::new()),
    ]
}

impl ReadFile {
    async fn call(
        &self,
        a: ReadFileArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        let cancel = ctx.cancel.clone();
        to_json(read_only(cancel, move || crate::fs::read_file(a, &ctx)).await?)
    }
}

impl ListDir {
    async fn call(
        &self,
        a: ListDirArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        let cancel = ctx.cancel.clone();
        to_json(read_only(cancel, move || crate::fs::list_dir(a, &ctx)).await?)
    }
}

impl SearchFiles {
    async fn call(
        &self,
        a: SearchFilesArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        let cancel = ctx.cancel.clone();
        to_json(read_only(cancel, move || crate::search::search_files(a, &ctx)).await?)
    }
}

impl EditFile {
    async fn call(
        &self,
        a: EditFileArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        to_json(blocking(move || crate::fs::edit_file(a, &ctx)).await?)
    }
}

impl WriteFile {
    async fn call(
        &self,
        a: WriteFileArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        to_json(blocking(move || crate::fs::write_file(a, &ctx)).await?)
    }
}

fn timeout_of(ms: Option<u64>) -> Result<Duration, ErrorPayload> {
    let ms = ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if ms == 0 || ms > MAX_TIMEOUT_MS {
        return Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("`timeoutMs` must be between 1 and {MAX_TIMEOUT_MS}"),
        )
        .with_detail("field", "timeoutMs"));
    }
    Ok(Duration::from_millis(ms))
}

static WARNED_UNSANDBOXED: AtomicBool = AtomicBool::new(false);

impl RunShell {
    async fn call(
        &self,
        a: RunShellArgs,
        ctx: ToolContext,
    ) -> Result<serde_json::Value, ErrorPayload> {
        if a.background == Some(true) {
            return Err(ErrorPayload::new(
                ErrorCode::ToolExecutionFailed,
                "`background: true` is not supported yet; run the command in the foreground",
            )
            .with_detail("field", "background"));
        }
        if a.command.trim().is_empty() {
            return Err(
                ErrorPayload::new(ErrorCode::ToolArgumentsInvalid, "`command` is empty")
                    .with_detail("field", "command"),
            );
        }
        if a.command.contains('\0') {
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                "`command` contains a NUL byte",
            )
            .with_detail("field", "command"));
        }
        let timeout = timeout_of(a.timeout_ms)?;
        let cwd = jail::resolve_cwd(&ctx.workspace, a.cwd.as_deref())?;
        let shell = ShellCommand {
            workspace: jail::canonical_root(&ctx.workspace),
            writable: ctx.roots.writable(),
            cwd,
            command: a.command.clone(),
            network: ctx.sandbox.network || ctx.elevated,
        };
        let child = exec::spawn_shell(&shell, &ctx.sandbox)?;
        if let Some(reason) = child.unsandboxed_reason() {
            if !WARNED_UNSANDBOXED.swap(true, Ordering::SeqCst) {
                (ctx.progress)(
                    ProgressStream::Info,
                    format!("sandbox unavailable, running unsandboxed: {reason}"),
                );
            }
        }
        to_json(exec::run_child(child, timeout, &ctx).await?)
    }
}

impl Git {
    async fn call(&self, a: GitArgs, ctx: ToolContext) -> Result<serde_json::Value, ErrorPayload> {
        crate::git::validate_subcommand(&a.command)?;
        let rest = a.args.clone().unwrap_or_default();
        if rest.iter().any(|s| s.contains('\0')) {
            return Err(ErrorPayload::new(
                ErrorCode::ToolArgumentsInvalid,
                "`args` contains a NUL byte",
            )
            .with_detail("field", "args"));
        }
        let root = jail::canonical_root(&ctx.workspace);
        let env = crate::git::safe_env()
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let spec = ExecSpec {
            program: "git".to_owned(),
            args: crate::git::safe_invocation(&a.command, &rest),
            cwd: root,
            env,
            timeout: Duration::from_millis(DEFAULT_TIMEOUT_MS),
        };
        to_json(exec::run(spec, &ctx).await?)
    }
}
