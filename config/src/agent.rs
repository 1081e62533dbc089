//! The configuration of how requests run: budgets (`[budget.request]`,
//! `[budget.session]`), model prices (`[prices."provider:model"]`), the output cap
//! (`maxOutputTokens`) and hooks (`[hooks]`, `[[hooks.PreToolUse]]`, …).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use keel_envelope::budget::BudgetLimits;
use keel_envelope::error::ErrorPayload;
use keel_kernel::config::{BudgetConfig, CommandHookConfig, HooksConfig, ModelPrice};
use keel_kernel::hooks::{HookEvent, DEFAULT_HOOK_TIMEOUT};
use serde::Deserialize;

use crate::spec::parse_model_spec;

/// The `toolCalls` key of every tool not named.
const ANY_TOOL: &str = "*";

/// `[budget]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawBudget {
    request: Option<RawLimits>,
    session: Option<RawLimits>,
}

/// `[budget.request]`, `[budget.session]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawLimits {
    model_calls: Option<u32>,
    tokens: Option<u64>,
    cost_usd: Option<f64>,
    wall_time_secs: Option<u64>,
    tool_calls: Option<BTreeMap<String, u32>>,
}

/// `[prices."provider:model"]`, US dollars per million tokens.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawPrice {
    input: f64,
    output: f64,
    cached_input: Option<f64>,
}

/// `[hooks]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHooks {
    #[serde(rename = "timeoutSecs")]
    timeout_secs: Option<u64>,
    #[serde(rename = "allowProjectHooks")]
    allow_project_hooks: Option<RawTrust>,
    #[serde(rename = "PreToolUse")]
    pre_tool_use: Option<Vec<RawHook>>,
    #[serde(rename = "PostToolUse")]
    post_tool_use: Option<Vec<RawHook>>,
    #[serde(rename = "UserPromptSubmit")]
    user_prompt_submit: Option<Vec<RawHook>>,
    #[serde(rename = "Stop")]
    stop: Option<Vec<RawHook>>,
    #[serde(rename = "SessionStart")]
    session_start: Option<Vec<RawHook>>,
}

impl RawHooks {
    fn entries(self) -> Vec<(HookEvent, Vec<RawHook>)> {
        [
            (HookEvent::PreToolUse, self.pre_tool_use),
            (HookEvent::PostToolUse, self.post_tool_use),
            (HookEvent::UserPromptSubmit, self.user_prompt_submit),
            (HookEvent::Stop, self.stop),
            (HookEvent::SessionStart, self.session_start),
        ]
        .into_iter()
        .filter_map(|(e, v)| v.map(|v| (e, v)))
        .collect()
    }
}

/// `hooks.allowProjectHooks = true | false | ["folder", …]`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum RawTrust {
    All(bool),
    Only(Vec<String>),
}

/// The projects whose own `.keel/config.toml` may set `[hooks]`
/// (`hooks.allowProjectHooks`, only in the user's own file).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ProjectTrust {
    /// No project (the default).
    #[default]
    None,
    /// Every project (`true`).
    All,
    /// These workspace folders, exactly (absolute, canonical when they exist).
    Only(Vec<PathBuf>),
}

impl ProjectTrust {
    /// Whether the project rooted at `workspace` may set hooks.
    pub fn trusts(&self, workspace: &Path) -> bool {
        match self {
            ProjectTrust::None => false,
            ProjectTrust::All => true,
            ProjectTrust::Only(list) => {
                let ws = canonical(workspace);
                list.contains(&ws)
            }
        }
    }
}

fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned())
}

/// A folder of `allowProjectHooks`: absolute, or `~/…` (the home folder).
fn trusted_folder(raw: &str) -> Result<PathBuf, String> {
    let path = match raw.strip_prefix("~/").or((raw == "~").then_some("")) {
        Some(rest) => dirs::home_dir()
            .ok_or_else(|| format!("{raw:?}: the home folder is unknown"))?
            .join(rest),
        None => PathBuf::from(raw),
    };
    if !path.is_absolute() {
        return Err(format!(
            "{raw:?} is not an absolute folder (nor one under `~/`)"
        ));
    }
    Ok(canonical(&path))
}

/// `[[hooks.<Point>]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawHook {
    command: String,
    matcher: Option<String>,
    timeout_secs: Option<u64>,
}

/// How requests run, as configured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentConfig {
    /// `[budget.request]` and `[budget.session]`.
    pub budget: BudgetConfig,
    /// `[prices."provider:model"]`.
    pub prices: BTreeMap<String, ModelPrice>,
    /// `maxOutputTokens`.
    pub max_output_tokens: Option<u32>,
    /// `[hooks]` and the hooks, the user's first, then the project's.
    pub hooks: HooksConfig,
    /// `hooks.allowProjectHooks` (only from the user's own file).
    pub allow_project_hooks: ProjectTrust,
}

