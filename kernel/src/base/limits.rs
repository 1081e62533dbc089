//! The budget's settings and what is stored of it: the configured limits and prices,
//! a request's own overrides, the checks of limits a host gives, and the record a
//! session keeps in its stored `extensions.budget`. The budget of a running request
//! is [`crate::work::budget`].

use std::collections::BTreeMap;

use keel_envelope::budget::{BudgetLimit, BudgetLimits, SessionBudget};
use keel_envelope::types::Usage;
use keel_envelope::{ErrorCode, ErrorPayload};
use serde::{Deserialize, Serialize};

/// The key of a session's budget in its stored `extensions`.
pub(crate) const EXT_KEY: &str = "budget";
/// The fraction of a limit at which `budget.warning` is emitted.
pub const WARN_AT: f64 = 0.8;
/// The key of `toolCalls` that applies to every tool not named.
pub const ANY_TOOL: &str = "*";

/// A model's price in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ModelPrice {
    /// Input tokens not served from the cache.
    pub input: f64,
    /// Output tokens.
    pub output: f64,
    /// Input tokens served from the provider's cache (default: `input`).
    pub cached_input: Option<f64>,
}

impl ModelPrice {
    /// The cost of one call's usage, in US dollars.
    pub fn cost(&self, u: Usage) -> f64 {
        let cached = u.cached_input_tokens.min(u.input_tokens) as f64;
        let fresh = u.input_tokens as f64 - cached;
        (fresh * self.input
            + cached * self.cached_input.unwrap_or(self.input)
            + u.output_tokens as f64 * self.output)
            / 1_000_000.0
    }
}

/// The configured limits of requests and sessions.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BudgetConfig {
    /// Limits of each request (`modelCalls` unset: [`crate::KernelConfig::max_turns`]).
    pub request: BudgetLimits,
    /// Limits of each session, summed over its requests.
    pub session: BudgetLimits,
}

/// What `request.send` sets for its own request.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct RequestOverrides {
    pub(crate) budget: Option<BudgetLimits>,
    pub(crate) max_output_tokens: Option<u32>,
}

impl RequestOverrides {
    /// The overrides of a `request.send`, checked.
    pub(crate) fn of(p: &keel_envelope::commands::RequestSend) -> Result<Self, ErrorPayload> {
        if let Some(l) = &p.budget {
            validate_limits(l, "payload.budget")?;
        }
        validate_max_output(p.max_output_tokens, "payload.maxOutputTokens")?;
        Ok(Self {
            budget: p.budget.clone(),
            max_output_tokens: p.max_output_tokens,
        })
    }
}

/// Checks limits given by a host; `field` names them in the error.
pub(crate) fn validate_limits(l: &BudgetLimits, field: &str) -> Result<(), ErrorPayload> {
    if let Some(c) = l.cost_usd {
        if !c.is_finite() || c < 0.0 {
            return Err(invalid(
                format!("{field}.costUsd"),
                format!("costUsd must be a non-negative number, not {c}"),
            ));
        }
    }
    if let Some(map) = &l.tool_calls {
        if map.keys().any(|k| k.trim().is_empty()) {
            return Err(invalid(
                format!("{field}.toolCalls"),
                "toolCalls keys must be tool names (or \"*\")".into(),
            ));
        }
    }
    Ok(())
}

/// Checks a `maxOutputTokens` given by a host.
pub(crate) fn validate_max_output(v: Option<u32>, field: &str) -> Result<(), ErrorPayload> {
    if v == Some(0) {
        return Err(invalid(
            field.to_owned(),
            "maxOutputTokens must be at least 1".into(),
        ));
    }
    Ok(())
}

/// The stored `extensions` of a new session: its `session.start` budget and output
/// cap, checked.
pub(crate) fn session_extensions(
    opts: &keel_envelope::commands::SessionStart,
) -> Result<serde_json::Map<String, serde_json::Value>, ErrorPayload> {
    if let Some(b) = &opts.budget {
        if let Some(l) = &b.request {
            validate_limits(l, "payload.budget.request")?;
        }
        if let Some(l) = &b.session {
            validate_limits(l, "payload.budget.session")?;
        }
    }
    validate_max_output(opts.max_output_tokens, "payload.maxOutputTokens")?;
    let stored = Stored {
        budget: opts.budget.clone(),
        max_output_tokens: opts.max_output_tokens,
        used: Used::default(),
        warned: Vec::new(),
    };
    let mut map = serde_json::Map::new();
    if stored != Stored::default() {
        if let Ok(v) = serde_json::to_value(&stored) {
            map.insert(EXT_KEY.to_owned(), v);
        }
    }
    Ok(map)
}

/// The stored budget of a fork of a session whose extensions are `parent`: the same
/// limits and output cap, nothing used yet.
pub(crate) fn fork_extension(
    parent: &serde_json::Map<String, serde_json::Value>,
) -> Option<serde_json::Value> {
    let stored: Stored = serde_json::from_value(parent.get(EXT_KEY)?.clone()).ok()?;
    let fork = Stored {
        budget: stored.budget,
        max_output_tokens: stored.max_output_tokens,
        ..Stored::default()
    };
    (fork != Stored::default())
        .then(|| serde_json::to_value(&fork).ok())
        .flatten()
}

fn invalid(field: String, message: String) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::RequestInvalid, message).with_detail("field", field)
}

/// What a session used, and what its `session.start` set.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Stored {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) budget: Option<SessionBudget>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) max_output_tokens: Option<u32>,
    #[serde(default)]
    pub(crate) used: Used,
    /// The session limits already announced by `budget.warning` (`tokens`,
    /// `toolCalls:run_shell`, …), so that each is announced once per session.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) warned: Vec<String>,
}

pub(crate) fn warned_key(limit: BudgetLimit, tool: Option<&str>) -> String {
    match tool {
        Some(t) => format!("{}:{t}", limit.as_str()),
        None => limit.as_str().to_owned(),
    }
}

pub(crate) fn parse_warned_key(key: &str) -> Option<(BudgetLimit, Option<String>)> {
    let (name, tool) = match key.split_once(':') {
        Some((n, t)) => (n, Some(t.to_owned())),
        None => (key, None),
    };
    let limit = [
        BudgetLimit::ModelCalls,
        BudgetLimit::Tokens,
        BudgetLimit::CostUsd,
        BudgetLimit::WallTimeSecs,
        BudgetLimit::ToolCalls,
    ]
    .into_iter()
    .find(|l| l.as_str() == name)?;
    Some((limit, tool))
}

impl Stored {
    /// The record in a session's stored `extensions`.
    pub(crate) fn load(extensions: &serde_json::Map<String, serde_json::Value>) -> Self {
        extensions
            .get(EXT_KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    }

    /// Writes the record into a session's stored `extensions`.
    pub(crate) fn save(&self, extensions: &mut serde_json::Map<String, serde_json::Value>) {
        if *self == Stored::default() {
            extensions.remove(EXT_KEY);
        } else if let Ok(v) = serde_json::to_value(self) {
            extensions.insert(EXT_KEY.to_owned(), v);
        }
    }
}

/// Usage figures of a request or a session.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Used {
    #[serde(default)]
    pub(crate) model_calls: u64,
    #[serde(default)]
    pub(crate) tokens: u64,
    #[serde(default)]
    pub(crate) cost_usd: f64,
    #[serde(default)]
    pub(crate) wall_time_ms: u64,
    #[serde(default)]
    pub(crate) tool_calls: BTreeMap<String, u64>,
}
