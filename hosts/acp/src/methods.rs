//! The ACP methods a client calls, on the protocol's own request and response types.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthenticateResponse, ClientRequest, CloseSessionResponse,
    DeleteSessionResponse, ForkSessionRequest, ForkSessionResponse, Implementation,
    InitializeResponse, ListSessionsRequest, ListSessionsResponse, LoadSessionResponse,
    McpCapabilities, McpServer, NewSessionRequest, NewSessionResponse, PromptCapabilities,
    ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionConfigOptionValue, SessionDeleteCapabilities,
    SessionForkCapabilities, SessionInfo, SessionListCapabilities, SessionResumeCapabilities,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest,
    SetSessionModeResponse,
};
use agent_client_protocol::Error;
use keel_envelope::commands::SessionStart;
use keel_envelope::host::{McpServerSpec, NameValue};
use keel_envelope::types::PermissionMode;
use keel_envelope::worktree::{AdditionalRoot, RootAccess};
use serde_json::{json, Value};

use crate::config::{model_choices, modes_state, MODEL_OPTION, MODE_OPTION};
use crate::error::{from_keel, invalid_params, to_value};
use crate::host::Host;
use crate::translate::{iso8601, Translator};

/// What Keel announces in `initialize`.
fn initialize_response() -> InitializeResponse {
    let sessions = SessionCapabilities::new()
        .list(SessionListCapabilities::new())
        .delete(SessionDeleteCapabilities::new())
        .close(SessionCloseCapabilities::new())
        .resume(SessionResumeCapabilities::new())
        .fork(SessionForkCapabilities::new())
        .additional_directories(SessionAdditionalDirectoriesCapabilities::new());
    let capabilities = AgentCapabilities::new()
        .load_session(true)
        .prompt_capabilities(
            PromptCapabilities::new()
                .image(false)
                .audio(false)
                .embedded_context(true),
        )
        .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
        .session_capabilities(sessions);
    InitializeResponse::new(ProtocolVersion::V1)
        .agent_capabilities(capabilities)
        .agent_info(Implementation::new("keel", env!("CARGO_PKG_VERSION")).title("Keel".to_owned()))
        .auth_methods(Vec::new())
}

fn same_dir(a: &Path, b: &str) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    canon(a) == canon(Path::new(b))
}

impl Host {
    /// Answers every request but `session/prompt` (see `lib.rs`), in arrival order.
    pub(crate) async fn dispatch(self: &Arc<Self>, request: ClientRequest) -> Result<Value, Error> {
        match request {
            ClientRequest::InitializeRequest(_) => to_value(initialize_response()),
            ClientRequest::AuthenticateRequest(_) => to_value(AuthenticateResponse::new()),
            ClientRequest::NewSessionRequest(p) => self.new_session(p).await,
            ClientRequest::LoadSessionRequest(p) => {
                let mcp = mcp_specs(&p.mcp_servers)?;
                let roots = roots_of(&p.additional_directories);
                let (sess_modes, options) = self
                    .load(&p.session_id.0, Some(&p.cwd), &mcp, &roots, true)
                    .await?;
                to_value(
                    LoadSessionResponse::new()
                        .modes(sess_modes)
                        .config_options(options),
                )
            }
            ClientRequest::ResumeSessionRequest(p) => {
                let mcp = mcp_specs(&p.mcp_servers)?;
                let roots = roots_of(&p.additional_directories);
                let (sess_modes, options) = self
                    .load(&p.session_id.0, Some(&p.cwd), &mcp, &roots, false)
                    .await?;
                to_value(
                    ResumeSessionResponse::new()
                        .modes(sess_modes)
                        .config_options(options),
                )
            }
            ClientRequest::ListSessionsRequest(p) => self.list(p),
            ClientRequest::CloseSessionRequest(p) => {
                let sess = self.session(&p.session_id.0)?;
                sess.handle.close().await.map_err(from_keel)?;
                self.forget(&p.session_id.0);
                to_value(CloseSessionResponse::new())
            }
            ClientRequest::DeleteSessionRequest(p) => {
                let id = p.session_id.0.to_string();
                // The kernel closes it first if it is open (a running prompt ends
                // `cancelled`), then removes its files.
                self.kernel.delete_session(&id).await.map_err(from_keel)?;
                self.forget(&id);
                to_value(DeleteSessionResponse::new())
            }
            ClientRequest::SetSessionModeRequest(p) => self.set_mode(p).await,
            ClientRequest::SetSessionConfigOptionRequest(p) => self.set_config_option(p).await,
            ClientRequest::ForkSessionRequest(p) => self.fork(p).await,
            ClientRequest::ExtMethodRequest(r) => {
                let params: Value = serde_json::from_str(r.params.get()).unwrap_or(Value::Null);
                self.ext_method(&r.method, params).await
            }
            other => Err(Error::method_not_found().data(json!({"method": other.method()}))),
        }
    }

