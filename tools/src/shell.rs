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

mod inline;
mod secrets;
mod wrappers;

/// How deep `sh -c`, `eval` and substitutions are followed.
const MAX_DEPTH: u8 = 6;

/// Programs that only read (given the option checks in [`classify_argv`]).
const READ_ONLY: &[&str] = &[
    "cat",
    "ls",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "pwd",
    "echo",
    "printf",
    "true",
    "false",
    "which",
    "whoami",
    "uname",
    "id",
    "stat",
    "file",
    "du",
    "df",
    "tree",
    "cut",
    "tr",
    "diff",
    "cmp",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "nl",
    "seq",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "md5sum",
    "cksum",
    "printenv",
    "test",
    "[",
    "cd",
    "type",
    "column",
    "rev",
    "paste",
    "comm",
    "jq",
    "sleep",
    "expr",
    "tac",
    "od",
    "hexdump",
    "strings",
    "ps",
    "free",
    "uptime",
    "groups",
    "locale",
    "nproc",
    "arch",
    "tty",
    "dircolors",
    "fold",
    "fmt",
    "expand",
    "unexpand",
    "join",
    "numfmt",
    "look",
    "whereis",
    "lsblk",
    "env",
    "hostname",
    "sort",
    "uniq",
    "date",
];

/// Programs that reach the network.
const NETWORK: &[&str] = &[
    "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "rsync", "ftp", "telnet",
    "socat", "aria2c", "httpie", "http", "https",
];

/// Programs that are always high risk.
const HIGH: &[&str] = &[
    "rm",
    "del",
    "rd",
    "rmdir",
    "unlink",
    "shred",
    "srm",
    "dd",
    "truncate",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init",
    "telinit",
    "killall",
    "pkill",
    "kill",
    "crontab",
    "mount",
    "umount",
    "swapoff",
    "swapon",
    "iptables",
    "useradd",
    "userdel",
    "usermod",
    "passwd",
    "chpasswd",
    "visudo",
    "insmod",
    "rmmod",
    "modprobe",
    "sysctl",
    "systemctl",
    "service",
    "launchctl",
    "format",
    "diskpart",
    "reg",
    "setfacl",
    "chattr",
    "docker",
    "podman",
    "kubectl",
];

/// Programs that escalate privileges.
const PRIVILEGE: &[&str] = &["sudo", "doas", "su", "pkexec", "runas", "run0"];

/// Programs that format or partition disks: always destructive.
const DISK: &[&str] = &[
    "mkfs", "mke2fs", "mkswap", "fdisk", "sfdisk", "cfdisk", "parted", "wipefs", "mkntfs",
    "mkdosfs", "newfs",
];

/// Shells whose `-c` script is analysed recursively.
const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "fish"];

/// Environment variables whose assignment changes what a program does (loaders,
/// search paths, shell start-up files). A leading assignment of one of these is never
/// harmless and stays part of the canonical key.
const DANGEROUS_ENV: &[&str] = &[
    "PATH",
    "BASH_ENV",
    "ENV",
    "IFS",
    "PS4",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "GIT_SSH",
    "GIT_SSH_COMMAND",
    "GIT_EXEC_PATH",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_EXTERNAL_DIFF",
    "GIT_PAGER",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "NODE_OPTIONS",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RUSTC_WRAPPER",
    "RUSTC",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "HOME",
    "RUBYLIB",
    "NODE_PATH",
    "PYTHONHOME",
    "PERLLIB",
    "PERL5DB",
    "GCONV_PATH",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "LUA_PATH",
    "LUA_CPATH",
    "ZDOTDIR",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_TEMPLATE_DIR",
    "DOTNET_STARTUP_HOOKS",
    "BROWSER",
    "SHELL",
];

/// Whether assigning `name` changes what runs or loads ([`DANGEROUS_ENV`], `LD_*`,
/// `DYLD_*`, `GIT_CONFIG_*`, exported functions `BASH_FUNC_*`).
fn dangerous_env(name: &str) -> bool {
    DANGEROUS_ENV.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("DYLD_")
        || name.starts_with("GIT_CONFIG_")
        || name.starts_with("BASH_FUNC_")
}

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
            }
        }
    }
    /// Combines two verdicts on one command: the worse risk, every flag of both, the
    /// reason of the worse one.
    fn merge(mut self, other: Finding) -> Self {
        if other.weight() > self.weight() {
            self.reason = other.reason;
        }
        self.risk = self.risk.max(other.risk);
        self.safe &= other.safe;
        self.destructive |= other.destructive;
        self.network |= other.network;
        self.elevated |= other.elevated;
        self.needs_approval |= other.needs_approval;
        self
    }
    /// Raises the risk to at least `risk` (a wrapper that adds a risk of its own).
    fn at_least(mut self, risk: RiskLevel, reason: &str) -> Self {
        if self.risk < risk {
            self.risk = risk;
            if !self.destructive {
                self.reason = format!("{reason}: {}", self.reason);
            }
        }
        if risk > RiskLevel::Low {
            self.safe = false;
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
        self.risk = self.risk.max(f.risk);
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

fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    }
}

/// Longest command line that is parsed at all.
const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// Deepest bracket nesting that is parsed at all (the parser recurses per level).
const MAX_NESTING: usize = 32;

/// Whether the line is small and shallow enough to hand to the parser without risking
/// its stack.
fn parseable_size(command: &str) -> bool {
    if command.len() > MAX_COMMAND_BYTES {
        return false;
    }
    let mut depth = 0usize;
    let mut max = 0usize;
    let mut backticks = 0usize;
    for c in command.chars() {
        match c {
            '(' | '{' | '[' => depth += 1,
            ')' | '}' | ']' => depth = depth.saturating_sub(1),
            '`' => backticks += 1,
            _ => {}
        }
        max = max.max(depth);
    }
    max <= MAX_NESTING && backticks <= 2 * MAX_NESTING
}

/// Parses a command line. A line the parser rejects is tried again with its
/// here-document delimiters unquoted (`<<'EOF'` → `<<EOF`; the parser rejects some
/// quoted delimiters inside substitutions), which only makes the analysis look at
/// more expansions.
fn parse(command: &str) -> Option<ast::Program> {
    parse_exact(command).or_else(|| {
        let unquoted = unquote_heredoc_delimiters(command)?;
        parse_exact(&unquoted)
    })
}

/// `<<'EOF'`, `<<"EOF"`, `<<\EOF` → `<<EOF`; `None` when there is none.
fn unquote_heredoc_delimiters(command: &str) -> Option<String> {
    let mut out = String::with_capacity(command.len());
    let mut rest = command;
    let mut changed = false;
    // Quoted delimiters met, as written (`'EOF'`): a terminator line written the same
    // way (the parser re-quotes it inside substitutions) is unquoted too.
    let mut quoted: Vec<(String, String)> = Vec::new();
    while let Some(pos) = rest.find("<<") {
        let (before, after) = rest.split_at(pos + 2);
        out.push_str(before);
        let after = if let Some(a) = after.strip_prefix('-') {
            out.push('-');
            a
        } else {
            after
        };
        let trimmed = after.trim_start_matches([' ', '\t']);
        out.push_str(&after[..after.len() - trimmed.len()]);
        let mut chars = trimmed.chars();
        match chars.next() {
            Some(q @ ('\'' | '"')) => match chars.as_str().find(q) {
                Some(end) => {
                    let delim = &chars.as_str()[..end];
                    quoted.push((format!("{q}{delim}{q}"), delim.to_owned()));
                    out.push_str(delim);
                    rest = &chars.as_str()[end + 1..];
                    changed = true;
                }
                None => rest = trimmed,
            },
            Some('\\') => {
                rest = chars.as_str();
                changed = true;
            }
            _ => rest = trimmed,
        }
    }
    out.push_str(rest);
    if !changed {
        return None;
    }
    if quoted.is_empty() {
        return Some(out);
    }
    let lines: Vec<&str> = out
        .split('\n')
        .map(|line| {
            quoted
                .iter()
                .find(|(q, _)| line.trim() == q)
                .map_or(line, |(_, d)| d.as_str())
        })
        .collect();
    Some(lines.join("\n"))
}

