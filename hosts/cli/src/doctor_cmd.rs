//! `keel doctor`: checks the installation and the configuration and prints each
//! finding with a fix. Exit 0 when Keel can run its main job (a session on the
//! scripted model with this configuration and store), 1 otherwise; missing optional
//! parts (sandbox, `rg`, `git`, unreachable model endpoints) are warnings.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use keel_adapters::{
    build_model_with_env, planned_output_cap, probe, provider_target, ProbeOutcome, ScriptedModel,
};
use keel_config::{default_keel_home, resolve_model_spec, Config, EnvMap};
use keel_envelope::types::StopReason;
use keel_envelope::{ErrorPayload, Event};
use keel_kernel::{Kernel, SessionOptions};
use serde::Serialize;

use crate::cli::DoctorArgs;
use crate::logging::LogSetup;

/// How a check went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Fine.
    Ok,
    /// Works, but something is missing or degraded.
    Warn,
    /// Keel cannot run its main job.
    Fail,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was checked.
    pub name: String,
    /// How it went.
    pub status: Status,
    /// What was found.
    pub summary: String,
    /// What to do about it (for warnings and failures).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub(crate) fn ok(name: impl Into<String>, summary: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            status: Status::Ok,
            summary: summary.into(),
            fix: None,
        }
    }

    pub(crate) fn warn(
        name: impl Into<String>,
        summary: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            status: Status::Warn,
            summary: summary.into(),
            fix: Some(fix.into()),
        }
    }

    pub(crate) fn fail(
        name: impl Into<String>,
        summary: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Check {
            name: name.into(),
            status: Status::Fail,
            summary: summary.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Whether Keel can run its main job.
    pub ok: bool,
    /// This binary's version.
    pub version: String,
    /// The findings, in order.
    pub checks: Vec<Check>,
}

/// Runs `keel doctor`; returns the exit code.
pub fn run(args: DoctorArgs, log: &LogSetup) -> i32 {
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel doctor: cannot start the runtime: {e}");
            return 1;
        }
    };
    let report = rt.block_on(diagnose(&args, log));
    tracing::info!(
        ok = report.ok,
        checks = report.checks.len(),
        "doctor finished"
    );
    if args.json.json {
        match serde_json::to_string(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("keel doctor: {e}");
                return 1;
            }
        }
    } else {
        print!("{}", text(&report, crate::render::colors()));
    }
    if report.ok {
        0
    } else {
        1
    }
}

/// Every check, in order.
pub async fn diagnose(args: &DoctorArgs, log: &LogSetup) -> Report {
    let env = EnvMap::from_process();
    let mut checks = vec![Check::ok(
        "version",
        format!(
            "keel {} (protocol {})",
            env!("CARGO_PKG_VERSION"),
            keel_envelope::PROTOCOL_VERSION
        ),
    )];
    let workspace = match &args.workspace.workspace {
        Some(w) => Some(w.clone()),
        None => std::env::current_dir().ok(),
    };
    let home = default_keel_home(&env);
    checks.push(home_check(home.as_deref()));
    checks.push(log_check(log));
    checks.push(
        crate::doctor_telemetry::telemetry_check(
            &log.telemetry,
            Duration::from_secs(args.timeout.max(1)),
        )
        .await,
    );
    let config = match &home {
        Some(h) => {
            let (check, config) = config_check(h, workspace.as_deref());
            checks.push(check);
            config
        }
        None => None,
    };
    if let Some(config) = &config {
        let limit = Duration::from_secs(args.timeout.max(1));
        checks.push(
            crate::doctor_store::store_check(args.store.store.as_deref(), &env, config, limit)
                .await,
        );
    }
    let sandbox = config
        .as_ref()
        .map(|c| c.sandbox.clone())
        .unwrap_or_default();
    checks.push(sandbox_check(&sandbox));
    checks.push(program_check(
        "rg",
        "ripgrep: handy for shell commands the model runs (search_files does not need it)",
        "install ripgrep (Debian/Ubuntu: apt-get install ripgrep; macOS: brew install ripgrep)",
    ));
    checks.push(program_check(
        "git",
        "the git tool runs it",
        "install git (Debian/Ubuntu: apt-get install git; macOS: xcode-select --install)",
    ));
    if let Some(config) = &config {
        checks.extend(model_checks(args, config, &env).await);
        let limit = Duration::from_secs(args.timeout.max(1));
        checks.extend(crate::doctor_mcp::mcp_checks(config, workspace.as_deref(), limit).await);
        if let Some(h) = &home {
            checks.push(crate::doctor_checkpoints::checkpoints_check(config, h).await);
            let limit = Duration::from_secs(args.timeout.max(1));
            let store = crate::doctor_worktrees::store_for(
                args.store.store.as_deref(),
                &env,
                config,
                h,
                limit,
            )
            .await;
            checks.push(crate::doctor_worktrees::worktrees_check(
                config,
                h,
                store.as_deref(),
            ));
            checks.push(crate::doctor_skills::skills_check(
                config,
                h,
                workspace.as_deref(),
            ));
        }
    }
    checks.push(session_check().await);
    Report {
        ok: checks.iter().all(|c| c.status != Status::Fail),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        checks,
    }
}

