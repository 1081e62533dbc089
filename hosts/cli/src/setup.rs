//! Shared set-up of the commands that run sessions: common flags, configuration,
//! model selection and the kernel.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_adapters::{build_model, resolve_model_spec, Config};
use keel_adapters::{default_keel_home, EnvMap};
use keel_envelope::types::PermissionMode;
use keel_envelope::ErrorPayload;
use keel_kernel::{Kernel, KernelConfig};
use keel_tools::policy::ShellPolicy;

/// Flags shared by `bridge`, `exec`, the REPL and `acp`.
#[derive(Debug, Clone, Default)]
pub struct Common {
    /// `--workspace DIR` (default: the current directory).
    pub workspace: Option<PathBuf>,
    /// `--model provider:model`.
    pub model: Option<String>,
    /// `--mode` / `--permission-mode`.
    pub mode: Option<PermissionMode>,
    /// Arguments that are not common flags, in order.
    pub rest: Vec<String>,
}

/// Parses the common flags out of `args`.
pub fn parse_common(args: &[String]) -> Result<Common, String> {
    let mut c = Common::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        let mut value = |name: &str| -> Result<String, String> {
            match inline.clone() {
                Some(v) => Ok(v),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{name} needs a value")),
            }
        };
        match flag {
            "--workspace" | "-w" => c.workspace = Some(PathBuf::from(value(flag)?)),
            "--model" | "-m" => c.model = Some(value(flag)?),
            "--mode" | "--permission-mode" => {
                let v = value(flag)?;
                c.mode = Some(PermissionMode::parse(&v).ok_or_else(|| {
                    format!("unknown mode {v:?}: use ask, auto-edit, auto or plan")
                })?);
            }
            _ => c.rest.push(a.clone()),
        }
    }
    Ok(c)
}

/// Everything a running command needs.
#[derive(Debug)]
#[allow(dead_code)]
pub struct Runtime {
    /// The kernel.
    pub kernel: Kernel,
    /// The effective configuration.
    pub config: Config,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The selected model, if one could be resolved.
    pub model_spec: Option<String>,
    /// The store directory.
    pub home: PathBuf,
}

/// Loads configuration and builds the kernel for `common`.
pub fn runtime(common: &Common) -> Result<Runtime, ErrorPayload> {
    let env = EnvMap::from_process();
    let workspace = match &common.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| {
            ErrorPayload::new(
                keel_envelope::ErrorCode::RequestInvalid,
                format!("no current directory: {e}"),
            )
        })?,
    };
    let workspace = std::fs::canonicalize(&workspace).map_err(|e| {
        ErrorPayload::new(
            keel_envelope::ErrorCode::RequestInvalid,
            format!("workspace {} is not usable: {e}", workspace.display()),
        )
    })?;
    let home = default_keel_home(&env).ok_or_else(|| {
        ErrorPayload::new(
            keel_envelope::ErrorCode::SessionPersistenceFailed,
            "no store directory: set KEEL_HOME",
        )
    })?;
    let config = Config::load(&home, Some(&workspace))?;
    let model_spec =
        resolve_model_spec(common.model.as_deref(), env.get("KEEL_MODEL"), &config).ok();
    let default_model = match &model_spec {
        Some(spec) => Some(build_model(spec, &config)?),
        None => None,
    };
    let kernel_config = KernelConfig {
        workspace: Some(workspace.clone()),
        permission_mode: common.mode.unwrap_or(config.permission_mode),
        approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        max_turns: config.max_turns,
        compaction_threshold: config.compaction_threshold,
        shell: ShellPolicy {
            whitelist: config.shell.whitelist.clone(),
            high_risk: config.shell.high_risk.clone(),
        },
        sandbox: config.sandbox.clone(),
        available_models: config.available_models(model_spec.as_deref()),
        ..KernelConfig::default()
    };
    let factory_config = config.clone();
    let mut builder = Kernel::builder()
        .config(kernel_config)
        .store_dir(&home)
        .model_factory(Arc::new(move |spec: &str| {
            build_model(spec, &factory_config)
        }));
    if let Some(m) = default_model {
        builder = builder.model(m);
    }
    let kernel = builder.build()?;
    Ok(Runtime {
        kernel,
        config,
        workspace,
        model_spec,
        home,
    })
}

/// Prints an error payload as one JSON line on stderr.
pub fn report(error: &ErrorPayload) {
    eprintln!("keel: {}", error.message);
}
