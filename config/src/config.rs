//! The TOML configuration: `$KEEL_HOME/config.toml`, overridden key by key by the
//! workspace's `.keel/config.toml`. Every key is documented in
//! `docs/configuration.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_envelope::error::{ErrorCategory, ErrorCode, ErrorPayload, Severity};
use keel_envelope::types::{ModelInfo, PermissionMode};
use keel_kernel::mcp::McpServerConfig;
use keel_tools::{SandboxConfig, SandboxMode};
use serde::Deserialize;

use crate::agent::{AgentConfig, RawAgent, RawBudget, RawHooks, RawPrice};
pub use crate::checkpoints::CheckpointsConfig;
use crate::mcp;
use crate::retry::RetryPolicy;
use crate::skills;
pub use crate::skills::SkillsConfig;
use crate::spec::parse_model_spec;
use crate::toml_keys::key_line;
pub use crate::worktrees::WorktreesConfig;

/// The configuration file name.
pub const CONFIG_FILE: &str = "config.toml";
/// The workspace folder holding project configuration.
pub const PROJECT_DIR: &str = ".keel";

/// Largest configuration file read (a larger one is an error that says so).
pub const CONFIG_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// One model offered to hosts.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModelEntry {
    /// The selection string, `provider:model`.
    pub id: String,
    /// A label for menus (default: the id).
    #[serde(default)]
    pub display_name: Option<String>,
    /// Overrides the context window, in tokens.
    #[serde(default)]
    pub context_window: Option<u64>,
}

/// Shell-command policy additions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellConfig {
    /// Extra commands treated as safe (allowed without approval where the mode allows).
    pub whitelist: Vec<String>,
    /// Extra commands treated as high risk (always ask).
    pub high_risk: Vec<String>,
}

/// Settings of one HTTP provider.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProviderConfig {
    /// The base URL (the provider's environment variable wins over it).
    pub base_url: Option<String>,
}

/// Settings of the HTTP providers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProvidersConfig {
    /// The OpenAI-compatible provider.
    pub openai: ProviderConfig,
    /// The Anthropic provider.
    pub anthropic: ProviderConfig,
}

