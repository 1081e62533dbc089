//! Which OS sandbox a shell command gets, and how each one is set up.
//!
//! The choice (`choose`) follows the configured [`SandboxMode`]: `auto` takes
//! bubblewrap when it can start a sandbox here, else Landlock when the kernel has it,
//! else none; `bubblewrap` and `landlock` take only that one; `off` takes none. When
//! the choice is none and the call requires a sandbox, `run_shell` refuses with
//! `SANDBOX_UNAVAILABLE`. [`sandbox_report`] tells a host (`keel doctor`) what shell
//! commands will get and why. Killing what a command started is in `exec`.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, OnceLock};

use keel_envelope::tools::SandboxKind;
use keel_envelope::{ErrorCode, ErrorPayload};
use landlock::{
    Access, AccessFs, AccessNet, PathBeneath, PathFd, RestrictionStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

/// The sandbox section of `docs/permissions.md`.
pub const SANDBOX_DOC: &str = r#"
## Sandbox

`run_shell` commands (foreground and background) run inside an OS sandbox. The
`sandbox` setting chooses which one (`SandboxConfig.mode`; config key `sandbox`):

| mode | what shell commands get |
|---|---|
| `auto` (default) | bubblewrap when it can start a sandbox here, else Landlock when the kernel has it, else none |
| `bubblewrap` | bubblewrap, else none |
| `landlock` | Landlock, else none |
| `off` | none, on purpose |

When the choice is none although the mode is not `off`, the command is refused with
`SANDBOX_UNAVAILABLE` if the call requires a sandbox (`SandboxConfig.require_sandbox`;
the kernel sets it in the `auto` permission mode, where nobody approves each command).
Otherwise it runs unsandboxed, with a warning. The error's message names the fixes:
install bubblewrap, use a kernel with Landlock, or set `sandbox = "off"`. Every result
says what ran: `sandbox` is `bubblewrap`, `landlock` or `none` (and `sandboxed` is
`sandbox != "none"`). `keel_tools::sandbox_report()` gives hosts the same answer before
any command runs, with the reason and the Landlock features in force.

**bubblewrap.** Everything is mounted read-only except the workspace and the
session's `write` extra roots (their `.git` stays read-only) and a private `/tmp`; `/dev` is a minimal device set and `/proc` is the
sandbox's own. The command gets its own PID namespace and its own session (no
controlling terminal). Without network it also gets its own network namespace, with
only a loopback device of its own.

**Landlock.** Used when bubblewrap is missing or cannot start (for example without
user namespaces). The command is restricted by the kernel before it starts: it reads
and executes everywhere, but writes only beneath the workspace, the session's `write`
extra roots, the temp directory
(`$TMPDIR` or `/tmp`, shared with the rest of the machine), `/dev/shm`, and to
`/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random` and `/dev/urandom`. Landlock only
grants rights beneath a directory, so the `.git` of the workspace (and of a `write`
root) is writable here. What
else holds depends on the kernel's Landlock ABI: links and renames across directories
(ABI 2), truncation (ABI 3), TCP `bind` and `connect` (ABI 4: denied without network;
UDP and pathname UNIX sockets are not covered), ioctl on devices such as terminals
(ABI 5), and from ABI 6 no signals to processes outside the sandbox and no connections
to abstract UNIX sockets created outside it. `sandbox_report()` lists the features in
force.

**Extra roots.** A session's extra roots (`session.start {additionalRoots}`) are
readable in both sandboxes, as everything is; `write` roots are writable like the
workspace, `read` roots are not. The command's working directory is always in the
workspace (a `cwd` in an extra root is refused), and the shell analysis rates a
path in an extra root like any path outside the workspace (a read or write there
asks): the file tools are the way to reach the extra roots without asking.

**Network.** Off inside the sandbox by default. It is on for one call when that call
was approved at the `elevated` level, and for every call when the configuration says
so (`SandboxConfig.network`; config key `sandboxNetwork = true`).

