//! Keel as an Agent Client Protocol (ACP) agent, protocol version 1, on the protocol's
//! official crate (`agent-client-protocol`): its connection, and its types for every
//! message.
//!
//! JSON-RPC 2.0 over newline-delimited streams: one message per line on the output,
//! nothing else. The server holds no agent logic: requests become kernel commands,
//! and kernel envelopes become `session/update` notifications and
//! `session/request_permission` requests (see `docs/acp.md`). It never sends `fs/*`
//! or `terminal/*` requests: Keel's tools work on the workspace themselves.
//!
//! Modules: `transport` (framing and the line limit), `methods` (the ACP methods),
//! `commands` (custom commands and skills as slash commands),
//! `prompt` (`session/prompt`), `pump` (a session's events to updates), `permission`
//! (permission requests), `ext` (`_keel/…` methods), `config` (modes and config
//! options), `translate` and `tools` (envelopes to updates), `host` (the connection's
//! sessions), `error` (Keel errors as JSON-RPC errors).

mod commands;
mod config;
mod error;
mod ext;
mod host;
mod methods;
mod permission;
mod prompt;
mod pump;
mod tools;
mod translate;
mod transport;

use std::sync::Arc;

use agent_client_protocol::v1::schema::{ClientNotification, ClientRequest};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, Client, Error};
use keel_kernel::Kernel;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};

pub use config::{config_options, modes_state, MODEL_OPTION, MODE_OPTION};
pub use tools::{diff_contents, tool_kind};
pub use translate::{iso8601, Translator};

use crate::error::to_value;
use crate::host::Host;

/// The ACP protocol version spoken.
pub const PROTOCOL_VERSION: u16 = 1;

/// Options of an ACP server.
#[derive(Debug, Clone, Default)]
pub struct AcpOptions {
    /// Largest accepted input line in bytes (default 16 MiB).
    pub max_line_bytes: Option<usize>,
    /// Where custom commands and skills are found; `None`: no slash commands are
    /// announced or expanded.
    pub skills: Option<keel_skills::Settings>,
    /// Names custom commands may not take (the REPL's own commands, with or without
    /// their `/`), so that a workspace's commands are the same in every host.
    pub reserved_commands: Vec<String>,
}

/// A request: `session/prompt` reaches the kernel now, in order, and is answered
/// aside when its request ends; everything else is answered in order.
async fn on_request(
    host: &Arc<Host>,
    request: ClientRequest,
    responder: Responder<Value>,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    host.connected(&cx);
    match request {
        ClientRequest::PromptRequest(p) => match host.start_prompt(p).await {
            Err(e) => responder.respond_with_error(e),
            Ok((sess, rid, wait)) => {
                tokio::spawn(async move {
                    let answer = prompt::finish_prompt(sess, rid, wait)
                        .await
                        .and_then(to_value);
                    let _ = responder.respond_with_result(answer);
                });
                Ok(())
            }
        },
        other => {
            // A session opened here hears of its slash commands after the answer that
            // gave the client its id.
            let known_id = match &other {
                ClientRequest::LoadSessionRequest(p) => Some(Some(p.session_id.0.to_string())),
                ClientRequest::ResumeSessionRequest(p) => Some(Some(p.session_id.0.to_string())),
                ClientRequest::NewSessionRequest(_) | ClientRequest::ForkSessionRequest(_) => {
                    Some(None)
                }
                _ => None,
            };
            let answer = host.dispatch(other).await;
            let opened = match (known_id, &answer) {
                (Some(Some(id)), Ok(_)) => Some(id),
                (Some(None), Ok(v)) => v["sessionId"].as_str().map(str::to_owned),
                _ => None,
            };
            let sent = responder.respond_with_result(answer);
            if let Some(id) = opened {
                host.announce_commands(&id);
            }
            sent
        }
    }
}

/// A notification: `session/cancel` interrupts; others are optional and ignored.
async fn on_notification(
    host: &Arc<Host>,
    notification: ClientNotification,
    cx: ConnectionTo<Client>,
) -> Result<(), Error> {
    host.connected(&cx);
    match notification {
        ClientNotification::CancelNotification(c) => match host.session(&c.session_id.0) {
            Ok(sess) => {
                let _ = sess.handle.interrupt().await;
            }
            Err(e) => tracing::warn!("keel acp: session/cancel: {}", e.message),
        },
        other => tracing::debug!("keel acp: ignoring notification {}", other.method()),
    }
    Ok(())
}

/// Serves one ACP connection until the input ends; returns when everything is
/// flushed. Running requests are interrupted and the store is flushed first.
pub async fn serve<R, W>(kernel: Kernel, input: R, output: W, options: AcpOptions)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let limit = options.max_line_bytes.unwrap_or(16 * 1024 * 1024);
    let (lines, framing) = transport::start(input, output, limit);
    let commands = options.skills.map(|settings| commands::Commands {
        settings,
        reserved: options.reserved_commands,
    });
    let host = Host::new(kernel, commands);
    let (h1, h2) = (host.clone(), host.clone());
    let connection = Agent
        .v1()
        .name("keel")
        .on_receive_request(
            async move |request: ClientRequest, responder: Responder<Value>, cx| {
                on_request(&h1, request, responder, cx).await
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |notification: ClientNotification, cx| {
                on_notification(&h2, notification, cx).await
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(lines)
        .await;
    if let Err(e) = connection {
        tracing::warn!("keel acp: the connection failed: {e:?}");
    }
    // EOF: stop running requests, flush the store, then the output.
    host.shutdown().await;
    framing.finish().await;
}
