//! The common options of a session's start.

use keel_envelope::commands::SessionStart;

/// The common options of [`crate::Kernel::start_session`]. The whole `session.start`
/// payload ([`SessionStart`]: also the session's MCP servers and host tools) is
/// accepted there too.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionOptions {
    /// The workspace root (default: the kernel's workspace).
    pub workspace_path: Option<String>,
    /// The permission mode (default: the kernel's).
    pub permission_mode: Option<keel_envelope::types::PermissionMode>,
    /// The model, `provider:model` (default: the kernel's).
    pub model: Option<String>,
    /// A title.
    pub title: Option<String>,
}

impl From<SessionOptions> for SessionStart {
    fn from(o: SessionOptions) -> Self {
        SessionStart::new()
            .workspace_path(o.workspace_path)
            .permission_mode(o.permission_mode)
            .model(o.model)
            .title(o.title)
    }
}