**Background tasks.** `run_shell {background: true}` starts the same way, in the same
sandbox, and is refused the same way. Its `timeoutMs` defaults to the maximum, one
hour (a foreground call's default is two minutes); when it passes, the task is stopped
and its output ends with a `[timed out after … ms …]` line. Its output is kept line by
line, each line cut at 8 KiB, and read to the end whatever bytes it holds.

**Stopping.** On timeout, cancellation, or after the command exits, everything it
started is killed: with bubblewrap the PID namespace dies with its first process; in
every mode each process carrying the call's marker (`KEEL_RUN_ID` in its environment),
in the call's process group, or a child of one of those is frozen, then killed. A
process that leaves the group, clears its environment and is orphaned before the kill
cannot be found without a PID namespace (Landlock, none).

**When Keel dies.** However the Keel process ends (a crash, `SIGKILL`, at any moment,
even in the first instant of a command), no command outlives it. Every process Keel
starts gets the parent-death signal (`SIGKILL`) before it runs anything, and checks
that Keel was still alive once it was set; and every command runs under a small
`/bin/sh` wrapper whose watcher waits for the end of a pipe only Keel holds open, then
kills the command's processes: with bubblewrap every process of its PID namespace,
otherwise the call's process group (so without a PID namespace, a process that left
the group escapes this last kill too). The wrapper and its watcher are two `sh`
processes beside the command.
"#;

/// The environment variable that marks every process started for one call.
pub const MARKER_VAR: &str = "KEEL_RUN_ID";

/// Which sandbox shell commands may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SandboxMode {
    /// bubblewrap, else Landlock, else none.
    #[default]
    Auto,
    /// Only bubblewrap.
    Bubblewrap,
    /// Only Landlock.
    Landlock,
    /// No sandbox, on purpose.
    Off,
}

impl SandboxMode {
    /// Every mode, in documentation order.
    pub const ALL: [SandboxMode; 4] = [
        SandboxMode::Auto,
        SandboxMode::Bubblewrap,
        SandboxMode::Landlock,
        SandboxMode::Off,
    ];

    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Auto => "auto",
            SandboxMode::Bubblewrap => "bubblewrap",
            SandboxMode::Landlock => "landlock",
            SandboxMode::Off => "off",
        }
    }

    /// Parses the configuration spelling.
    pub fn parse(s: &str) -> Option<SandboxMode> {
        SandboxMode::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Sandbox settings for `run_shell`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// `false` turns the sandbox off whatever `mode` says (the same as `mode: Off`).
    pub enabled: bool,
    /// Which sandbox may be used.
    pub mode: SandboxMode,
    /// Whether commands may use the network (TCP) inside the sandbox. A call approved
    /// at the `elevated` level gets the network whatever this says.
    pub network: bool,
    /// Refuse (`SANDBOX_UNAVAILABLE`) instead of running unsandboxed when no sandbox
    /// can run and the mode is not `off`. Set per call by the kernel in the `auto`
    /// permission mode.
    pub require_sandbox: bool,
    /// The bubblewrap executable (default: `bwrap` found in `PATH`).
    pub bwrap: Option<PathBuf>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self::new(SandboxMode::Auto)
    }
}

impl SandboxConfig {
    /// Settings for `mode`, without network.
    pub fn new(mode: SandboxMode) -> Self {
        Self {
            enabled: mode != SandboxMode::Off,
            mode,
            network: false,
            require_sandbox: false,
            bwrap: None,
        }
    }

    /// No sandbox.
    pub fn off() -> Self {
        Self::new(SandboxMode::Off)
    }

    /// The same settings with `require_sandbox` set to `require`.
    pub fn required(mut self, require: bool) -> Self {
        self.require_sandbox = require;
        self
    }

    /// The same settings with the network on or off.
    pub fn with_network(mut self, network: bool) -> Self {
        self.network = network;
        self
    }

    /// The mode in force (`Off` when `enabled` is false).
    pub fn effective_mode(&self) -> SandboxMode {
        if self.enabled {
            self.mode
        } else {
            SandboxMode::Off
        }
    }
}

/// What the running kernel's Landlock offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandlockInfo {
    /// The ABI version in use (the lower of the kernel's and the one Keel targets).
    pub abi: u32,
    /// The restrictions in force at that ABI (`fs_write`, `refer`, `truncate`, `tcp`,
    /// `ioctl_dev`, `signal_scope`, `abstract_unix_socket_scope`).
    pub features: Vec<&'static str>,
}

/// What shell commands will get under a configuration, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxReport {
    /// The mode in force.
    pub mode: SandboxMode,
    /// The sandbox commands will run in.
    pub sandbox: SandboxKind,
    /// Why, in one sentence.
    pub reason: String,
    /// Whether commands are refused because a sandbox is required and none can run.
    pub refused: bool,
    /// Whether the network is on inside the sandbox (without an elevated approval).
    pub network: bool,
    /// bubblewrap: its path, or why it cannot be used.
    pub bubblewrap: Result<PathBuf, String>,
    /// Landlock: what it offers, or why it cannot be used.
    pub landlock: Result<LandlockInfo, String>,
}

/// The sandbox chosen for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Choice {
    Bubblewrap(PathBuf),
    Landlock(LandlockInfo),
    None { reason: String },
}

