//! Commands built by hiding a program inside wrappers, shells, schedulers,
//! interpreters and compositions, and the invariant they must keep: the composite is
//! never rated below the program it contains, and never decided less strictly in any
//! permission mode. Shared by the property test (`tests/invariant.rs`) and the
//! shell-analysis fuzz target (`fuzz/fuzz_targets/shell.rs`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionMode, RiskLevel};
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy, Verdict};

/// Simple commands (one command, maybe with a redirection): denied, high-risk, and a
/// few milder ones for contrast.
pub const PROGRAMS: &[&str] = &[
    "rm x",
    "rm -rf build",
    "rm -rf /",
    "rm -rf ~",
    "rm -rf ..",
    "curl https://example.com",
    "wget http://x",
    "sudo ls",
    "dd if=a of=b",
    "dd if=/dev/zero of=/dev/sda",
    "mkfs.ext4 /dev/sda1",
    "tee /etc/passwd",
    "cat /etc/shadow",
    "cat ~/.ssh/id_rsa",
    "LD_PRELOAD=/tmp/x.so ls",
    "PATH=/tmp ls",
    "git push",
    "git reset --hard",
    "kill 1",
    "shutdown -h now",
    "chmod -R 777 /",
    "cp a /etc/x",
    "mv a /tmp/b",
    "nc -l 1234",
    "find / -delete",
    "truncate -s 0 /var/log/x",
    "docker run x",
    "ssh host",
    "git clean -fdx",
    "npm install",
    "shred x",
    "chown -R nobody /etc",
    "python3 -c 'import shutil; shutil.rmtree(\"/\")'",
    "perl -e 'unlink \"x\"'",
    "echo x > /etc/hosts",
    "cat /etc/shadow > leak.txt",
    "echo x > /dev/sda",
    "make",
    "mv a b",
    "ls",
];

/// Programs that are not simple commands (only hidden by quoting and composition).
pub const COMPOUND_PROGRAMS: &[&str] = &[":(){ :|:& };:"];

/// Wrappers of a simple command: `{x}` is the command's words.
pub const WRAPS: &[&str] = &[
    "env {x}",
    "env FOO=1 {x}",
    "env -i {x}",
    "command {x}",
    "exec {x}",
    "nohup {x}",
    "setsid {x}",
    "timeout 5 {x}",
    "timeout -s KILL 5 {x}",
    "nice {x}",
    "nice -n 5 {x}",
    "ionice -c3 {x}",
    "stdbuf -oL {x}",
    "time {x}",
    "/usr/bin/time -p {x}",
    "flock build/.lock {x}",
    "chroot / {x}",
    "watch -x {x}",
    "screen -dm {x}",
    "screen -dmS job {x}",
    "tmux new -d {x}",
    "sudo {x}",
    "sudo -u root {x}",
    "doas {x}",
    "xargs {x}",
    "xargs -0 {x}",
    "busybox {x}",
    "strace -f {x}",
    "systemd-run --user {x}",
    "faketime 2020-01-01 {x}",
    "find . -exec {x} \\;",
    "find src -execdir {x} +",
    "FOO=1 {x}",
];

/// Ways to hand a command to something that parses it again: `{q}` is the command
/// single-quoted for the shell, `{x}` the command itself, `{d}` a here-document
/// delimiter unique to the nesting level, `{py}`, `{pl}`, `{js}`, `{rb}` inline code
/// (already quoted) that runs the command through a shell.
pub const QUOTES: &[&str] = &[
    "bash -c {q}",
    "sh -c {q}",
    "zsh -c {q}",
    "dash -c {q}",
    "bash -lc {q}",
    "bash -o pipefail -c {q}",
    "su -c {q}",
    "su root -c {q}",
    "sudo sh -c {q}",
    "nohup bash -c {q}",
    "watch {q}",
    "eval {q}",
    "echo {q} | sh",
    "sh <<< {q}",
    "bash <<'{d}'\n{x}\n{d}",
    "at now <<< {q}",
    "at now <<{d}\n{x}\n{d}",
    "echo {q} | at now",
    "batch <<< {q}",
    "flock build/.lock -c {q}",
    "tmux new -d {q}",
    "screen -dm sh -c {q}",
    "find . -exec sh -c {q} \\;",
    "python3 -c {py}",
    "perl -e {pl}",
    "node -e {js}",
    "ruby -e {rb}",
];

/// Compositions with harmless commands. `{x}` is always followed by a newline or the
/// end, so a here-document inside it stays terminated; `{bq}` is the command escaped
/// for backquotes.
pub const COMPOSES: &[&str] = &[
    "ls && {x}",
    "{x}\nls",
    "false || {x}",
    "ls | {x}",
    "{ {x}\n} | cat",
    "({x}\n)",
    "{ {x}\n}",
    "echo $({x}\n)",
    "echo `{bq}\n`",
    "cat <({x}\n)",
    "ls > >({x}\n)",
    "if true; then {x}\nfi",
    "if false; then ls; else {x}\nfi",
    "for i in 1; do {x}\ndone",
    "while true; do {x}\nbreak; done",
    "case a in a) {x}\n;; esac",
    "f() { {x}\n}; f",
    "({x}\n) & wait",
    "cat <<{d}\n$({x}\n)\n{d}",
    "V=$({x}\n) ls",
];

