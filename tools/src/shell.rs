//! Shell risk analysis (seed 002 §6.7).
//!
//! The command line is parsed with a real POSIX/bash parser (`brush-parser`). Only a
//! list of plain simple commands joined by `&&`, `||`, `;` and `|` can be low risk,
//! and only when every part is. Every simple command found anywhere in the line is
//! rated — in lists, pipes, subshells, loops, conditionals, substitutions, the scripts
//! of `sh -c`, `su -c`, `watch`, `tmux`, `at` here-documents and `echo … | sh`, the
//! commands of wrappers and launchers (`wrappers`: `env`, `timeout`, `sudo`,
//! `setsid`, `chroot`, `xargs`, `find -exec`, …) and the shell commands of inline
//! interpreter code (`inline`: `python -c`, `node -e`, `perl -e`, …) — and the line
//! gets the worst rating. Writes outside the workspace, environment variables that
//! change what runs or loads, and reads of well-known secret locations (`secrets`)
//! are high and need an approval. Anything that fails to parse is never low risk, and
//! its pieces that parse alone are still checked for destructive commands.
//!
//! Every analysed command falls in one of four tiers:
//!
//! | tier | examples | effect |
//! |---|---|---|
//! | low (`safe`) | `cat`, `rg foo`, `cargo test`, `timeout 60 cargo test` | auto-allowed outside plan mode |
//! | medium | unknown programs, file-writing redirections, `mv`, compound commands, `python -c 'print(1)'`, `watch ls` | asks; auto mode allows |
//! | high | `rm`, `git reset`, `curl`, `sudo`, `setsid rm x`, `tee /etc/passwd`, `PATH=/tmp ls`, `cat ~/.ssh/id_rsa`, unparseable input | asks; auto mode denies what needs an approval unless a rule allows |
//! | destructive | `rm -rf /`, `rm -rf ~`, recursive deletes outside the workspace, `mkfs`, `dd of=/dev/…`, fork bombs, wherever they hide | denied in every mode |
//!
//! The invariant: a command is never rated below, nor decided less strictly than, any
//! program it contains (`tools/tests/invariant.rs`, and a fuzz target).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use brush_parser::ast;
use brush_parser::word::WordPiece;
use keel_envelope::types::RiskLevel;

use crate::git::{self, GitClass};
use crate::jail;
use crate::policy::ShellPolicy;

mod canonical;
mod classify;
mod inline;
mod parse;
mod programs;
mod secrets;
mod tables;
mod walk;
mod wrappers;

use canonical::*;
pub use canonical::{canonical_command, quote};
use classify::*;
use parse::*;
pub use programs::pattern_matches;
use programs::*;
use tables::*;
use walk::*;

/// Stands for a word computed at run time in [`ShellAnalysis::commands`] (a literal
/// word with these characters is always quoted there).
pub const COMPUTED_WORD: &str = "$COMPUTED";

/// The outcome of analysing one command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellAnalysis {
    /// The risk shown to the approver.
    pub risk: RiskLevel,
    /// Low risk: may run without approval (outside plan mode).
    pub safe: bool,
    /// Denied in every mode (the default-deny list).
    pub destructive: bool,
    /// Reaches the network.
    pub network: bool,
    /// Needs the `elevated` level: network, privilege escalation, rewriting git
    /// history. Auto mode does not run these without a rule.
    pub elevated: bool,
    /// The command needs a person's approval even in auto mode (unless a rule covers
    /// it): it cannot be verified (it does not parse, nests too deeply, or feeds
    /// computed text to a shell) or it reaches paths outside the workspace.
    pub needs_approval: bool,
    /// Whether the line parsed.
    pub parsed: bool,
    /// Why, for a person.
    pub reason: String,
    /// The top-level parts, in order, when the line is a plain list of simple commands
    /// (empty otherwise). Used for allow rules.
    pub parts: Vec<CommandPart>,
    /// The canonical form of the whole line (see [`canonical_command`]).
    pub canonical: String,
    /// The canonical text of every simple command found anywhere in the line (inside
    /// substitutions, subshells, `sh -c` scripts, wrappers and inline code too), with
    /// [`COMPUTED_WORD`] for a word computed at run time. Used for deny rules.
    pub commands: Vec<String>,
}

/// One simple command of a plain command list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandPart {
    /// Canonical text: literal words, leading harmless assignments dropped, quoting
    /// normalised.
    pub canonical: String,
    /// Whether this part is low risk by itself.
    pub safe: bool,
    /// Whether an allow rule may match this part (literal words, no substitution, no
    /// writing redirection).
    pub ruleable: bool,
}

/// A verdict on one piece of the line.
#[derive(Debug, Clone)]
struct Finding {
    risk: RiskLevel,
    safe: bool,
    destructive: bool,
    network: bool,
    elevated: bool,
    needs_approval: bool,
    reason: String,
}

