//! The permission gate's pure decision (seed 002 §6.6).

use std::path::{Path, PathBuf};

use keel_envelope::tools::PolicyVerdict;
use keel_envelope::types::PermissionMode;
use keel_envelope::ErrorCode;

/// Rules in force for a session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Always-allow rules (global and project, as synced by the host): a tool name
    /// (`edit_file`) or a tool with a pattern (`run_shell(npm run test:*)`).
    pub allow: Vec<String>,
    /// Deny rules (e.g. from an ACP `reject_always`), same syntax.
    pub deny: Vec<String>,
    /// Canonical keys approved with `allow_session`.
    pub session_keys: std::collections::BTreeSet<String>,
}

/// Shell whitelist and high-risk additions from configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellPolicy {
    /// Extra low-risk command patterns (`npm run test:*`).
    pub whitelist: Vec<String>,
    /// Extra high-risk program names or patterns.
    pub high_risk: Vec<String>,
}

/// Inputs of one decision.
#[derive(Debug, Clone)]
pub struct DecisionInput<'a> {
    /// The tool name.
    pub tool: &'a str,
    /// The arguments.
    pub args: &'a serde_json::Value,
    /// The session's mode.
    pub mode: PermissionMode,
    /// The rules.
    pub rules: &'a Rules,
    /// The workspace root (canonical).
    pub workspace: &'a PathBuf,
    /// Shell policy.
    pub shell: &'a ShellPolicy,
}

/// The gate's verdict plus what the kernel needs to act on it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// The public verdict (decision, level, risk, reason, actionType, scope).
    pub verdict: PolicyVerdict,
    /// The canonical key of this call for `allow_session` (same command with another
    /// env prefix or quoting, same file path → same key).
    pub key: String,
    /// For `deny`: the code to report (`TOOL_PERMISSION_DENIED`,
    /// `PLAN_APPROVAL_REQUIRED`, `PATH_OUTSIDE_WORKSPACE`, …).
    pub deny_code: Option<ErrorCode>,
    /// Whether running the call needs the elevated context (network, outside paths).
    pub elevated: bool,
    /// A preview for the approver: the command for shell and git, a diff for edits and
    /// writes, empty otherwise.
    pub preview: String,
    /// The shell command, for shell and git calls.
    pub command: Option<String>,
}

use keel_envelope::tools::{
    Decision, EditFileArgs, GitArgs, ListDirArgs, ReadFileArgs, RunShellArgs, SearchFilesArgs,
    WriteFileArgs,
};
use keel_envelope::types::{PermissionLevel, RiskLevel};
use keel_envelope::ErrorPayload;

use crate::git::{self, GitClass};
use crate::jail::{self, ResolvedPath};
use crate::shell::{self, ShellAnalysis};
use crate::spec::{self, Analysis, ApprovalRequirement, PlanBehavior, ToolSpec};

/// The policy part of `docs/permissions.md`.
pub const POLICY_DOC: &str = r#"
## Modes

| mode | behaviour |
|---|---|
| `ask` | reads, read-only git and low-risk shell commands run; everything else asks |
| `auto-edit` | as `ask`, and edits and writes inside the workspace run without asking (except inside `.git`); shell and git writes still ask |
| `auto` | nothing asks; the default-deny list still denies, and calls that need an approval — `elevated` calls (network, history-rewriting git, privilege escalation), reads outside the workspace (and of secret locations), shell writes outside the workspace, and shell lines that cannot be verified (unparseable, computed text piped into a shell, environment variables that change what runs) — are denied unless an allow rule or a session approval covers them, because nobody is there to approve |
| `plan` | only `read_file`, `list_dir`, `search_files` and read-only `git` run; anything else is denied with `PLAN_APPROVAL_REQUIRED` and the model is told to propose a plan (reads outside the workspace still ask) |

## Precedence

The gate evaluates, in this order, and the first step that decides wins:

1. **default-deny** (every mode, no rule overrides it): writes outside the workspace or through a symlink leaving it (`PATH_OUTSIDE_WORKSPACE`); NUL bytes and device or special files; a shell `cwd` outside the workspace; destructive shell commands (`rm -rf /`, `rm -rf ~`, recursive deletes of the whole workspace (`rm -rf .`, `rm -rf *` at the root) or of anything outside it, recursive permission changes outside the workspace, `mkfs`, `dd of=/dev/…`, writes to devices, fork bombs), wherever they hide (wrappers, `-c` scripts, here-documents, `at` jobs, inline interpreter code, substitutions), and shell lines nested deeper than the analysis follows; invalid arguments (`TOOL_ARGUMENTS_INVALID`).
2. **plan mode**: tools the matrix does not allow in plan mode are denied (`PLAN_APPROVAL_REQUIRED`); run_shell is denied whatever the command.
3. **deny rules** (global, project and session): a matching deny rule denies (`TOOL_PERMISSION_DENIED`), before any allow rule or session approval is looked at. For run_shell a deny rule matches when any simple command anywhere in the line matches (inside `&&` lists, pipes, substitutions, `sh -c` scripts, here-documents fed to a shell or `at`, wrappers such as `env`, `timeout`, `xargs`, `sudo`, `watch`, `find -exec`, and the shell commands of inline interpreter code).
4. **auto mode**: allows, except what needs an approval that no allow rule or session key covers: `elevated` calls, reads outside the workspace (file tools and shell commands), shell writes outside the workspace, reads of secret locations, and shell lines that cannot be verified (denied: unapproved network downloads, unapproved destructive git, unapproved outside access, unparseable commands, environment variables that change what runs).
5. **allow**: calls that are low risk by themselves (reads, read-only git, low-risk shell commands, and in `auto-edit` edits inside the workspace), then allow rules (global and project) and the session's `allow_session` keys.
6. **ask**: everything else.