/// For a line that does not parse: the pieces between its operators, brackets and
/// newlines (outside quotes) that parse alone are analysed, and a destructive one makes
/// the whole line destructive, so a parser gap cannot turn `rm -rf /` into an "ask".
fn salvage(script: &str, ctx: &Ctx<'_>, acc: &mut Acc) {
    // Pieces between every operator, and pieces that keep their pipes (`echo … | sh`).
    let pieces = salvage_pieces(script, true)
        .into_iter()
        .take(256)
        .chain(salvage_pieces(script, false).into_iter().take(256));
    for piece in pieces {
        let mut sub = Acc::new();
        if parse_exact(&piece).is_some() && analyze_script(&piece, &ctx.nested(), &mut sub, None) {
            let f = sub.finding("");
            if f.destructive {
                acc.add(f.within("a part of the command"));
                return;
            }
        }
    }
}

/// Splits at unquoted `;`, `&`, brackets, backquotes, newlines and (with `pipes`) `|`,
/// and drops the keywords that open a clause (`then`, `do`, …).
fn salvage_pieces(script: &str, pipes: bool) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = script.chars();
    let mut push = |cur: &mut String| {
        let mut piece = cur.trim();
        loop {
            let before = piece;
            for kw in [
                "then", "do", "else", "elif", "if", "while", "until", "!", "time",
            ] {
                if let Some(rest) = piece.strip_prefix(kw) {
                    if rest.starts_with([' ', '\t']) {
                        piece = rest.trim_start();
                    }
                }
            }
            if piece == before {
                break;
            }
        }
        if !piece.is_empty() && piece != "$" {
            out.push(piece.trim_end_matches('$').to_owned());
        }
        cur.clear();
    };
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, '\'' | '"') => {
                quote = Some(c);
                cur.push(c);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(c);
            }
            (Some('"') | None, '\\') => {
                cur.push(c);
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (None, '|') if !pipes => cur.push(c),
            (None, ';' | '|' | '&' | '(' | ')' | '{' | '}' | '`' | '\n') => push(&mut cur),
            (_, c) => cur.push(c),
        }
    }
    push(&mut cur);
    out
}

fn parse_exact(command: &str) -> Option<ast::Program> {
    if !parseable_size(command) || has_huge_io_number(command) {
        return None;
    }
    let opts = parser_options();
    let mut parser = brush_parser::Parser::new(
        std::io::BufReader::new(command.as_bytes()),
        &opts,
        &brush_parser::SourceInfo::default(),
    );
    guarded(|| parser.parse_program().ok()).flatten()
}

/// Runs the parser, turning a panic inside it into `None` (the line is then
/// unparseable, so high risk and never allowed without a person). The parser is a
/// dependency; its known panics are also avoided up front ([`has_huge_io_number`]).
fn guarded<T>(f: impl FnOnce() -> T) -> Option<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok()
}

/// Whether the line has a file-descriptor number too large for the parser, which
/// panics on it (`99999999999>x`; found by fuzzing).
fn has_huge_io_number(command: &str) -> bool {
    let bytes = command.as_bytes();
    let mut run = 0usize;
    for &b in bytes {
        if b.is_ascii_digit() {
            run += 1;
        } else {
            if run >= 10 && (b == b'<' || b == b'>') {
                return true;
            }
            run = 0;
        }
    }
    false
}

/// Analyses a script; returns whether it parsed. `parts` collects the top-level
/// simple commands when the script is a plain list (cleared otherwise).
fn analyze_script(
    script: &str,
    ctx: &Ctx<'_>,
    acc: &mut Acc,
    mut parts: Option<&mut Vec<CommandPart>>,
) -> bool {
    if ctx.depth > MAX_DEPTH {
        acc.add(Finding::too_deep(
            "the command nests shells or substitutions too deeply to analyse",
        ));
        return false;
    }
    if looks_like_fork_bomb(script) {
        acc.add(Finding::destructive("a fork bomb"));
    }
    let Some(program) = parse(script) else {
        acc.add(Finding::unverifiable(
            "the command could not be parsed, so it cannot be checked",
        ));
        salvage(script, ctx, acc);
        if let Some(p) = parts.as_deref_mut() {
            p.clear();
        }
        return false;
    };
    // `((` opens an arithmetic command or two subshells (bash decides by trying); the
    // parser always reads arithmetic and may drop what follows, so the subshell reading
    // is analysed too.
    if script.contains("((") && script.replace("$((", "").contains("((") {
        // `$((` stays arithmetic expansion.
        let spaced = script
            .replace("$((", "\u{0}")
            .replace("((", "( (")
            .replace('\u{0}', "$((");
        let mut sub = Acc::new();
        if parse_exact(&spaced).is_some() && analyze_script(&spaced, &ctx.nested(), &mut sub, None)
        {
            acc.add(sub.finding("uses `((`").unsafe_());
        }
    }
    let mut plain = true;
    let mut collected = Vec::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            if matches!(sep, ast::SeparatorOperator::Async) {
                acc.make_unsafe("runs a command in the background");
                plain = false;
            }
            for pipeline in
                std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                    ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
                }))
            {
                // `time cmd` is harmless; the commands still count.
                for (k, cmd) in pipeline.seq.iter().enumerate() {
                    let stdin = piped_stdin(&pipeline.seq, k, ctx);
                    ctx.with_stdin(stdin, || match cmd {
                        ast::Command::Simple(sc) => {
                            let part = analyze_simple(sc, ctx, acc);
                            collected.push(part);
                        }
                        other => {
                            plain = false;
                            analyze_command(other, ctx, acc);
                        }
                    });
                }
            }
        }
    }
    if let Some(p) = parts {
        if plain {
            *p = collected;
        } else {
            p.clear();
        }
    }
    true
}

/// The literal words of a simple command (`None` when any word is computed).
fn literal_words(sc: &ast::SimpleCommand, ctx: &Ctx<'_>) -> Option<Vec<String>> {
    let mut scratch = Acc::new();
    let mut out = vec![word_info(&sc.word_or_name.as_ref()?.value, ctx, &mut scratch).literal?];
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        if let ast::CommandPrefixOrSuffixItem::Word(w) = item {
            out.push(word_info(&w.value, ctx, &mut scratch).literal?);
        }
    }
    Some(out)
}

/// The script an `echo`/`printf` with literal arguments feeds into a pipe.
fn echoed_script(cmd: &ast::Command, ctx: &Ctx<'_>) -> Option<String> {
    let ast::Command::Simple(sc) = cmd else {
        return None;
    };
    let words = literal_words(sc, ctx)?;
    match basename(words.first()?) {
        "echo" => Some(
            words[1..]
                .iter()
                .filter(|w| !matches!(w.as_str(), "-n" | "-e" | "-E"))
                .cloned()
                .collect::<Vec<_>>()
                .join(" "),
        ),
        "printf" => Some(words[1..].join(" ").replace("\\n", "\n")),
        _ => None,
    }
}

/// The standard input of the `k`-th command of a pipeline: the caller's for the first,
/// the literal text of an `echo`/`printf` before it, or computed output.
fn piped_stdin(seq: &[ast::Command], k: usize, ctx: &Ctx<'_>) -> Stdin {
    if k == 0 {
        return ctx.stdin();
    }
    match echoed_script(&seq[k - 1], ctx) {
        Some(text) => Stdin::Text(text),
        None => Stdin::Computed,
    }
}

fn looks_like_fork_bomb(script: &str) -> bool {
    let compact: String = script.chars().filter(|c| !c.is_whitespace()).collect();
    compact.contains(":(){:|:&};:") || compact.contains("(){$0|$0&}") || compact.contains("$0&$0")
}

fn analyze_compound_list(list: &ast::CompoundList, ctx: &Ctx<'_>, acc: &mut Acc) {
    for ast::CompoundListItem(and_or, _) in &list.0 {
        for pipeline in
            std::iter::once(&and_or.first).chain(and_or.additional.iter().map(|a| match a {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => p,
            }))
        {
            for (k, cmd) in pipeline.seq.iter().enumerate() {
                let stdin = piped_stdin(&pipeline.seq, k, ctx);
                ctx.with_stdin(stdin, || analyze_command(cmd, ctx, acc));
            }
        }
    }
}

fn analyze_command(cmd: &ast::Command, ctx: &Ctx<'_>, acc: &mut Acc) {
    match cmd {
        ast::Command::Simple(sc) => {
            analyze_simple(sc, ctx, acc);
        }
        ast::Command::Compound(cc, redirects) => {
            acc.make_unsafe("uses a compound command (subshell, group, loop or conditional)");
            analyze_compound(cc, ctx, acc);
            if let Some(r) = redirects {
                for io in &r.0 {
                    analyze_redirect(io, ctx, acc);
                }
            }
        }
        ast::Command::Function(def) => {
            acc.make_unsafe("defines a shell function");
            if calls_name(&def.body.0, &def.fname) {
                acc.add(Finding::destructive(
                    "a fork bomb (a function that calls itself)",
                ));
            }
            analyze_compound(&def.body.0, ctx, acc);
        }
        ast::Command::ExtendedTest(e) => {
            acc.make_unsafe("uses an extended test expression");
            analyze_test_expr(e, ctx, acc);
        }
    }
}

