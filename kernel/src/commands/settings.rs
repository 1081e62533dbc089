//! A session's settings and state: `session.state`, `session.set_mode`,
//! `session.set_model` and `session.load_history` (idle only), `session.set_rules`.

use std::sync::Arc;

use keel_envelope::commands::{LoadHistory, SessionStateCmd, SetMode, SetModel, SetRules};
use keel_envelope::events::{
    SessionHistoryLoaded, SessionModeChanged, SessionModelChanged, SessionRulesUpdated,
};
use keel_envelope::types::ApprovalRules;
use keel_envelope::{ErrorCode, ErrorPayload, Event};

use super::Cx;
use crate::session::Session;

/// `session.state`.
pub(crate) async fn state(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    _: &SessionStateCmd,
) -> Result<(), ErrorPayload> {
    let snap = session.snapshot();
    session
        .emitter
        .emit(cx.rid, Event::SessionState(snap))
        .await;
    Ok(())
}

/// `session.set_mode`.
pub(crate) async fn set_mode(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SetMode,
) -> Result<(), ErrorPayload> {
    let previous = std::mem::replace(&mut session.data().state.mode, p.mode.clone());
    let ev = SessionModeChanged::new(p.mode.clone(), previous);
    session
        .emit_persist(cx.rid, Event::SessionModeChanged(ev))
        .await;
    Ok(())
}

/// `session.set_model` (idle only).
pub(crate) async fn set_model(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SetModel,
) -> Result<(), ErrorPayload> {
    if session.data().active.is_some() {
        return Err(ErrorPayload::new(
            ErrorCode::SessionBusy,
            "the model can only be changed while the session is idle",
        ));
    }
    let model = cx.services.model(Some(&p.model))?;
    let previous = {
        let mut d = session.data();
        d.model = model.clone();
        std::mem::replace(&mut d.state.model, model.id())
    };
    let ev = SessionModelChanged::new(model.id(), previous);
    session
        .emit_persist(cx.rid, Event::SessionModelChanged(ev))
        .await;
    Ok(())
}

/// `session.set_rules`: the always-allow and always-deny rules, and (when given)
/// the session's own deny rules; a malformed rule refuses the whole command.
pub(crate) async fn set_rules(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &SetRules,
) -> Result<(), ErrorPayload> {
    crate::pipeline::gate::check_rules(p)?;
    let rules = ApprovalRules::new(
        p.always_allow_global.clone(),
        p.always_allow_project.clone(),
        p.always_deny_global.clone(),
        p.always_deny_project.clone(),
    );
    {
        let mut d = session.data();
        d.state.rules = rules.clone();
        if let Some(deny) = &p.deny {
            d.state.session_deny = deny.clone();
        }
    }
    let ev = SessionRulesUpdated::new(rules, "host");
    session
        .emit_persist(cx.rid, Event::SessionRulesUpdated(ev))
        .await;
    Ok(())
}

/// `session.load_history` (idle only).
pub(crate) async fn load_history(
    cx: &Cx<'_>,
    session: &Arc<Session>,
    p: &LoadHistory,
) -> Result<(), ErrorPayload> {
    let count = {
        let mut d = session.data();
        if d.active.is_some() {
            return Err(ErrorPayload::new(
                ErrorCode::SessionBusy,
                "history can only be loaded while the session is idle",
            ));
        }
        let converted = crate::base::history_import::convert_history(&p.messages)?;
        d.state.history.extend(converted);
        d.state.history.len() as u32
    };
    let ev = SessionHistoryLoaded::new(count);
    session
        .emit_persist(cx.rid, Event::SessionHistoryLoaded(ev))
        .await;
    Ok(())
}