impl Choice {
    pub(crate) fn kind(&self) -> SandboxKind {
        match self {
            Choice::Bubblewrap(_) => SandboxKind::Bubblewrap,
            Choice::Landlock(_) => SandboxKind::Landlock,
            Choice::None { .. } => SandboxKind::None,
        }
    }
}

fn find_in_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Chooses the sandbox for `config` (probes are run once per process and cached).
pub(crate) fn choose(config: &SandboxConfig) -> Choice {
    let mode = config.effective_mode();
    let none = |reason: String| Choice::None { reason };
    match mode {
        SandboxMode::Off => none("the sandbox is turned off (`sandbox = \"off\"`)".to_owned()),
        SandboxMode::Bubblewrap => match bubblewrap(config) {
            Ok(p) => Choice::Bubblewrap(p),
            Err(e) => none(e),
        },
        SandboxMode::Landlock => match landlock() {
            Ok(l) => Choice::Landlock(l),
            Err(e) => none(e),
        },
        SandboxMode::Auto => match bubblewrap(config) {
            Ok(p) => Choice::Bubblewrap(p),
            Err(b) => match landlock() {
                Ok(l) => Choice::Landlock(l),
                Err(l) => none(format!("{b}; {l}")),
            },
        },
    }
}

/// The error of a call that requires a sandbox when none can run.
pub(crate) fn unavailable(mode: SandboxMode, reason: &str) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::SandboxUnavailable,
        format!(
            "no OS sandbox can run this command ({reason}); install bubblewrap, use a kernel with Landlock, or set `sandbox = \"off\"` to run commands unsandboxed"
        ),
    )
    .with_detail("mode", mode.as_str())
    .with_detail("reason", reason)
}

/// What shell commands will get under `config`, and why. Hosts call this for
/// `keel doctor`; it runs the same probes as the first command would.
pub fn sandbox_report(config: &SandboxConfig) -> SandboxReport {
    let mode = config.effective_mode();
    let choice = choose(config);
    let bubblewrap = bubblewrap(config);
    let landlock = landlock();
    let sandbox = choice.kind();
    let refused =
        sandbox == SandboxKind::None && mode != SandboxMode::Off && config.require_sandbox;
    let reason = match &choice {
        Choice::Bubblewrap(p) => format!("bubblewrap ({}) can start a sandbox here", p.display()),
        Choice::Landlock(l) => {
            let why = match (&bubblewrap, mode) {
                (Err(e), SandboxMode::Auto) => format!("{e}; "),
                _ => String::new(),
            };
            format!(
                "{why}Landlock ABI {} is available ({})",
                l.abi,
                l.features.join(", ")
            )
        }
        Choice::None { reason } if refused => {
            format!("{reason}; commands are refused because a sandbox is required")
        }
        Choice::None { reason } if mode == SandboxMode::Off => reason.clone(),
        Choice::None { reason } => format!("{reason}; commands run unsandboxed"),
    };
    SandboxReport {
        mode,
        sandbox,
        reason,
        refused,
        network: config.network,
        bubblewrap,
        landlock,
    }
}

/// Whether shell commands get an OS sandbox under the default settings (`auto`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxStatus {
    /// Commands run in this sandbox.
    Available {
        /// bubblewrap or Landlock.
        sandbox: SandboxKind,
    },
    /// No sandbox can run; commands run unsandboxed (or are refused when required).
    Unavailable {
        /// Why, for a warning.
        reason: String,
    },
}

/// What shell commands get under the default settings; [`sandbox_report`] says more.
pub fn sandbox_status() -> SandboxStatus {
    match choose(&SandboxConfig::default()) {
        Choice::None { reason } => SandboxStatus::Unavailable { reason },
        other => SandboxStatus::Available {
            sandbox: other.kind(),
        },
    }
}

// ---------------------------------------------------------------- bubblewrap

static BWRAP: OnceLock<Mutex<HashMap<PathBuf, Result<PathBuf, String>>>> = OnceLock::new();

/// bubblewrap for `config`: its path when it can start a sandbox here (probed once per
/// path and process), or why not.
pub(crate) fn bubblewrap(config: &SandboxConfig) -> Result<PathBuf, String> {
    if !cfg!(target_os = "linux") {
        return Err("the OS sandbox is only implemented on Linux".to_owned());
    }
    let path = match &config.bwrap {
        Some(p) => p.clone(),
        None => find_in_path("bwrap")
            .ok_or_else(|| "bubblewrap (`bwrap`) is not installed".to_owned())?,
    };
    let cache = BWRAP.get_or_init(Mutex::default);
    if let Some(r) = cache.lock().ok().and_then(|c| c.get(&path).cloned()) {
        return r;
    }
    let r = probe_bubblewrap(&path);
    if let Ok(mut c) = cache.lock() {
        c.insert(path, r.clone());
    }
    r
}

