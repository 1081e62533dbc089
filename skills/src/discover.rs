//! Discovery: which folders are looked at, in which order a name wins, and the rules
//! every file passes (trust, symlinks, size, names).
//!
//! Skills, first found wins: the workspace's `.keel/skills/` then `.agents/skills/`,
//! the user's `$KEEL_HOME/skills/` then `~/.agents/skills/`, then the configured
//! folders in order. Commands: the workspace's `.keel/commands/`, then
//! `$KEEL_HOME/commands/`. A project's folders and files are read through the
//! workspace jail: a path that leads outside the workspace is left out. The user's own
//! folders may hold links (skill installers link skills there).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use keel_tools::jail;

use crate::command::{self, Command, MAX_COMMAND_BYTES};
use crate::skill::{self, read_text, Skill, MAX_SKILL_BYTES, SKILL_FILE};
use crate::{
    Source, Warning, WarningKind, MAX_ENTRIES_PER_FOLDER, PROJECT_COMMAND_DIR, PROJECT_SKILL_DIRS,
};

/// Which projects' own skills are loaded: the same projects whose own hooks count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProjectTrust {
    /// Every project.
    All,
    /// These workspace folders (compared as real paths); none by default.
    Only(Vec<PathBuf>),
}

impl Default for ProjectTrust {
    fn default() -> Self {
        ProjectTrust::Only(Vec::new())
    }
}

impl ProjectTrust {
    /// Whether the project rooted at `workspace` is trusted.
    pub fn trusts(&self, workspace: &Path) -> bool {
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_owned());
        match self {
            ProjectTrust::All => true,
            ProjectTrust::Only(list) => {
                let ws = canon(workspace);
                list.iter().any(|p| canon(p) == ws)
            }
        }
    }
}

/// Where skills and commands are looked for, besides the workspace's own folders.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// The user's skill folders, in the order their names win.
    pub user_skill_dirs: Vec<PathBuf>,
    /// Folders named in the configuration, after the user's.
    pub configured_skill_dirs: Vec<PathBuf>,
    /// The user's command folders.
    pub user_command_dirs: Vec<PathBuf>,
    /// The projects whose own skills are loaded.
    pub trust: ProjectTrust,
}

/// What discovery found, and what it left out.
#[derive(Debug, Clone, PartialEq)]
pub struct Discovered<T> {
    /// What was found, sorted by name.
    pub items: Vec<T>,
    /// What was left out, in the order it was met.
    pub warnings: Vec<Warning>,
}

/// A workspace's skills and commands.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    /// The skills.
    pub skills: Discovered<Skill>,
    /// The custom commands.
    pub commands: Discovered<Command>,
}

impl Catalog {
    /// The command called `name`, if any.
    pub fn command(&self, name: &str) -> Option<&Command> {
        self.commands.items.iter().find(|c| c.name == name)
    }

    /// The skill called `name`, if any.
    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.items.iter().find(|s| s.name == name)
    }

    /// Every warning, the skills' first.
    pub fn warnings(&self) -> impl Iterator<Item = &Warning> {
        self.skills.warnings.iter().chain(&self.commands.warnings)
    }

    /// What a prompt typed by a person becomes: `/NAME arguments` of a custom command
    /// its expanded template, `/skill:NAME request` the skill's instructions and the
    /// request (see [`crate::activation_prompt`]). `Ok(None)`: not one of them (send it
    /// as typed). An unknown skill, or one whose `SKILL.md` no longer passes the
    /// checks, is an error saying so.
    pub fn expand_slash(&self, prompt: &str) -> Result<Option<Slash>, SlashError> {
        let Some(rest) = prompt.strip_prefix('/') else {
            return Ok(None);
        };
        let (name, args) = match rest.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a),
            None => (rest, ""),
        };
        if let Some(skill) = name.strip_prefix(SKILL_COMMAND_PREFIX) {
            let found = self
                .skill(skill)
                .ok_or_else(|| SlashError::UnknownSkill(skill.to_owned()))?;
            let activation = found.activate().map_err(SlashError::Unreadable)?;
            return Ok(Some(Slash {
                kind: SlashKind::Skill,
                name: found.name.clone(),
                path: found.path.clone(),
                files: activation.files.len(),
                text: crate::activation_prompt(&activation, args),
            }));
        }
        Ok(self.command(name).map(|c| Slash {
            kind: SlashKind::Command,
            name: c.name.clone(),
            path: c.path.clone(),
            files: 0,
            text: c.expand(args),
        }))
    }
}