fn analyze_compound(cc: &ast::CompoundCommand, ctx: &Ctx<'_>, acc: &mut Acc) {
    match cc {
        ast::CompoundCommand::BraceGroup(ast::BraceGroupCommand(l))
        | ast::CompoundCommand::Subshell(ast::SubshellCommand(l)) => {
            analyze_compound_list(l, ctx, acc)
        }
        ast::CompoundCommand::ForClause(f) => {
            for w in f.values.iter().flatten() {
                word_info(&w.value, ctx, acc);
            }
            analyze_compound_list(&f.body.0, ctx, acc);
        }
        ast::CompoundCommand::ArithmeticForClause(f) => {
            for e in [&f.initializer, &f.condition, &f.updater]
                .into_iter()
                .flatten()
            {
                word_info(&e.value, ctx, acc);
            }
            analyze_compound_list(&f.body.0, ctx, acc)
        }
        ast::CompoundCommand::CaseClause(c) => {
            word_info(&c.value.value, ctx, acc);
            for item in &c.cases {
                for p in &item.patterns {
                    word_info(&p.value, ctx, acc);
                }
                if let Some(l) = &item.cmd {
                    analyze_compound_list(l, ctx, acc);
                }
            }
        }
        ast::CompoundCommand::IfClause(i) => {
            analyze_compound_list(&i.condition, ctx, acc);
            analyze_compound_list(&i.then, ctx, acc);
            for e in i.elses.iter().flatten() {
                if let Some(c) = &e.condition {
                    analyze_compound_list(c, ctx, acc);
                }
                analyze_compound_list(&e.body, ctx, acc);
            }
        }
        ast::CompoundCommand::WhileClause(w) | ast::CompoundCommand::UntilClause(w) => {
            analyze_compound_list(&w.0, ctx, acc);
            analyze_compound_list(&(w.1).0, ctx, acc);
        }
        ast::CompoundCommand::Arithmetic(a) => {
            // `(( $(cmd) ))` runs the substitution; `((cmd) )` may also be meant as
            // nested subshells, so the text is analysed as commands too.
            word_info(&a.expr.value, ctx, acc);
            let mut sub = Acc::new();
            if analyze_script(&a.expr.value, &ctx.nested(), &mut sub, None) {
                acc.add(sub.finding("uses an arithmetic command").unsafe_());
            }
        }
    }
}

fn analyze_test_expr(e: &ast::ExtendedTestExpr, ctx: &Ctx<'_>, acc: &mut Acc) {
    match e {
        ast::ExtendedTestExpr::And(a, b) | ast::ExtendedTestExpr::Or(a, b) => {
            analyze_test_expr(a, ctx, acc);
            analyze_test_expr(b, ctx, acc);
        }
        ast::ExtendedTestExpr::Not(a) | ast::ExtendedTestExpr::Parenthesized(a) => {
            analyze_test_expr(a, ctx, acc)
        }
        ast::ExtendedTestExpr::UnaryTest(_, w) => {
            word_info(&w.value, ctx, acc);
        }
        ast::ExtendedTestExpr::BinaryTest(_, a, b) => {
            word_info(&a.value, ctx, acc);
            word_info(&b.value, ctx, acc);
        }
    }
}

/// Whether a compound command calls `name` anywhere (for fork-bomb detection).
fn calls_name(cc: &ast::CompoundCommand, name: &str) -> bool {
    // The display form is good enough: look for the name as a whole word.
    let text = cc.to_string();
    text.split(|c: char| {
        c.is_whitespace()
            || c == '|'
            || c == '&'
            || c == ';'
            || c == '('
            || c == ')'
            || c == '{'
            || c == '}'
    })
    .any(|w| w == name)
}

/// What a word expands to.
struct WordInfo {
    /// The literal value, when the word has no expansion.
    literal: Option<String>,
}

fn word_info(raw: &str, ctx: &Ctx<'_>, acc: &mut Acc) -> WordInfo {
    let Some(Ok(pieces)) = guarded(|| brush_parser::word::parse(raw, &parser_options())) else {
        acc.add(Finding::unverifiable(
            "a word of the command could not be parsed",
        ));
        return WordInfo { literal: None };
    };
    let mut out = String::new();
    let mut literal = true;
    for p in &pieces {
        literal &= piece_literal(&p.piece, raw, ctx, acc, &mut out);
    }
    WordInfo {
        literal: literal.then_some(out),
    }
}

/// Appends the literal text of `piece` to `out`; returns whether it is literal.
/// Substitutions are analysed; `raw` is the whole word, salvaged when a substitution
/// inside it does not parse.
fn piece_literal(
    piece: &WordPiece,
    raw: &str,
    ctx: &Ctx<'_>,
    acc: &mut Acc,
    out: &mut String,
) -> bool {
    match piece {
        WordPiece::Text(t) | WordPiece::SingleQuotedText(t) | WordPiece::AnsiCQuotedText(t) => {
            out.push_str(t);
            true
        }
        WordPiece::EscapeSequence(e) => {
            out.push_str(e.strip_prefix('\\').unwrap_or(e));
            true
        }
        WordPiece::TildePrefix(t) => {
            out.push('~');
            out.push_str(t);
            true
        }
        WordPiece::DoubleQuotedSequence(seq) | WordPiece::GettextDoubleQuotedSequence(seq) => {
            let mut ok = true;
            for p in seq {
                ok &= piece_literal(&p.piece, raw, ctx, acc, out);
            }
            ok
        }
        WordPiece::ParameterExpansion(_) => {
            acc.make_unsafe("expands a variable, so the final command is not known");
            false
        }
        WordPiece::CommandSubstitution(script)
        | WordPiece::BackquotedCommandSubstitution(script) => {
            acc.make_unsafe("uses command substitution");
            let inner = ctx.nested();
            let mut sub = Acc::new();
            let script = match piece {
                WordPiece::BackquotedCommandSubstitution(_) => unescape_backquoted(script),
                _ => script.clone(),
            };
            if !analyze_script(&script, &inner, &mut sub, None) {
                // The parser may have cut the substitution short (`$(case x in a) …`):
                // look at the whole word.
                salvage(raw, ctx, &mut sub);
            }
            sub.safe = false;
            acc.add(Finding {
                risk: sub.risk.max(RiskLevel::Medium),
                safe: false,
                destructive: sub.destructive,
                network: sub.network,
                elevated: sub.elevated,
                needs_approval: sub.needs_approval,
                reason: sub
                    .reason
                    .map(|r| r.1)
                    .unwrap_or_else(|| "uses command substitution".to_owned()),
            });
            false
        }
        WordPiece::ArithmeticExpression(e) => {
            if e.value.contains("$(") || e.value.contains('`') {
                acc.make_unsafe("uses command substitution inside arithmetic");
                let inner = ctx.nested();
                let mut sub = Acc::new();
                word_info(&e.value, &inner, &mut sub);
                acc.add(Finding {
                    risk: sub.risk,
                    safe: false,
                    destructive: sub.destructive,
                    network: sub.network,
                    elevated: sub.elevated,
                    needs_approval: sub.needs_approval,
                    reason: sub.reason.map(|r| r.1).unwrap_or_default(),
                });
            } else {
                acc.make_unsafe("uses arithmetic expansion");
            }
            false
        }
    }
}