## Rules

A rule is a tool name (`edit_file`, `run_shell`) or a tool with a pattern:

- `run_shell(PATTERN)`: PATTERN is a command of words; a final word ending in `*` matches any word with that prefix and any further words (`npm run test:*`, `cargo *`); `<name>` matches one non-option word; other words match exactly. It is matched against each simple command of the canonicalised line (leading `VAR=value` dropped, quoting normalised). An allow rule allows the line only if it is a plain list of simple commands (joined by `&&`, `||`, `;`, `|`) where every command is low risk or matched by an allow rule, with no substitution and no writing redirection.
- `git(PATTERN)`: the same pattern syntax against `SUBCOMMAND ARGS…` (`git(commit *)`).
- `read_file(GLOB)`, `list_dir(GLOB)`, `search_files(GLOB)`, `edit_file(GLOB)`, `write_file(GLOB)`: a glob on the workspace-relative path (`src/**/*.rs`). File rules, including bare tool names, never cover paths outside the workspace; only a session approval of that exact path does.

Deny rules use the same syntax and the same canonical form as allow rules, so `run_shell(rm x)` catches `rm x`, `rm  x`, `rm 'x'`, `FOO=1 rm x`, `env rm x`, `timeout 5 rm x` and `bash -c 'rm x'` alike. A word computed at run time may be anything, so a deny rule matches from the first computed word on: `run_shell(rm *)` catches `rm "$f"`, and a command whose program name is computed (`$CMD x`) is caught by every run_shell deny rule. Deny rules come from the host: `alwaysDenyGlobal` and `alwaysDenyProject` (kept with the always-allow rules in `ApprovalRules`) and `deny`, which holds for the session only (`session.set_rules`).

## Canonical keys

`allow_session` remembers the call's canonical key:

- shell: `run_shell:` and the canonical command (`FOO=1 cargo test` and `cargo test` are one key; `'a b'` and `"a b"` are one key; the wrappers that change nothing about what a command does — `env` with harmless assignments, `command`, `builtin`, `exec`, `nohup`, `time`, `timeout`, `nice`, `ionice`, `stdbuf` — are dropped, so `timeout 60 cargo test` is `cargo test`; `bash -c 'cargo test'` is `cargo test`; assignments of variables that change how programs run, such as `PATH`, `LD_PRELOAD` or `GIT_SSH_COMMAND`, are kept, also when given to `env`), plus `@CWD` when the working directory is not the root;
- git: `git:` and the canonical subcommand and arguments;
- file tools: the tool name and the resolved path (`./src/a.rs` and `src/../src/a.rs` are one key).

## Shell risk tiers

The command is parsed with a real shell parser, and every simple command found anywhere in it is rated: in `&&`/`||`/`;` lists and pipes, subshells, groups, loops and conditionals, command and process substitutions (also inside here-documents, `[[ ]]`, `(( ))` and `case` words), and whatever wrappers, shells, schedulers and interpreters run. The line gets the worst rating found: a command is never rated below, nor decided less strictly than, any program it contains (a property test and a fuzz target check this invariant).

Low-risk: the §6.7 whitelist (`npm run test:*`, `npm run lint`, `npm run build:*`, `npx playwright test <file>`, `git status`, `git diff`, `rg <pattern>`), configured whitelist entries, and read-only commands (`cat`, `ls`, `head`, `tail`, `wc`, `grep`, `rg`, `pwd`, `echo`, `find` without `-exec`/`-delete`, `sed -n Np`, `cargo check/test/build/clippy`, read-only git, …) with literal arguments inside the workspace. Medium: unknown programs, file-writing redirections, `mv`/`cp`/`mkdir` inside the workspace, compound commands, substitutions, variable expansions, `eval`, `exec`, inline interpreter code, reads outside the workspace (which also need an approval). High: the §6.7 list (`rm`/`del`, `git reset`, `git checkout --`, `git clean`, `curl`/`wget`, `powershell -EncodedCommand`), `dd`, `chmod -R`, `chown -R`, `shutdown`, `reboot`, `kill`, `sudo` and other privilege escalation, network tools, configured high-risk entries, anything that does not parse or pipes text into a shell (`echo … | sh`, `bash <<< …`; literal scripts are analysed like `sh -c`), and the cases below. Destructive commands are default-denied (above).

**Wrappers and launchers** are rated by the command they run: `env` (its assignments and `-S` strings), `command`, `builtin`, `exec`, `nohup`, `time`, `timeout`, `nice`, `ionice`, `stdbuf`, `flock` (also `-c`), `taskset`, `chrt`, `strace`, `faketime`, `busybox`, `xargs` (literal text piped into it becomes arguments: `echo / | xargs rm -rf` is `rm -rf /`), `find -exec`/`-execdir`/`-ok`/`-okdir` (under a root outside the workspace `{}` is outside too); the scripts of `sh`/`bash`/`zsh`/`dash`/`ksh`/`fish -c`, `su -c`, `runuser`, `eval`, `watch` (its arguments are a `sh -c` script, argv with `-x`), `tmux` (`new`, `neww`, `split-window`, `respawn-*`, `run-shell`, `if-shell`, `pipe-pane`, `send-keys`, `-c`), `screen` (and `screen -X stuff`), `at` and `batch` (the job given as a here-string, a here-document or `echo … |`), and scripts fed to a shell on standard input. Some add a risk of their own: `setsid`, `watch`, `screen` and `tmux` are at least medium (the command outlives or escapes its process group); `chroot`, `at`, `batch`, `systemd-run` and `nsenter` at least high (another root, or run later or elsewhere, outside the sandbox); `sudo`, `doas`, `su`, `pkexec`, `run0` and `runuser` are high and `elevated`. An assignment where a wrapper expects the program (`timeout 5 LD_PRELOAD=x ls`) counts as `env` would run it.