/// Why a `/skill:NAME` prompt could not be expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SlashError {
    /// No skill of that name was found.
    UnknownSkill(String),
    /// Its `SKILL.md` no longer passes the checks.
    Unreadable(Warning),
}

impl std::fmt::Display for SlashError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SlashError::UnknownSkill(name) => write!(f, "unknown skill {name:?}"),
            SlashError::Unreadable(w) => write!(f, "{w}"),
        }
    }
}

/// The prefix of a skill used as a command: `/skill:NAME`.
pub const SKILL_COMMAND_PREFIX: &str = "skill:";

/// Whether a slash prompt named a custom command or a skill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlashKind {
    /// A custom command.
    Command,
    /// A skill (`/skill:NAME`).
    Skill,
}

/// A prompt expanded by [`Catalog::expand_slash`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slash {
    /// A command or a skill.
    pub kind: SlashKind,
    /// Its name.
    pub name: String,
    /// The file its text came from.
    pub path: PathBuf,
    /// For a skill, how many other files it has.
    pub files: usize,
    /// The prompt to send.
    pub text: String,
}

/// One folder to look in.
struct Root {
    /// The folder as named (for warnings and paths).
    path: PathBuf,
    source: Source,
    /// For a project's folder: the workspace's real path and the folder relative to it.
    project: Option<(PathBuf, String)>,
    /// A missing folder is worth a warning (one the user configured).
    must_exist: bool,
}

/// An entry of a folder that passed the folder's rules: its name, its path as found,
/// and its real path.
struct Entry {
    name: String,
    path: PathBuf,
    real: PathBuf,
    is_dir: bool,
}

impl Root {
    /// The entries of the folder, sorted by name. Hidden entries are skipped; for a
    /// project's folder, entries that lead outside the workspace give a warning.
    fn entries(&self, warnings: &mut Vec<Warning>) -> Vec<Entry> {
        let real = match &self.project {
            Some((ws, rel)) => match jail::resolve(ws, rel) {
                Ok(r) if !r.inside => {
                    warnings.push(Warning::new(
                        &self.path,
                        WarningKind::OutsideRoot,
                        format!(
                            "it leads outside the workspace (to {}); it was ignored",
                            r.display
                        ),
                    ));
                    return Vec::new();
                }
                Ok(r) if !r.exists => return Vec::new(),
                Ok(r) => r.abs,
                Err(e) => {
                    warnings.push(Warning::new(
                        &self.path,
                        WarningKind::Unreadable,
                        format!("{}; it was ignored", e.message),
                    ));
                    return Vec::new();
                }
            },
            None => match std::fs::canonicalize(&self.path) {
                Ok(p) => p,
                Err(e) => {
                    if self.must_exist || e.kind() != std::io::ErrorKind::NotFound {
                        warnings.push(Warning::new(
                            &self.path,
                            WarningKind::Unreadable,
                            format!("the folder cannot be read: {e}; it was ignored"),
                        ));
                    }
                    return Vec::new();
                }
            },
        };
        let list = match std::fs::read_dir(&real) {
            Ok(l) => l,
            Err(e) => {
                warnings.push(Warning::new(
                    &self.path,
                    WarningKind::Unreadable,
                    format!("the folder cannot be read: {e}; it was ignored"),
                ));
                return Vec::new();
            }
        };
        let mut names: Vec<std::ffi::OsString> = list.flatten().map(|e| e.file_name()).collect();
        names.sort();
        names.retain(|n| !n.to_string_lossy().starts_with('.'));
        if names.len() > MAX_ENTRIES_PER_FOLDER {
            warnings.push(Warning::new(
                &self.path,
                WarningKind::TooMany,
                format!(
                    "the folder has {} entries; only the first {MAX_ENTRIES_PER_FOLDER} by name were looked at",
                    names.len()
                ),
            ));
            names.truncate(MAX_ENTRIES_PER_FOLDER);
        }
        let mut out = Vec::new();
        for os in names {
            let path = self.path.join(&os);
            let Some(name) = os.to_str().map(str::to_owned) else {
                warnings.push(Warning::new(
                    &path,
                    WarningKind::BadName,
                    "the name is not UTF-8; it was ignored",
                ));
                continue;
            };
            match self.check(&name, &real) {
                Ok((entry_real, is_dir)) => out.push(Entry {
                    name,
                    path,
                    real: entry_real,
                    is_dir,
                }),
                Err(Some((kind, message))) => warnings.push(Warning::new(&path, kind, message)),
                Err(None) => {}
            }
        }
        out
    }