/// Inside backquotes a backslash before `\\` or `$` is removed (the parser already
/// removes it before a backquote).
fn unescape_backquoted(script: &str) -> String {
    let mut out = String::with_capacity(script.len());
    let mut chars = script.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('\\' | '$')) {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn analyze_redirect(io: &ast::IoRedirect, ctx: &Ctx<'_>, acc: &mut Acc) -> bool {
    // Returns whether the redirection writes a file.
    match io {
        ast::IoRedirect::File(_, kind, target) => {
            let writes = matches!(
                kind,
                ast::IoFileRedirectKind::Write
                    | ast::IoFileRedirectKind::Append
                    | ast::IoFileRedirectKind::Clobber
                    | ast::IoFileRedirectKind::ReadAndWrite
            );
            match target {
                ast::IoFileRedirectTarget::Filename(w) => {
                    let info = word_info(&w.value, ctx, acc);
                    if writes {
                        if let Some(p) = names_secret(&w.value, ctx) {
                            acc.add(Finding::outside_high(format!(
                                "uses {p}, a well-known secret location"
                            )));
                        }
                        return redirect_write(info.literal.as_deref(), ctx, acc);
                    }
                    if let Some(p) = names_secret(&w.value, ctx) {
                        acc.add(Finding::outside_high(format!(
                            "uses {p}, a well-known secret location"
                        )));
                    } else if let Some(t) = info.literal.as_deref() {
                        if !t.starts_with("/dev/") && !path_inside(t, ctx) {
                            acc.add(Finding::outside(format!(
                                "reads {t}, outside the workspace"
                            )));
                        }
                    }
                    false
                }
                ast::IoFileRedirectTarget::Fd(_) | ast::IoFileRedirectTarget::Duplicate(_) => false,
                ast::IoFileRedirectTarget::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                    acc.make_unsafe("uses process substitution");
                    let inner = ctx.nested();
                    analyze_compound_list(l, &inner, acc);
                    true
                }
            }
        }
        ast::IoRedirect::OutputAndError(w, _) => {
            let info = word_info(&w.value, ctx, acc);
            redirect_write(info.literal.as_deref(), ctx, acc)
        }
        ast::IoRedirect::HereDocument(_, doc) => {
            if doc.requires_expansion {
                word_info(&doc.doc.value, ctx, acc);
            }
            false
        }
        ast::IoRedirect::HereString(_, w) => {
            word_info(&w.value, ctx, acc);
            false
        }
    }
}

/// A redirection writes to `target`; returns whether it writes a real file.
fn redirect_write(target: Option<&str>, ctx: &Ctx<'_>, acc: &mut Acc) -> bool {
    match target {
        Some("/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty") => false,
        Some(t) if t.starts_with("/dev/fd/") => false,
        Some(t) if t.starts_with("/dev/") => {
            acc.add(Finding::destructive(format!(
                "writes directly to the device {t}"
            )));
            true
        }
        Some(t) => {
            if path_inside(t, ctx) {
                acc.add(Finding::medium(format!(
                    "redirects output into the file {t}"
                )));
            } else {
                acc.add(Finding::outside_high(format!(
                    "redirects output to {t}, outside the workspace"
                )));
            }
            true
        }
        None => {
            acc.add(Finding::high(
                "redirects output to a file whose name is computed at run time",
            ));
            true
        }
    }
}

/// Whether `target` (a literal path in the command) stays inside the workspace.
fn path_inside(target: &str, ctx: &Ctx<'_>) -> bool {
    if target.starts_with('~') {
        return false;
    }
    match jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), target) {
        Ok(r) => r.inside,
        Err(_) => false,
    }
}

/// Programs whose arguments are text, not files to open.
const NOT_READING: &[&str] = &[
    "echo", "printf", "which", "type", "whereis", "basename", "dirname", "seq", "sleep", "true",
    "false", "expr", "test", "[",
];

/// Whether `word` (as written: `~/.ssh/x`, `$HOME/.aws`, `/etc/shadow`) names a secret
/// location outside the workspace.
fn names_secret(word: &str, ctx: &Ctx<'_>) -> Option<String> {
    let unquoted: String = word.chars().filter(|c| *c != '"' && *c != '\'').collect();
    for cand in secrets::path_candidates(&unquoted) {
        let cand = cand
            .strip_prefix("${HOME}")
            .or_else(|| cand.strip_prefix("$HOME"))
            .map(|rest| format!("~{rest}"))
            .unwrap_or_else(|| cand.to_owned());
        if secrets::is_secret_path(&cand) && !path_inside(&cand, ctx) {
            return Some(cand);
        }
    }
    None
}

/// Reading a well-known secret location, by any program: high, and it needs an
/// approval.
fn secret_arguments(
    sc: &ast::SimpleCommand,
    argv: &[Option<String>],
    ctx: &Ctx<'_>,
) -> Option<Finding> {
    if lit(argv, 0).is_some_and(|p| NOT_READING.contains(&basename(p))) {
        return None;
    }
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        let raw = match item {
            ast::CommandPrefixOrSuffixItem::Word(w)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => &w.value,
            _ => continue,
        };
        if let Some(p) = names_secret(raw, ctx) {
            return Some(Finding::outside_high(format!(
                "uses {p}, a well-known secret location"
            )));
        }
    }
    None
}

fn analyze_simple(sc: &ast::SimpleCommand, ctx: &Ctx<'_>, acc: &mut Acc) -> CommandPart {
    let mut local = Acc::new();
    let mut argv: Vec<Option<String>> = Vec::new();
    let mut kept_assignments: Vec<String> = Vec::new();
    let mut writes = false;
    // Prefix: assignments and redirections.
    for item in sc.prefix.iter().flat_map(|p| p.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assign, word) => {
                let name = match &assign.name {
                    ast::AssignmentName::VariableName(n) => n.clone(),
                    ast::AssignmentName::ArrayElementName(n, _) => n.clone(),
                };
                let value = match &assign.value {
                    ast::AssignmentValue::Scalar(w) => word_info(&w.value, ctx, &mut local).literal,
                    ast::AssignmentValue::Array(_) => None,
                };
                if dangerous_env(&name) {
                    local.add(Finding::hijack(&name));
                    kept_assignments.push(word.value.clone());
                } else if value.is_none() {
                    // A computed value is still only an environment variable.
                }
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                writes |= analyze_redirect(io, ctx, &mut local)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                local.make_unsafe("uses process substitution");
                let inner = ctx.nested();
                analyze_compound_list(l, &inner, &mut local);
            }
            ast::CommandPrefixOrSuffixItem::Word(_) => {}
        }
    }
    if let Some(w) = &sc.word_or_name {
        argv.push(word_info(&w.value, ctx, &mut local).literal);
    }
    for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
        match item {
            ast::CommandPrefixOrSuffixItem::Word(w) => {
                argv.push(word_info(&w.value, ctx, &mut local).literal)
            }
            ast::CommandPrefixOrSuffixItem::AssignmentWord(assign, w) => {
                // `export PATH=/tmp:$PATH`, `declare -x LD_PRELOAD=…`.
                let name = match &assign.name {
                    ast::AssignmentName::VariableName(n)
                    | ast::AssignmentName::ArrayElementName(n, _) => n,
                };
                if dangerous_env(name) {
                    local.add(Finding::hijack(name));
                }
                argv.push(word_info(&w.value, ctx, &mut local).literal)
            }
            ast::CommandPrefixOrSuffixItem::IoRedirect(io) => {
                writes |= analyze_redirect(io, ctx, &mut local)
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, ast::SubshellCommand(l)) => {
                local.make_unsafe("uses process substitution");
                argv.push(None);
                let inner = ctx.nested();
                analyze_compound_list(l, &inner, &mut local);
            }
        }
    }
    let substitutions_ok = local.safe;
    // `bash <<< 'script'`, `at now <<EOF … EOF`, `python3 < x.py`: what the command
    // reads on standard input (the last input redirection wins over a pipe).
    let mut stdin = None;
    for item in sc
        .prefix
        .iter()
        .flat_map(|p| p.0.iter())
        .chain(sc.suffix.iter().flat_map(|s| s.0.iter()))
    {
        let ast::CommandPrefixOrSuffixItem::IoRedirect(io) = item else {
            continue;
        };
        match io {
            ast::IoRedirect::HereString(fd, w) if fd.is_none_or(|f| f == 0) => {
                let mut scratch = Acc::new();
                stdin = Some(match word_info(&w.value, ctx, &mut scratch).literal {
                    Some(t) => Stdin::Text(t),
                    None => Stdin::Computed,
                });
            }
            ast::IoRedirect::HereDocument(fd, doc) if fd.is_none_or(|f| f == 0) => {
                stdin = Some(Stdin::Text(doc.doc.value.clone()));
            }
            ast::IoRedirect::File(
                fd,
                ast::IoFileRedirectKind::Read | ast::IoFileRedirectKind::ReadAndWrite,
                _,
            ) if fd.is_none_or(|f| f == 0) => stdin = Some(Stdin::File),
            _ => {}
        }
    }
    if let Some(f) = secret_arguments(sc, &argv, ctx) {
        local.add(f);
    }
    if argv.is_empty() {
        // Only assignments or redirections: `FOO=1` or `> file`.
        if !writes && local.risk == RiskLevel::Low {
            local.add(Finding::low("sets a shell variable"));
        }
    } else {
        let stdin = stdin.unwrap_or_else(|| ctx.stdin());
        local.add(ctx.with_stdin(stdin, || classify_argv(&argv, ctx)));
    }
    let literal_words: Option<Vec<String>> = argv.iter().cloned().collect();
    let mut env_assignments = Vec::new();
    let canonical = {
        let mut words: Vec<String> = kept_assignments.clone();
        match &literal_words {
            Some(ws) => {
                let (assigns, rest) = strip_transparent(ws);
                env_assignments = assigns;
                words.extend(env_assignments.iter().cloned());
                words.extend(rest.iter().map(|w| quote(w)));
            }
            None => words.push(sc.to_string()),
        }
        words.join(" ")
    };
    let part = CommandPart {
        canonical,
        safe: local.safe,
        ruleable: literal_words.is_some()
            && !writes
            && substitutions_ok
            && kept_assignments.is_empty()
            && env_assignments.is_empty(),
    };
    for f in drain(local) {
        acc.add(f);
    }
    part
}

