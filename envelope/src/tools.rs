//! Argument and result shapes of the seven built-in tools (seed 002 §6.4), and the
//! permission-decision record that the gate and `keel policy check` report.
//!
//! Tool results travel as JSON in `tool.call.completed.result`; these types are their
//! documented schema.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use ts_rs::TS;

use crate::types::{PermissionLevel, RiskLevel};

/// `read_file {path, offset?, limit?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct ReadFileArgs {
    /// Path relative to the workspace root, or absolute (inside the workspace or one of
    /// the session's extra roots, which are named by absolute path).
    pub path: String,
    /// First line to return, 1-based.
    #[serde(default)]
    pub offset: Option<u64>,
    /// Maximum number of lines to return.
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The result of `read_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct ReadFileResult {
    /// The path as given, normalised relative to the workspace (absolute in an extra
    /// root).
    pub path: String,
    /// The text returned.
    pub content: String,
    /// First line returned, 1-based.
    pub start_line: u64,
    /// Number of lines returned.
    pub line_count: u64,
    /// Total number of lines in the file.
    pub total_lines: u64,
    /// Size of the file in bytes.
    pub size_bytes: u64,
    /// Whether lines were left out (by `limit` or by the size cap).
    pub truncated: bool,
}

/// `list_dir {path, depth?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct ListDirArgs {
    /// Directory relative to the workspace root (`.` for the root), or absolute (also
    /// in one of the session's extra roots).
    #[serde(default = "dot")]
    pub path: String,
    /// How deep to go (1 = the directory's own entries).
    #[serde(default)]
    pub depth: Option<u32>,
}

fn dot() -> String {
    ".".to_owned()
}

crate::wire::wire_enum! {
    /// The kind of a directory entry.
    pub enum EntryKind {
        /// A regular file.
        File = "file",
        /// A directory.
        Dir = "dir",
        /// A symbolic link (not followed).
        Symlink = "symlink",
        /// Anything else (device, socket, fifo).
        Other = "other",
    }
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct DirEntry {
    /// Path relative to the workspace root, `/`-separated (absolute in an extra root).
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes (files only; 0 otherwise).
    pub size: u64,
    /// Depth below the listed directory (1 = direct child).
    pub depth: u32,
}

/// The result of `list_dir`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct ListDirResult {
    /// The directory listed.
    pub path: String,
    /// The entries, sorted by path.
    pub entries: Vec<DirEntry>,
    /// Whether entries were left out (entry cap reached).
    pub truncated: bool,
}

/// How `search_files` matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SearchMode {
    /// Search file contents.
    #[default]
    Content,
    /// Match file names (glob or substring).
    Name,
}

/// `search_files {query, path?, mode, glob?, caseSensitive?, regex?, contextLines?, maxResults?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct SearchFilesArgs {
    /// What to look for.
    pub query: String,
    /// Where to look (default: the workspace root; an extra root by its absolute path).
    #[serde(default)]
    pub path: Option<String>,
    /// Content or name search.
    #[serde(default)]
    pub mode: Option<SearchMode>,
    /// Only files matching this glob.
    #[serde(default)]
    pub glob: Option<String>,
    /// Case-sensitive matching (default: smart case).
    #[serde(default)]
    pub case_sensitive: Option<bool>,
    /// Treat the query as a regular expression (default: literal).
    #[serde(default)]
    pub regex: Option<bool>,
    /// Lines of context around each match.
    #[serde(default)]
    pub context_lines: Option<u32>,
    /// At most this many results.
    #[serde(default)]
    pub max_results: Option<u32>,
}

/// One search hit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct SearchMatch {
    /// Path relative to the workspace root (absolute in an extra root).
    pub path: String,
    /// 1-based line number (content mode; null in name mode).
    pub line: Option<u64>,
    /// The matching line or name, possibly with context lines.
    pub snippet: String,
}

/// The result of `search_files`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct SearchFilesResult {
    /// The hits, in path then line order.
    pub matches: Vec<SearchMatch>,
    /// Whether hits were left out (`maxResults` reached).
    pub truncated: bool,
    /// Number of files searched.
    pub files_searched: u64,
}