    async fn new_session(self: &Arc<Self>, p: NewSessionRequest) -> Result<Value, Error> {
        let mcp = mcp_specs(&p.mcp_servers)?;
        let (handle, stream) = self
            .kernel
            .start_session(
                SessionStart::new()
                    .workspace_path(p.cwd.display().to_string())
                    .mcp_servers((!mcp.is_empty()).then_some(mcp))
                    .additional_roots(roots_of(&p.additional_directories)),
            )
            .await
            .map_err(from_keel)?;
        let sess = self.attach(handle, stream);
        let mode = sess.handle.state().session.permission_mode;
        to_value(
            NewSessionResponse::new(sess.handle.id().to_owned())
                .modes(modes_state(mode))
                .config_options(sess.config_options(&self.kernel)),
        )
    }

    /// `session/fork`: Keel's `session.fork` of the whole conversation (same mode, model,
    /// rules, plan, task graph, review, host tools and MCP servers, with the request's
    /// `mcpServers` added; the request's `additionalDirectories` as its extra roots),
    /// attached as a new session. The parent must be open in this
    /// process (`session/load` it first).
    async fn fork(self: &Arc<Self>, p: ForkSessionRequest) -> Result<Value, Error> {
        let parent = p.session_id.0.to_string();
        let servers = mcp_specs(&p.mcp_servers)?;
        let (handle, stream) = self
            .kernel
            .fork_session_with_mcp(
                &parent,
                keel_envelope::commands::SessionFork::new()
                    .additional_roots(roots_of(&p.additional_directories)),
                &servers,
            )
            .await
            .map_err(from_keel)?;
        if !same_dir(&p.cwd, &handle.workspace().display().to_string()) {
            tracing::warn!(
                "keel acp: the fork of {parent} works in {}, not {}",
                handle.workspace().display(),
                p.cwd.display()
            );
        }
        let sess = self.attach(handle, stream);
        let mode = sess.handle.state().session.permission_mode;
        to_value(
            ForkSessionResponse::new(sess.handle.id().to_owned())
                .modes(modes_state(mode))
                .config_options(sess.config_options(&self.kernel)),
        )
    }

    /// `session/load` (with `replay`) and `session/resume`: restores the session, sends
    /// its stored events as updates when replaying, then answers. `roots` (the
    /// request's `additionalDirectories`) is the session's whole list of extra roots
    /// from now on, as ACP says: empty, none.
    async fn load(
        self: &Arc<Self>,
        id: &str,
        cwd: Option<&PathBuf>,
        mcp_servers: &[McpServerSpec],
        roots: &[AdditionalRoot],
        replay: bool,
    ) -> Result<
        (
            agent_client_protocol::v1::schema::SessionModeState,
            Vec<agent_client_protocol::v1::schema::SessionConfigOption>,
        ),
        Error,
    > {
        self.forget(id);
        let (handle, stream) = self
            .kernel
            .resume_session_with(id, None, mcp_servers, Some(roots))
            .await
            .map_err(from_keel)?;
        if let Some(c) = cwd {
            if !same_dir(c, &handle.workspace().display().to_string()) {
                tracing::warn!(
                    "keel acp: session {id} was created in {}, not {}; keeping its workspace",
                    handle.workspace().display(),
                    c.display()
                );
            }
        }
        let sess = self.attach(handle, stream);
        if replay {
            let log = self.kernel.session_log(id).map_err(from_keel)?;
            let mut t = Translator::new(sess.workspace.clone());
            for env in &log {
                for u in t.translate(env, true) {
                    self.update(id, u);
                }
            }
        }
        let mode = sess.handle.state().session.permission_mode;
        Ok((modes_state(mode), sess.config_options(&self.kernel)))
    }

    fn list(&self, p: ListSessionsRequest) -> Result<Value, Error> {
        let sessions = self.kernel.list_sessions().map_err(from_keel)?;
        let list: Vec<SessionInfo> = sessions
            .into_iter()
            .filter(|s| p.cwd.as_deref().is_none_or(|c| same_dir(c, &s.workspace)))
            .map(|s| {
                let mut meta = serde_json::Map::new();
                meta.insert(
                    "keel".into(),
                    json!({"state": s.state, "permissionMode": s.permission_mode, "model": s.model}),
                );
                let dirs = s
                    .additional_roots
                    .unwrap_or_default()
                    .into_iter()
                    .map(|r| PathBuf::from(r.path))
                    .collect();
                SessionInfo::new(s.session_id, s.workspace)
                    .additional_directories(dirs)
                    .updated_at(iso8601(s.updated_at))
                    .title(s.title)
                    .meta(meta)
            })
            .collect();
        to_value(ListSessionsResponse::new(list))
    }

