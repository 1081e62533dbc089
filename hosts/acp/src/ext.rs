//! Keel's extension methods, under `_keel/`: replay from a cursor, the session's
//! state, the task graph.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::{Error, ErrorCode};
use keel_envelope::commands::{CommandPayload, TaskGraphStateCmd};
use keel_envelope::types::Cursor;
use keel_envelope::Envelope;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::oneshot;

use crate::error::{from_keel, invalid_params};
use crate::host::{Host, Sess};
use crate::translate::Translator;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SessionIdParams {
    session_id: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ReplayParams {
    session_id: String,
    #[serde(default)]
    cursor: Option<Cursor>,
}

fn parse<T: for<'de> Deserialize<'de>>(params: Value) -> Result<T, Error> {
    let params = if params.is_null() { json!({}) } else { params };
    serde_json::from_value(params).map_err(|e| invalid_params(format!("invalid params: {e}")))
}

impl Host {
    /// A `_keel/…` method.
    pub(crate) async fn ext_method(
        self: &Arc<Self>,
        method: &str,
        params: Value,
    ) -> Result<Value, Error> {
        match method {
            "_keel/replay" => {
                let p: ReplayParams = parse(params)?;
                self.replay(&p.session_id, p.cursor.as_ref())
            }
            "_keel/session_state" => {
                let p: SessionIdParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                Ok(serde_json::to_value(sess.handle.state()).unwrap_or(Value::Null))
            }
            "_keel/task_graph" => {
                let p: SessionIdParams = parse(params)?;
                let sess = self.session(&p.session_id)?;
                let env = self
                    .command_event(
                        &sess,
                        CommandPayload::TaskGraphState(TaskGraphStateCmd::new()),
                    )
                    .await?;
                Ok(env.event.payload_value())
            }
            other => Err(Error::method_not_found().data(json!({ "method": other }))),
        }
    }

    /// Sends the stored events after `cursor` as updates; answers what was sent.
    fn replay(&self, session_id: &str, cursor: Option<&Cursor>) -> Result<Value, Error> {
        let sess = self.session(session_id)?;
        let log = self.kernel.session_log(session_id).map_err(from_keel)?;
        let start = match cursor {
            None => 0,
            Some(c) => {
                log.iter()
                    .position(|e| e.request_id == c.request_id && e.sequence == c.sequence)
                    .ok_or_else(|| invalid_params("the cursor is not in the session's log"))?
                    + 1
            }
        };
        let mut t = Translator::new(sess.workspace.clone());
        let mut sent = 0u64;
        for env in &log[start..] {
            for u in t.translate(env, true) {
                self.update(session_id, u);
                sent += 1;
            }
        }
        let last = log
            .last()
            .map(|e| json!({"requestId": e.request_id, "sequence": e.sequence}));
        Ok(json!({
            "replayedEvents": log.len() - start,
            "updates": sent,
            "lastCursor": last,
            "events": log[start..]
                .iter()
                .map(|e| serde_json::to_value(e).unwrap_or(Value::Null))
                .collect::<Vec<_>>(),
        }))
    }

    /// Runs a session command and returns the first event answering it.
    async fn command_event(&self, sess: &Sess, payload: CommandPayload) -> Result<Envelope, Error> {
        let rid = self.kernel.new_request_id();
        let (tx, rx) = oneshot::channel();
        sess.st().event_waiters.insert(rid.clone(), tx);
        let cmd =
            keel_envelope::Command::new(rid.clone(), Some(sess.handle.id().to_owned()), payload);
        if let Err(e) = self.kernel.execute(cmd).await {
            sess.st().event_waiters.remove(&rid);
            return Err(from_keel(e));
        }
        match tokio::time::timeout(Duration::from_secs(10), rx).await {
            Ok(Ok(env)) => Ok(env),
            _ => Err(Error::new(
                ErrorCode::INTERNAL_ERROR,
                "the kernel did not answer the command",
            )),
        }
    }
}