/// The raw keys of one file this module reads.
#[derive(Debug, Default)]
pub(crate) struct RawAgent {
    pub(crate) budget: Option<RawBudget>,
    pub(crate) prices: Option<BTreeMap<String, RawPrice>>,
    pub(crate) max_output_tokens: Option<u32>,
    pub(crate) hooks: Option<RawHooks>,
}

type Invalid<'a> = &'a dyn Fn(&str, String) -> ErrorPayload;

fn limits(raw: RawLimits, key: &str, invalid: Invalid<'_>) -> Result<BudgetLimits, ErrorPayload> {
    if let Some(c) = raw.cost_usd {
        if !c.is_finite() || c < 0.0 {
            return Err(invalid(
                &format!("{key}.costUsd"),
                format!("{c} is not a non-negative number of US dollars"),
            ));
        }
    }
    if let Some(map) = &raw.tool_calls {
        if let Some(k) = map.keys().find(|k| k.trim().is_empty()) {
            return Err(invalid(
                &format!("{key}.toolCalls"),
                format!("{k:?} is not a tool name (or \"*\")"),
            ));
        }
    }
    Ok(BudgetLimits::new()
        .model_calls(raw.model_calls)
        .tokens(raw.tokens)
        .cost_usd(raw.cost_usd)
        .wall_time_secs(raw.wall_time_secs)
        .tool_calls(raw.tool_calls))
}

/// Lays `over` on `base` key by key (`toolCalls` tool by tool). A project's file
/// (`project`) can only make a limit stricter: where `base` has a limit, the lower one
/// counts (and `0`, no limit, does not remove it).
fn merge(base: &mut BudgetLimits, over: BudgetLimits, project: bool) {
    let pick = |b, o| if project { stricter(b, o) } else { o.or(b) };
    base.model_calls = pick(
        base.model_calls.map(u64::from),
        over.model_calls.map(u64::from),
    )
    .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    base.tokens = pick(base.tokens, over.tokens);
    base.cost_usd = if project {
        stricter(base.cost_usd, over.cost_usd)
    } else {
        over.cost_usd.or(base.cost_usd)
    };
    base.wall_time_secs = pick(base.wall_time_secs, over.wall_time_secs);
    if let Some(tools) = over.tool_calls {
        let before = base.tool_calls.clone().unwrap_or_default();
        let map = base.tool_calls.get_or_insert_with(BTreeMap::new);
        for (name, n) in tools {
            let n = if project {
                // The user's limit of this tool: its own, else `"*"`.
                let mine = before
                    .get(&name)
                    .or_else(|| (name != ANY_TOOL).then(|| before.get(ANY_TOOL)).flatten());
                stricter(mine.map(|m| u64::from(*m)), Some(u64::from(n)))
                    .map_or(n, |m| u32::try_from(m).unwrap_or(u32::MAX))
            } else {
                n
            };
            map.insert(name, n);
        }
    }
}

/// The stricter of two limits, where `0` (or none) is no limit.
fn stricter<T: PartialOrd + Copy + Default>(base: Option<T>, over: Option<T>) -> Option<T> {
    let none = T::default();
    match (base, over) {
        (Some(b), Some(o)) if b != none => Some(if o == none || b < o { b } else { o }),
        (b, o) => o.or(b),
    }
}

/// The higher of two prices (the stricter estimate), field by field.
fn dearer(mine: ModelPrice, theirs: ModelPrice) -> ModelPrice {
    let cached = |p: ModelPrice| p.cached_input.unwrap_or(p.input);
    ModelPrice {
        input: mine.input.max(theirs.input),
        output: mine.output.max(theirs.output),
        cached_input: (mine.cached_input.is_some() || theirs.cached_input.is_some())
            .then(|| cached(mine).max(cached(theirs))),
    }
}

impl AgentConfig {
    /// Sets the kernel's budgets, prices, output cap and hooks from this configuration.
    pub fn apply_to(&self, kernel: &mut keel_kernel::KernelConfig) {
        kernel.budget = self.budget.clone();
        kernel.prices = self.prices.iter().map(|(k, v)| (k.clone(), *v)).collect();
        kernel.max_output_tokens = self.max_output_tokens;
        kernel.hooks = self.hooks.clone();
    }