**Inline code**: interpreters given inline code (`python -c`, `python3 -c`, `node -e`/`-p`, `bun -e`, `deno eval`, `perl -e`/`-E`, `ruby -e`, `php -r`, `lua -e`, `Rscript -e`, `osascript -e`, an `awk` program) or reading their program from a here-document or a pipe are at least medium. They are high for calls that delete files, change permissions or kill processes (`os.remove`, `shutil.rmtree`, `unlink`, `fs.rmSync`, `FileUtils.rm_rf`, `os.kill`, `chmod`, …); for calls that run other programs (`os.system`, `subprocess`, `child_process`, `exec`, `eval`, `system`, backticks, `qx`, …), whose string literals are then analysed as shell commands, so `os.system('rm -rf /')` is default-denied like `rm -rf /`; for network access (`urllib`, `requests`, `socket`, `fetch`, `http.get`, `Net::HTTP`, `LWP`, modules loaded with `-M`/`-r`; also `elevated`); and for string literals that name a secret location or, next to a write or delete call, a path outside the workspace (these need an approval). A recursive delete (`rmtree`, `rm_rf`, `remove_tree`, `rmSync(…, {recursive})`) of the root, the home directory or anything outside the workspace is destructive, and `perl -i`/`ruby -i`/`awk -i inplace` on files outside the workspace is high. This is a textual check of the code, not an interpreter: it catches the obvious, and the sandbox contains the rest.

**High because of where or how**, and needing an approval (auto mode denies them unless a rule or a session approval covers them):

- writes outside the workspace: redirections (`>`, `>>`, `>|`, `&>`), `tee`, `cp`/`mv`/`install`/`ln`/`touch`/`mkdir`/`tar`/`unzip` with an operand outside, `dd of=`, `sed -i`, `perl -i`, `sort -o`, `tree -o`, `time -o`, `strace -o`, `find -fprint`, `truncate`, `chmod`/`chown` of paths outside;
- environment variables that change what runs or loads, set by a leading assignment, `env VAR=…`, `export`/`declare -x`/`typeset`/`readonly`/`local`, `sudo VAR=…`, `tmux -e` or a bare assignment: `PATH`, `LD_*`, `DYLD_*`, `BASH_ENV`, `ENV`, `BASH_FUNC_*`, `IFS`, `PROMPT_COMMAND`, `PYTHONPATH`, `PYTHONHOME`, `PYTHONSTARTUP`, `NODE_OPTIONS`, `NODE_PATH`, `PERL5LIB`, `PERL5OPT`, `PERLLIB`, `RUBYOPT`, `RUBYLIB`, `GIT_SSH`, `GIT_SSH_COMMAND`, `GIT_CONFIG_*`, `GIT_EXEC_PATH`, `GIT_ASKPASS`, `SSH_ASKPASS`, `JAVA_TOOL_OPTIONS`, `CLASSPATH`, `RUSTC_WRAPPER`, `HOME`, `EDITOR`, `PAGER`, `SHELL`, … (what runs cannot be checked);
- well-known secret locations outside the workspace, named by any program except those that only print their arguments (`echo`, `printf`, `basename`, …): `/etc/shadow`, `/etc/gshadow`, `/etc/sudoers` and `/etc/sudoers.d`, SSH host keys, `/etc/ssl/private`, `/root`, `/proc/*/environ`, `~/.ssh`, `~/.aws`, `~/.kube`, `~/.gnupg`, `~/.azure`, `~/.password-store`, `~/.config/gcloud`, `~/.config/gh`, `~/.docker/config.json`, `~/.cargo/credentials`, `~/.netrc`, `~/.git-credentials`, `~/.npmrc`, `~/.pypirc`, `~/.pgpass`, private keys named `id_*`, and `.env`/`.env.*` files; also written `$HOME/…`, read through `< FILE`, `--opt=FILE`, `if=FILE` or `@FILE`.

**Limits.** A line nested more than 6 shells or substitutions deep, or 16 wrappers deep, is denied in every mode, so nothing can hide below the limit. A line that does not parse is high and needs an approval; its pieces that parse alone are still analysed, and a destructive piece denies the whole line. Lines longer than 64 KiB or nested more than 32 brackets deep are not parsed.

Network commands (`curl`, `wget`, `ssh`, `git push/fetch/pull`, package installs, inline code that reaches the network) are `elevated`: when approved, run_shell runs them with the network; otherwise the sandbox has no network.

## Sandbox

On Linux, run_shell runs inside bubblewrap when it is available: the workspace is writable (its `.git` stays read-only), `/tmp` is private, everything else is read-only, the network is unshared unless the call was approved at the `elevated` level, the command gets its own PID namespace and dies with the runtime. `SandboxConfig { enabled: false }` turns it off. When bubblewrap is missing or cannot start a sandbox (for example without user namespaces), commands run unsandboxed: `keel_tools::sandbox_status()` says why, every result carries `sandboxed: false`, and the first such call of the process emits an `info` progress chunk. Either way the command runs in its own process group, and on timeout, cancellation or exit the whole group is killed. The `git` tool runs unsandboxed, always with the pager, external diff, textconv and fsmonitor disabled and no terminal prompts.
"#;