    async fn set_mode(&self, p: SetSessionModeRequest) -> Result<Value, Error> {
        let sess = self.session(&p.session_id.0)?;
        let mode = parse_mode(&p.mode_id.0)?;
        sess.handle.set_mode(mode).await.map_err(from_keel)?;
        to_value(SetSessionModeResponse::new())
    }

    /// `session/set_config_option`: `mode` (Keel's permission modes) or `model` (one
    /// of the listed models, while the session is idle).
    async fn set_config_option(&self, p: SetSessionConfigOptionRequest) -> Result<Value, Error> {
        let sess = self.session(&p.session_id.0)?;
        let config = p.config_id.0.as_ref();
        let value = match &p.value {
            SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
            _ => {
                return Err(invalid_params(format!(
                    "the `{config}` option takes a value id"
                )))
            }
        };
        match config {
            MODE_OPTION => {
                let mode = parse_mode(&value)?;
                sess.handle.set_mode(mode).await.map_err(from_keel)?;
            }
            MODEL_OPTION => {
                let current = sess.handle.state().session.model;
                let choices = model_choices(&self.kernel.config().available_models, &current);
                if !choices.iter().any(|(id, _)| *id == value) {
                    let ids: Vec<&str> = choices.iter().map(|(id, _)| id.as_str()).collect();
                    return Err(invalid_params(format!(
                        "unknown model {value:?}: use one of {}",
                        ids.join(", ")
                    )));
                }
                if value != current {
                    sess.handle.set_model(value).await.map_err(from_keel)?;
                }
            }
            other => {
                return Err(invalid_params(format!(
                    "unknown config option {other:?}: use `{MODE_OPTION}` or `{MODEL_OPTION}`"
                )))
            }
        }
        to_value(SetSessionConfigOptionResponse::new(
            sess.config_options(&self.kernel),
        ))
    }
}

/// ACP's `additionalDirectories` as Keel's extra roots: each one `write` (ACP's
/// additional roots widen the session's file scope like its `cwd`; Keel checks them:
/// absolute, existing directories, none inside another or the `cwd`).
fn roots_of(dirs: &[PathBuf]) -> Vec<AdditionalRoot> {
    dirs.iter()
        .map(|d| AdditionalRoot::new(d.display().to_string(), RootAccess::Write))
        .collect()
}

fn parse_mode(id: &str) -> Result<PermissionMode, Error> {
    PermissionMode::parse(id).ok_or_else(|| {
        invalid_params(format!(
            "unknown mode {id:?}: use ask, auto-edit, auto or plan"
        ))
    })
}

/// The MCP servers of `session/new`, `session/load` and `session/resume` as the
/// kernel's specs: stdio and streamable HTTP (announced in `mcpCapabilities`); the SSE
/// transport is refused. Their tools ask for approval (trust `ask`) like the kernel's
/// own configured servers without a trust setting.
fn mcp_specs(servers: &[McpServer]) -> Result<Vec<McpServerSpec>, Error> {
    let pairs = |v: Vec<(String, String)>| -> Vec<NameValue> {
        v.into_iter()
            .map(|(name, value)| NameValue::new(name, value))
            .collect()
    };
    servers
        .iter()
        .map(|s| match s {
            McpServer::Stdio(s) => Ok(McpServerSpec::new(s.name.clone())
                .transport("stdio".to_owned())
                .command(s.command.display().to_string())
                .args(s.args.clone())
                .env(pairs(
                    s.env
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                ))),
            McpServer::Http(h) => Ok(McpServerSpec::new(h.name.clone())
                .transport("http".to_owned())
                .url(h.url.clone())
                .headers(pairs(
                    h.headers
                        .iter()
                        .map(|e| (e.name.clone(), e.value.clone()))
                        .collect(),
                ))),
            McpServer::Sse(s) => Err(invalid_params(format!(
                "MCP server {:?}: the SSE transport is not supported (mcpCapabilities.sse is false); use streamable HTTP or stdio",
                s.name
            ))),
            _ => Err(invalid_params(
                "an MCP server with a transport Keel does not support (use stdio or http)",
            )),
        })
        .collect()
}