    /// Applies one file's keys. `project`: the file is the `.keel/config.toml` of
    /// this workspace, whose `[hooks]` count only when the user's own file trusts
    /// it. Returns whether the file set `budget.request.modelCalls`.
    pub(crate) fn apply(
        &mut self,
        raw: RawAgent,
        project: Option<&Path>,
        invalid: Invalid<'_>,
    ) -> Result<bool, ErrorPayload> {
        let mut sets_model_calls = false;
        if let Some(n) = raw.max_output_tokens {
            if n == 0 {
                return Err(invalid("maxOutputTokens", "must be at least 1".into()));
            }
            self.max_output_tokens = Some(n);
        }
        if let Some(b) = raw.budget {
            if let Some(r) = b.request {
                let l = limits(r, "budget.request", invalid)?;
                sets_model_calls = l.model_calls.is_some();
                merge(&mut self.budget.request, l, project.is_some());
            }
            if let Some(s) = b.session {
                let l = limits(s, "budget.session", invalid)?;
                merge(&mut self.budget.session, l, project.is_some());
            }
        }
        if let Some(prices) = raw.prices {
            for (model, p) in prices {
                let key = format!("prices.\"{model}\"");
                parse_model_spec(&model).map_err(|e| invalid(&key, e.message))?;
                for (name, v) in [("input", Some(p.input)), ("output", Some(p.output))]
                    .into_iter()
                    .chain([("cachedInput", p.cached_input)])
                {
                    if let Some(v) = v {
                        if !v.is_finite() || v < 0.0 {
                            return Err(invalid(
                                &format!("{key}.{name}"),
                                format!("{v} is not a non-negative price"),
                            ));
                        }
                    }
                }
                let mut price = ModelPrice {
                    input: p.input,
                    output: p.output,
                    cached_input: p.cached_input,
                };
                // A project cannot make your cost limits count less.
                if let (Some(_), Some(mine)) = (project, self.prices.get(&model)) {
                    price = dearer(*mine, price);
                }
                self.prices.insert(model, price);
            }
        }
        if let Some(h) = raw.hooks {
            self.apply_hooks(h, project, invalid)?;
        }
        Ok(sets_model_calls)
    }

    fn apply_hooks(
        &mut self,
        mut h: RawHooks,
        project: Option<&Path>,
        invalid: Invalid<'_>,
    ) -> Result<(), ErrorPayload> {
        if let Some(allow) = h.allow_project_hooks.take() {
            if project.is_some() {
                return Err(invalid(
                    "hooks.allowProjectHooks",
                    "can only be set in your own config.toml, not in a project's".into(),
                ));
            }
            self.allow_project_hooks = match allow {
                RawTrust::All(true) => ProjectTrust::All,
                RawTrust::All(false) => ProjectTrust::None,
                RawTrust::Only(list) => ProjectTrust::Only(
                    list.iter()
                        .map(|f| trusted_folder(f))
                        .collect::<Result<_, _>>()
                        .map_err(|why| invalid("hooks.allowProjectHooks", why))?,
                ),
            };
        }
        // Hooks run commands (and their time limit decides whether the user's own
        // hooks count), so an untrusted project may set nothing under `[hooks]`.
        if let Some(ws) = project.filter(|ws| !self.allow_project_hooks.trusts(ws)) {
            let set = h
                .timeout_secs
                .map(|_| "hooks.timeoutSecs".to_owned())
                .or_else(|| {
                    h.entries()
                        .into_iter()
                        .find(|(_, list)| !list.is_empty())
                        .map(|(e, _)| format!("hooks.{}", e.as_str()))
                });
            if let Some(key) = set {
                return Err(invalid(
                    &key,
                    format!(
                        "hooks run commands on this machine, so a project's `[hooks]` count \
                         only in a project you trust: add {:?} to `hooks.allowProjectHooks` \
                         in your own config.toml",
                        canonical(ws).display().to_string()
                    ),
                ));
            }
            return Ok(());
        }
        if let Some(t) = h.timeout_secs {
            if t == 0 {
                return Err(invalid("hooks.timeoutSecs", "must be at least 1".into()));
            }
            self.hooks.timeout = Duration::from_secs(t);
        }
        for (event, list) in h.entries() {
            for (i, raw) in list.into_iter().enumerate() {
                let key = format!("hooks.{}[{i}]", event.as_str());
                if raw.timeout_secs == Some(0) {
                    return Err(invalid(
                        &format!("{key}.timeoutSecs"),
                        "must be at least 1".into(),
                    ));
                }
                let hook = CommandHookConfig {
                    command: raw.command,
                    matcher: raw.matcher,
                    timeout: raw.timeout_secs.map(Duration::from_secs),
                };
                // The same checks as the kernel's, named by key here.
                if let Err(why) =
                    keel_kernel::hooks::CommandHook::new(event, &hook, DEFAULT_HOOK_TIMEOUT)
                {
                    let field = if why.contains("matcher") {
                        "matcher"
                    } else {
                        "command"
                    };
                    return Err(invalid(&format!("{key}.{field}"), why));
                }
                self.hooks.of_mut(event).push(hook);
            }
        }
        Ok(())
    }
}