/// A parsed allow or deny rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// The tool name.
    pub tool: String,
    /// The pattern, when given.
    pub pattern: Option<String>,
}

impl Rule {
    /// Parses `tool` or `tool(pattern)`. Returns `None` for malformed rules.
    pub fn parse(text: &str) -> Option<Rule> {
        let text = text.trim();
        if let Some(open) = text.find('(') {
            let inner = text[open + 1..].strip_suffix(')')?;
            let tool = text[..open].trim();
            if tool.is_empty() {
                return None;
            }
            let pattern = inner.trim();
            Some(Rule {
                tool: tool.to_owned(),
                pattern: (!pattern.is_empty()).then(|| pattern.to_owned()),
            })
        } else if text.is_empty() {
            None
        } else {
            Some(Rule {
                tool: text.to_owned(),
                pattern: None,
            })
        }
    }
}

/// What a rule is matched against.
#[derive(Debug, Clone)]
enum Target {
    /// A shell line.
    Shell(Box<ShellAnalysis>),
    /// A git invocation's words.
    Git(Vec<String>),
    /// A path inside the workspace (relative).
    Path(String),
    /// A path outside the workspace: no rule matches.
    Outside,
    /// Nothing to match (custom tools): bare rules only.
    Bare,
}

/// Everything the gate works out about one call before applying the mode.
#[derive(Debug, Clone)]
struct Assessment {
    level: PermissionLevel,
    risk: RiskLevel,
    reason: String,
    action_type: String,
    scope: Vec<String>,
    /// Low risk by itself (allowed outside plan mode; in plan mode when `plan_ok`).
    safe: bool,
    /// May run in plan mode.
    plan_ok: bool,
    /// An edit inside the workspace (allowed in auto-edit).
    edit_like: bool,
    /// Default-denied.
    hard_deny: Option<ErrorCode>,
    elevated: bool,
    /// Auto mode needs a rule for it.
    needs_rule_in_auto: bool,
    preview: String,
    command: Option<String>,
    key: String,
    target: Target,
}

impl Assessment {
    fn new(
        level: PermissionLevel,
        risk: RiskLevel,
        reason: impl Into<String>,
        action: &str,
        scope: &[&str],
        key: String,
    ) -> Self {
        Self {
            level,
            risk,
            reason: reason.into(),
            action_type: action.to_owned(),
            scope: scope.iter().map(|s| (*s).to_owned()).collect(),
            safe: false,
            plan_ok: false,
            edit_like: false,
            hard_deny: None,
            elevated: false,
            needs_rule_in_auto: false,
            preview: String::new(),
            command: None,
            key,
            target: Target::Bare,
        }
    }

    fn denied(
        code: ErrorCode,
        level: PermissionLevel,
        reason: impl Into<String>,
        action: &str,
        key: String,
    ) -> Self {
        let mut a = Self::new(level, RiskLevel::High, reason, action, &[], key);
        a.hard_deny = Some(code);
        a
    }
}

fn parse<T: serde::de::DeserializeOwned>(args: &serde_json::Value) -> Result<T, ErrorPayload> {
    let v = if args.is_null() {
        serde_json::Value::Object(Default::default())
    } else {
        args.clone()
    };
    serde_path_to_error::deserialize(v).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("invalid arguments: {}", e.inner()),
        )
        .with_detail("field", e.path().to_string())
    })
}

fn path_key(tool: &str, r: &ResolvedPath) -> String {
    format!("{tool}:{}", r.display)
}

fn assess_read(tool: &str, action: &str, raw: &str, ws: &Path) -> Assessment {
    match jail::resolve(ws, raw) {
        Err(e) => Assessment::denied(
            e.code,
            PermissionLevel::Read,
            e.message,
            action,
            format!("{tool}:{raw}"),
        ),
        Ok(r) if r.inside => {
            let mut a = Assessment::new(
                PermissionLevel::Read,
                RiskLevel::Low,
                format!("reads `{}` inside the workspace", r.display),
                action,
                &["filesystem:workspace:read"],
                path_key(tool, &r),
            );
            a.safe = true;
            a.plan_ok = true;
            a.target = Target::Path(r.display);
            a
        }
        Ok(r) => {
            let mut a = Assessment::new(
                PermissionLevel::Elevated,
                RiskLevel::High,
                format!(
                    "reads `{}`, outside the workspace; this needs an elevated approval",
                    r.display
                ),
                action,
                &["filesystem:outside:read"],
                path_key(tool, &r),
            );
            a.plan_ok = true;
            a.elevated = true;
            a.needs_rule_in_auto = true;
            a.target = Target::Outside;
            a
        }
    }
}

fn write_target(tool: &str, raw: &str, ws: &Path) -> Result<ResolvedPath, Box<Assessment>> {
    match jail::resolve(ws, raw) {
        Err(e) => Err(Box::new(Assessment::denied(e.code, PermissionLevel::Write, e.message, "file.write", format!("{tool}:{raw}")))),
        Ok(r) if !r.inside => Err(Box::new(Assessment::denied(
            ErrorCode::PathOutsideWorkspace,
            PermissionLevel::Write,
            format!("`{raw}` resolves to `{}`, outside the workspace; writes outside the workspace are denied", r.display),
            "file.write",
            path_key(tool, &r),
        ))),
        Ok(r) if r.is_dir => Err(Box::new(Assessment::denied(ErrorCode::ToolArgumentsInvalid, PermissionLevel::Write, format!("`{raw}` is a directory"), "file.write", path_key(tool, &r)))),
        Ok(r) => Ok(r),
    }
}