/// The effective configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// The default model, `provider:model`.
    pub model: Option<String>,
    /// The models offered to hosts.
    pub available_models: Vec<ModelEntry>,
    /// The permission mode of new sessions.
    pub permission_mode: PermissionMode,
    /// Seconds an approval waits before it is denied (0 = wait forever).
    pub approval_timeout_secs: u64,
    /// Shell-command policy additions.
    pub shell: ShellConfig,
    /// The sandbox of shell commands (`sandbox`) and whether it lets the network
    /// through (`sandboxNetwork`).
    pub sandbox: SandboxConfig,
    /// Fraction of the context window at which the history is compacted.
    pub compaction_threshold: f64,
    /// Maximum model calls per request (`maxTurns`; `budget.request.modelCalls` is
    /// the same setting).
    pub max_turns: u32,
    /// Retries of failed model calls.
    pub retry: RetryPolicy,
    /// HTTP provider settings.
    pub providers: ProvidersConfig,
    /// Whether new sessions propose edits as patches instead of writing them
    /// (`patchPreview`).
    pub patch_preview: bool,
    /// Budgets, prices, the output cap and hooks.
    pub agent: AgentConfig,
    /// Whether the session store syncs every event to the disk before delivering it
    /// (`fsyncEachEvent`): survives a power loss, at one disk sync per event.
    pub fsync_each_event: bool,
    /// Maximum number of sessions open at once in one process (`maxOpenSessions`;
    /// 0 = no limit).
    pub max_open_sessions: usize,
    /// The MCP servers every session starts with (`[mcpServers.NAME]`; in
    /// `$KEEL_HOME/config.toml`, and in the file of a project listed in
    /// `trustedProjects`), in name order, without the disabled ones.
    pub mcp_servers: Vec<McpServerConfig>,
    /// The projects whose `.keel/config.toml` may start programs (`trustedProjects`;
    /// only in `$KEEL_HOME/config.toml`).
    pub trusted_projects: Vec<PathBuf>,
    /// Seconds an MCP server may take to start (`mcpStartupTimeoutSecs`).
    pub mcp_startup_timeout_secs: u64,
    /// Seconds one MCP tool call may run (`mcpToolTimeoutSecs`; 0 = no limit).
    pub mcp_tool_timeout_secs: u64,
    /// Seconds the kernel waits for the host to answer a host-tool call
    /// (`hostToolTimeoutSecs`; 0 = wait forever).
    pub host_tool_timeout_secs: u64,
    /// `[skills]`: configured skill folders.
    pub skills: SkillsConfig,
    /// `[checkpoints]`: on or off, and the limits of the checkpoint stores.
    pub checkpoints: CheckpointsConfig,
    /// Where sessions are kept (`store`: a directory or a PostgreSQL URL; only in
    /// `$KEEL_HOME/config.toml`); `None`: files under `KEEL_HOME`.
    pub store: Option<crate::StoreSetting>,
    /// Seconds a node's lease on a session lasts in a shared store (`leaseTtlSecs`).
    pub lease_ttl_secs: u64,
    /// `isolation` and `[worktrees]`: isolated workspaces.
    pub worktrees: WorktreesConfig,
    /// The files the configuration was read from, in the order applied.
    pub sources: Vec<PathBuf>,
    /// Files that were skipped, and why (a project file that leads out of the
    /// workspace); hosts show or log them.
    pub warnings: Vec<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            model: None,
            available_models: Vec::new(),
            permission_mode: PermissionMode::Ask,
            approval_timeout_secs: 60,
            shell: ShellConfig::default(),
            sandbox: SandboxConfig::default(),
            compaction_threshold: 0.8,
            max_turns: keel_kernel::config::DEFAULT_MAX_TURNS,
            retry: RetryPolicy::default(),
            providers: ProvidersConfig::default(),
            patch_preview: false,
            agent: AgentConfig::default(),
            fsync_each_event: false,
            max_open_sessions: 1000,
            mcp_servers: Vec::new(),
            trusted_projects: Vec::new(),
            mcp_startup_timeout_secs: 30,
            mcp_tool_timeout_secs: 120,
            host_tool_timeout_secs: 60,
            skills: SkillsConfig::default(),
            checkpoints: CheckpointsConfig::default(),
            store: None,
            lease_ttl_secs: crate::DEFAULT_LEASE_TTL_SECS,
            worktrees: WorktreesConfig::default(),
            sources: Vec::new(),
            warnings: Vec::new(),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawConfig {
    model: Option<String>,
    available_models: Option<Vec<ModelEntry>>,
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    permission_mode: Option<PermissionMode>,
    approval_timeout_secs: Option<u64>,
    shell: Option<RawShell>,
    sandbox: Option<SandboxSetting>,
    sandbox_network: Option<bool>,
    compaction_threshold: Option<f64>,
    max_turns: Option<u32>,
    retry: Option<RawRetry>,
    providers: Option<RawProviders>,
    patch_preview: Option<bool>,
    max_output_tokens: Option<u32>,
    budget: Option<RawBudget>,
    prices: Option<std::collections::BTreeMap<String, RawPrice>>,
    hooks: Option<RawHooks>,
    fsync_each_event: Option<bool>,
    max_open_sessions: Option<usize>,
    mcp_servers: Option<BTreeMap<String, mcp::RawMcpServer>>,
    trusted_projects: Option<Vec<PathBuf>>,
    mcp_startup_timeout_secs: Option<u64>,
    mcp_tool_timeout_secs: Option<u64>,
    host_tool_timeout_secs: Option<u64>,
    skills: Option<skills::RawSkills>,
    checkpoints: Option<crate::checkpoints::RawCheckpoints>,
    store: Option<String>,
    lease_ttl_secs: Option<u64>,
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    isolation: Option<keel_envelope::worktree::Isolation>,
    worktrees: Option<crate::worktrees::RawWorktrees>,
    /// `[telemetry]`: the host reads it (`keel_telemetry::TelemetryConfig`) from the
    /// user's own file; here it is only accepted, and ignored in a project's file.
    #[serde(rename = "telemetry")]
    telemetry_table: Option<toml::Value>,
    /// `[serve]`: the daemon's own settings, read by keel-serve; only in
    /// `$KEEL_HOME/config.toml`.
    serve: Option<toml::Value>,
}