/// Strips the wrappers that change nothing about what a command does (`env`,
/// `command`, `builtin`, `exec`, `nohup`, `time`, `timeout`, `nice`, `ionice`,
/// `stdbuf`), so `timeout 60 cargo test` keys and matches rules as `cargo test`.
/// Returns the assignments `env` makes that change what runs (kept, quoted, like a
/// leading `PATH=…`) and the command itself.
fn strip_transparent(words: &[String]) -> (Vec<String>, &[String]) {
    let opt: Vec<Option<String>> = words.iter().cloned().map(Some).collect();
    let mut assigns = Vec::new();
    let mut i = 0;
    while let Some(w) = words.get(i) {
        let name = basename(w);
        let next_is_option = words.get(i + 1).is_some_and(|n| n.starts_with('-'));
        let next = match name {
            "env" => {
                let mut j = i + 1;
                let mut found = Vec::new();
                while let Some((var, _)) = words.get(j).and_then(|w| w.split_once('=')) {
                    if var.is_empty() || var.starts_with('-') {
                        break;
                    }
                    if dangerous_env(var) {
                        found.push(quote(&words[j]));
                    }
                    j += 1;
                }
                if words.get(j).is_none_or(|n| n.starts_with('-')) {
                    break;
                }
                assigns.extend(found);
                j
            }
            "command" | "builtin" | "nohup" | "exec" | "time" if !next_is_option => i + 1,
            "timeout" => {
                wrappers::skip_options(&opt, i + 1, "sk", &["--signal", "--kill-after"]) + 1
            }
            "nice" => wrappers::skip_options(&opt, i + 1, "n", &["--adjustment"]),
            "stdbuf" => wrappers::skip_options(&opt, i + 1, "ioe", &[]),
            "ionice"
                if !words[i + 1..]
                    .iter()
                    .take_while(|w| w.starts_with('-'))
                    .any(|w| w.contains(['p', 'P', 'u'])) =>
            {
                wrappers::skip_options(&opt, i + 1, "cn", &[])
            }
            _ => break,
        };
        if next >= words.len() || next <= i {
            break;
        }
        i = next;
    }
    (assigns, &words[i..])
}

fn drain(acc: Acc) -> Vec<Finding> {
    vec![Finding {
        risk: acc.risk,
        safe: acc.safe,
        destructive: acc.destructive,
        network: acc.network,
        elevated: acc.elevated,
        needs_approval: acc.needs_approval,
        reason: acc.reason.map(|r| r.1).unwrap_or_default(),
    }]
}

/// Quotes a word the canonical way: bare when it only has safe characters, single
/// quotes otherwise.
pub fn quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,^*?[]~".contains(c))
    {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The canonical form of a command line: each simple command with literal words,
/// harmless leading `VAR=value` assignments dropped and quoting normalised, joined by
/// its operators. `None` when the line does not parse.
pub fn canonical_command(command: &str) -> Option<String> {
    let program = parse(command)?;
    let policy = ShellPolicy::default();
    let ctx = Ctx {
        root: PathBuf::from("/"),
        cwd: RefCell::new(PathBuf::from("/")),
        policy: &policy,
        depth: 0,
        seen: Rc::default(),
        wraps: Cell::new(0),
        stdin: RefCell::new(Stdin::Terminal),
    };
    let mut out = String::new();
    for list in &program.complete_commands {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            let mut pipes = vec![(None, &and_or.first)];
            pipes.extend(and_or.additional.iter().map(|a| match a {
                ast::AndOr::And(p) => (Some("&&"), p),
                ast::AndOr::Or(p) => (Some("||"), p),
            }));
            for (op, pipeline) in pipes {
                if let Some(op) = op {
                    out.push_str(&format!(" {op} "));
                }
                if pipeline.bang {
                    out.push_str("! ");
                }
                let mut first = true;
                for cmd in &pipeline.seq {
                    if !first {
                        out.push_str(" | ");
                    }
                    first = false;
                    match cmd {
                        ast::Command::Simple(sc) => {
                            let mut scratch = Acc::new();
                            let part = analyze_simple(sc, &ctx, &mut scratch);
                            out.push_str(&part.canonical);
                        }
                        other => out.push_str(&normalize_ws(&other.to_string())),
                    }
                }
            }
            match sep {
                ast::SeparatorOperator::Async => out.push_str(" &"),
                ast::SeparatorOperator::Sequence => out.push_str(" ;"),
            }
            out.push(' ');
        }
    }
    let trimmed = out.trim().trim_end_matches(';').trim().to_owned();
    // `bash -lc 'cargo test'` is the same call as `cargo test`.
    if let Some(script) = single_shell_script(&program) {
        if let Some(inner) = canonical_command(&script) {
            return Some(inner);
        }
    }
    Some(trimmed)
}