fn in_git_dir(rel: &str) -> bool {
    rel == ".git" || rel.starts_with(".git/") || rel.contains("/.git/")
}

fn ctx_for(ws: &Path) -> crate::ToolContext {
    crate::ToolContext {
        workspace: ws.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: std::sync::Arc::new(|_, _| {}),
        elevated: false,
        sandbox: crate::SandboxConfig::default(),
    }
}

fn assess_edit(args: &EditFileArgs, ws: &Path) -> Assessment {
    let r = match write_target("edit_file", &args.path, ws) {
        Ok(r) => r,
        Err(a) => return *a,
    };
    let mut a = Assessment::new(
        PermissionLevel::Write,
        RiskLevel::Medium,
        format!("edits `{}` inside the workspace", r.display),
        "file.edit",
        &["filesystem:workspace:write"],
        path_key("edit_file", &r),
    );
    a.preview = match crate::fs::plan_edit(args, &ctx_for(ws)) {
        Ok((_, old, new, _)) => crate::edit::unified_diff(&r.display, &old, &new).0,
        Err(e) => format!("(the edit cannot be applied: {})", e.message),
    };
    a.edit_like = !in_git_dir(&r.display);
    if in_git_dir(&r.display) {
        a.risk = RiskLevel::High;
        a.reason = format!("edits `{}` inside `.git`", r.display);
    }
    a.target = Target::Path(r.display);
    a
}

fn assess_write(args: &WriteFileArgs, ws: &Path) -> Assessment {
    let r = match write_target("write_file", &args.path, ws) {
        Ok(r) => r,
        Err(a) => return *a,
    };
    let mut a = if r.exists {
        let mut a = Assessment::new(
            PermissionLevel::Write,
            RiskLevel::High,
            format!("overwrites the existing file `{}`", r.display),
            "file.overwrite",
            &["filesystem:workspace:write"],
            path_key("write_file", &r),
        );
        let old = jail::read_regular(&r.abs)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        a.preview = crate::edit::unified_diff(&r.display, &old, &args.content).0;
        a
    } else {
        let mut a = Assessment::new(
            PermissionLevel::Write,
            RiskLevel::Medium,
            format!("creates `{}` inside the workspace", r.display),
            "file.write",
            &["filesystem:workspace:write"],
            path_key("write_file", &r),
        );
        a.preview = crate::edit::unified_diff(&r.display, "", &args.content).0;
        a
    };
    a.edit_like = !in_git_dir(&r.display);
    if in_git_dir(&r.display) {
        a.risk = RiskLevel::High;
        a.reason = format!("writes `{}` inside `.git`", r.display);
    }
    a.target = Target::Path(r.display);
    a
}

fn assess_shell(args: &RunShellArgs, ws: &Path, policy: &ShellPolicy) -> Assessment {
    let root = jail::canonical_root(ws);
    let (cwd_abs, cwd_rel) = match args.cwd.as_deref() {
        None | Some("") => (root.clone(), ".".to_owned()),
        Some(c) => match jail::resolve(ws, c) {
            Ok(r) if r.inside && r.is_dir => (r.abs, r.display),
            Ok(r) if r.inside => {
                return Assessment::denied(
                    ErrorCode::ToolArgumentsInvalid,
                    PermissionLevel::Execute,
                    format!("`cwd` `{c}` is not an existing directory"),
                    "shell.execute",
                    format!("run_shell:{}", args.command),
                );
            }
            Ok(r) => {
                return Assessment::denied(ErrorCode::PathOutsideWorkspace, PermissionLevel::Execute, format!("`cwd` `{c}` resolves to `{}`, outside the workspace; commands run inside the workspace only", r.display), "shell.execute", format!("run_shell:{}", args.command));
            }
            Err(e) => {
                return Assessment::denied(
                    e.code,
                    PermissionLevel::Execute,
                    e.message,
                    "shell.execute",
                    format!("run_shell:{}", args.command),
                )
            }
        },
    };
    if args.command.contains('\0') {
        return Assessment::denied(
            ErrorCode::ToolArgumentsInvalid,
            PermissionLevel::Execute,
            "the command contains a NUL byte",
            "shell.execute",
            "run_shell:".to_owned(),
        );
    }
    let an = shell::analyze(&args.command, &root, Some(&cwd_abs), policy);
    let key = if cwd_rel == "." {
        format!("run_shell:{}", an.canonical)
    } else {
        format!("run_shell:{}@{cwd_rel}", an.canonical)
    };
    let level = if an.elevated {
        PermissionLevel::Elevated
    } else {
        PermissionLevel::Execute
    };
    let mut scope = vec!["process:spawn", "filesystem:workspace"];
    if an.network {
        scope.push("network");
    }
    let mut a = Assessment::new(
        level,
        an.risk,
        an.reason.clone(),
        "shell.execute",
        &scope,
        key,
    );
    if an.destructive {
        a.hard_deny = Some(ErrorCode::ToolPermissionDenied);
        a.reason = format!("default-denied: {}", an.reason);
    }
    a.safe = an.safe;
    a.elevated = an.elevated;
    a.needs_rule_in_auto = an.elevated || an.needs_approval;
    a.preview = args.command.clone();
    a.command = Some(args.command.clone());
    a.target = Target::Shell(Box::new(an));
    a
}