    /// The real path of entry `name` of the folder (real path `real`) and whether it
    /// is a folder; `Err(None)` for an entry to skip without a word.
    fn check(
        &self,
        name: &str,
        real: &Path,
    ) -> Result<(PathBuf, bool), Option<(WarningKind, String)>> {
        match &self.project {
            Some((ws, rel)) => {
                let r = jail::resolve(ws, &format!("{rel}/{name}")).map_err(|e| {
                    Some((
                        WarningKind::Unreadable,
                        format!("{}; it was ignored", e.message),
                    ))
                })?;
                if !r.inside {
                    return Err(Some((
                        WarningKind::OutsideRoot,
                        format!(
                            "it leads outside the workspace (to {}); it was ignored",
                            r.display
                        ),
                    )));
                }
                if !r.exists {
                    return Err(None);
                }
                Ok((r.abs, r.is_dir))
            }
            None => {
                let p = real.join(name);
                let md = std::fs::metadata(&p).map_err(|_| None)?;
                let real = std::fs::canonicalize(&p).map_err(|_| None)?;
                Ok((real, md.is_dir()))
            }
        }
    }
}

fn project_root(workspace: &Path, rel: &str) -> Root {
    Root {
        path: workspace.join(rel),
        source: Source::Project,
        project: Some((jail::canonical_root(workspace), rel.to_owned())),
        must_exist: false,
    }
}

fn user_root(path: &Path, source: Source) -> Root {
    Root {
        path: path.to_owned(),
        source,
        project: None,
        must_exist: source == Source::Configured,
    }
}

impl Settings {
    /// The user's default folders: `$KEEL_HOME/skills` and `~/.agents/skills` for
    /// skills, `$KEEL_HOME/commands` for commands; no configured folders, no trusted
    /// project.
    pub fn for_user(keel_home: &Path) -> Settings {
        let mut user_skill_dirs = vec![keel_home.join("skills")];
        if let Some(home) = dirs::home_dir() {
            user_skill_dirs.push(home.join(".agents").join("skills"));
        }
        Settings {
            user_skill_dirs,
            configured_skill_dirs: Vec::new(),
            user_command_dirs: vec![keel_home.join("commands")],
            trust: ProjectTrust::default(),
        }
    }

    /// The skills and the commands of `workspace`; `builtins` are the names commands
    /// may not take (the REPL's own, without the `/`).
    pub fn catalog(&self, workspace: &Path, builtins: &[&str]) -> Catalog {
        Catalog {
            skills: self.skills(workspace),
            commands: self.commands(workspace, builtins),
        }
    }