/// The script of a line that is exactly `sh -c SCRIPT` (or `bash -lc`, …).
fn single_shell_script(program: &ast::Program) -> Option<String> {
    let [list] = program.complete_commands.as_slice() else {
        return None;
    };
    let [ast::CompoundListItem(and_or, ast::SeparatorOperator::Sequence)] = list.0.as_slice()
    else {
        return None;
    };
    if !and_or.additional.is_empty() || and_or.first.bang {
        return None;
    }
    let [ast::Command::Simple(sc)] = and_or.first.seq.as_slice() else {
        return None;
    };
    if sc.prefix.is_some()
        && sc.prefix.as_ref().is_some_and(|p| {
            p.0.iter()
                .any(|i| !matches!(i, ast::CommandPrefixOrSuffixItem::AssignmentWord(..)))
        })
    {
        return None;
    }
    let name = basename(&sc.word_or_name.as_ref()?.value).to_owned();
    if !SHELLS.contains(&name.as_str()) {
        return None;
    }
    let suffix = sc.suffix.as_ref()?;
    let words: Vec<&ast::Word> = suffix
        .0
        .iter()
        .map(|i| match i {
            ast::CommandPrefixOrSuffixItem::Word(w) => Some(w),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()?;
    let [flag, script] = words.as_slice() else {
        return None;
    };
    if !(flag.value.starts_with('-')
        && flag.value.ends_with('c')
        && flag.value.chars().skip(1).all(|c| c.is_ascii_alphabetic()))
    {
        return None;
    }
    let pieces = guarded(|| brush_parser::word::parse(&script.value, &parser_options()))?.ok()?;
    let mut out = String::new();
    let policy = ShellPolicy::default();
    let ctx = Ctx {
        root: PathBuf::from("/"),
        cwd: RefCell::new(PathBuf::from("/")),
        policy: &policy,
        depth: 0,
        seen: Rc::default(),
        wraps: Cell::new(0),
        stdin: RefCell::new(Stdin::Terminal),
    };
    let mut scratch = Acc::new();
    for p in &pieces {
        if !piece_literal(&p.piece, &script.value, &ctx, &mut scratch, &mut out) {
            return None;
        }
    }
    Some(out)
}

/// A shell variable name.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn lit(argv: &[Option<String>], i: usize) -> Option<&str> {
    argv.get(i).and_then(|a| a.as_deref())
}

/// Classifies one simple command given its words (`None` for a computed word).
fn classify_argv(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    if !argv.is_empty() {
        ctx.seen.borrow_mut().push(
            argv.iter()
                .map(|w| w.as_deref().map_or_else(|| COMPUTED_WORD.to_owned(), quote))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    let Some(program) = lit(argv, 0) else {
        // `$RUNNER rm -rf x`: the computed program may be a wrapper, so what follows
        // is rated too.
        let f = Finding::medium("the program name is computed at run time");
        if lit(argv, 1).is_some() {
            return f.merge(wrappers::inner(&argv[1..], ctx));
        }
        return f;
    };
    // `timeout 5 LD_PRELOAD=x ls`: an assignment where a wrapper expects the program is
    // rated as `env` would run it.
    if program
        .split_once('=')
        .is_some_and(|(var, _)| is_identifier(var))
    {
        let mut with_env = vec![Some("env".to_owned())];
        with_env.extend(argv.iter().cloned());
        return wrappers::inner(&with_env, ctx);
    }
    let name = basename(program);
    let all_literal = argv.iter().all(Option::is_some);
    let words: Vec<&str> = argv.iter().map(|a| a.as_deref().unwrap_or("")).collect();

    // Configured high-risk entries first, then the configured whitelist.
    for pat in &ctx.policy.high_risk {
        if pattern_matches(pat, &words, all_literal)
            || (!pat.contains(' ') && pat.trim_end_matches('*') == name)
        {
            return Finding::high(format!("matches the configured high-risk entry `{pat}`"));
        }
    }
    let destructive_or_high = inner_danger(name, argv, ctx);
    if let Some(f) = destructive_or_high {
        return f;
    }
    if all_literal {
        for pat in BUILTIN_WHITELIST
            .iter()
            .copied()
            .map(str::to_owned)
            .chain(ctx.policy.whitelist.iter().cloned())
        {
            if pattern_matches(&pat, &words, true) {
                return Finding::low(format!("matches the whitelist entry `{pat}`"));
            }
        }
    }

    if let Some(f) = wrappers::classify_wrapper(name, argv, ctx) {
        return f;
    }
    if DISK.contains(&name) || name.starts_with("mkfs") {
        return Finding::destructive(format!("`{name}` formats or partitions a disk"));
    }
    if NETWORK.contains(&name) {
        return Finding::network(format!("`{name}` reaches the network"));
    }
    if name.eq_ignore_ascii_case("powershell")
        || name.eq_ignore_ascii_case("powershell.exe")
        || name.eq_ignore_ascii_case("pwsh")
    {
        let encoded = words.iter().skip(1).any(|w| {
            let l = w.to_ascii_lowercase();
            l.starts_with('-')
                && l.len() >= 2
                && ("-encodedcommand".starts_with(&l)
                    && l.len() >= 2
                    && l != "-"
                    && (l.starts_with("-e") || l == "-ec"))
        });
        if encoded {
            return Finding::high("`powershell -EncodedCommand` runs a hidden script");
        }
        return Finding::medium("runs PowerShell");
    }
    if HIGH.contains(&name) {
        return Finding::high(format!("`{name}` is on the high-risk list"));
    }
    if let Some(lang) = inline::lang_of(name) {
        return inline::classify_interpreter(lang, name, &argv[1..], ctx);
    }
    match name {
        "chmod" | "chown" | "chgrp" => {
            let mut f = if has_flag(&words, 'R', "--recursive") {
                Finding::high(format!("`{name} -R` changes permissions recursively"))
            } else {
                Finding::medium(format!("`{name}` changes file permissions"))
            };
            // The first operand is the mode or owner.
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')).skip(1) {
                if !path_inside(w, ctx) {
                    f = f.merge(Finding::outside_high(format!(
                        "`{name}` changes {w}, outside the workspace"
                    )));
                }
            }
            return f;
        }
        "export" | "declare" | "typeset" | "readonly" | "local" => {
            let mut f = Finding::medium(format!("`{name}` sets shell variables"));
            for w in words.iter().skip(1) {
                if let Some((var, _)) = w.split_once('=') {
                    if dangerous_env(var) {
                        f = f.merge(Finding::hijack(var));
                    }
                }
            }
            return f;
        }
        "alias" => {
            // An alias body is a script that may run later in the same shell.
            let mut f = Finding::medium("`alias` defines a command");
            for w in words.iter().skip(1) {
                if let Some((_, body)) = w.split_once('=') {
                    f = f.merge(wrappers::script(body, ctx).within("the alias runs"));
                }
            }
            return f;
        }
        "eval" => {
            let f = Finding::medium("`eval` runs a computed script");
            return if all_literal {
                f.merge(wrappers::script(&words[1..].join(" "), ctx).within("`eval`"))
            } else {
                f
            };
        }
        "source" | "." => return Finding::medium("runs a script file in the shell"),
        "find" => return classify_find(&words, argv, ctx),
        _ => {}
    }
    if SHELLS.contains(&name) {
        return classify_shell(name, argv, ctx);
    }
    if name == "git" {
        if !all_literal {
            return Finding::medium("`git` with computed arguments");
        }
        let args: Vec<String> = words[1..].iter().map(|s| (*s).to_owned()).collect();
        return match git::classify_cli(&args) {
            GitClass::ReadOnly => Finding::low("read-only git"),
            GitClass::Write { reason } => Finding::medium(reason),
            GitClass::High { reason } => Finding::high(reason),
            GitClass::Elevated { reason, network } => {
                if network {
                    Finding::network(reason)
                } else {
                    Finding::elevated(reason)
                }
            }
        };
    }
    if name == "cd" {
        // Later commands of the list run there: follow it, so `cd .. && rm -rf x` is
        // judged from the right place. An unknown target counts as outside.
        let target = words.get(1).copied().filter(|t| !t.starts_with('-'));
        let next = match (target, all_literal) {
            (Some(t), true) if !t.starts_with('~') => {
                jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), t)
                    .map(|r| r.abs)
                    .unwrap_or_else(|_| PathBuf::from("/"))
            }
            _ => PathBuf::from("/"),
        };
        let inside = next.starts_with(&ctx.root);
        *ctx.cwd.borrow_mut() = next;
        return if inside && all_literal {
            Finding::low("`cd` inside the workspace")
        } else {
            Finding::outside("`cd` leaves the workspace")
        };
    }
    // Reading outside the workspace needs an approval; what the command does besides
    // (`sed -i`, `sort -o`) is rated too, and the worse counts.
    let mut read_outside = None;
    if READ_ONLY.contains(&name) || matches!(name, "rg" | "find" | "sed") {
        if !matches!(
            name,
            "echo"
                | "printf"
                | "which"
                | "type"
                | "expr"
                | "test"
                | "["
                | "seq"
                | "sleep"
                | "whereis"
                | "basename"
                | "dirname"
        ) {
            // `sed SCRIPT FILE…`: the script (`/re/d`) is not a path.
            let sed_script = (name == "sed"
                && !words.iter().any(|w| {
                    matches!(*w, "-e" | "-f" | "--expression" | "--file")
                        || w.starts_with("--expression=")
                        || w.starts_with("--file=")
                }))
            .then(|| words.iter().skip(1).position(|w| !w.starts_with('-')))
            .flatten()
            .map(|p| p + 1);
            let outside = words
                .iter()
                .enumerate()
                .skip(1)
                .filter(|(i, _)| Some(*i) != sed_script)
                .map(|(_, w)| w)
                .filter(|w| !w.starts_with('-') || w.contains('/'))
                .find(|w| {
                    let path = w
                        .split_once('=')
                        .map(|(_, v)| v)
                        .filter(|_| w.starts_with("--"))
                        .unwrap_or(w);
                    (path.starts_with('/')
                        || path.starts_with('~')
                        || path.starts_with("..")
                        || path.contains("/.."))
                        && !matches!(
                            path,
                            "/dev/null" | "/dev/stdin" | "/dev/stdout" | "/dev/stderr"
                        )
                        && !path_inside(path, ctx)
                });
            if let Some(p) = outside {
                read_outside = Some(Finding::outside(format!(
                    "`{name}` reads {p}, outside the workspace"
                )));
            }
        }
        if read_outside.is_none() && !ctx.cwd.borrow().starts_with(&ctx.root) {
            read_outside = Some(Finding::outside(format!(
                "`{name}` runs outside the workspace"
            )));
        }
    }
    let finding = match name {
        "rg" => {
            if words
                .iter()
                .any(|w| w.starts_with("--pre") || *w == "-z" || *w == "--search-zip")
            {
                Finding::medium("`rg --pre`/`-z` runs other programs")
            } else {
                Finding::low("`rg` only reads")
            }
        }
        "sed" => {
            let in_place = words.iter().skip(1).any(|w| {
                *w == "-i"
                    || w.starts_with("--in-place")
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains('i'))
            });
            let simple_print = words.len() >= 3 && words[1] == "-n" && is_sed_print(words[2]);
            if in_place {
                let mut f = Finding::medium("`sed -i` edits files in place");
                // The operands are the files, after the script unless `-e`/`-f` gave it.
                let script_given = words.iter().any(|w| {
                    matches!(*w, "-e" | "-f" | "--expression" | "--file")
                        || w.starts_with("--expression=")
                        || w.starts_with("--file=")
                });
                let mut skip_value = false;
                let mut operands = Vec::new();
                for w in words.iter().skip(1) {
                    if std::mem::take(&mut skip_value) {
                        continue;
                    }
                    if matches!(*w, "-e" | "-f" | "--expression" | "--file" | "-l") {
                        skip_value = true;
                    } else if !w.starts_with('-') {
                        operands.push(*w);
                    }
                }
                let files = if script_given {
                    &operands[..]
                } else {
                    operands.get(1..).unwrap_or(&[])
                };
                for w in files {
                    if !path_inside(w, ctx) {
                        f = Finding::outside_high(format!(
                            "`sed -i` edits {w}, outside the workspace"
                        ));
                    }
                }
                f
            } else if simple_print {
                Finding::low("`sed -n` prints lines")
            } else {
                Finding::medium("`sed` scripts can write files or run commands")
            }
        }
        "sort"
            if words
                .iter()
                .any(|w| *w == "-o" || w.starts_with("--output") || w.starts_with("-o")) =>
        {
            match option_target(&words, "-o", "--output") {
                Some(t) if !path_inside(t, ctx) => {
                    Finding::outside_high(format!("`sort -o` writes {t}, outside the workspace"))
                }
                _ => Finding::medium("`sort -o` writes a file"),
            }
        }
        "sort" if words.iter().any(|w| w.starts_with("--compress-program")) => {
            Finding::medium("`sort --compress-program` runs another program")
        }
        "tree"
            if words
                .iter()
                .any(|w| *w == "-o" || w.starts_with("--output")) =>
        {
            match option_target(&words, "-o", "--output") {
                Some(t) if !path_inside(t, ctx) => {
                    Finding::outside_high(format!("`tree -o` writes {t}, outside the workspace"))
                }
                _ => Finding::medium("`tree -o` writes a file"),
            }
        }
        "file" if words.iter().any(|w| *w == "-C" || *w == "--compile") => {
            Finding::medium("`file -C` writes a compiled magic file")
        }
        "uniq" if words.iter().skip(1).filter(|w| !w.starts_with('-')).count() > 1 => {
            Finding::medium("`uniq` with two files writes the second")
        }
        "date" if words.iter().any(|w| *w == "-s" || w.starts_with("--set")) => {
            Finding::high("`date -s` sets the clock")
        }
        "hostname" if words.len() > 1 && !words[1].starts_with('-') => {
            Finding::high("`hostname NAME` renames the machine")
        }
        "tee" => {
            let mut f = Finding::medium("`tee` writes files");
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')) {
                if matches!(*w, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty") {
                    continue;
                }
                if w.starts_with("/dev/") {
                    return Finding::destructive(format!("writes directly to the device {w}"));
                }
                if !path_inside(w, ctx) {
                    f = Finding::outside_high(format!("`tee` writes {w}, outside the workspace"));
                }
            }
            f
        }
        "cargo" => classify_cargo(&words),
        "npm" | "pnpm" | "yarn" => classify_npm(name, &words),
        "npx" => Finding::medium("`npx` may download and run packages"),
        "pip" | "pip3" | "gem" | "go" | "apt" | "apt-get" | "brew" | "yum" | "dnf" | "apk" => {
            let sub = words.get(1).copied().unwrap_or("");
            match (name, sub) {
                ("go", "test" | "build" | "vet" | "version" | "env" | "list" | "fmt") => {
                    if sub == "fmt" {
                        Finding::medium("`go fmt` rewrites files")
                    } else {
                        Finding::low(format!("`go {sub}` builds or checks code"))
                    }
                }
                (_, "install" | "get" | "update" | "upgrade" | "download" | "add" | "mod") => {
                    Finding::network(format!("`{name} {sub}` downloads packages"))
                }
                _ => Finding::medium(format!("`{name}` changes the environment")),
            }
        }
        "mv" | "cp" | "mkdir" | "touch" | "ln" | "install" | "patch" | "tar" | "zip" | "unzip"
        | "gzip" | "gunzip" => {
            let mut f = Finding::medium(format!("`{name}` changes files"));
            let dest = words.iter().skip(1).rfind(|w| !w.starts_with('-'));
            if let Some(d) = dest.filter(|d| d.starts_with("/dev/") && **d != "/dev/null") {
                if matches!(name, "cp" | "mv" | "install" | "ln" | "dd" | "tar") {
                    return Finding::destructive(format!("`{name}` writes to the device {d}"));
                }
            }
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')) {
                if !path_inside(w, ctx) && !w.is_empty() {
                    f = Finding::outside_high(format!(
                        "`{name}` touches {w}, outside the workspace"
                    ));
                }
            }
            f
        }
        n if READ_ONLY.contains(&n) => {
            if all_literal {
                Finding::low(format!("`{n}` only reads"))
            } else {
                Finding::medium(format!("`{n}` with computed arguments"))
            }
        }
        _ => Finding::medium(format!("`{name}` is not a known read-only command")),
    };
    let finding = match read_outside {
        Some(r) => r.merge(finding),
        None => finding,
    };
    if finding.safe && !all_literal {
        return finding.unsafe_();
    }
    finding
}