fn git_words(args: &GitArgs) -> Vec<String> {
    let mut w = vec![args.command.clone()];
    w.extend(args.args.clone().unwrap_or_default());
    w
}

fn assess_git(args: &GitArgs) -> Assessment {
    let words = git_words(args);
    let canonical = words
        .iter()
        .map(|w| shell::quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    let key = format!("git:{canonical}");
    if let Err(e) = git::validate_subcommand(&args.command) {
        return Assessment::denied(
            ErrorCode::ToolArgumentsInvalid,
            PermissionLevel::Execute,
            e.message,
            "git.execute",
            key,
        );
    }
    let rest = args.args.clone().unwrap_or_default();
    let mut a = match git::classify(&args.command, &rest) {
        GitClass::ReadOnly => {
            let mut a = Assessment::new(
                PermissionLevel::Read,
                RiskLevel::Low,
                format!("`git {}` only reads the repository", args.command),
                "git.read",
                &["process:spawn", "git:read"],
                key,
            );
            a.safe = true;
            a.plan_ok = true;
            a
        }
        GitClass::Write { reason } => Assessment::new(
            PermissionLevel::Execute,
            RiskLevel::Medium,
            reason,
            "git.write",
            &["process:spawn", "git:write"],
            key,
        ),
        GitClass::High { reason } => Assessment::new(
            PermissionLevel::Execute,
            RiskLevel::High,
            reason,
            "git.write",
            &["process:spawn", "git:write"],
            key,
        ),
        GitClass::Elevated { reason, network } => {
            let scope: &[&str] = if network {
                &["process:spawn", "git:write", "network"]
            } else {
                &["process:spawn", "git:history"]
            };
            let mut a = Assessment::new(
                PermissionLevel::Elevated,
                RiskLevel::High,
                reason,
                if network {
                    "git.network"
                } else {
                    "git.history"
                },
                scope,
                key,
            );
            a.elevated = true;
            a.needs_rule_in_auto = true;
            a
        }
    };
    a.preview = format!("git {canonical}");
    a.command = Some(a.preview.clone());
    a.target = Target::Git(words);
    a
}

fn assess_custom(spec: &ToolSpec, args: &serde_json::Value) -> Assessment {
    let key = format!(
        "{}:{}",
        spec.name,
        serde_json::to_string(args).unwrap_or_default()
    );
    let scope = format!("tool:{}", spec.name);
    Assessment::new(
        spec.level,
        spec.risk,
        format!(
            "runs the tool `{}` (level {})",
            spec.name,
            spec::level_str(spec.level)
        ),
        &spec.action_type,
        &[scope.as_str()],
        key,
    )
}

/// The row of `tool`: the given spec, else the built-in or kernel row of that name,
/// else the row of an undeclared tool (execute level, always asks, refused in plan
/// mode).
fn row_of(tool: &str, spec: Option<&ToolSpec>) -> ToolSpec {
    if let Some(s) = spec {
        return s.clone();
    }
    spec::builtin_spec(tool)
        .or_else(|| spec::kernel_specs().into_iter().find(|s| s.name == tool))
        .unwrap_or_else(|| {
            ToolSpec::custom(
                tool,
                "",
                serde_json::Value::Null,
                PermissionLevel::Execute,
                PlanBehavior::Denied,
                ApprovalRequirement::Always,
            )
        })
}

/// Applies the row to the analysis of one call: the row's level and risk are
/// floors, its plan behaviour and approval requirement decide unless they say
/// "depends" (`Partial` / `Depends`), in which case the analysis decides. An elevated
/// call always needs approval.
fn apply_row(a: &mut Assessment, row: &ToolSpec) {
    if a.hard_deny.is_some() {
        return;
    }
    if row.level > a.level {
        a.level = row.level;
    }
    if a.level == PermissionLevel::Elevated {
        a.elevated = true;
        a.needs_rule_in_auto = true;
    }
    if row.risk > a.risk {
        a.risk = row.risk;
    }
    match row.plan {
        PlanBehavior::Allowed => a.plan_ok = true,
        PlanBehavior::Denied => a.plan_ok = false,
        PlanBehavior::Partial => {}
    }
    match row.approval {
        ApprovalRequirement::Never => a.safe = true,
        ApprovalRequirement::Always => a.safe = false,
        ApprovalRequirement::Depends => {}
    }
    if a.elevated {
        a.safe = false;
    }
}

/// The action type an analysis reports when it has nothing more specific to say; it
/// stands for the row's own action type.
fn generic_action(analysis: Analysis) -> &'static str {
    match analysis {
        Analysis::None => "tool.execute",
        Analysis::ReadPath => "file.read",
        Analysis::ListPath => "directory.list",
        Analysis::SearchPath => "file.search",
        Analysis::Edit => "file.edit",
        Analysis::Write => "file.write",
        Analysis::Shell => "shell.execute",
        Analysis::Git => "git.execute",
    }
}

/// The analysis of one call, named by its row, then the row applied to it.
fn assess(input: &DecisionInput<'_>, spec: Option<&ToolSpec>) -> Assessment {
    let row = row_of(input.tool, spec);
    let mut a = analyse(input, &row);
    // The analysis may refine the action (`git.read`, `file.overwrite`); otherwise
    // the row's action stands.
    if a.action_type == generic_action(row.analysis) {
        a.action_type = row.action_type.clone();
    }
    apply_row(&mut a, &row);
    a
}