/// `KEEL_HOME` exists (or can be created) and a file can be written in it.
fn home_check(home: Option<&Path>) -> Check {
    let Some(home) = home else {
        return Check::fail(
            "KEEL_HOME",
            "no store directory: neither KEEL_HOME, XDG_DATA_HOME nor a platform data directory is set",
            "set KEEL_HOME to a writable directory, e.g. export KEEL_HOME=~/.local/share/keel",
        );
    };
    let shown = home.display();
    let probe = home.join(format!(".keel-doctor-{}", std::process::id()));
    let result = std::fs::create_dir_all(home)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe));
    match result {
        Ok(()) => Check::ok("KEEL_HOME", format!("{shown} is writable")),
        Err(e) => Check::fail(
            "KEEL_HOME",
            format!("{shown} is not writable: {e}"),
            format!(
                "make {shown} a writable directory, or point KEEL_HOME at one (sessions, history and logs are kept there)"
            ),
        ),
    }
}

fn log_check(log: &LogSetup) -> Check {
    match (&log.dir, &log.problem) {
        (Some(dir), _) => Check::ok(
            "logs",
            format!(
                "{} (KEEL_LOG={})",
                dir.join(crate::logging::DailyFile::file_name(
                    &crate::logging::today()
                ))
                .display(),
                std::env::var(crate::logging::ENV)
                    .ok()
                    .filter(|v| !v.trim().is_empty())
                    .unwrap_or_else(|| crate::logging::DEFAULT_FILTER.to_owned())
            ),
        ),
        (None, Some(p)) => Check::warn(
            "logs",
            p.clone(),
            "make KEEL_HOME writable; meanwhile use --log-stderr to see the log",
        ),
        (None, None) => Check::warn("logs", "no log file", "set KEEL_HOME"),
    }
}

/// Loads the configuration as the session commands do.
fn config_check(home: &Path, workspace: Option<&Path>) -> (Check, Option<Config>) {
    match Config::load(home, workspace) {
        Ok(config) => {
            let summary = if config.sources.is_empty() {
                format!(
                    "no configuration file (defaults; {} would be read)",
                    home.join(keel_config::CONFIG_FILE).display()
                )
            } else {
                let files: Vec<String> = config
                    .sources
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                format!("valid: {}", files.join(", "))
            };
            (Check::ok("config", summary), Some(config))
        }
        Err(e) => (
            Check::fail("config", e.message.clone(), config_fix(&e)),
            None,
        ),
    }
}

fn config_fix(e: &ErrorPayload) -> String {
    let file = e.details.get("file").and_then(|v| v.as_str());
    let key = e.details.get("key").and_then(|v| v.as_str());
    let line = e.details.get("line").and_then(|v| v.as_u64());
    let place = match (file, line) {
        (Some(f), Some(l)) => format!("{f}, line {l}"),
        (Some(f), None) => f.to_owned(),
        _ => "the configuration file".to_owned(),
    };
    match key {
        Some(k) if e.message.contains("unknown key") => format!(
            "in {place}: remove or rename the key `{k}` (docs/configuration.md lists every key)"
        ),
        Some(k) => format!("in {place}: give `{k}` a valid value (see docs/configuration.md)"),
        None => format!("in {place}: fix the TOML syntax"),
    }
}