/// A program hidden in layers.
#[derive(Debug, Clone)]
pub struct Shape {
    /// The program, as run alone.
    pub program: &'static str,
    /// The command that hides it.
    pub command: String,
}

/// Quotes a string for the shell (single quotes).
pub fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A double-quoted string literal for Python and JavaScript (`extra` holds the
/// characters that interpolate and need a backslash: `$@` in Perl, `#` in Ruby).
fn code_string(s: &str, extra: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '\n' => out.push_str("\\n"),
            c if extra.contains(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn fill(template: &str, x: &str, depth: usize) -> String {
    let plain = code_string(x, "");
    template
        .replace("{py}", &sh_quote(&format!("import os; os.system({plain})")))
        .replace(
            "{pl}",
            &sh_quote(&format!("system({})", code_string(x, "$@"))),
        )
        .replace(
            "{js}",
            &sh_quote(&format!("require('child_process').execSync({plain})")),
        )
        .replace(
            "{rb}",
            &sh_quote(&format!("system({})", code_string(x, "#"))),
        )
        .replace("{d}", &format!("END{depth}"))
        .replace("{q}", &sh_quote(x))
        .replace("{bq}", &x.replace('\\', "\\\\").replace('`', "\\`"))
        .replace("{x}", x)
}

/// Builds a shape from choices: a program and layers `(kind, index)`, innermost first.
/// Kind 0 wraps (only while the command is still simple; a quote otherwise), 1 quotes,
/// 2 composes. Indices are taken modulo the tables, so any bytes give a valid shape.
pub fn build(program: usize, compound: bool, layers: &[(u8, u8)]) -> Shape {
    let program = if compound {
        COMPOUND_PROGRAMS[program % COMPOUND_PROGRAMS.len()]
    } else {
        PROGRAMS[program % PROGRAMS.len()]
    };
    let mut command = program.to_owned();
    let mut simple = !compound;
    for (depth, (kind, index)) in layers.iter().enumerate() {
        let i = usize::from(*index);
        let template = match kind % 3 {
            0 if simple => WRAPS[i % WRAPS.len()],
            0 | 1 => {
                simple = false;
                QUOTES[i % QUOTES.len()]
            }
            _ => {
                simple = false;
                COMPOSES[i % COMPOSES.len()]
            }
        };
        command = fill(template, &command, depth);
    }
    Shape { program, command }
}

fn strictness(d: &Decision) -> u8 {
    match d {
        Decision::Allow => 0,
        Decision::Ask => 1,
        _ => 2,
    }
}

fn risk_rank(r: &RiskLevel) -> u8 {
    match r {
        RiskLevel::Low => 0,
        RiskLevel::Medium => 1,
        _ => 2,
    }
}

/// A workspace like the corpus's: `src/`, `build/`, `target/debug`.
pub fn workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    for d in ["src", "build", "target/debug"] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    let ws = std::fs::canonicalize(&ws).expect("canonical");
    (dir, ws)
}

/// The gate's verdict on a shell command.
pub fn verdict(ws: &Path, command: &str, mode: PermissionMode) -> Verdict {
    let args = serde_json::json!({ "command": command });
    let rules = Rules::default();
    let shell = ShellPolicy::default();
    let ws = ws.to_path_buf();
    decide(&DecisionInput {
        tool: "run_shell",
        args: &args,
        mode,
        rules: &rules,
        workspace: &ws,
        roots: keel_tools::jail::Roots::none(),
        shell: &shell,
    })
}

/// The invariant: in every mode, `command` is decided at least as strictly as
/// `program` alone and rated at least as high.
pub fn check(ws: &Path, program: &str, command: &str) -> Result<(), String> {
    for mode in PermissionMode::ALL {
        let alone = verdict(ws, program, mode.clone());
        let hidden = verdict(ws, command, mode.clone());
        if strictness(&hidden.verdict.decision) < strictness(&alone.verdict.decision) {
            return Err(format!(
                "{:?}: `{command}` is {:?} ({}) but `{program}` alone is {:?} ({})",
                mode,
                hidden.verdict.decision,
                hidden.verdict.reason,
                alone.verdict.decision,
                alone.verdict.reason
            ));
        }
        if risk_rank(&hidden.verdict.risk_level) < risk_rank(&alone.verdict.risk_level) {
            return Err(format!(
                "`{command}` is rated {:?} ({}) but `{program}` alone is {:?} ({})",
                hidden.verdict.risk_level,
                hidden.verdict.reason,
                alone.verdict.risk_level,
                alone.verdict.reason
            ));
        }
    }
    Ok(())
}