/// One exact replacement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct Edit {
    /// The text to find; must match exactly once unless `replaceAll`.
    pub old_text: String,
    /// The replacement.
    pub new_text: String,
    /// Replace every occurrence.
    #[serde(default)]
    pub replace_all: Option<bool>,
}

/// `edit_file {path, edits}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EditFileArgs {
    /// The file to edit: relative to the workspace root, or absolute (also in one of the
    /// session's `write` extra roots).
    pub path: String,
    /// The replacements, applied in order; all or none.
    pub edits: Vec<Edit>,
}

/// Lines added and removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct DiffStats {
    /// Lines added.
    pub added: u64,
    /// Lines removed.
    pub removed: u64,
}

/// The result of `edit_file` and `write_file`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct FileChangeResult {
    /// The file changed.
    pub path: String,
    /// Whether the file was created.
    pub created: bool,
    /// Unified diff of the change.
    pub diff: String,
    /// Lines added and removed.
    pub stats: DiffStats,
    /// Number of replacements made (edit_file).
    pub replacements: u64,
}

/// `write_file {path, content}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The file to create or overwrite: relative to the workspace root, or absolute
    /// (also in one of the session's `write` extra roots).
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// `run_shell {command, cwd?, timeoutMs?, background?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct RunShellArgs {
    /// The command line, run by `sh -c`.
    pub command: String,
    /// Working directory inside the workspace (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Time limit (default 120 000 ms).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Start as a background task and return at once.
    #[serde(default)]
    pub background: Option<bool>,
}

/// The result of `run_shell`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct RunShellResult {
    /// Exit code, or null when killed by a signal.
    pub exit_code: Option<i32>,
    /// Captured standard output (capped).
    pub stdout: String,
    /// Captured standard error (capped).
    pub stderr: String,
    /// Whether the time limit killed it.
    pub timed_out: bool,
    /// Whether output was cut at the cap.
    pub truncated: bool,
    /// Wall time.
    pub duration_ms: u64,
    /// Whether it ran inside an OS sandbox (`sandbox` is not `none`).
    pub sandboxed: bool,
    /// Which OS sandbox it ran in.
    #[serde(default)]
    pub sandbox: SandboxKind,
}

crate::wire::wire_enum! {
    /// The OS sandbox a shell command ran in.
    pub enum SandboxKind {
        /// bubblewrap: private mount, pid and (unless allowed) network namespaces.
        Bubblewrap = "bubblewrap",
        /// Landlock: the kernel's access control, applied to the command before it starts.
        Landlock = "landlock",
        /// No OS sandbox.
        None = "none",
    }
}

// Declared by `wire_enum!`, which takes no `#[default]`.
#[allow(clippy::derivable_impls)]
impl Default for SandboxKind {
    fn default() -> Self {
        SandboxKind::None
    }
}

/// `git {command, args?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[ts(optional_fields = nullable)]
pub struct GitArgs {
    /// The git subcommand (`status`, `diff`, `log`, `commit`, …).
    pub command: String,
    /// Further arguments.
    #[serde(default)]
    pub args: Option<Vec<String>>,
}

crate::wire::wire_enum! {
    /// What the gate decided.
    pub enum Decision {
        /// Run without asking.
        Allow = "allow",
        /// Ask a person first.
        Ask = "ask",
        /// Refuse.
        Deny = "deny",
    }
}

/// The permission gate's verdict on one call, as printed by `keel policy check`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "camelCase")]
pub struct PolicyVerdict {
    /// Allow, ask or deny.
    pub decision: Decision,
    /// The permission level of this call.
    pub level: PermissionLevel,
    /// The risk shown to the approver.
    pub risk_level: RiskLevel,
    /// Why, in words a person can read.
    pub reason: String,
    /// The approval action type, e.g. `shell.execute`, `file.write`.
    pub action_type: String,
    /// The approval scope, e.g. `["process:spawn", "filesystem:workspace"]`.
    pub scope: Vec<String>,
}
