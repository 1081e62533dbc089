//! Budgets: the limits a request and its session run under, how much of them is used,
//! the `budget.warning` at 80 % and the clean stop when a limit is reached.
//!
//! Limits come from three levels, key by key: the configuration, `session.start
//! {budget}`, `request.send {budget}`. A limit of 0 is no limit. The request's model
//! calls default to [`crate::KernelConfig::max_turns`].
//!
//! When limits are checked:
//! - before each model call: model calls, tokens, cost, wall time (the request stops
//!   before the call when one is reached);
//! - before each tool call: tokens, cost, wall time and that tool's calls (the call and
//!   the rest of the turn are skipped, and the request stops);
//! - wall time also by a timer, which stops a running model call or tool like an
//!   interrupt ([`crate::work::request`]).
//!
//! What a session under a session limit used is kept in its stored state
//! (`extensions.budget`), so a resumed session goes on counting.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use keel_envelope::budget::{BudgetLimit, BudgetLimits, BudgetScope, BudgetStatus};
use keel_envelope::events::ToolCallSkipped;
use keel_envelope::ids::IdKind;
use keel_envelope::types::Usage;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use crate::base::limits::{
    parse_warned_key, warned_key, ModelPrice, RequestOverrides, Stored, Used, ANY_TOOL, WARN_AT,
};
use crate::base::model::{Message, ToolCallRequest};
use crate::session::Session;

/// Limits in force (`None`: no limit).
#[derive(Debug, Clone, Default, PartialEq)]
struct Limits {
    model_calls: Option<u64>,
    tokens: Option<u64>,
    cost_usd: Option<f64>,
    wall_ms: Option<u64>,
    tool_calls: BTreeMap<String, u64>,
}

impl Limits {
    /// Lays `over` on `base` key by key; then 0 means no limit.
    fn resolve(levels: &[Option<&BudgetLimits>]) -> Self {
        let mut out = BudgetLimits::default();
        let mut tools = BTreeMap::new();
        for l in levels.iter().flatten() {
            out.model_calls = l.model_calls.or(out.model_calls);
            out.tokens = l.tokens.or(out.tokens);
            out.cost_usd = l.cost_usd.or(out.cost_usd);
            out.wall_time_secs = l.wall_time_secs.or(out.wall_time_secs);
            for (k, v) in l.tool_calls.iter().flatten() {
                tools.insert(k.clone(), u64::from(*v));
            }
        }
        Limits {
            model_calls: out.model_calls.map(u64::from).filter(|n| *n > 0),
            tokens: out.tokens.filter(|n| *n > 0),
            cost_usd: out.cost_usd.filter(|c| *c > 0.0),
            wall_ms: out
                .wall_time_secs
                .filter(|n| *n > 0)
                .map(|s| s.saturating_mul(1000)),
            tool_calls: tools.into_iter().filter(|(_, v)| *v > 0).collect(),
        }
    }

    fn tool_limit(&self, name: &str) -> Option<u64> {
        self.tool_calls
            .get(name)
            .or_else(|| self.tool_calls.get(ANY_TOOL))
            .copied()
    }
}

#[derive(Debug, Default)]
struct State {
    /// This request.
    request: Used,
    /// The session, including this request.
    session: Used,
    /// The session's wall time before this request.
    session_wall_before: u64,
    warned: HashSet<(BudgetScope, BudgetLimit, Option<String>)>,
    unpriced_warned: bool,
}

/// The budget of one running request (and of its session).
#[derive(Debug)]
pub(crate) struct Budget {
    request: Limits,
    session: Limits,
    price: Option<ModelPrice>,
    model: String,
    max_output_tokens: Option<u32>,
    started: Instant,
    state: Mutex<State>,
}

impl Budget {
    /// The budget of a request about to run.
    pub(crate) fn start(session: &Session, o: &RequestOverrides) -> Self {
        let config = &session.services.config();
        let (stored, model) = {
            let d = session.data();
            (Stored::load(&d.state.extensions), d.model.id())
        };
        let base = BudgetLimits::new().model_calls(config.max_turns);
        let started = stored.budget.clone().unwrap_or_default();
        let request = Limits::resolve(&[
            Some(&base),
            Some(&config.budget.request),
            started.request.as_ref(),
            o.budget.as_ref(),
        ]);
        let session_limits =
            Limits::resolve(&[Some(&config.budget.session), started.session.as_ref()]);
        let warned = stored
            .warned
            .iter()
            .filter_map(|k| parse_warned_key(k))
            .map(|(l, t)| (BudgetScope::Session, l, t))
            .collect();
        let state = State {
            session_wall_before: stored.used.wall_time_ms,
            session: stored.used,
            warned,
            ..State::default()
        };
        Budget {
            request,
            session: session_limits,
            price: config.prices.get(&model).copied(),
            model,
            max_output_tokens: o
                .max_output_tokens
                .or(stored.max_output_tokens)
                .or(config.max_output_tokens),
            started: Instant::now(),
            state: Mutex::new(state),
        }
    }

