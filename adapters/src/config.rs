//! The TOML configuration: `$KEEL_HOME/config.toml`, overridden key by key by the
//! workspace's `.keel/config.toml`. Every key is documented in
//! `docs/configuration.md`.

use std::path::{Path, PathBuf};

use keel_envelope::error::{ErrorCategory, ErrorCode, ErrorPayload, Severity};
use keel_envelope::types::{ModelInfo, PermissionMode};
use keel_tools::{SandboxConfig, SandboxMode};
use serde::Deserialize;

use crate::http::RetryPolicy;
use crate::select::{parse_model_spec, EnvMap};

/// The configuration file name.
pub const CONFIG_FILE: &str = "config.toml";
/// The workspace folder holding project configuration.
pub const PROJECT_DIR: &str = ".keel";

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
    /// Maximum model turns per request.
    pub max_turns: u32,
    /// Retries of failed model calls.
    pub retry: RetryPolicy,
    /// HTTP provider settings.
    pub providers: ProvidersConfig,
    /// Whether new sessions propose edits as patches instead of writing them
    /// (`patchPreview`).
    pub patch_preview: bool,
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
            max_turns: 50,
            retry: RetryPolicy::default(),
            providers: ProvidersConfig::default(),
            patch_preview: false,
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

/// The 1-based line where `key` is set: `name = …` at the top level for `name`,
/// `name = …` under `[table]` (or `table.name = …`) for `table.name`. Keys inside
/// arrays of tables (`availableModels[1].id`) are not looked up.
fn key_line(text: &str, key: &str) -> Option<usize> {
    if key.contains('[') {
        return None;
    }
    let (table, name) = match key.rsplit_once('.') {
        Some((t, n)) => (Some(t), n),
        None => (None, key),
    };
    let mut current: Option<String> = None;
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(header) = line.strip_prefix('[') {
            let header = header.trim_start_matches('[');
            let end = header.find(']').unwrap_or(header.len());
            current = Some(header[..end].trim().to_owned());
            continue;
        }
        let Some((lhs, _)) = line.split_once('=') else {
            continue;
        };
        let lhs = lhs.trim().trim_matches('"');
        let hit = match (&current, table) {
            (None, None) => lhs == name,
            (Some(c), Some(t)) => c == t && lhs == name,
            (None, Some(t)) => lhs == format!("{t}.{name}"),
            (Some(_), None) => false,
        };
        if hit {
            return Some(i + 1);
        }
    }
    None
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
        for file in files {
            // Regular files only: a FIFO or device would block or never end.
            let text = match keel_tools::jail::read_regular(&file).and_then(|b| {
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
            config.apply_toml(&text, &file)?;
        }
        Ok(config)
    }

    /// Applies one file's text over this configuration (`file` names it in errors).
    pub fn apply_toml(&mut self, text: &str, file: &Path) -> Result<(), ErrorPayload> {
        let raw = parse_raw(text, file)?;
        self.apply(raw, file)
            .map_err(|e| with_key_line(e, text, file))?;
        self.sources.push(file.to_owned());
        Ok(())
    }

    fn apply(&mut self, raw: RawConfig, file: &Path) -> Result<(), ErrorPayload> {
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
        if let Some(p) = raw.permission_mode {
            self.permission_mode = p;
        }
        if let Some(t) = raw.approval_timeout_secs {
            self.approval_timeout_secs = t;
        }
        if let Some(shell) = raw.shell {
            if let Some(w) = shell.whitelist {
                self.shell.whitelist = w;
            }
            if let Some(h) = shell.high_risk {
                self.shell.high_risk = h;
            }
        }
        if let Some(SandboxSetting(mode)) = raw.sandbox {
            self.sandbox.mode = mode;
            self.sandbox.enabled = mode != SandboxMode::Off;
        }
        if let Some(network) = raw.sandbox_network {
            self.sandbox.network = network;
        }
        if let Some(c) = raw.compaction_threshold {
            if !(c > 0.0 && c <= 1.0) {
                return Err(invalid(
                    "compactionThreshold",
                    format!("{c} is not a fraction in (0, 1]"),
                ));
            }
            self.compaction_threshold = c;
        }
        if let Some(m) = raw.max_turns {
            if m == 0 {
                return Err(invalid("maxTurns", "must be at least 1".to_owned()));
            }
            self.max_turns = m;
        }
        if let Some(r) = raw.retry {
            if let Some(v) = r.max_retries {
                self.retry.max_retries = v;
            }
            if let Some(v) = r.base_delay_ms {
                self.retry.base_delay_ms = v;
            }
            if let Some(v) = r.max_delay_ms {
                self.retry.max_delay_ms = v;
            }
        }
        if let Some(p) = raw.patch_preview {
            self.patch_preview = p;
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
        let info = |id: &str, name: Option<&str>| ModelInfo {
            id: id.to_owned(),
            display_name: name.unwrap_or(id).to_owned(),
            provider: id.split(':').next().unwrap_or_default().to_owned(),
            is_current: Some(id) == current,
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

/// The default `KEEL_HOME`: `$KEEL_HOME`, else `$XDG_DATA_HOME/keel`, else the
/// platform data directory + `keel` (e.g. `~/.local/share/keel`).
pub fn default_keel_home(env: &EnvMap) -> Option<PathBuf> {
    if let Some(home) = env.get("KEEL_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(xdg) = env.get("XDG_DATA_HOME") {
        return Some(Path::new(xdg).join("keel"));
    }
    dirs::data_dir().map(|d| d.join("keel"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn patch_preview_is_a_key() {
        let mut c = Config::default();
        assert!(!c.patch_preview);
        c.apply_toml("patchPreview = true\n", Path::new("config.toml"))
            .unwrap();
        assert!(c.patch_preview);
        // A project file may turn it off again.
        c.apply_toml("patchPreview = false\n", Path::new(".keel/config.toml"))
            .unwrap();
        assert!(!c.patch_preview);
        let e = c
            .apply_toml(
                "# preview\npatchPreview = \"yes\"\n",
                Path::new("config.toml"),
            )
            .unwrap_err();
        assert_eq!(e.details["key"], "patchPreview");
        assert_eq!(e.details["line"], 2);
    }

    #[test]
    fn bad_values_name_their_key_and_line() {
        let mut c = Config::default();
        let text = "model = \"openai:gpt-4o\"\n\n[retry]\nmaxRetries = 2\n\n[shell]\n\ncompactionThreshold = 3.0\n";
        // compactionThreshold sits under [shell] here: an unknown key of that table.
        let e = c.apply_toml(text, Path::new("c.toml")).unwrap_err();
        assert_eq!(e.details["key"], "shell.compactionThreshold");
        let text = "model = \"openai:gpt-4o\"\ncompactionThreshold = 3.0\n";
        let e = c.apply_toml(text, Path::new("c.toml")).unwrap_err();
        assert_eq!(e.details["key"], "compactionThreshold");
        assert_eq!(e.details["line"], 2);
        assert!(
            e.message.starts_with("c.toml:2: invalid value"),
            "{}",
            e.message
        );
        let e = c
            .apply_toml("maxTurns = 0\n", Path::new("c.toml"))
            .unwrap_err();
        assert_eq!(e.details["line"], 1);
    }

    #[test]
    fn keys_are_found_in_tables() {
        let text = "a = 1\n[retry]\nmaxRetries = 2\n[[availableModels]]\nid = \"x\"\n";
        assert_eq!(key_line(text, "a"), Some(1));
        assert_eq!(key_line(text, "retry.maxRetries"), Some(3));
        assert_eq!(
            key_line("retry.maxRetries = 1\n", "retry.maxRetries"),
            Some(1)
        );
        assert_eq!(key_line(text, "model"), None);
        assert_eq!(key_line(text, "availableModels[0].id"), None);
    }

    #[test]
    fn line_and_column_are_one_based() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