/// The sandbox shell commands will get under the configuration. The one place that
/// reads `keel_tools::sandbox_report`.
fn sandbox_check(config: &keel_tools::SandboxConfig) -> Check {
    use keel_tools::{SandboxKind, SandboxMode};
    let r = keel_tools::sandbox_report(config);
    let network = if r.network { "; network on" } else { "" };
    match r.sandbox {
        _ if r.mode == SandboxMode::Off => Check::warn(
            "sandbox",
            "none: turned off by the configuration (sandbox = false or \"off\")",
            "remove `sandbox = false` / `sandbox = \"off\"` from the configuration to run shell commands in a sandbox",
        ),
        SandboxKind::Bubblewrap => Check::ok("sandbox", format!("bubblewrap: {}{network}", r.reason)),
        SandboxKind::Landlock => Check::ok("sandbox", format!("landlock: {}{network}", r.reason)),
        _ => Check::warn(
            "sandbox",
            format!(
                "none: {}; shell commands run unsandboxed in ask and auto-edit modes and are refused in auto mode",
                r.reason
            ),
            "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap), or run on a Linux kernel with Landlock, or set `sandbox = \"off\"` to run commands unsandboxed on purpose",
        ),
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn program_check(name: &str, why: &str, fix: &str) -> Check {
    match find_in_path(name) {
        Some(p) => Check::ok(name, p.display().to_string()),
        None => Check::warn(name, format!("not on PATH ({why})"), fix),
    }
}

/// The selected model and the configured ones: each can be built (keys set, script
/// readable) and, over HTTP, its endpoint answers within the time limit.
async fn model_checks(args: &DoctorArgs, config: &Config, env: &EnvMap) -> Vec<Check> {
    let mut checks = Vec::new();
    let selected = resolve_model_spec(args.model.model.as_deref(), env.get("KEEL_MODEL"), config);
    let mut specs: Vec<String> = Vec::new();
    match &selected {
        Ok(spec) => {
            checks.push(Check::ok("model", format!("{spec} is selected")));
            specs.push(spec.clone());
        }
        Err(e) => checks.push(Check::warn(
            "model",
            e.message.clone(),
            "pass --model provider:model, set KEEL_MODEL, or set `model` in config.toml (the scripted model needs no network: scripted:path/to/script.json)",
        )),
    }
    for entry in &config.available_models {
        if !specs.contains(&entry.id) {
            specs.push(entry.id.clone());
        }
    }
    let limit = Duration::from_secs(args.timeout.max(1));
    let probes = specs
        .iter()
        .map(|spec| model_check(spec, config, env, limit));
    // Probed together; the report keeps the configured order.
    checks.extend(futures::future::join_all(probes).await);
    checks
}

async fn model_check(spec: &str, config: &Config, env: &EnvMap, limit: Duration) -> Check {
    let name = format!("model {spec}");
    if let Err(e) = build_model_with_env(spec, config, env) {
        let fix = match e.details.get("variable").and_then(|v| v.as_str()) {
            Some(var) => format!("set {var} in the environment (keys are never read from files)"),
            None => {
                "check the model name and, for scripted:, that the script file exists and is valid"
                    .to_owned()
            }
        };
        return Check::warn(name, e.message, fix);
    }
    let target = match provider_target(spec, config, env) {
        Ok(Some(t)) => t,
        Ok(None) => return Check::ok(name, "offline model; its script loads"),
        Err(e) => return Check::warn(name, e.message, "use provider:model"),
    };
    let key = if target.key_set() {
        format!("{} is set", target.key_variable)
    } else {
        format!("{} is not set", target.key_variable)
    };
    let url = target.probe_url();
    let where_from = format!(
        "the base URL comes from {}; set {} or providers.{}.baseUrl to change it",
        target.base_url_source,
        if target.provider == "anthropic" {
            "ANTHROPIC_BASE_URL"
        } else {
            "OPENAI_BASE_URL"
        },
        target.provider
    );
    let (outcome, cap) =
        futures::future::join(probe(&target, limit), output_cap_text(spec, config, env)).await;
    let key = format!("{key}; {cap}");
    match outcome {
        ProbeOutcome::Answered {
            status,
            elapsed_ms,
            lists_model,
        } => {
            let head = format!("{url} answers HTTP {status} in {elapsed_ms} ms; {key}");
            match status {
                401 | 403 => Check::warn(
                    name,
                    format!("{head}; the key is refused"),
                    format!("check {} (it is refused by the server)", target.key_variable),
                ),
                200..=299 if lists_model == Some(false) => Check::warn(
                    name,
                    format!("{head}; its model list does not name {}", target.model),
                    "check the model name against the server's list (for Ollama: ollama pull <model>)",
                ),
                _ => Check::ok(name, head),
            }
        }
        ProbeOutcome::Unreachable { message } => Check::warn(
            name,
            format!("{url} does not answer: {message}; {key}"),
            format!("start the server, or fix its address: {where_from}"),
        ),
        ProbeOutcome::TimedOut { limit_ms } => Check::warn(
            name,
            format!("{url} did not answer within {limit_ms} ms; {key}"),
            format!("check the network and the server, or raise --timeout; {where_from}"),
        ),
    }
}

/// The output cap calls of `spec` get when they set none, and where it comes from:
/// `maxOutputTokens` in the configuration, else the default derived from the window
/// (the server is asked for it as a session's first call asks).
async fn output_cap_text(spec: &str, config: &Config, env: &EnvMap) -> String {
    if let Some(n) = config.agent.max_output_tokens {
        return format!("output cap {n} tokens, configured (maxOutputTokens)");
    }
    match planned_output_cap(spec, config, env).await {
        Ok(Some(cap)) => format!("output cap {cap}"),
        Ok(None) => "no output cap (offline model)".to_owned(),
        Err(e) => format!("output cap unknown: {}", e.message),
    }
}

/// The main job: a session on the scripted model, in a scratch directory.
async fn session_check() -> Check {
    let name = "session";
    let base = std::env::temp_dir().join(format!("keel-doctor-{}", std::process::id()));
    let result = scripted_session(&base).await;
    let _ = std::fs::remove_dir_all(&base);
    match result {
        Ok(()) => Check::ok(name, "a session on the scripted model runs"),
        Err(e) => Check::fail(
            name,
            format!("a session on the scripted model does not run: {e}"),
            "run `keel demo` to see the failure, and `keel doctor --log-stderr` for the log",
        ),
    }
}

async fn scripted_session(base: &Path) -> Result<(), String> {
    let workspace = base.join("project");
    std::fs::create_dir_all(&workspace)
        .map_err(|e| format!("cannot create {}: {e}", workspace.display()))?;
    let model = ScriptedModel::from_json(serde_json::json!({"turns": [{"text": "ready"}]}))
        .map_err(|e| e.message)?
        .with_id("scripted:doctor");
    let kernel = Kernel::builder()
        .workspace(&workspace)
        .model(Arc::new(model))
        .store_dir(base.join("store"))
        .build()
        .map_err(|e| e.message)?;
    let run = async {
        let (session, mut events) = kernel
            .start_session(SessionOptions {
                workspace_path: None,
                permission_mode: None,
                model: None,
                title: Some("doctor".into()),
            })
            .await
            .map_err(|e| e.message)?;
        let rid = session
            .send("are you there?")
            .await
            .map_err(|e| e.message)?;
        let mut outcome = Err("the session ended without completing".to_owned());
        while let Some(env) = events.recv().await {
            match &env.event {
                Event::SessionCompleted(c) if env.request_id == rid => {
                    outcome = if c.stop_reason == StopReason::EndTurn {
                        Ok(())
                    } else {
                        Err(format!("it stopped with {:?}", c.stop_reason))
                    };
                    break;
                }
                Event::Error(e) | Event::RequestRejected(e) if env.request_id == rid => {
                    outcome = Err(e.message.clone());
                    break;
                }
                _ => {}
            }
        }
        let _ = session.close().await;
        outcome
    };
    let outcome = match tokio::time::timeout(Duration::from_secs(60), run).await {
        Ok(r) => r,
        Err(_) => Err("no answer within 60 s".to_owned()),
    };
    kernel.shutdown("doctor").await;
    outcome
}

/// The report as text: one line per check, its fix under it.
pub fn text(report: &Report, color: bool) -> String {
    let paint = |code: &str, s: &str| {
        if color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    };
    let width = report
        .checks
        .iter()
        .map(|c| c.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::from("keel doctor\n\n");
    for c in &report.checks {
        let mark = match c.status {
            Status::Ok => paint("32", "ok  "),
            Status::Warn => paint("33", "warn"),
            Status::Fail => paint("31", "FAIL"),
        };
        out.push_str(&format!("  {mark}  {:<width$}  {}\n", c.name, c.summary));
        if let Some(fix) = &c.fix {
            out.push_str(&format!("        {:<width$}  fix: {fix}\n", ""));
        }
    }
    let warnings = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Warn)
        .count();
    let failures = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .count();
    out.push('\n');
    if report.ok {
        out.push_str(&format!(
            "Keel can run sessions ({warnings} warning{}).\n",
            if warnings == 1 { "" } else { "s" }
        ));
    } else {
        out.push_str(&format!(
            "Keel cannot run sessions: {failures} problem{} to fix ({warnings} warning{}).\n",
            if failures == 1 { "" } else { "s" },
            if warnings == 1 { "" } else { "s" }
        ));
    }
    out
}
