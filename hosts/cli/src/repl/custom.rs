//! Skills and custom commands in the REPL: `/skills`, `/NAME` (a command's template,
//! expanded and sent), `/skill:NAME` (a skill's instructions, sent with the request),
//! their lines in `/help` and their names for Tab completion.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use keel_skills::{Catalog, Settings};

use super::render;
use super::slash::COMMANDS;
use super::Repl;

/// The prefix of a skill typed as a command: `/skill:NAME`.
const SKILL_PREFIX: &str = "/skill:";

/// The names a command may not take: the REPL's own commands and their aliases.
pub(crate) fn builtins() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = COMMANDS.iter().map(|c| c.name).collect();
    names.extend(["/exit", "/q", "/?"]);
    names
}

/// The workspace's skills and commands, found again when asked (`/skills`, `/help`) or
/// when the session's workspace changes; and the names Tab completes.
#[derive(Debug)]
pub(crate) struct Custom {
    settings: Settings,
    workspace: PathBuf,
    catalog: Catalog,
    /// Shared with the line editor's completer.
    names: Arc<Mutex<Vec<String>>>,
}

impl Custom {
    pub(crate) fn new(
        settings: Settings,
        workspace: &Path,
        names: Arc<Mutex<Vec<String>>>,
    ) -> Self {
        let catalog = settings.catalog(workspace, &builtins());
        let custom = Custom {
            settings,
            workspace: workspace.to_owned(),
            catalog,
            names,
        };
        custom.share_names();
        custom
    }

    fn share_names(&self) {
        let mut names: Vec<String> = self
            .catalog
            .commands
            .items
            .iter()
            .map(|c| format!("/{}", c.name))
            .collect();
        names.extend(
            self.catalog
                .skills
                .items
                .iter()
                .map(|s| format!("{SKILL_PREFIX}{}", s.name)),
        );
        if let Ok(mut n) = self.names.lock() {
            *n = names;
        }
    }

    /// Finds everything again, in `workspace`.
    pub(crate) fn reload(&mut self, workspace: &Path) {
        self.workspace = workspace.to_owned();
        self.catalog = self.settings.catalog(workspace, &builtins());
        self.share_names();
    }

    /// How many files were skipped.
    pub(crate) fn skipped(&self) -> usize {
        self.catalog.warnings().count()
    }
}

impl Repl {
    /// The catalog of the session's workspace (found again when it changed, e.g.
    /// after `/resume`).
    fn catalog_now(&mut self, fresh: bool) -> &Catalog {
        let ws = PathBuf::from(self.session.state().session.workspace);
        if fresh || ws != self.custom.workspace {
            self.custom.reload(&ws);
        }
        &self.custom.catalog
    }

    /// Says at start-up that files were skipped, if any were.
    pub(super) fn custom_notice(&mut self) {
        let n = self.custom.skipped();
        if n > 0 {
            let line = self.screen.style.yellow(&format!(
                "{n} skill or command file{} skipped; /skills says why",
                if n == 1 { " was" } else { "s were" }
            ));
            self.screen.line(&line);
        }
    }

    /// `/skills`: the skills and commands found (again), and what was skipped.
    pub(super) fn skills_command(&mut self) {
        let st = self.screen.style;
        let catalog = self.catalog_now(true).clone();
        let ws = self.custom.workspace.clone();
        let shown = |p: &Path| match p.strip_prefix(&ws) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => p.display().to_string(),
        };
        self.screen.line(&st.bold("skills"));
        if catalog.skills.items.is_empty() {
            self.screen.line(&st.dim(
                "  none (a skill is a folder with a SKILL.md in .keel/skills/, .agents/skills/, $KEEL_HOME/skills/ or ~/.agents/skills/)",
            ));
        }
        for s in &catalog.skills.items {
            self.screen.line(&format!(
                "  {:<24} {}",
                s.name,
                st.dim(&format!("{} · {}", s.source.as_str(), shown(&s.path)))
            ));
            self.screen.line(&format!(
                "    {}",
                render::first_line(&render::sanitize(&s.description), 110)
            ));
        }
        self.screen.line(&st.bold("commands"));
        if catalog.commands.items.is_empty() {
            self.screen.line(&st.dim(
                "  none (a command is a Markdown file NAME.md in .keel/commands/ or $KEEL_HOME/commands/)",
            ));
        }
        for c in &catalog.commands.items {
            let usage = match &c.argument_hint {
                Some(h) => format!("/{} {h}", c.name),
                None => format!("/{}", c.name),
            };
            self.screen.line(&format!(
                "  {:<24} {}  {}",
                render::sanitize(&usage),
                render::first_line(&render::sanitize(&c.summary()), 80),
                st.dim(&format!("{} · {}", c.source.as_str(), shown(&c.path)))
            ));
        }
        let warnings: Vec<String> = catalog.warnings().map(|w| w.to_string()).collect();
        if !warnings.is_empty() {
            self.screen.line(&st.bold("skipped"));
            for w in warnings {
                let line = st.yellow(&format!("  ⚠ {}", render::sanitize(&w)));
                self.screen.line(&line);
            }
        }
        self.screen.line(
            &st.dim(
                "Use a skill with /skill:NAME [request]; run a command with /NAME [arguments].",
            ),
        );
    }

    /// The lines `/help` adds for custom commands and skills.
    pub(super) fn help_custom(&mut self) {
        let st = self.screen.style;
        let catalog = self.catalog_now(true).clone();
        if !catalog.commands.items.is_empty() {
            self.screen.line(&st.bold("custom commands"));
            for c in &catalog.commands.items {
                let usage = match &c.argument_hint {
                    Some(h) => format!("/{} {h}", c.name),
                    None => format!("/{}", c.name),
                };
                self.screen.line(&format!(
                    "  {:<34} {}",
                    render::sanitize(&usage),
                    st.dim(&render::first_line(&render::sanitize(&c.summary()), 80))
                ));
            }
        }
        if !catalog.skills.items.is_empty() {
            self.screen.line(&st.bold("skills"));
            for s in &catalog.skills.items {
                self.screen.line(&format!(
                    "  {:<34} {}",
                    format!("{SKILL_PREFIX}{} [request]", s.name),
                    st.dim(&render::first_line(&render::sanitize(&s.description), 80))
                ));
            }
        }
    }

    /// Runs `/name` as a custom command or `/skill:NAME` as a skill, if it is one:
    /// the prompt is built and sent. Returns whether it was one.
    pub(super) fn run_custom(&mut self, name: &str, arg: &str) -> bool {
        use keel_skills::{SlashError, SlashKind};
        let typed = format!("{name} {arg}");
        let expanded = self.catalog_now(false).expand_slash(&typed);
        let slash = match expanded {
            Ok(Some(s)) => s,
            Ok(None) => return false,
            Err(e @ SlashError::UnknownSkill(_)) => {
                self.warn_line(&format!("{e}; /skills lists them"));
                return true;
            }
            Err(e) => {
                self.warn_line(&format!("⚠ {}", render::sanitize(&e.to_string())));
                return true;
            }
        };
        let plural =
            |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        let line = match slash.kind {
            SlashKind::Skill => format!(
                "skill {} ({}, {})",
                slash.name,
                slash.path.display(),
                plural(slash.files, "other file", "other files")
            ),
            SlashKind::Command => format!(
                "/{} → {} from {}",
                slash.name,
                plural(slash.text.lines().count(), "line", "lines"),
                slash.path.display()
            ),
        };
        let line = self.screen.style.dim(&render::sanitize(&line));
        self.screen.line(&line);
        self.send(&slash.text, None);
        true
    }
}