    /// The output cap of each model call of the request.
    pub(crate) fn max_output_tokens(&self) -> Option<u32> {
        self.max_output_tokens
    }

    /// Records the cap as the running request's (for its sub-agents).
    pub(crate) fn record_output_cap(&self, session: &Session, rid: &str) {
        if let Some(a) = session.data().active.as_mut().filter(|a| a.id == rid) {
            a.output_cap = self.max_output_tokens;
        }
    }
}

/// The cap of summaries and side questions: short answers, whatever the session's
/// cap, unless that is smaller.
pub(crate) const SHORT_ANSWER_CAP: u32 = 2048;

/// The output cap of a model call the session makes beside a request's own turns
/// (a sub-agent's, a side question's, a compaction's): the running request's cap,
/// else the session's (`session.start`), else the configuration's; `None` when none
/// is set (the provider's default applies, as for a request).
pub(crate) fn session_output_cap(session: &Session) -> Option<u32> {
    let d = session.data();
    d.active
        .as_ref()
        .filter(|a| !a.ended)
        .and_then(|a| a.output_cap)
        .or_else(|| Stored::load(&d.state.extensions).max_output_tokens)
        .or(session.services.config().max_output_tokens)
}

/// [`SHORT_ANSWER_CAP`], or the session's cap when it is smaller.
pub(crate) fn short_answer_cap(session: &Session) -> u32 {
    session_output_cap(session).map_or(SHORT_ANSWER_CAP, |c| c.min(SHORT_ANSWER_CAP))
}

impl Budget {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tick(&self, s: &mut State) {
        let elapsed = self.started.elapsed().as_millis() as u64;
        s.request.wall_time_ms = elapsed;
        s.session.wall_time_ms = s.session_wall_before.saturating_add(elapsed);
    }

    /// Counts a model call: its reported usage, or the estimates when the provider
    /// reported none.
    pub(crate) fn record_model_call(&self, usage: Usage, est_input: u64, est_output: u64) {
        let usage = if usage.input_tokens + usage.output_tokens == 0 {
            Usage::new(est_input, est_output, 0)
        } else {
            usage
        };
        let tokens = usage.input_tokens + usage.output_tokens;
        let cost = self.price.map(|p| p.cost(usage)).unwrap_or(0.0);
        let mut guard = self.state();
        let s = &mut *guard;
        for u in [&mut s.request, &mut s.session] {
            u.model_calls += 1;
            u.tokens += tokens;
            u.cost_usd += cost;
        }
    }

    fn record_tool_call(&self, name: &str) {
        let mut guard = self.state();
        let s = &mut *guard;
        for u in [&mut s.request, &mut s.session] {
            *u.tool_calls.entry(name.to_owned()).or_default() += 1;
        }
    }

    /// Every limit with its use now, for `tool` too when given.
    fn figures(&self, s: &State, tool: Option<&str>) -> Vec<BudgetStatus> {
        let mut out = Vec::new();
        for (scope, l, u) in [
            (BudgetScope::Request, &self.request, &s.request),
            (BudgetScope::Session, &self.session, &s.session),
        ] {
            let mut push = |limit, used: f64, max: Option<f64>, tool: Option<&str>| {
                if let Some(max) = max {
                    out.push(
                        BudgetStatus::new(scope.clone(), limit, used, max)
                            .tool_name(tool.map(str::to_owned)),
                    );
                }
            };
            push(
                BudgetLimit::ModelCalls,
                u.model_calls as f64,
                l.model_calls.map(|m| m as f64),
                None,
            );
            push(
                BudgetLimit::Tokens,
                u.tokens as f64,
                l.tokens.map(|m| m as f64),
                None,
            );
            push(BudgetLimit::CostUsd, u.cost_usd, l.cost_usd, None);
            push(
                BudgetLimit::WallTimeSecs,
                u.wall_time_ms as f64 / 1000.0,
                l.wall_ms.map(|m| m as f64 / 1000.0),
                None,
            );
            // Every tool used so far, and the one about to be called.
            let mut names: Vec<&str> = u.tool_calls.keys().map(String::as_str).collect();
            if let Some(t) = tool {
                if !names.contains(&t) {
                    names.push(t);
                }
            }
            for name in names {
                let used = u.tool_calls.get(name).copied().unwrap_or(0);
                push(
                    BudgetLimit::ToolCalls,
                    used as f64,
                    l.tool_limit(name).map(|m| m as f64),
                    Some(name),
                );
            }
        }
        out
    }