/// The §6.7 whitelist.
const BUILTIN_WHITELIST: &[&str] = &[
    "npm run test:*",
    "npm run lint",
    "npm run build:*",
    "npx playwright test <file>",
    "git status",
    "git diff",
    "rg <pattern>",
];

/// Matches a whitelist or high-risk pattern against the words of one command.
///
/// A pattern is words separated by spaces. A final word ending in `*` matches any word
/// with that prefix followed by any further words; `<name>` matches exactly one word
/// that is not an option; other words match exactly.
pub fn pattern_matches(pattern: &str, words: &[&str], all_literal: bool) -> bool {
    if !all_literal {
        return false;
    }
    let pat: Vec<&str> = pattern.split_whitespace().collect();
    if pat.is_empty() {
        return false;
    }
    for (i, p) in pat.iter().enumerate() {
        let last = i + 1 == pat.len();
        if last && p.ends_with('*') {
            let prefix = &p[..p.len() - 1];
            return match words.get(i) {
                Some(w) => w.starts_with(prefix),
                None => prefix.is_empty(),
            };
        }
        let Some(w) = words.get(i) else {
            return false;
        };
        if p.starts_with('<') && p.ends_with('>') {
            if w.starts_with('-') {
                return false;
            }
        } else if p != w {
            return false;
        }
    }
    words.len() == pat.len()
}

fn is_sed_print(script: &str) -> bool {
    let Some(body) = script.strip_suffix('p') else {
        return false;
    };
    let mut parts = body.split(',');
    let ok = |s: Option<&str>| {
        s.is_some_and(|s| !s.is_empty() && (s.chars().all(|c| c.is_ascii_digit()) || s == "$"))
    };
    match (parts.next(), parts.next(), parts.next()) {
        (a, None, None) => ok(a),
        (a, b, None) => ok(a) && ok(b),
        _ => false,
    }
}

fn has_flag(words: &[&str], short: char, long: &str) -> bool {
    words.iter().skip(1).any(|w| {
        *w == long
            || (w.starts_with('-') && !w.starts_with("--") && w.chars().skip(1).any(|c| c == short))
    })
}