impl Finding {
    fn low(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::Low,
            safe: true,
            destructive: false,
            network: false,
            elevated: false,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn medium(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::Medium,
            safe: false,
            destructive: false,
            network: false,
            elevated: false,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn high(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::High,
            safe: false,
            destructive: false,
            network: false,
            elevated: false,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn destructive(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::High,
            safe: false,
            destructive: true,
            network: false,
            elevated: false,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn network(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::High,
            safe: false,
            destructive: false,
            network: true,
            elevated: true,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn elevated(reason: impl Into<String>) -> Self {
        Self {
            risk: RiskLevel::High,
            safe: false,
            destructive: false,
            network: false,
            elevated: true,
            needs_approval: false,
            reason: reason.into(),
        }
    }
    fn unverifiable(reason: impl Into<String>) -> Self {
        let mut f = Self::high(reason);
        f.needs_approval = true;
        f
    }
    fn outside(reason: impl Into<String>) -> Self {
        let mut f = Self::medium(reason);
        f.needs_approval = true;
        f
    }
    fn outside_high(reason: impl Into<String>) -> Self {
        let mut f = Self::high(reason);
        f.needs_approval = true;
        f
    }
    fn unsafe_(mut self) -> Self {
        self.safe = false;
        if self.risk == RiskLevel::Low {
            self.risk = RiskLevel::Medium;
        }
        self
    }
    /// An environment variable that changes what runs or loads: what runs cannot be
    /// checked, so the line needs an approval.
    fn hijack(name: &str) -> Self {
        Self::unverifiable(format!(
            "sets {name}, which changes what runs or loads, so what runs cannot be checked"
        ))
    }
    /// Denied in every mode: the line nests deeper than the analysis follows, so a
    /// destructive command could hide below the limit.
    fn too_deep(reason: impl Into<String>) -> Self {
        let mut f = Self::destructive(reason);
        f.needs_approval = true;
        f
    }
    fn weight(&self) -> u8 {
        if self.destructive {
            4
        } else {
            match self.risk {
                RiskLevel::High => 3,
                RiskLevel::Medium => 2,
                RiskLevel::Low => 1,
                // A risk this version does not know counts as the highest.
                _ => 3,
            }
        }
    }
    /// Combines two verdicts on one command: the worse risk, every flag of both, the
    /// reason of the worse one.
    fn merge(mut self, other: Finding) -> Self {
        if other.weight() > self.weight() {
            self.reason = other.reason;
        }
        self.risk = self.risk.clone().max(other.risk);
        self.safe &= other.safe;
        self.destructive |= other.destructive;
        self.network |= other.network;
        self.elevated |= other.elevated;
        self.needs_approval |= other.needs_approval;
        self
    }
    /// Raises the risk to at least `risk` (a wrapper that adds a risk of its own).
    fn at_least(mut self, risk: RiskLevel, reason: &str) -> Self {
        if risk > RiskLevel::Low {
            self.safe = false;
        }
        if self.risk < risk {
            self.risk = risk;
            if !self.destructive {
                self.reason = format!("{reason}: {}", self.reason);
            }
        }
        self
    }
    /// Prefixes the reason (`sudo: …`).
    fn within(mut self, what: &str) -> Self {
        self.reason = format!("{what}: {}", self.reason);
        self
    }
}

/// Accumulates findings; the worst one gives the reason.
#[derive(Debug, Clone)]
struct Acc {
    risk: RiskLevel,
    safe: bool,
    destructive: bool,
    network: bool,
    elevated: bool,
    needs_approval: bool,
    reason: Option<(u8, String)>,
}

impl Acc {
    fn new() -> Self {
        Self {
            risk: RiskLevel::Low,
            safe: true,
            destructive: false,
            network: false,
            elevated: false,
            needs_approval: false,
            reason: None,
        }
    }
    fn add(&mut self, f: Finding) {
        let weight = f.weight();
        if self.reason.as_ref().is_none_or(|(w, _)| weight > *w) {
            self.reason = Some((weight, f.reason));
        }
        self.risk = self.risk.clone().max(f.risk);
        self.safe &= f.safe;
        self.destructive |= f.destructive;
        self.network |= f.network;
        self.elevated |= f.elevated;
        self.needs_approval |= f.needs_approval;
    }
    fn make_unsafe(&mut self, reason: &str) {
        self.add(Finding::medium(reason));
    }
    /// The accumulated verdict as one finding (`fallback` when nothing gave a reason).
    fn finding(self, fallback: &str) -> Finding {
        Finding {
            risk: self.risk,
            safe: self.safe,
            destructive: self.destructive,
            network: self.network,
            elevated: self.elevated,
            needs_approval: self.needs_approval,
            reason: self
                .reason
                .map(|r| r.1)
                .unwrap_or_else(|| fallback.to_owned()),
        }
    }
}

struct Ctx<'a> {
    root: PathBuf,
    /// The working directory; `cd` in a command list changes it for what follows.
    cwd: RefCell<PathBuf>,
    policy: &'a ShellPolicy,
    depth: u8,
    /// Canonical text of every simple command met, at any depth.
    seen: Rc<RefCell<Vec<String>>>,
    /// How many wrappers (`env`, `timeout`, `sudo`, …) the current command is inside.
    wraps: Cell<u8>,
    /// What the command being classified reads on standard input.
    stdin: RefCell<Stdin>,
}

/// What a command reads on standard input: programs that take their script from it
/// (`sh`, `at`, `python`, `xargs`) are rated by it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stdin {
    /// Nothing known: the terminal, or whatever the caller passes.
    Terminal,
    /// A file (`< script.sh`).
    File,
    /// Literal text: a here-string, a here-document, or `echo`/`printf` piped in.
    Text(String),
    /// The output of another command.
    Computed,
}

impl Ctx<'_> {
    /// What the command being classified reads on standard input.
    fn stdin(&self) -> Stdin {
        self.stdin.borrow().clone()
    }
    /// Runs `f` with `stdin` as the standard input, then restores the previous one.
    fn with_stdin<T>(&self, stdin: Stdin, f: impl FnOnce() -> T) -> T {
        let prev = self.stdin.replace(stdin);
        let out = f();
        *self.stdin.borrow_mut() = prev;
        out
    }
}

impl<'a> Ctx<'a> {
    fn nested(&self) -> Ctx<'a> {
        Ctx {
            root: self.root.clone(),
            cwd: RefCell::new(self.cwd.borrow().clone()),
            policy: self.policy,
            depth: self.depth + 1,
            seen: Rc::clone(&self.seen),
            wraps: Cell::new(0),
            stdin: RefCell::new(self.stdin()),
        }
    }
}

/// Analyses `command` run in `cwd` (absolute; the workspace root when `None`).
pub fn analyze(
    command: &str,
    workspace: &Path,
    cwd: Option<&Path>,
    policy: &ShellPolicy,
) -> ShellAnalysis {
    let root = jail::canonical_root(workspace);
    let cwd = cwd.map(Path::to_path_buf).unwrap_or_else(|| root.clone());
    let ctx = Ctx {
        root,
        cwd: RefCell::new(cwd),
        policy,
        depth: 0,
        seen: Rc::default(),
        wraps: Cell::new(0),
        stdin: RefCell::new(Stdin::Terminal),
    };
    let mut acc = Acc::new();
    let mut parts = Vec::new();
    let parsed = analyze_script(command, &ctx, &mut acc, Some(&mut parts));
    if command.trim().is_empty() {
        acc.add(Finding::medium("the command is empty"));
    }
    let (risk, reason) = if acc.destructive {
        (
            RiskLevel::High,
            acc.reason.clone().map(|r| r.1).unwrap_or_default(),
        )
    } else {
        (
            acc.risk,
            acc.reason.clone().map(|r| r.1).unwrap_or_default(),
        )
    };
    let canonical = if parsed {
        canonical_command(command).unwrap_or_else(|| normalize_ws(command))
    } else {
        normalize_ws(command)
    };
    let commands = ctx.seen.borrow().clone();
    ShellAnalysis {
        risk,
        safe: acc.safe && parsed && !acc.destructive && !acc.network && !acc.elevated,
        destructive: acc.destructive,
        network: acc.network,
        elevated: acc.elevated || acc.network,
        needs_approval: acc.needs_approval || !parsed,
        parsed,
        reason,
        parts,
        canonical,
        commands,
    }
}

fn normalize_ws(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(cmd: &str) -> ShellAnalysis {
        analyze(cmd, Path::new("/tmp"), None, &ShellPolicy::default())
    }

    #[test]
    fn basics() {
        assert!(a("ls -la").safe);
        assert!(a("FOO=1 cat a | grep x && wc -l b").safe);
        assert!(!a("cat $(rm -rf /)").safe);
        assert!(a("cat $(rm -rf /)").destructive);
        assert!(a("rm -rf /").destructive);
        assert!(a("bash -c 'rm -rf ~'").destructive);
        assert!(a(":(){ :|:& };:").destructive);
        assert!(!a("echo hi > out.txt").safe);
        assert!(a("echo hi > /dev/null").safe);
        assert!(a("curl https://x").network);
        assert!(!a("ls (").parsed);
    }

    #[test]
    fn parser_panics_are_avoided() {
        // Found by fuzzing: the parser unwraps an overflowing file-descriptor number.
        for cmd in [
            "<44444444444444444444<t",
            "ls 99999999999>x",
            "echo $(cat 12345678901<y)",
        ] {
            let an = a(cmd);
            assert!(!an.safe && an.risk == RiskLevel::High, "{cmd}: {an:?}");
        }
        assert!(a("ls 2>/dev/null").safe);
        assert!(a("echo 123456789>/dev/null").safe);
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(
            canonical_command("FOO=1 echo 'a b'"),
            canonical_command("echo \"a b\"")
        );
        assert_eq!(canonical_command("ls  -la"), Some("ls -la".to_owned()));
        assert_ne!(
            canonical_command("LD_PRELOAD=x ls"),
            canonical_command("ls")
        );
    }
}
