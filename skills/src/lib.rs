//! Agent Skills and custom slash commands: where they are found, how their files are
//! read and checked, and the text they become.
//!
//! A **skill** is a folder holding a `SKILL.md`: YAML front matter (`name`,
//! `description`, and the optional `license`, `compatibility`, `metadata`,
//! `allowed-tools` of the open Agent Skills format) and a Markdown body of
//! instructions, with any other files beside it. Discovery reads only the front
//! matter ([`Skill`]: name, description, path, source); the body and the list of the
//! skill's other files are read when the skill is activated ([`Skill::activate`]), and
//! one of those files only when asked for ([`Skill::read_file`]).
//!
//! A **custom command** is a Markdown prompt template, `NAME.md` in a commands folder,
//! with optional front matter (`description`, `argument-hint`); [`expand`] fills in
//! `$ARGUMENTS` and `$1` … `$9`.
//!
//! Where they come from and in which order a name wins is [`Settings`]'s job (see
//! `discover.rs`). Bad files never fail discovery as a whole: each gives a [`Warning`]
//! naming the file, and that skill or command is left out.
//!
//! Modules: `frontmatter` (splitting a file and reading its YAML), `skill` (one skill:
//! checks, activation, its files), `command` (one command, expansion), `discover`
//! (folders, precedence, trust), `prompt` (the texts a model reads). This crate never
//! prints: everything it has to say is a value.

mod command;
mod discover;
mod frontmatter;
mod prompt;
mod skill;

use std::path::PathBuf;

pub use command::{expand, Command, MAX_COMMAND_BYTES};
pub use discover::{
    Catalog, Discovered, ProjectTrust, Settings, Slash, SlashError, SlashKind, SKILL_COMMAND_PREFIX,
};
pub use prompt::{activation_prompt, catalog_block, MAX_CATALOG_SKILLS};
pub use skill::{
    Activation, Skill, MAX_COMPATIBILITY_CHARS, MAX_DESCRIPTION_CHARS, MAX_LISTED_FILES,
    MAX_NAME_CHARS, MAX_SKILL_BYTES, SKILL_FILE,
};

/// Folders of the workspace that hold skills, in the order their names win.
pub const PROJECT_SKILL_DIRS: [&str; 2] = [".keel/skills", ".agents/skills"];
/// The folder of the workspace that holds custom commands.
pub const PROJECT_COMMAND_DIR: &str = ".keel/commands";
/// At most this many entries of one folder are looked at; the rest are left out, with
/// a warning.
pub const MAX_ENTRIES_PER_FOLDER: usize = 1000;

/// Where a skill or a command was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Source {
    /// The workspace: `.keel/skills/`, `.agents/skills/`, `.keel/commands/`.
    Project,
    /// The user's own folders: `$KEEL_HOME/skills/`, `~/.agents/skills/`,
    /// `$KEEL_HOME/commands/`.
    User,
    /// A folder named in the configuration (`skills.paths`).
    Configured,
}

impl Source {
    /// `project`, `user` or `config`.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Project => "project",
            Source::User => "user",
            Source::Configured => "config",
        }
    }
}

/// Why a skill, a command or a folder was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WarningKind {
    /// The front matter is missing, unterminated, not YAML, or a field has the wrong
    /// type or is too long.
    Malformed,
    /// The name is missing, not of the allowed characters or length, or differs from
    /// the folder's name.
    BadName,
    /// Another skill or command of the same name comes first.
    Duplicate,
    /// The file is larger than its limit.
    TooLarge,
    /// The path leads outside the workspace (a symlink), or a file outside its skill's
    /// folder.
    OutsideRoot,
    /// A skill of a project that is not trusted.
    Untrusted,
    /// A command whose name is one of the REPL's own commands.
    BuiltinName,
    /// The file or folder cannot be read (not a regular file, not UTF-8, an I/O
    /// error, a configured folder that does not exist, a folder without `SKILL.md`).
    Unreadable,
    /// A folder with more entries than [`MAX_ENTRIES_PER_FOLDER`].
    TooMany,
}

impl WarningKind {
    /// A stable name: `malformed`, `bad_name`, `duplicate`, `too_large`,
    /// `outside_root`, `untrusted`, `builtin_name`, `unreadable`, `too_many`.
    pub fn as_str(self) -> &'static str {
        match self {
            WarningKind::Malformed => "malformed",
            WarningKind::BadName => "bad_name",
            WarningKind::Duplicate => "duplicate",
            WarningKind::TooLarge => "too_large",
            WarningKind::OutsideRoot => "outside_root",
            WarningKind::Untrusted => "untrusted",
            WarningKind::BuiltinName => "builtin_name",
            WarningKind::Unreadable => "unreadable",
            WarningKind::TooMany => "too_many",
        }
    }
}

/// A skill, a command or a folder that was left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The file or folder it is about.
    pub path: PathBuf,
    /// Why, as a stable kind.
    pub kind: WarningKind,
    /// Why, for a person: a sentence that ends by saying what was done.
    pub message: String,
}

impl Warning {
    pub(crate) fn new(
        path: impl Into<PathBuf>,
        kind: WarningKind,
        message: impl Into<String>,
    ) -> Self {
        Warning {
            path: path.into(),
            kind,
            message: message.into(),
        }
    }
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.message)
    }
}