/// Checks that `bwrap` can start a sandbox with the namespaces `run_shell` uses.
pub fn probe_bubblewrap(bwrap: &Path) -> Result<PathBuf, String> {
    let mut cmd = std::process::Command::new(bwrap);
    cmd.args([
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--die-with-parent",
        "--new-session",
        "--",
        "/bin/sh",
        "-c",
        "true",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    let probe = crate::spawn::spawn_std(cmd).and_then(|c| c.wait_with_output());
    match probe {
        Ok(out) if out.status.success() => Ok(bwrap.to_path_buf()),
        Ok(out) => Err(format!(
            "bubblewrap cannot start a sandbox here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("bubblewrap cannot be run: {e}")),
    }
}

/// The bubblewrap arguments that run `command` (a program and its arguments) with the
/// workspace and the `extra` writable folders (a session's `write` roots) writable, a
/// private `/tmp`, everything else read-only, each writable folder's `.git` read-only,
/// a PID namespace and session of its own, and the network cut unless `network` is
/// true. No `--die-with-parent`: it arms bubblewrap's first process while its child is
/// still waiting to be released by it, and a parent killed in that moment leaves the
/// child blocked for ever; the sandbox dies with this process through the lifeline
/// instead (see `wrap`).
pub fn bwrap_args(
    workspace: &Path,
    extra: &[PathBuf],
    cwd: &Path,
    command: &[String],
    network: bool,
) -> Vec<String> {
    let mut a: Vec<String> = [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    for dir in std::iter::once(workspace).chain(extra.iter().map(PathBuf::as_path)) {
        let d = dir.to_string_lossy().into_owned();
        a.extend(["--bind".to_owned(), d.clone(), d]);
        let git = dir.join(".git");
        if git.is_dir() {
            let g = git.to_string_lossy().into_owned();
            a.extend(["--ro-bind".to_owned(), g.clone(), g]);
        }
    }
    if !network {
        a.push("--unshare-net".to_owned());
    }
    a.extend(
        ["--unshare-pid", "--new-session", "--chdir"]
            .iter()
            .map(|s| (*s).to_owned()),
    );
    a.push(cwd.to_string_lossy().into_owned());
    a.push("--".to_owned());
    a.extend(command.iter().cloned());
    a
}

// ---------------------------------------------------------------- Landlock

/// The newest ABI whose rules Keel sets (older kernels get what they support).
const TARGET_ABI: ABI = ABI::V6;

static LANDLOCK: OnceLock<Result<LandlockInfo, String>> = OnceLock::new();

/// Landlock on this kernel: what it offers (probed once per process), or why not.
pub(crate) fn landlock() -> Result<LandlockInfo, String> {
    LANDLOCK.get_or_init(probe_landlock).clone()
}

fn features(abi: u32, network: bool) -> Vec<&'static str> {
    let mut f = Vec::new();
    for (min, name) in [
        (1, "fs_write"),
        (2, "refer"),
        (3, "truncate"),
        (4, "tcp"),
        (5, "ioctl_dev"),
        (6, "signal_scope"),
        (6, "abstract_unix_socket_scope"),
    ] {
        if abi >= min && !(network && name == "tcp") {
            f.push(name);
        }
    }
    f
}

/// Restricts a throwaway thread to learn the ABI in force.
fn probe_landlock() -> Result<LandlockInfo, String> {
    if !cfg!(target_os = "linux") {
        return Err("Landlock is only available on Linux".to_owned());
    }
    let probe = std::thread::Builder::new()
        .name("keel-landlock-probe".into())
        .spawn(|| -> Result<RestrictionStatus, String> {
            let abi = ABI::V1;
            let root = PathFd::new("/").map_err(|e| e.to_string())?;
            Ruleset::default()
                .handle_access(AccessFs::from_all(abi))
                .and_then(|r| r.create())
                .and_then(|r| r.add_rule(PathBeneath::new(root, AccessFs::from_all(abi))))
                .and_then(|r| r.restrict_self())
                .map_err(|e| e.to_string())
        })
        .map_err(|e| format!("cannot start the Landlock probe: {e}"))?;
    let status = probe
        .join()
        .map_err(|_| "the Landlock probe failed".to_owned())??;
    let abi = match status.landlock {
        landlock::LandlockStatus::Available { effective_abi, .. } => effective_abi as u32,
        landlock::LandlockStatus::NotEnabled => {
            return Err("Landlock is built into this kernel but not enabled".to_owned())
        }
        landlock::LandlockStatus::NotImplemented => {
            return Err("this kernel has no Landlock".to_owned())
        }
    };
    if status.ruleset == RulesetStatus::NotEnforced {
        return Err("Landlock is not enforced on this kernel".to_owned());
    }
    let abi = abi.min(TARGET_ABI as u32);
    Ok(LandlockInfo {
        abi,
        features: features(abi, false),
    })
}

/// Device nodes a sandboxed command may write.
const WRITABLE_DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The Landlock ruleset of a command (enforced by the command's process alone, before
/// its `exec`: see [`crate::spawn::Tie`]): read and execute everywhere, write beneath
/// `workspace`, the `extra` writable folders (a session's `write` roots), the temp
/// directory and `/dev/shm` and to a few devices, TCP only with `network`, signals and
/// abstract sockets scoped.
pub(crate) fn landlock_ruleset(
    workspace: &Path,
    extra: &[PathBuf],
    network: bool,
) -> Result<OwnedFd, String> {
    let abi = TARGET_ABI;
    let err = |e: landlock::RulesetError| format!("cannot set up Landlock: {e}");
    let path = |p: &Path| {
        PathFd::new(p).map_err(|e| format!("cannot set up Landlock for {}: {e}", p.display()))
    };
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?
        .scope(Scope::from_all(abi))
        .map_err(err)?;
    if !network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(err)?;
    }
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rule(PathBeneath::new(
            path(Path::new("/"))?,
            AccessFs::from_read(abi),
        ))
        .map_err(err)?
        .add_rule(PathBeneath::new(path(workspace)?, AccessFs::from_all(abi)))
        .map_err(err)?;
    for dir in extra {
        created = created
            .add_rule(PathBeneath::new(path(dir)?, AccessFs::from_all(abi)))
            .map_err(err)?;
    }
    let mut writable = vec![std::env::temp_dir()];
    if Path::new("/dev/shm").is_dir() {
        writable.push(PathBuf::from("/dev/shm"));
    }
    for dir in writable {
        if let Ok(fd) = PathFd::new(&dir) {
            created = created
                .add_rule(PathBeneath::new(fd, AccessFs::from_all(abi)))
                .map_err(err)?;
        }
    }
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    for dev in WRITABLE_DEVICES {
        if let Ok(fd) = PathFd::new(dev) {
            created = created
                .add_rule(PathBeneath::new(fd, device))
                .map_err(err)?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "Landlock is not enforced on this kernel".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bwrap_that_cannot_start_is_reported_unavailable() {
        let e = probe_bubblewrap(Path::new("/bin/false")).expect_err("cannot start");
        assert!(e.contains("cannot start"), "{e}");
        let e = probe_bubblewrap(Path::new("/nonexistent/bwrap")).expect_err("missing");
        assert!(e.contains("cannot be run"), "{e}");
        let bwrap = find_in_path("bwrap").expect("bubblewrap is installed");
        assert!(probe_bubblewrap(&bwrap).is_ok());
    }

    #[test]
    fn modes_parse_and_print() {
        for m in SandboxMode::ALL {
            assert_eq!(SandboxMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(SandboxMode::parse("yes"), None);
        assert_eq!(SandboxConfig::off().effective_mode(), SandboxMode::Off);
        let c = SandboxConfig {
            enabled: false,
            ..SandboxConfig::default()
        };
        assert_eq!(c.effective_mode(), SandboxMode::Off);
    }

    #[test]
    fn features_follow_the_abi_and_the_network() {
        assert_eq!(features(1, false), ["fs_write"]);
        assert_eq!(features(4, false), ["fs_write", "refer", "truncate", "tcp"]);
        assert!(!features(6, true).contains(&"tcp"));
        assert!(features(6, false).contains(&"signal_scope"));
    }

    #[test]
    fn a_forced_mode_that_cannot_run_chooses_none() {
        let mut c = SandboxConfig::new(SandboxMode::Bubblewrap);
        c.bwrap = Some(PathBuf::from("/bin/false"));
        let r = sandbox_report(&c);
        assert_eq!(r.sandbox, SandboxKind::None);
        assert!(!r.refused);
        assert!(r.reason.contains("cannot start"), "{}", r.reason);
        let r = sandbox_report(&c.clone().required(true));
        assert!(r.refused, "{r:?}");
        let r = sandbox_report(&SandboxConfig::off().required(true));
        assert!(!r.refused && r.sandbox == SandboxKind::None);
    }
}
