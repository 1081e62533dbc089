//! Budgets: the limits a request and a session run under, and how close they are.
//!
//! A limit given as `0` means "no limit"; an absent limit keeps the value of the level
//! below it (`request.send` over `session.start` over the configuration).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

crate::wire::growable! {
    /// Limits of one scope (a request, or a whole session). Every field is optional.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    #[ts(optional_fields = nullable)]
    pub struct BudgetLimits {
        /// Model calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub model_calls: Option<u32>,
        /// Input plus output tokens, summed over the model calls.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tokens: Option<u64>,
        /// Estimated cost in US dollars (needs the model's price in the configuration).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cost_usd: Option<f64>,
        /// Wall time in seconds while a request runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub wall_time_secs: Option<u64>,
        /// Calls per tool, by tool name; `"*"` applies to each tool not named.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tool_calls: Option<BTreeMap<String, u32>>,
    }
}

crate::wire::growable! {
    /// The budget of `session.start`: limits for each of its requests and for the whole
    /// session.
    #[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    #[ts(optional_fields = nullable)]
    pub struct SessionBudget {
        /// Limits of each request of the session.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub request: Option<BudgetLimits>,
        /// Limits of the whole session (summed over its requests).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub session: Option<BudgetLimits>,
    }
}

crate::wire::wire_enum! {
    /// Which budget a figure belongs to.
    pub enum BudgetScope {
        /// The running request.
        Request = "request",
        /// The whole session.
        Session = "session",
    }
}

crate::wire::wire_enum! {
    /// Which limit a figure is about (the key of [`BudgetLimits`]).
    pub enum BudgetLimit {
        /// Model calls.
        ModelCalls = "modelCalls",
        /// Input plus output tokens.
        Tokens = "tokens",
        /// Estimated cost in US dollars.
        CostUsd = "costUsd",
        /// Wall time in seconds.
        WallTimeSecs = "wallTimeSecs",
        /// Calls of one tool (`toolName` says which).
        ToolCalls = "toolCalls",
    }
}

crate::wire::growable! {
    /// How much of one limit is used: the payload of `budget.warning`, and the
    /// `budget` of `session.completed` when a limit stopped the request.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
    #[serde(rename_all = "camelCase")]
    #[ts(optional_fields = nullable)]
    pub struct BudgetStatus {
        /// The request's or the session's budget.
        pub scope: BudgetScope,
        /// Which limit.
        pub limit: BudgetLimit,
        /// The tool, for `toolCalls`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub tool_name: Option<String>,
        /// Used so far (model calls, tokens, US dollars, seconds or tool calls).
        pub used: f64,
        /// The limit, in the same unit.
        pub max: f64,
    }
}