    /// The limits at 80 % or more that were not announced yet (and marks them).
    pub(crate) fn new_warnings(&self) -> Vec<BudgetStatus> {
        let mut s = self.state();
        self.tick(&mut s);
        let figures = self.figures(&s, None);
        figures
            .into_iter()
            .filter(|f| f.used >= f.max * WARN_AT)
            .filter(|f| {
                s.warned
                    .insert((f.scope.clone(), f.limit.clone(), f.tool_name.clone()))
            })
            .collect()
    }

    /// The first limit that forbids another model call.
    fn reached_for_model_call(&self) -> Option<BudgetStatus> {
        let mut s = self.state();
        self.tick(&mut s);
        self.figures(&s, None)
            .into_iter()
            .find(|f| f.limit != BudgetLimit::ToolCalls && f.used >= f.max)
    }

    /// The first limit that forbids a call of `tool`.
    fn reached_for_tool_call(&self, tool: &str) -> Option<BudgetStatus> {
        let mut s = self.state();
        self.tick(&mut s);
        self.figures(&s, Some(tool)).into_iter().find(|f| {
            f.used >= f.max
                && match f.limit {
                    BudgetLimit::ModelCalls => false,
                    BudgetLimit::ToolCalls => f.tool_name.as_deref() == Some(tool),
                    _ => true,
                }
        })
    }

    /// Time left before the wall-time limit (the request's or the session's).
    pub(crate) fn wall_time_left(&self) -> Option<Duration> {
        let s = self.state();
        let elapsed = self.started.elapsed().as_millis() as u64;
        let left = |max: Option<u64>, before: u64| {
            max.map(|m| m.saturating_sub(before.saturating_add(elapsed)))
        };
        let r = left(self.request.wall_ms, 0);
        let ss = left(self.session.wall_ms, s.session_wall_before);
        r.into_iter().chain(ss).min().map(Duration::from_millis)
    }

    /// Time left before 80 % of the wall-time limit, while no warning was given.
    pub(crate) fn wall_warning_in(&self) -> Option<Duration> {
        let s = self.state();
        let elapsed = self.started.elapsed().as_millis() as u64;
        let at = |max: Option<u64>, before: u64, scope| {
            let warned = s.warned.contains(&(scope, BudgetLimit::WallTimeSecs, None));
            max.filter(|_| !warned).map(|m| {
                ((m as f64 * WARN_AT) as u64).saturating_sub(before.saturating_add(elapsed))
            })
        };
        let r = at(self.request.wall_ms, 0, BudgetScope::Request);
        let ss = at(
            self.session.wall_ms,
            s.session_wall_before,
            BudgetScope::Session,
        );
        r.into_iter().chain(ss).min().map(Duration::from_millis)
    }

    /// The wall-time limit that ends the request now.
    pub(crate) fn wall_time_reached(&self) -> BudgetStatus {
        let mut s = self.state();
        self.tick(&mut s);
        let figures = self.figures(&s, None);
        let wall: Vec<BudgetStatus> = figures
            .into_iter()
            .filter(|f| f.limit == BudgetLimit::WallTimeSecs)
            .collect();
        wall.iter()
            .find(|f| f.used >= f.max)
            .or(wall.first())
            .cloned()
            .unwrap_or(BudgetStatus::new(
                BudgetScope::Request,
                BudgetLimit::WallTimeSecs,
                s.request.wall_time_ms as f64 / 1000.0,
                s.request.wall_time_ms as f64 / 1000.0,
            ))
    }

    /// Whether a cost limit is set that cannot be counted (no price for the model);
    /// true once.
    fn unpriced(&self) -> bool {
        if self.price.is_some()
            || (self.request.cost_usd.is_none() && self.session.cost_usd.is_none())
        {
            return false;
        }
        !std::mem::replace(&mut self.state().unpriced_warned, true)
    }

    /// Writes the session's figures into its stored state (the wall time so far
    /// included), when a session limit is in force.
    pub(crate) fn save(&self, session: &Session) {
        if self.session == Limits::default() {
            return;
        }
        let (used, mut warned) = {
            let mut s = self.state();
            self.tick(&mut s);
            let warned: Vec<String> = s
                .warned
                .iter()
                .filter(|(scope, _, _)| *scope == BudgetScope::Session)
                .map(|(_, l, t)| warned_key(l.clone(), t.as_deref()))
                .collect();
            (s.session.clone(), warned)
        };
        warned.sort();
        let mut d = session.data();
        let mut stored = Stored::load(&d.state.extensions);
        stored.used = used;
        stored.warned = warned;
        stored.save(&mut d.state.extensions);
    }
}