/// `sandbox = "auto" | "bubblewrap" | "landlock" | "off"`, or `true` (= `"auto"`) /
/// `false` (= `"off"`).
#[derive(Debug, Clone, Copy)]
struct SandboxSetting(SandboxMode);

impl<'de> Deserialize<'de> for SandboxSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = SandboxSetting;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("\"auto\", \"bubblewrap\", \"landlock\", \"off\", true or false")
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
                Ok(SandboxSetting(if v {
                    SandboxMode::Auto
                } else {
                    SandboxMode::Off
                }))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                SandboxMode::parse(v)
                    .map(SandboxSetting)
                    .ok_or_else(|| E::invalid_value(serde::de::Unexpected::Str(v), &self))
            }
        }
        d.deserialize_any(Visitor)
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawShell {
    whitelist: Option<Vec<String>>,
    high_risk: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawRetry {
    max_retries: Option<u32>,
    base_delay_ms: Option<u64>,
    max_delay_ms: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProviders {
    openai: Option<RawProvider>,
    anthropic: Option<RawProvider>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawProvider {
    base_url: Option<String>,
}

/// The first key of a project's file that would loosen the user's safety settings or
/// send a provider's key to another server: a provider's `baseUrl`, a shell
/// whitelist, the sandbox off or its network on, the `auto` permission mode. A project
/// the user does not trust may only make settings stricter.
fn weakening(raw: &RawConfig) -> Option<&'static str> {
    if let Some(p) = &raw.providers {
        if p.openai.as_ref().is_some_and(|o| o.base_url.is_some()) {
            return Some("providers.openai.baseUrl");
        }
        if p.anthropic.as_ref().is_some_and(|o| o.base_url.is_some()) {
            return Some("providers.anthropic.baseUrl");
        }
    }
    if raw
        .shell
        .as_ref()
        .and_then(|s| s.whitelist.as_ref())
        .is_some_and(|w| !w.is_empty())
    {
        return Some("shell.whitelist");
    }
    if raw.sandbox.is_some_and(|s| s.0 == SandboxMode::Off) {
        return Some("sandbox");
    }
    if raw.sandbox_network == Some(true) {
        return Some("sandboxNetwork");
    }
    if raw.permission_mode == Some(PermissionMode::Auto) {
        return Some("permissionMode");
    }
    None
}

/// Sets `slot` to `value` when the file gives one.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(v) = value {
        *slot = v;
    }
}

fn config_error(message: String, file: &Path) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message)
        .category(ErrorCategory::Business)
        .severity(Severity::Error)
        .with_detail("file", file.display().to_string())
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}

fn parse_raw(text: &str, file: &Path) -> Result<RawConfig, ErrorPayload> {
    let shown = file.display();
    let de = toml::Deserializer::new(text);
    serde_path_to_error::deserialize::<_, RawConfig>(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        let msg = inner.message().trim().replace('\n', "; ");
        let (line, col) = inner
            .span()
            .map(|s| line_col(text, s.start))
            .unwrap_or((0, 0));
        let position = if line > 0 {
            format!(":{line}:{col}")
        } else {
            String::new()
        };
        let mut err = if let Some(rest) = msg.strip_prefix("unknown field `") {
            let field = rest.split('`').next().unwrap_or_default();
            let key = if path.is_empty() || path == "." {
                field.to_owned()
            } else if path == field || path.ends_with(&format!(".{field}")) {
                path.clone()
            } else {
                format!("{path}.{field}")
            };
            config_error(
                format!("{shown}{position}: unknown key `{key}` ({msg})"),
                file,
            )
            .with_detail("key", key)
        } else {
            let at = if path.is_empty() || path == "." {
                String::new()
            } else {
                format!(" (key `{path}`)")
            };
            let err = config_error(format!("{shown}{position}: {msg}{at}"), file);
            if at.is_empty() {
                err
            } else {
                err.with_detail("key", path)
            }
        };
        if line > 0 {
            err = err.with_detail("line", line).with_detail("column", col);
        }
        err
    })
}