/// Destructive and high-risk checks that look at arguments (`rm -rf /`, `dd of=/dev/…`,
/// recursive permission changes outside the workspace).
fn inner_danger(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Option<Finding> {
    let words: Vec<&str> = argv.iter().map(|a| a.as_deref().unwrap_or("")).collect();
    match name {
        "rm" | "del" | "rd" | "rmdir" | "shred" | "unlink" | "srm" => {
            let recursive = has_flag(&words, 'r', "--recursive")
                || has_flag(&words, 'R', "--recursive")
                || words.iter().any(|w| w.eq_ignore_ascii_case("/s"));
            if words.contains(&"--no-preserve-root") {
                return Some(Finding::destructive(
                    "`rm --no-preserve-root` can delete the whole system",
                ));
            }
            let mut after_ddash = false;
            for (i, a) in argv.iter().enumerate().skip(1) {
                let Some(w) = a.as_deref() else {
                    if recursive {
                        return Some(Finding::destructive(
                            "a recursive delete of a path computed at run time",
                        ));
                    }
                    continue;
                };
                if w == "--" {
                    after_ddash = true;
                    continue;
                }
                if w.starts_with('-') && !after_ddash {
                    continue;
                }
                let _ = i;
                if dangerous_delete_target(w, ctx) {
                    return Some(if recursive || name == "rd" {
                        Finding::destructive(format!(
                            "a recursive delete of {w}, outside the workspace"
                        ))
                    } else {
                        Finding::outside_high(format!("deletes {w}, outside the workspace"))
                    });
                }
            }
            None
        }
        "dd" => {
            let mut f = Finding::high("`dd` copies raw data");
            for w in &words[1..] {
                if let Some(target) = w.strip_prefix("of=") {
                    if target.starts_with("/dev/") && target != "/dev/null" {
                        return Some(Finding::destructive(format!(
                            "`dd` writes directly to the device {target}"
                        )));
                    }
                    if target != "/dev/null" && !path_inside(target, ctx) {
                        f = Finding::outside_high(format!(
                            "`dd` writes {target}, outside the workspace"
                        ));
                    }
                }
            }
            Some(f)
        }
        "truncate" => {
            let mut skip_value = false;
            for w in &words[1..] {
                if std::mem::take(&mut skip_value) {
                    continue;
                }
                if matches!(*w, "-s" | "-r" | "--size" | "--reference") {
                    skip_value = true;
                    continue;
                }
                if !w.starts_with('-') && !path_inside(w, ctx) {
                    return Some(Finding::outside_high(format!(
                        "`truncate` empties {w}, outside the workspace"
                    )));
                }
            }
            None
        }
        "chmod" | "chown" | "chgrp" => {
            let recursive = has_flag(&words, 'R', "--recursive");
            if recursive {
                for w in words.iter().skip(2).filter(|w| !w.starts_with('-')) {
                    if dangerous_delete_target(w, ctx) {
                        return Some(Finding::destructive(format!(
                            "`{name} -R` on {w}, outside the workspace"
                        )));
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// Whether deleting `target` reaches outside the workspace (or is the root or home).
fn dangerous_delete_target(target: &str, ctx: &Ctx<'_>) -> bool {
    if target.starts_with('~') || target.starts_with("$HOME") {
        return true;
    }
    let t = target.trim_end_matches('*');
    let t = if t.is_empty() { "." } else { t };
    if t == "/" || t.chars().all(|c| c == '/') {
        return true;
    }
    if t.starts_with('~') {
        return true;
    }
    match jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), t) {
        // The workspace root itself counts: deleting all of it is not an edit.
        Ok(r) => !r.inside || r.abs == ctx.root,
        Err(_) => true,
    }
}

/// The value of an option that names a file (`-o FILE`, `-oFILE`, `--output=FILE`).
fn option_target<'a>(words: &[&'a str], short: &str, long: &str) -> Option<&'a str> {
    for (i, w) in words.iter().enumerate().skip(1) {
        if *w == short || *w == long {
            return words.get(i + 1).copied();
        }
        if let Some(v) = w.strip_prefix(long).and_then(|v| v.strip_prefix('=')) {
            return Some(v);
        }
        if w.len() > short.len() && w.starts_with(short) && !w.starts_with("--") {
            return Some(&w[short.len()..]);
        }
    }
    None
}

fn classify_shell(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    // `sh -c SCRIPT`, `bash -lc SCRIPT`, `bash -e -o pipefail -c SCRIPT`.
    let mut i = 1;
    let mut script = None;
    let mut stdin_flag = false;
    while i < argv.len() {
        let Some(w) = argv[i].as_deref() else {
            return Finding::medium(format!("`{name}` with computed arguments"));
        };
        if w == "--" || w == "-" {
            i += 1;
            stdin_flag |= w == "-";
            break;
        }
        if matches!(w, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if w.starts_with("--") {
            i += 1;
            continue;
        }
        if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
            if w.starts_with('-') && w.contains('c') {
                script = argv.get(i + 1).cloned();
                if script.is_none() {
                    return Finding::medium(format!("`{name} -c` without a script"));
                }
                break;
            }
            stdin_flag |= w.starts_with('-') && w.contains('s');
            i += 1;
            continue;
        }
        break;
    }
    match script {
        Some(Some(s)) => wrappers::script(&s, ctx).within(&format!("`{name} -c`")),
        Some(None) => Finding::medium(format!("`{name} -c` of a computed script")),
        None if i < argv.len() && !stdin_flag => Finding::high(format!(
            "`{name}` runs the script file {}, which cannot be checked",
            lit(argv, i).unwrap_or("(computed)")
        )),
        None => match ctx.stdin() {
            Stdin::Text(text) => {
                // The script's own commands do not read it again.
                let g = ctx.with_stdin(Stdin::Terminal, || wrappers::script(&text, ctx));
                if g.risk == RiskLevel::High {
                    g.within("feeds a script to a shell")
                } else {
                    g.at_least(RiskLevel::High, "feeds a script to a shell")
                }
            }
            Stdin::Computed => Finding::unverifiable(
                "pipes computed text into a shell, so what runs cannot be checked",
            ),
            Stdin::File | Stdin::Terminal => Finding::high(format!(
                "`{name}` runs a script from a file or standard input, which cannot be checked"
            )),
        },
    }
}

fn classify_find(words: &[&str], argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let mut f = Finding::low("`find` only lists files");
    let roots: Vec<&str> = words
        .iter()
        .skip(1)
        .take_while(|w| !w.starts_with('-') && **w != "(" && **w != "!")
        .copied()
        .collect();
    let outside = roots
        .iter()
        .find(|r| r.starts_with('~') || !path_inside(r, ctx))
        .copied();
    if let Some(r) = outside {
        f = Finding::outside(format!("`find` reads {r}, outside the workspace"));
    }
    let mut i = 1;
    while i < words.len() {
        let w = words[i];
        match w {
            "-delete" if outside.is_some() => {
                f = f.merge(Finding::destructive("`find -delete` outside the workspace"))
            }
            "-delete" => f = f.merge(Finding::high("`find -delete` deletes files")),
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = words[i + 1..]
                    .iter()
                    .position(|x| *x == ";" || *x == "+")
                    .map(|p| i + 1 + p)
                    .unwrap_or(words.len());
                // Under an outside root, `{}` names files outside the workspace.
                let cmd: Vec<Option<String>> = argv[i + 1..end]
                    .iter()
                    .map(|a| match (a.as_deref(), outside) {
                        (Some(x), Some(root)) if x.contains("{}") => {
                            Some(x.replace("{}", &format!("{}/{{}}", root.trim_end_matches('/'))))
                        }
                        _ => a.clone(),
                    })
                    .collect();
                let g = ctx
                    .with_stdin(Stdin::Computed, || wrappers::inner(&cmd, ctx))
                    .unsafe_()
                    .within(&format!("`find {w}` runs a command for each file"));
                f = f.merge(g);
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                let target = words.get(i + 1).copied().unwrap_or("");
                f = f.merge(if path_inside(target, ctx) {
                    Finding::medium(format!("`find {w}` writes a file"))
                } else {
                    Finding::outside_high(format!(
                        "`find {w}` writes {target}, outside the workspace"
                    ))
                });
            }
            _ => {}
        }
        i += 1;
    }
    f
}

fn classify_cargo(words: &[&str]) -> Finding {
    let sub = words
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('+') && !w.starts_with('-'))
        .copied()
        .unwrap_or("");
    match sub {
        "check" | "test" | "build" | "clippy" | "doc" | "tree" | "metadata" | "bench"
        | "nextest" | "" => {
            if words.contains(&"--fix") {
                Finding::medium("`cargo --fix` rewrites files")
            } else {
                Finding::low(format!("`cargo {sub}` builds or checks code"))
            }
        }
        "fmt" if words.contains(&"--check") => Finding::low("`cargo fmt --check` only checks"),
        "fmt" => Finding::medium("`cargo fmt` rewrites files"),
        "install" | "add" | "update" | "publish" | "login" | "search" | "fetch" => {
            Finding::network(format!("`cargo {sub}` reaches the network"))
        }
        _ => Finding::medium(format!("`cargo {sub}` may run arbitrary code")),
    }
}

fn classify_npm(name: &str, words: &[&str]) -> Finding {
    let sub = words.get(1).copied().unwrap_or("");
    match sub {
        "test" | "t" | "ls" | "list" | "--version" | "-v" | "outdated" | "view" => {
            Finding::low(format!("`{name} {sub}` only reads or tests"))
        }
        "install" | "i" | "ci" | "add" | "update" | "publish" | "exec" | "dlx" => {
            Finding::network(format!("`{name} {sub}` downloads or publishes packages"))
        }
        _ => Finding::medium(format!("`{name} {sub}` runs a project script")),
    }
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