fn analyse(input: &DecisionInput<'_>, row: &ToolSpec) -> Assessment {
    let ws = input.workspace.as_path();
    let tool = row.name.as_str();
    let action = row.action_type.as_str();
    macro_rules! args {
        ($t:ty) => {
            match parse::<$t>(input.args) {
                Ok(a) => a,
                Err(e) => {
                    return Assessment::denied(
                        ErrorCode::ToolArgumentsInvalid,
                        row.level,
                        format!("{tool}: {}", e.message),
                        action,
                        format!("{tool}:invalid"),
                    )
                }
            }
        };
    }
    match row.analysis {
        Analysis::None => assess_custom(row, input.args),
        Analysis::ReadPath => {
            let a = args!(ReadFileArgs);
            assess_read(tool, action, &a.path, ws)
        }
        Analysis::ListPath => {
            let a = args!(ListDirArgs);
            assess_read(tool, action, &a.path, ws)
        }
        Analysis::SearchPath => {
            let a = args!(SearchFilesArgs);
            assess_read(tool, action, a.path.as_deref().unwrap_or("."), ws)
        }
        Analysis::Edit => {
            let a = args!(EditFileArgs);
            assess_edit(&a, ws)
        }
        Analysis::Write => {
            let a = args!(WriteFileArgs);
            assess_write(&a, ws)
        }
        Analysis::Shell => {
            let a = args!(RunShellArgs);
            assess_shell(&a, ws, input.shell)
        }
        Analysis::Git => {
            let a = args!(GitArgs);
            assess_git(&a)
        }
    }
}

/// The canonical key of a call for `allow_session`: the same command with another
/// environment prefix or quoting, or the same file through another spelling of its
/// path, gives the same key.
pub fn canonical_key(tool: &str, args: &serde_json::Value, workspace: &Path) -> String {
    let rules = Rules::default();
    let shell = ShellPolicy::default();
    let ws = workspace.to_path_buf();
    let input = DecisionInput {
        tool,
        args,
        mode: PermissionMode::Ask,
        rules: &rules,
        workspace: &ws,
        shell: &shell,
    };
    assess(&input, None).key
}

fn glob_match(pattern: &str, rel: &str) -> bool {
    match globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher().is_match(rel),
        Err(_) => false,
    }
}

fn part_matches(pattern: &str, canonical_part: &str) -> bool {
    // The canonical part is quoted; split it back into words with the shell parser's
    // rules by re-analysing it as words.
    let words = split_words(canonical_part);
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    shell::pattern_matches(pattern, &refs, true)
}

/// Whether a deny pattern matches one canonical command. A computed word may expand to
/// anything, so from the first one on the rule is taken to match: `rm "$f"` hits
/// `run_shell(rm *)`, and `$CMD x` hits every shell deny rule.
fn deny_matches(pattern: &str, canonical: &str) -> bool {
    let words = split_words(canonical);
    let Some(k) = words.iter().position(|w| w == shell::COMPUTED_WORD) else {
        return part_matches(pattern, canonical);
    };
    let pat: Vec<&str> = pattern.split_whitespace().collect();
    for (i, w) in words[..k].iter().enumerate() {
        let Some(p) = pat.get(i) else {
            return false;
        };
        if i + 1 == pat.len() && p.ends_with('*') {
            return w.starts_with(&p[..p.len() - 1]);
        }
        let fits = if p.starts_with('<') && p.ends_with('>') {
            !w.starts_with('-')
        } else {
            p == w
        };
        if !fits {
            return false;
        }
    }
    true
}

fn split_words(canonical: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut has = false;
    let mut chars = canonical.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_quote = !in_quote;
                has = true;
            }
            '\\' if !in_quote => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c if c.is_whitespace() && !in_quote => {
                if has || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            c => cur.push(c),
        }
    }
    if has || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Whether an allow rule (or set of them) allows the call.
fn allowed_by_rules(tool: &str, a: &Assessment, rules: &[Rule]) -> Option<String> {
    let mine: Vec<&Rule> = rules.iter().filter(|r| r.tool == tool).collect();
    if mine.is_empty() {
        return None;
    }
    match &a.target {
        Target::Outside => None,
        Target::Bare => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_none_or(|p| p == "*"))
            .map(|r| rule_text(r)),
        Target::Path(rel) => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_none_or(|p| glob_match(p, rel)))
            .map(|r| rule_text(r)),
        Target::Git(words) => {
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            mine.iter()
                .find(|r| {
                    r.pattern
                        .as_deref()
                        .is_none_or(|p| shell::pattern_matches(p, &refs, true))
                })
                .map(|r| rule_text(r))
        }
        Target::Shell(an) => {
            if let Some(r) = mine.iter().find(|r| r.pattern.is_none()) {
                return Some(rule_text(r));
            }
            if !an.parsed || an.parts.is_empty() {
                return None;
            }
            let mut used = None;
            for part in &an.parts {
                if part.safe {
                    continue;
                }
                if !part.ruleable {
                    return None;
                }
                let hit = mine.iter().find(|r| {
                    r.pattern
                        .as_deref()
                        .is_some_and(|p| part_matches(p, &part.canonical))
                })?;
                used = Some(rule_text(hit));
            }
            // Every part is low risk or covered by a rule; substitutions and redirections
            // already made their part non-ruleable.
            used
        }
    }
}