/// Adds the line of the error's `key` (when it can be found in `text`) to an error
/// about a value: `file:line: …` in the message, and `line` in the details.
fn with_key_line(mut err: ErrorPayload, text: &str, file: &Path) -> ErrorPayload {
    let Some(key) = err.details.get("key").and_then(|k| k.as_str()) else {
        return err;
    };
    let Some(line) = key_line(text, key) else {
        return err;
    };
    let shown = file.display().to_string();
    if let Some(rest) = err.message.strip_prefix(&shown) {
        err.message = format!("{shown}:{line}{rest}");
    }
    err.with_detail("line", line)
}

impl Config {
    /// Loads `keel_home/config.toml`, then `workspace/.keel/config.toml` over it key
    /// by key. Missing files are skipped; an unreadable file, malformed TOML (with its
    /// line and column), an unknown key (named, with its file) or a bad value is an
    /// error (`REQUEST_INVALID`, details `file`, `key`, `line`, `column`).
    pub fn load(keel_home: &Path, workspace: Option<&Path>) -> Result<Config, ErrorPayload> {
        let mut config = Config::default();
        let mut files = vec![keel_home.join(CONFIG_FILE)];
        if let Some(ws) = workspace {
            // The project's file comes with the project: it is read through the
            // workspace jail, like a tool read, so a symlink cannot make Keel read
            // (and echo in errors) a file from elsewhere.
            let rel = format!("{PROJECT_DIR}/{CONFIG_FILE}");
            match keel_tools::jail::resolve(ws, &rel) {
                Ok(r) if r.inside => files.push(r.abs),
                Ok(r) => config.warnings.push(format!(
                    "{} leads outside the workspace (to {}); it was ignored",
                    ws.join(&rel).display(),
                    r.display
                )),
                Err(e) => config.warnings.push(format!(
                    "{} was ignored: {}",
                    ws.join(&rel).display(),
                    e.message
                )),
            }
        }
        for (i, file) in files.into_iter().enumerate() {
            // Regular files only: a FIFO or device would block or never end.
            let text = match keel_tools::jail::read_regular(&file, CONFIG_MAX_BYTES).and_then(|b| {
                String::from_utf8(b)
                    .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8"))
            }) {
                Ok(t) => t,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(config_error(
                        format!("{} could not be read: {e}", file.display()),
                        &file,
                    ))
                }
            };
            // The second file is the workspace's.
            config.apply_file(&text, &file, workspace.filter(|_| i == 1))?;
        }
        Ok(config)
    }

    /// Whether `workspace` is one of `trustedProjects` (compared as canonical paths).
    pub fn trusts(&self, workspace: &Path) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        let ws = canon(workspace);
        self.trusted_projects.iter().any(|p| canon(p) == ws)
    }

    /// Applies one file's text over this configuration (`file` names it in errors),
    /// as the user's own file.
    pub fn apply_toml(&mut self, text: &str, file: &Path) -> Result<(), ErrorPayload> {
        self.apply_file(text, file, None)
    }

    /// Applies a project's `.keel/config.toml` (`file`, in the workspace folder's
    /// `.keel`) over this configuration: like [`Config::apply_toml`], except that what
    /// starts programs counts only in a project the user trusts: `mcpServers` needs the
    /// workspace in the user's `trustedProjects`, `[hooks]` needs it there or in
    /// `hooks.allowProjectHooks`; and a project never sets `trustedProjects`.
    pub fn apply_project_toml(&mut self, text: &str, file: &Path) -> Result<(), ErrorPayload> {
        let ws = file
            .parent()
            .and_then(Path::parent)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        self.apply_file(text, file, Some(ws))
    }

    fn apply_file(
        &mut self,
        text: &str,
        file: &Path,
        project: Option<&Path>,
    ) -> Result<(), ErrorPayload> {
        let raw = parse_raw(text, file)?;
        if let Some(ws) = project {
            let trusted = self.trusts(ws);
            let refused = if raw.trusted_projects.is_some() {
                Some((
                    "trustedProjects",
                    "can only be set in $KEEL_HOME/config.toml: a project cannot trust itself",
                ))
            } else if raw.store.is_some() || raw.lease_ttl_secs.is_some() {
                Some((
                    if raw.store.is_some() { "store" } else { "leaseTtlSecs" },
                    "can only be set in $KEEL_HOME/config.toml: a project cannot move where your sessions are kept",
                ))
            } else if raw.serve.is_some() {
                Some((
                    "serve",
                    "can only be set in $KEEL_HOME/config.toml: a project cannot open the daemon to the network",
                ))
            } else if raw.checkpoints.is_some() {
                Some((
                    "checkpoints",
                    "can only be set in $KEEL_HOME/config.toml: its limits apply to the checkpoints of every workspace",
                ))
            } else if raw.mcp_servers.is_some() && !trusted {
                Some((
                    "mcpServers",
                    "starts programs, so a project's configuration may set it only if you trust the project: add its path to `trustedProjects` in $KEEL_HOME/config.toml",
                ))
            } else if !trusted {
                weakening(&raw).map(|key| {
                    (
                        key,
                        "loosens your safety settings or sends your API key elsewhere, so a project's configuration may set it only if you trust the project: add its path to `trustedProjects` in $KEEL_HOME/config.toml",
                    )
                })
            } else {
                None
            };
            if let Some((key, why)) = refused {
                let err = config_error(format!("{}: `{key}` {why}", file.display()), file)
                    .with_detail("key", key);
                return Err(with_key_line(err, text, file));
            }
        }
        // A project listed in `trustedProjects` counts as the user's own file for hooks.
        let project = project.filter(|ws| !self.trusts(ws));
        self.apply(raw, file, project)
            .map_err(|e| with_key_line(e, text, file))?;
        self.sources.push(file.to_owned());
        Ok(())
    }

    fn apply(
        &mut self,
        raw: RawConfig,
        file: &Path,
        project: Option<&Path>,
    ) -> Result<(), ErrorPayload> {
        let invalid = |key: &str, why: String| {
            config_error(
                format!("{}: invalid value for `{key}`: {why}", file.display()),
                file,
            )
            .with_detail("key", key.to_owned())
        };
        if let Some(m) = raw.model {
            parse_model_spec(&m).map_err(|e| invalid("model", e.message))?;
            self.model = Some(m);
        }
        if let Some(list) = raw.available_models {
            for (i, entry) in list.iter().enumerate() {
                parse_model_spec(&entry.id)
                    .map_err(|e| invalid(&format!("availableModels[{i}].id"), e.message))?;
            }
            self.available_models = list;
        }
        set(&mut self.permission_mode, raw.permission_mode);
        set(&mut self.approval_timeout_secs, raw.approval_timeout_secs);
        if let Some(shell) = raw.shell {
            set(&mut self.shell.whitelist, shell.whitelist);
            set(&mut self.shell.high_risk, shell.high_risk);
        }
        if let Some(SandboxSetting(mode)) = raw.sandbox {
            self.sandbox.mode = mode;
            self.sandbox.enabled = mode != SandboxMode::Off;
        }
        set(&mut self.sandbox.network, raw.sandbox_network);
        if let Some(c) = raw.compaction_threshold {
            if !(c > 0.0 && c <= 1.0) {
                return Err(invalid(
                    "compactionThreshold",
                    format!("{c} is not a fraction in (0, 1]"),
                ));
            }
            self.compaction_threshold = c;
        }
        let agent = RawAgent {
            budget: raw.budget,
            prices: raw.prices,
            max_output_tokens: raw.max_output_tokens,
            hooks: raw.hooks,
        };
        // The user's limit of model calls per request, which a project can only lower.
        let user_calls = project.map(|_| {
            self.agent
                .budget
                .request
                .model_calls
                .unwrap_or(self.max_turns)
        });
        let sets_model_calls = self.agent.apply(agent, project, &invalid)?;
        if let Some(m) = raw.max_turns {
            if m == 0 {
                return Err(invalid("maxTurns", "must be at least 1".to_owned()));
            }
            if sets_model_calls {
                return Err(invalid(
                    "maxTurns",
                    "`maxTurns` and `budget.request.modelCalls` are the same setting; set one"
                        .to_owned(),
                ));
            }
            self.max_turns = m;
            // The later file wins, whichever of the two names it uses.
            self.agent.budget.request.model_calls = None;
        }
        if let Some(mine) = user_calls.filter(|n| *n != 0) {
            let calls = &mut self.agent.budget.request.model_calls;
            let now = calls.unwrap_or(self.max_turns);
            if now == 0 || now > mine {
                match calls {
                    Some(n) => *n = mine,
                    None => self.max_turns = mine,
                }
            }
        }
        if let Some(r) = raw.retry {
            set(&mut self.retry.max_retries, r.max_retries);
            set(&mut self.retry.base_delay_ms, r.base_delay_ms);
            set(&mut self.retry.max_delay_ms, r.max_delay_ms);
        }
        set(&mut self.patch_preview, raw.patch_preview);
        set(&mut self.fsync_each_event, raw.fsync_each_event);
        set(&mut self.max_open_sessions, raw.max_open_sessions);
        if let Some(t) = raw.mcp_startup_timeout_secs {
            if t == 0 {
                return Err(invalid(
                    "mcpStartupTimeoutSecs",
                    "must be at least 1".to_owned(),
                ));
            }
            self.mcp_startup_timeout_secs = t;
        }
        set(&mut self.mcp_tool_timeout_secs, raw.mcp_tool_timeout_secs);
        set(&mut self.host_tool_timeout_secs, raw.host_tool_timeout_secs);
        if let Some(sk) = raw.skills {
            self.skills.apply(sk, project.is_some(), &invalid)?;
        }
        if let Some(c) = raw.checkpoints {
            self.checkpoints.apply(c, &invalid)?;
        }
        self.worktrees
            .apply(raw.isolation, raw.worktrees, project.is_some(), &invalid)?;
        if raw.telemetry_table.is_some() && project.is_some() {
            self.warnings.push(format!(
                "{}: [telemetry] is ignored in a project's file (only $KEEL_HOME/config.toml sets where telemetry goes)",
                file.display()
            ));
        }
        if let Some(st) = raw.store {
            self.store = Some(crate::parse_store(&st).map_err(|why| invalid("store", why))?);
        }
        if let Some(t) = raw.lease_ttl_secs {
            if t == 0 || t > 3600 {
                return Err(invalid(
                    "leaseTtlSecs",
                    format!("{t} is not between 1 and 3600 seconds"),
                ));
            }
            self.lease_ttl_secs = t;
        }
        if let Some(servers) = raw.mcp_servers {
            mcp::merge(&mut self.mcp_servers, servers, &invalid)?;
        }
        if let Some(projects) = raw.trusted_projects {
            if let Some(p) = projects.iter().find(|p| !p.is_absolute()) {
                return Err(invalid(
                    "trustedProjects",
                    format!("{} is not an absolute path", p.display()),
                ));
            }
            self.trusted_projects = projects;
        }
        if let Some(p) = raw.providers {
            if let Some(url) = p.openai.and_then(|o| o.base_url) {
                self.providers.openai.base_url = Some(url);
            }
            if let Some(url) = p.anthropic.and_then(|o| o.base_url) {
                self.providers.anthropic.base_url = Some(url);
            }
        }
        Ok(())
    }

    /// The models to show hosts: the configured list, with `current` (default: the
    /// configured model) marked and added first when the list lacks it.
    pub fn available_models(&self, current: Option<&str>) -> Vec<ModelInfo> {
        let current = current.or(self.model.as_deref());
        let info = |id: &str, name: Option<&str>| {
            ModelInfo::new(
                id.to_owned(),
                name.unwrap_or(id).to_owned(),
                id.split(':').next().unwrap_or_default().to_owned(),
                Some(id) == current,
            )
        };
        let mut out: Vec<ModelInfo> = self
            .available_models
            .iter()
            .map(|e| info(&e.id, e.display_name.as_deref()))
            .collect();
        if let Some(c) = current {
            if !out.iter().any(|m| m.id == c) {
                out.insert(0, info(c, None));
            }
        }
        out
    }

    /// The configured context window for a model id, if any.
    pub fn context_window_override(&self, spec: &str) -> Option<u64> {
        self.available_models
            .iter()
            .find(|e| e.id == spec)
            .and_then(|e| e.context_window)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