/// Emits `budget.warning` for each limit newly at 80 % or more, and once a warning
/// that a cost limit cannot be counted.
pub(crate) async fn warn(session: &Session, rid: &str, b: &Budget) {
    if b.unpriced() {
        let w = ErrorPayload::new(
            ErrorCode::PriceUnknown,
            format!(
                "a cost limit is set but the configuration has no price for {}: its calls are not counted",
                b.model
            ),
        )
        .severity(keel_envelope::error::Severity::Warning)
        .with_detail("model", b.model.clone());
        session.emitter.emit(rid, Event::Warning(w)).await;
    }
    for status in b.new_warnings() {
        session
            .emitter
            .emit(rid, Event::BudgetWarning(status))
            .await;
    }
}

/// Before a model call: the warnings due, then the limit that forbids the call.
pub(crate) async fn before_model_call(
    session: &Session,
    rid: &str,
    b: &Budget,
) -> Option<BudgetStatus> {
    warn(session, rid, b).await;
    let hit = b.reached_for_model_call();
    if hit.is_some() {
        b.save(session);
    }
    hit
}

/// Before a tool call: the limit that forbids it, or the call is counted (and the
/// warnings due emitted).
pub(crate) async fn before_tool_call(
    session: &Session,
    rid: &str,
    b: &Budget,
    tool: &str,
) -> Option<BudgetStatus> {
    warn(session, rid, b).await;
    if let Some(hit) = b.reached_for_tool_call(tool) {
        b.save(session);
        return Some(hit);
    }
    b.record_tool_call(tool);
    warn(session, rid, b).await;
    None
}

/// The error that ends a request at `hit`: `MAX_TURNS_EXCEEDED` for the request's
/// model calls (as before budgets existed), `BUDGET_EXCEEDED` for every other limit.
pub(crate) fn exceeded(hit: &BudgetStatus) -> ErrorPayload {
    let whose = match hit.scope {
        BudgetScope::Session => "the session",
        _ => "the request",
    };
    let (code, message) = match (&hit.scope, &hit.limit) {
        (BudgetScope::Request, BudgetLimit::ModelCalls) => (
            ErrorCode::MaxTurnsExceeded,
            format!("the request reached its limit of {} model calls", hit.max),
        ),
        (_, BudgetLimit::ModelCalls) => (
            ErrorCode::BudgetExceeded,
            format!("{whose} reached its limit of {} model calls", hit.max),
        ),
        (_, BudgetLimit::Tokens) => (
            ErrorCode::BudgetExceeded,
            format!(
                "{whose} used {} of its {} tokens",
                hit.used as u64, hit.max as u64
            ),
        ),
        (_, BudgetLimit::CostUsd) => (
            ErrorCode::BudgetExceeded,
            format!(
                "{whose} cost an estimated ${:.4} of its ${:.4}",
                hit.used, hit.max
            ),
        ),
        (_, BudgetLimit::WallTimeSecs) => (
            ErrorCode::BudgetExceeded,
            format!("{whose} ran for its limit of {} s", hit.max),
        ),
        (_, BudgetLimit::ToolCalls) => (
            ErrorCode::BudgetExceeded,
            format!(
                "{whose} reached its limit of {} calls of {}",
                hit.max,
                hit.tool_name.as_deref().unwrap_or("a tool")
            ),
        ),
        // The kernel reports only the limits above.
        (_, limit) => (
            ErrorCode::BudgetExceeded,
            format!("{whose} reached its {limit} limit of {}", hit.max),
        ),
    };
    let mut e = ErrorPayload::new(code.clone(), message)
        .severity(keel_envelope::error::Severity::Warning)
        .with_detail("scope", hit.scope.as_str())
        .with_detail("limit", hit.limit.as_str())
        .with_detail("used", hit.used)
        .with_detail("max", hit.max);
    if let Some(t) = &hit.tool_name {
        e = e.with_detail("toolName", t.clone());
    }
    if code == ErrorCode::MaxTurnsExceeded {
        e = e.with_detail("maxTurns", hit.max as u64);
    }
    e
}

/// Closes the calls of a turn that the budget stops: `tool.call.skipped` for each, and
/// a result for each in the history so that it stays well-formed.
pub(crate) async fn skip_calls(
    session: &Session,
    rid: &str,
    calls: &[ToolCallRequest],
    hit: &BudgetStatus,
) {
    let error = exceeded(hit).severity(keel_envelope::error::Severity::Error);
    for call in calls {
        let id = session.services.next_id(IdKind::ToolCall);
        let mut e = error.clone();
        e.code = ErrorCode::BudgetExceeded;
        session
            .emitter
            .emit(
                rid,
                Event::ToolCallSkipped(ToolCallSkipped::new(
                    id,
                    call.name.clone(),
                    e.with_detail("toolName", call.name.clone()),
                )),
            )
            .await;
        session.data().state.history.push(Message::Tool {
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!(
                "not run: {} (the request stopped here)",
                exceeded(hit).message
            ),
            is_error: true,
        });
    }
}