fn denied_by_rules(tool: &str, a: &Assessment, rules: &[Rule]) -> Option<String> {
    let mine: Vec<&Rule> = rules.iter().filter(|r| r.tool == tool).collect();
    if mine.is_empty() {
        return None;
    }
    if let Some(r) = mine.iter().find(|r| r.pattern.is_none()) {
        return Some(rule_text(r));
    }
    match &a.target {
        Target::Outside | Target::Bare => None,
        Target::Path(rel) => mine
            .iter()
            .find(|r| r.pattern.as_deref().is_some_and(|p| glob_match(p, rel)))
            .map(|r| rule_text(r)),
        Target::Git(words) => {
            let refs: Vec<&str> = words.iter().map(String::as_str).collect();
            mine.iter()
                .find(|r| {
                    r.pattern
                        .as_deref()
                        .is_some_and(|p| shell::pattern_matches(p, &refs, true))
                })
                .map(|r| rule_text(r))
        }
        Target::Shell(an) => {
            for cmd in &an.commands {
                if let Some(r) = mine
                    .iter()
                    .find(|r| r.pattern.as_deref().is_some_and(|p| deny_matches(p, cmd)))
                {
                    return Some(rule_text(r));
                }
            }
            None
        }
    }
}

fn rule_text(r: &Rule) -> String {
    match &r.pattern {
        Some(p) => format!("{}({p})", r.tool),
        None => r.tool.clone(),
    }
}

fn verdict(
    a: Assessment,
    decision: Decision,
    reason: String,
    deny_code: Option<ErrorCode>,
    elevated: bool,
) -> Verdict {
    Verdict {
        verdict: PolicyVerdict {
            decision,
            level: a.level,
            risk_level: a.risk,
            reason,
            action_type: a.action_type,
            scope: a.scope,
        },
        key: a.key,
        deny_code: if decision == Decision::Deny {
            deny_code.or(Some(ErrorCode::ToolPermissionDenied))
        } else {
            None
        },
        elevated,
        preview: a.preview,
        command: a.command,
    }
}

/// The gate's decision for one call of a built-in tool (or an unknown tool, treated
/// as an `execute`-level tool that always asks). Pure: the only I/O is resolving
/// paths and reading the file an edit would change, for the preview.
pub fn decide(input: &DecisionInput<'_>) -> Verdict {
    decide_with_spec(input, None)
}

/// Like [`decide`], for the tool whose row is `spec` (`None`: the built-in or kernel
/// row of that name). The row decides: its level and risk are floors, its plan
/// behaviour and approval requirement apply, and the analysis it names looks at the
/// arguments.
pub fn decide_with_spec(input: &DecisionInput<'_>, spec: Option<&ToolSpec>) -> Verdict {
    let a = assess(input, spec);
    let tool = input.tool;
    let allow = parse_rules(&input.rules.allow);
    let deny = parse_rules(&input.rules.deny);
    // 1. Default-deny.
    if let Some(code) = a.hard_deny {
        let reason = a.reason.clone();
        return verdict(a, Decision::Deny, reason, Some(code), false);
    }
    // 2. Plan mode.
    if input.mode == PermissionMode::Plan && !a.plan_ok {
        let reason = format!(
            "plan mode: `{tool}` cannot run until a plan is approved ({}). Propose a plan instead: describe the changes and commands you intend, and wait for approval.",
            a.reason
        );
        return verdict(
            a,
            Decision::Deny,
            reason,
            Some(ErrorCode::PlanApprovalRequired),
            false,
        );
    }
    // 3. Deny rules.
    if let Some(rule) = denied_by_rules(tool, &a, &deny) {
        let reason = format!("denied by the rule `{rule}`");
        return verdict(
            a,
            Decision::Deny,
            reason,
            Some(ErrorCode::ToolPermissionDenied),
            false,
        );
    }
    let session = input.rules.session_keys.contains(&a.key);
    let by_rule = allowed_by_rules(tool, &a, &allow);
    // 4. Auto mode.
    if input.mode == PermissionMode::Auto {
        if a.needs_rule_in_auto && !session && by_rule.is_none() {
            let reason = format!("{}; this needs an approval, and auto mode does not ask (add an allow rule to let it run)", a.reason);
            return verdict(
                a,
                Decision::Deny,
                reason,
                Some(ErrorCode::ToolPermissionDenied),
                false,
            );
        }
        let reason = format!("auto mode: {}", a.reason);
        let elevated = a.elevated;
        return verdict(a, Decision::Allow, reason, None, elevated);
    }
    // 5. Allow: low risk by itself, auto-edit edits, rules, session keys.
    if a.safe && (input.mode != PermissionMode::Plan || a.plan_ok) {
        let reason = a.reason.clone();
        let elevated = a.elevated;
        return verdict(a, Decision::Allow, reason, None, elevated);
    }
    if input.mode == PermissionMode::AutoEdit && a.edit_like && !a.elevated {
        let reason = format!("auto-edit mode: {}", a.reason);
        return verdict(a, Decision::Allow, reason, None, false);
    }
    if session {
        let reason = format!("approved for this session: {}", a.reason);
        let elevated = a.elevated;
        return verdict(a, Decision::Allow, reason, None, elevated);
    }
    if let Some(rule) = by_rule {
        let reason = format!("allowed by the rule `{rule}`: {}", a.reason);
        let elevated = a.elevated;
        return verdict(a, Decision::Allow, reason, None, elevated);
    }
    // 6. Ask.
    let reason = a.reason.clone();
    let elevated = a.elevated;
    verdict(a, Decision::Ask, reason, None, elevated)
}

fn parse_rules(texts: &[String]) -> Vec<Rule> {
    texts.iter().filter_map(|t| Rule::parse(t)).collect()
}
