//! Shared set-up of the commands that run sessions: configuration,
//! model selection and the kernel.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use keel_adapters::build_model;
use keel_config::{default_keel_home, selected_model_spec, Config, EnvMap};
use keel_envelope::ErrorPayload;
use keel_kernel::{Kernel, KernelConfig};
use keel_tools::policy::ShellPolicy;

use crate::cli::SessionArgs;

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
    /// Where skills and custom commands are found.
    pub skills: keel_skills::Settings,
}

/// What a command that needs a model says when none is selected.
/// Threads of the blocking pool of a process that serves many sessions (the bridge, the
/// daemon, ACP). Each session's file work (state saves, file tools, checkpoint scans)
/// runs there; tokio's default of 512 let 500 busy sessions start about 200 threads,
/// each with its stack and its share of the allocator's arenas (about 10 MB of a
/// bridge's memory), while two cores run 32 of them at most as fast. Beyond this, the
/// work waits its turn. See docs/performance.md ("Memory of a bridge running many
/// sessions").
pub const SERVER_BLOCKING_THREADS: usize = 32;

/// The runtime of a process that serves many sessions: multi-threaded, with the
/// blocking pool bounded by [`SERVER_BLOCKING_THREADS`].
pub fn server_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(SERVER_BLOCKING_THREADS)
        .build()
}

pub const NO_MODEL: &str =
    "no model configured: pass --model provider:model, set KEEL_MODEL, or set `model` in config.toml";

/// Loads configuration and builds the kernel for `common`.
pub fn runtime(common: &SessionArgs) -> Result<Runtime, ErrorPayload> {
    let env = EnvMap::from_process();
    let workspace = match &common.workspace.workspace {
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
    for w in &config.warnings {
        tracing::warn!("{w}");
        eprintln!("keel: {w}");
    }
    // A model named but malformed (unknown provider, no `:`) stops the set-up with
    // what is wrong and where it came from; none named leaves the runtime without a
    // default model, which each command reports in its own way.
    let model_spec = selected_model_spec(
        common.model.model.as_deref(),
        env.get("KEEL_MODEL"),
        &config,
    )?;
    tracing::info!(
        workspace = %workspace.display(),
        home = %home.display(),
        model = model_spec.as_deref().unwrap_or("(none)"),
        config_files = config.sources.len(),
        "runtime configured"
    );
    let default_model = match &model_spec {
        Some(spec) => Some(build_model(spec, &config)?),
        None => None,
    };
    let mut kernel_config = KernelConfig {
        workspace: Some(workspace.clone()),
        permission_mode: common
            .mode
            .mode
            .clone()
            .unwrap_or(config.permission_mode.clone()),
        approval_timeout: Duration::from_secs(config.approval_timeout_secs),
        max_turns: config.max_turns,
        compaction_threshold: config.compaction_threshold,
        shell: ShellPolicy {
            whitelist: config.shell.whitelist.clone(),
            high_risk: config.shell.high_risk.clone(),
        },
        sandbox: config.sandbox.clone(),
        available_models: config.available_models(model_spec.as_deref()),
        patch_preview: config.patch_preview,
        fsync_each_event: config.fsync_each_event,
        max_open_sessions: config.max_open_sessions,
        worktrees: keel_kernel::config::WorktreeConfig {
            dir: config.worktrees.dir.clone(),
            isolation: config.worktrees.isolation.clone(),
            sub_agent_isolation: config.worktrees.sub_agents.clone(),
            keep_branch: config.worktrees.keep_branch,
        },
        mcp_servers: config.mcp_servers.clone(),
        mcp_startup_timeout: Duration::from_secs(config.mcp_startup_timeout_secs),
        mcp_call_timeout: Duration::from_secs(config.mcp_tool_timeout_secs),
        host_tool_timeout: Duration::from_secs(config.host_tool_timeout_secs),
        checkpoints: config.checkpoints.enabled,
        checkpoint_max_bytes: config.checkpoints.max_bytes,
        checkpoint_max_age: config.checkpoints.max_age(),
        ..KernelConfig::default()
    };
    // Budgets, prices, the output cap and hooks.
    config.agent.apply_to(&mut kernel_config);
    kernel_config.lease_ttl = Duration::from_secs(config.lease_ttl_secs);
    kernel_config.node_id = env
        .get("KEEL_NODE_ID")
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned);
    let store = crate::store_select::selected(common.store.store.as_deref(), &env, &config)?;
    if let Some((keel_config::StoreSetting::Postgres(_), _)) = &store {
        // Checkpoints stay on this node, beside its KEEL_HOME.
        kernel_config.checkpoint_dir = Some(home.join("checkpoints"));
    }
    let factory_config = config.clone();
    let mut builder = Kernel::builder()
        .config(kernel_config)
        .telemetry(crate::telemetry::recorder());
    builder = match &store {
        None => builder.store_dir(&home),
        Some((keel_config::StoreSetting::Dir(dir), _)) => builder.store_dir(dir),
        Some((keel_config::StoreSetting::Postgres(url), source)) => {
            tracing::info!(source, "the session store is PostgreSQL");
            builder.store(crate::store_select::open_postgres(url)?)
        }
    };
    let mut builder = builder.model_factory(Arc::new(move |spec: &str| {
        build_model(spec, &factory_config)
    }));
    if let Some(m) = default_model {
        builder = builder.model(m);
    }
    // Sessions find their skills and commands when they open: the model sees the
    // skills' names and descriptions and activates one with `activate_skill`; hosts
    // list them with `skills.list` and `commands.list`.
    let skills = skill_settings(&config, &home);
    builder = builder.skills(skills.clone(), crate::repl::reserved_commands());
    let kernel = builder.build()?;
    Ok(Runtime {
        kernel,
        config,
        workspace,
        model_spec,
        home,
        skills,
    })
}

/// Where skills and custom commands are found: the user's folders under `home`
/// (`KEEL_HOME`) and `~/.agents/skills`, then `skills.paths`. A project's own skills
/// load when the project is trusted as for hooks: in `trustedProjects` or
/// `hooks.allowProjectHooks`.
pub fn skill_settings(config: &Config, home: &std::path::Path) -> keel_skills::Settings {
    use keel_config::ProjectTrust as Hooks;
    let mut settings = keel_skills::Settings::for_user(home);
    settings.configured_skill_dirs = config.skills.paths.clone();
    settings.trust = match &config.agent.allow_project_hooks {
        Hooks::All => keel_skills::ProjectTrust::All,
        Hooks::None => keel_skills::ProjectTrust::Only(config.trusted_projects.clone()),
        Hooks::Only(list) => {
            let mut all = config.trusted_projects.clone();
            all.extend(list.iter().cloned());
            keel_skills::ProjectTrust::Only(all)
        }
    };
    settings
}

/// Prints an error's message on stderr, and logs it.
pub fn report(error: &ErrorPayload) {
    tracing::error!(code = error.code.as_str(), message = %error.message, "command failed");
    eprintln!("keel: {}", error.message);
}