    /// The skills of `workspace`, the user and the configured folders.
    pub fn skills(&self, workspace: &Path) -> Discovered<Skill> {
        let mut warnings = Vec::new();
        let trusted = self.trust.trusts(workspace);
        let mut roots: Vec<Root> = PROJECT_SKILL_DIRS
            .iter()
            .map(|rel| project_root(workspace, rel))
            .collect();
        roots.extend(
            self.user_skill_dirs
                .iter()
                .map(|p| user_root(p, Source::User)),
        );
        roots.extend(
            self.configured_skill_dirs
                .iter()
                .map(|p| user_root(p, Source::Configured)),
        );
        let mut found: Vec<Skill> = Vec::new();
        let mut by_name: HashMap<String, PathBuf> = HashMap::new();
        for root in &roots {
            for entry in root.entries(&mut warnings) {
                if !entry.is_dir {
                    continue;
                }
                let path = entry.path.join(SKILL_FILE);
                if root.source == Source::Project && !trusted {
                    // Not even read: what an untrusted project says stays out.
                    warnings.push(Warning::new(
                        &path,
                        WarningKind::Untrusted,
                        format!(
                            "this project is not trusted, so its skill {:?} was not loaded; \
                             add {:?} to `trustedProjects` or `hooks.allowProjectHooks` in $KEEL_HOME/config.toml to load its skills",
                            entry.name,
                            jail::canonical_root(workspace).display().to_string()
                        ),
                    ));
                    continue;
                }
                let skill = match read_skill(root, &entry, &path) {
                    Ok(s) => s,
                    Err((kind, message)) => {
                        warnings.push(Warning::new(
                            &path,
                            kind,
                            format!("{message}; the skill was skipped"),
                        ));
                        continue;
                    }
                };
                if let Some(first) = by_name.get(&skill.name) {
                    warnings.push(Warning::new(
                        &path,
                        WarningKind::Duplicate,
                        format!(
                            "the skill {:?} of {} comes first; this one was skipped",
                            skill.name,
                            first.display()
                        ),
                    ));
                    continue;
                }
                by_name.insert(skill.name.clone(), path);
                found.push(skill);
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Discovered {
            items: found,
            warnings,
        }
    }

    /// The custom commands of `workspace` and the user; `builtins` are the names
    /// commands may not take.
    pub fn commands(&self, workspace: &Path, builtins: &[&str]) -> Discovered<Command> {
        let mut warnings = Vec::new();
        let mut roots = vec![project_root(workspace, PROJECT_COMMAND_DIR)];
        roots.extend(
            self.user_command_dirs
                .iter()
                .map(|p| user_root(p, Source::User)),
        );
        let mut found: Vec<Command> = Vec::new();
        let mut by_name: HashMap<String, PathBuf> = HashMap::new();
        for root in &roots {
            for entry in root.entries(&mut warnings) {
                let Some(name) = entry.name.strip_suffix(".md") else {
                    continue;
                };
                if entry.is_dir {
                    continue;
                }
                let skipped = |m: String| format!("{m}; the command was skipped");
                if let Some(p) = command::name_problem(name) {
                    warnings.push(Warning::new(&entry.path, WarningKind::BadName, skipped(p)));
                    continue;
                }
                if builtins.iter().any(|b| b.trim_start_matches('/') == name) {
                    warnings.push(Warning::new(
                        &entry.path,
                        WarningKind::BuiltinName,
                        skipped(format!("/{name} is a built-in command; rename the file")),
                    ));
                    continue;
                }
                let parsed = read_text(&entry.real, MAX_COMMAND_BYTES)
                    .and_then(|t| Command::parse(name, &t, entry.path.clone(), root.source));
                let cmd = match parsed {
                    Ok(c) => c,
                    Err((kind, m)) => {
                        warnings.push(Warning::new(&entry.path, kind, skipped(m)));
                        continue;
                    }
                };
                if let Some(first) = by_name.get(name) {
                    warnings.push(Warning::new(
                        &entry.path,
                        WarningKind::Duplicate,
                        skipped(format!(
                            "the command /{name} of {} comes first",
                            first.display()
                        )),
                    ));
                    continue;
                }
                by_name.insert(name.to_owned(), entry.path.clone());
                found.push(cmd);
            }
        }
        found.sort_by(|a, b| a.name.cmp(&b.name));
        Discovered {
            items: found,
            warnings,
        }
    }
}

/// Reads the skill in folder `entry`: the skill, or what is wrong.
fn read_skill(root: &Root, entry: &Entry, path: &Path) -> Result<Skill, (WarningKind, String)> {
    let real = match &root.project {
        Some((ws, rel)) => {
            let r = jail::resolve(ws, &format!("{rel}/{}/{SKILL_FILE}", entry.name))
                .map_err(|e| (WarningKind::Unreadable, e.message))?;
            if !r.inside {
                return Err((
                    WarningKind::OutsideRoot,
                    format!("it leads outside the workspace (to {})", r.display),
                ));
            }
            if !r.exists {
                return Err((
                    WarningKind::Unreadable,
                    format!("the folder has no {SKILL_FILE}"),
                ));
            }
            r.abs
        }
        None => {
            let p = entry.real.join(SKILL_FILE);
            if std::fs::symlink_metadata(&p).is_err() {
                return Err((
                    WarningKind::Unreadable,
                    format!("the folder has no {SKILL_FILE}"),
                ));
            }
            p
        }
    };
    let text = read_text(&real, MAX_SKILL_BYTES)?;
    let parsed = skill::parse(&text, &entry.name)?;
    let jail = root.project.as_ref().map(|(ws, _)| ws.clone());
    Ok(Skill::from_parsed(
        parsed,
        path.to_owned(),
        entry.real.clone(),
        root.source,
        jail,
    ))
}
