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
    /// The session's extra roots: the file tools' paths in them are judged like paths
    /// in the workspace (writes only in `write` roots).
    pub roots: Roots,
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

use keel_envelope::tools::{Decision, EditFileArgs, GitArgs, RunShellArgs, WriteFileArgs};
use keel_envelope::types::{PermissionLevel, RiskLevel};
use keel_envelope::ErrorPayload;

use crate::args::ToolArgs;
use crate::git::{self, GitClass};
use crate::jail::{self, ResolvedPath, Roots};
use crate::shell::{self, ShellAnalysis};
use crate::spec::{self, Analysis, ApprovalRequirement, PlanBehavior, ToolSpec};

mod assess;
mod rules;
use assess::*;
use rules::*;

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

## Extra roots

The workspace root itself is resolved to its real path once per process (the first time a tool names a path in it) and kept: a session goes on working in the directory its root named then, even if a symlink on the way to the root is later pointed elsewhere; paths inside the root are resolved afresh, component by component, on every call.

A session may have extra roots beside its workspace (`session.start {additionalRoots}`, each `read` or `write`). The file tools (`read_file`, `list_dir`, `search_files`, `edit_file`, `write_file`) name paths in them by absolute path (a relative path is always the workspace's) and are judged there as in the workspace: the same jail (component-wise resolution, symlinks followed, `..`, NUL bytes and special files refused), reads allowed without asking (also in plan mode), edits and writes asking as in the workspace (allowed in `auto-edit`; `.git` high risk) — but only in `write` roots: a write in a `read` root is default-denied with `PATH_OUTSIDE_WORKSPACE`, like a write outside. The real path decides: a link in a root that leads out of every root is outside, one that leads into the workspace or another root is judged there. Scopes say where: `filesystem:root:read`, `filesystem:root:write`. A file rule's glob is matched against the absolute path there (`edit_file(/srv/shared/**)`); a bare rule (`edit_file`) covers the roots as it covers the workspace. Shell commands are not widened: the shell analysis rates a path in an extra root like any path outside the workspace, a `cwd` must be in the workspace, and the sandbox lets commands write in `write` roots only (see Sandbox).

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

**Background commands.** `run_shell {background: true}` is analysed like the same command in the foreground, so it is never rated or decided more leniently, and its reason ends with `(runs in the background)`. Its canonical key is the same, so one `allow_session` covers both.

**Where commands run.** The rating does not depend on the sandbox: a command is rated by what it would do unsandboxed. run_shell then runs it (foreground or background) inside an OS sandbox chosen by `SandboxConfig { enabled, mode, network, require_sandbox, bwrap }`: bubblewrap when it can start here, else Landlock when the kernel has it, else none (see Sandbox below). With no sandbox the call is refused with `SANDBOX_UNAVAILABLE` when it requires one (the kernel requires it in `auto` mode, where nobody approves each command) and otherwise runs with a warning; every result's `sandbox` says which one ran. The command runs in its own process group, and on timeout, cancellation or exit everything it started is killed. The `git` tool runs unsandboxed, always with the pager, external diff, textconv and fsmonitor disabled and no terminal prompts.
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
    /// A path inside the workspace (relative), or inside an extra root (absolute).
    Path(String),
    /// A path outside the workspace and its extra roots: no rule matches.
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
        roots: Roots::none(),
        shell: &shell,
    };
    assess(&input, None).key
}

fn verdict(
    a: Assessment,
    decision: Decision,
    reason: String,
    deny_code: Option<ErrorCode>,
    elevated: bool,
) -> Verdict {
    let is_deny = decision == Decision::Deny;
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
        deny_code: if is_deny {
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
    decide_assessed(input, assess(input, spec))
}

/// Like [`decide_with_spec`], for arguments the caller already decoded once
/// ([`ToolArgs::decode`] with the row's analysis): they are not decoded again.
/// `input.args` is still the JSON they came from (the key of a tool without an
/// analysis is made from it). Arguments decoded for another analysis than the row's
/// are denied with `TOOL_ARGUMENTS_INVALID`.
pub fn decide_decoded(
    input: &DecisionInput<'_>,
    args: &ToolArgs,
    spec: Option<&ToolSpec>,
) -> Verdict {
    decide_assessed(input, assess_decoded(input, args, spec))
}

/// Steps 1–6 of the decision, on the call's analysis.
fn decide_assessed(input: &DecisionInput<'_>, a: Assessment) -> Verdict {
    let tool = input.tool;
    let allow = parse_rules(&input.rules.allow);
    let deny = parse_rules(&input.rules.deny);
    // 1. Default-deny.
    if let Some(code) = a.hard_deny.clone() {
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
