//! Finding and killing every process started for one call.
//!
//! A call's processes are: its root (the child we spawned, in its own process group),
//! every process in that group (while the root is not reaped, so the group id cannot
//! be reused), every process whose environment carries the call's marker, and every
//! child of one of those. [`Tree::kill_all`] freezes them with `SIGSTOP` round after
//! round until a scan of `/proc` finds no new one (a frozen process cannot fork, and a
//! frozen parent keeps its children findable), then kills them all with `SIGKILL`.
//! Signals go through a pidfd opened and checked against the process's start time, so
//! a recycled pid is never signalled.
//!
//! That full search reads all of `/proc` several times. While the root lives, two
//! shorter ways are exact, and are taken first:
//!
//! - **bubblewrap** ([`Shape::Sandbox`]): every process of the call but bubblewrap
//!   itself lives in the sandbox's PID namespace, whose init is bubblewrap's only
//!   child. Killing that init makes the kernel kill the whole namespace, but only
//!   as the init exits, some time later. So: find the init (`/proc/<root>/task/*/
//!   children`), kill every process beneath it round after round until a round finds
//!   none not yet killed (a process with `SIGKILL` pending cannot fork; an orphan goes
//!   to the init), so that each has its `SIGKILL` when the kill returns; then the
//!   init and the root. Nothing is frozen.
//! - **a sub-reaper root** ([`Shape::Subtree`]: the wrapper of every other command,
//!   made a child sub-reaper by `spawn`): every descendant stays in the root's subtree
//!   even when orphaned. So: send the root `SIGSTOP` (once it is asleep or stopped it
//!   can no longer fork: see `cannot_fork`), then kill every live
//!   descendant found by walking the children lists, round after round, until none is
//!   left but zombies (a killed process cannot fork; the children of one that dies are
//!   handed to the root, where the next round finds them), then the root. The
//!   wrapper's watcher is killed last, so that if this process dies half-way the
//!   watcher still kills the rest.
//!
//! When the root has already exited (its orphans went to init), or a fast way cannot
//! vouch for what it saw, the full search runs.

use std::collections::HashMap;
use std::os::fd::OwnedFd;

use rustix::process::{Pid, PidfdFlags, Signal};

/// One line of `/proc/<pid>/stat`, the fields we use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    pub(crate) pid: u32,
    pub(crate) ppid: u32,
    pub(crate) pgrp: u32,
    pub(crate) state: char,
    /// The kernel's flags (`PF_*`).
    pub(crate) flags: u64,
    /// Start time, in clock ticks since boot.
    pub(crate) start: u64,
}

impl Stat {
    /// A zombie or a dead process: gone for our purpose.
    pub(crate) fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/<pid>/stat`.
pub(crate) fn stat(pid: u32) -> Option<Stat> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let rest = &s[s.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        pid,
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        flags: f.get(6)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// Every process visible in `/proc`.
pub(crate) fn all_processes() -> Vec<Stat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(stat)
        .collect()
}

/// Whether `/proc/<pid>/environ` holds exactly the entry `needle` (`NAME=value`).
pub(crate) fn environ_has(pid: u32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|b| *b == 0).any(|e| e == needle))
        .unwrap_or(false)
}

/// Sends `sig` to `pid` if it is still the process that started at `start`; keeps the
/// pidfd for later signals.
fn signal(pid: u32, start: u64, fd: &mut Option<OwnedFd>, sig: Signal) -> bool {
    let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    if fd.is_none() {
        *fd = rustix::process::pidfd_open(p, PidfdFlags::empty()).ok();
        // The pidfd names whatever process had the pid when it was opened: check that
        // it is still the one we found.
        if stat(pid).is_none_or(|s| s.start != start) {
            *fd = None;
            return false;
        }
    }
    match fd {
        Some(fd) => rustix::process::pidfd_send_signal(&*fd, sig).is_ok(),
        // Kernels before 5.3 have no pidfd: the start time was checked just before.
        None => {
            stat(pid).is_some_and(|s| s.start == start)
                && rustix::process::kill_process(p, sig).is_ok()
        }
    }
}

/// The children of `pid` (of all its threads), from `/proc/<pid>/task/*/children`;
/// `None` where the kernel does not list them.
pub(crate) fn children(pid: u32) -> Option<Vec<u32>> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut out = Vec::new();
    let mut listed = false;
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            listed = true;
            out.extend(
                text.split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    // A process that is gone has no task directory; one whose kernel has no children
    // lists has task directories without the file.
    listed.then_some(out)
}

/// Whether a process is done for: gone, or a zombie, or another process now, or
/// exiting, or with a `SIGKILL` pending (it will never run another instruction of its
/// own). Killed processes are waited for this far only: the rest of an exit (a PID
/// namespace's teardown, for one) may take milliseconds and runs nothing.
pub(crate) fn finished(pid: u32, start: u64) -> bool {
    const PF_EXITING: u64 = 0x4;
    let Some(s) = stat(pid) else { return true };
    if s.is_dead() || s.start != start || s.flags & PF_EXITING != 0 {
        return true;
    }
    let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
        return true;
    };
    let pending = status
        .lines()
        .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
        .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
        .fold(0, |a, b| a | b);
    pending & (1 << 8) != 0
}

/// Whether `pid`, sent `SIGSTOP` before this call, can no longer create a process:
/// stopped or dead, or asleep (`S`). A process asleep after the signal was sent was
/// not in the middle of a `fork` when it came (a fork runs or waits in `R`/`D`, and
/// the forking process handles the signal on its way back, without sleeping), and it
/// handles the signal before running anything of its own: so every child it has is
/// listed already. This needs no wait for the process to be scheduled, which a loaded
/// machine may delay for long. In `R` or `D` it may still be finishing a fork whose
/// child is not listed yet.
fn cannot_fork(pid: u32) -> bool {
    stat(pid).is_none_or(|s| matches!(s.state, 'S' | 'T' | 't' | 'Z' | 'X' | 'x'))
}

/// How a call's processes hang together, which decides the fast way to kill them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// The root is bubblewrap; its only child is the init of the sandbox's PID
    /// namespace.
    Sandbox,
    /// The root is a child sub-reaper.
    Subtree,
}

/// The processes of one call.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    root: u32,
    root_start: u64,
    shape: Shape,
    needle: Vec<u8>,
    /// What the first [`Tree::kill_all`] killed, shared by the clones: a kill runs
    /// once, and a second caller (a dropped call while its kill runs on a blocking
    /// thread) waits for the first instead of scanning `/proc` beside it.
    done: std::sync::Arc<std::sync::Mutex<Option<Vec<Killed>>>>,
}

/// A process that was killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Killed {
    pub(crate) pid: u32,
    pub(crate) start: u64,
}

/// How long [`Tree::kill_all`] waits for its `SIGSTOP`s to take effect (a process
/// in uninterruptible sleep stops only when it leaves it); then it kills what it found.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// Whether a process we sent `SIGSTOP` has stopped (or is gone): only then can it no
/// longer be in the middle of a `fork` whose child the next scan would miss.
///
/// A `vfork` parent (`/bin/sh` is dash on Debian, which runs commands with `vfork`)
/// waits in uninterruptible sleep until its child calls `exec` or exits, and takes the
/// `SIGSTOP` only then: when the child is frozen before its `exec`, the parent never
/// stops. Such a parent cannot fork either, and its child is already listed, so a
/// parent in `D` state with a frozen child among `frozen_parents` counts as settled
/// (without this, an interrupt landing in that window waited out [`STOP_GRACE`]).
fn settled(pid: u32, start: u64, frozen_parents: &[u32]) -> bool {
    match stat(pid) {
        None => true,
        Some(s) => {
            s.is_dead()
                || s.start != start
                || matches!(s.state, 'T' | 't')
                || (s.state == 'D' && frozen_parents.contains(&pid))
        }
    }
}

/// The parents of the members that are stopped: a `vfork` parent of one of them waits
/// for it and cannot run before it does.
fn frozen_parents(members: &HashMap<u32, (u64, Option<OwnedFd>)>) -> Vec<u32> {
    members
        .iter()
        .filter(|(_, (start, _))| *start != u64::MAX)
        .filter_map(|(pid, (start, _))| stat(*pid).filter(|s| s.start == *start))
        .filter(|s| matches!(s.state, 'T' | 't'))
        .map(|s| s.ppid)
        .collect()
}

impl Tree {
    /// The tree rooted at our child `root`, whose processes carry `marker`.
    pub(crate) fn new(root: u32, shape: Shape, marker_var: &str, marker: &str) -> Self {
        let root_start = stat(root).map(|s| s.start).unwrap_or(0);
        Self {
            root,
            root_start,
            shape,
            needle: format!("{marker_var}={marker}").into_bytes(),
            done: std::sync::Arc::default(),
        }
    }

    /// Freezes, then kills, every process of the call. `group` says whether the root
    /// is not reaped yet (so its process group id still names this call's group).
    /// Returns what was killed. Blocks while the frozen processes stop (at most
    /// [`STOP_GRACE`]).
    pub(crate) fn kill_all(&self, group: bool) -> Vec<Killed> {
        let mut done = self.done.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(killed) = &*done {
            return killed.clone();
        }
        let fast = match (group, self.shape) {
            (true, Shape::Sandbox) => self.kill_sandbox(),
            (true, Shape::Subtree) => self.kill_subtree(),
            (false, _) => None,
        };
        let killed = match fast {
            Some(k) => k,
            None => self.freeze_and_kill(group),
        };
        *done = Some(killed.clone());
        killed
    }

    /// Whether the root is still running (not exited, and the process we started).
    fn root_alive(&self) -> bool {
        stat(self.root).is_some_and(|s| !s.is_dead() && s.start == self.root_start)
    }

    /// bubblewrap: kills every process of the sandbox's PID namespace (walked from its
    /// init, bubblewrap's only child, round after round until a round finds none it has
    /// not killed: a killed process cannot fork, and an orphan goes to the init), then
    /// the init and bubblewrap. Nothing waits for the namespace's teardown. `None`
    /// (nothing done) when the root has no child to vouch for: it may be creating it
    /// right now.
    fn kill_sandbox(&self) -> Option<Vec<Killed>> {
        if !self.root_alive() {
            return None;
        }
        let inits: Vec<Stat> = children(self.root)?
            .into_iter()
            .filter_map(stat)
            .filter(|c| c.ppid == self.root && c.start >= self.root_start && !c.is_dead())
            .collect();
        if inits.is_empty() {
            return None;
        }
        let deadline = std::time::Instant::now() + STOP_GRACE;
        let mut killed: HashMap<u32, u64> = HashMap::new();
        loop {
            let mut fresh = Vec::new();
            let mut stack: Vec<u32> = inits.iter().map(|s| s.pid).collect();
            while let Some(p) = stack.pop() {
                for c in children(p).unwrap_or_default() {
                    let Some(s) = stat(c).filter(|s| !s.is_dead() && s.start >= self.root_start)
                    else {
                        continue;
                    };
                    stack.push(c);
                    if killed.get(&c) != Some(&s.start) {
                        fresh.push(s);
                    }
                }
            }
            if fresh.is_empty() {
                break;
            }
            for s in fresh {
                let mut fd = None;
                if signal(s.pid, s.start, &mut fd, Signal::KILL) {
                    killed.insert(s.pid, s.start);
                }
            }
            if std::time::Instant::now() >= deadline {
                // Killing the init below still ends the namespace.
                break;
            }
        }
        for c in inits {
            let mut fd = None;
            if signal(c.pid, c.start, &mut fd, Signal::KILL) {
                killed.insert(c.pid, c.start);
            }
        }
        let mut out: Vec<Killed> = killed
            .into_iter()
            .map(|(pid, start)| Killed { pid, start })
            .collect();
        self.kill_root(&mut out);
        Some(out)
    }

    /// A sub-reaper root: stops it, kills its live descendants round after round (the
    /// wrapper's watcher last, then one more sweep for anything forked meanwhile), then
    /// the root. `None` when the root is gone or its children cannot be listed; the
    /// root's death meanwhile, or a root that never stops, adds the full search.
    fn kill_subtree(&self) -> Option<Vec<Killed>> {
        if !self.root_alive() {
            return None;
        }
        let mut root_fd = None;
        if !signal(self.root, self.root_start, &mut root_fd, Signal::STOP) {
            return None;
        }
        children(self.root)?;
        let root_line = std::fs::read(format!("/proc/{}/cmdline", self.root)).ok();
        let deadline = std::time::Instant::now() + STOP_GRACE;
        let mut killed: HashMap<u32, u64> = HashMap::new();
        // First the command's processes, sparing the watcher; then everything left.
        let settled = self.sweep(root_line.as_deref(), deadline, &mut killed)
            && self.sweep(None, deadline, &mut killed);
        let mut out: Vec<Killed> = killed
            .into_iter()
            .map(|(pid, start)| Killed { pid, start })
            .collect();
        let orphaned = !self.root_alive();
        self.kill_root(&mut out);
        if orphaned || !settled {
            // The root died during the walk (what it left went to init), or it never
            // stopped: the full search finds the rest.
            out.extend(self.freeze_and_kill(true));
        }
        Some(out)
    }

    /// Kills the root's live descendants round after round until a round finds none
    /// not yet killed with the root stopped; `spare` (the root's command line) spares
    /// its direct children with that command line (the wrapper's own forks: its
    /// watcher), unless the root waits on a `vfork` child. `false` when `deadline`
    /// passed first.
    fn sweep(
        &self,
        spare: Option<&[u8]>,
        deadline: std::time::Instant,
        killed: &mut HashMap<u32, u64>,
    ) -> bool {
        loop {
            let mut fresh = Vec::new();
            let mut stack = vec![self.root];
            while let Some(p) = stack.pop() {
                for c in children(p).unwrap_or_default() {
                    let Some(s) = stat(c).filter(|s| !s.is_dead() && s.start >= self.root_start)
                    else {
                        continue;
                    };
                    stack.push(c);
                    if killed.get(&c) != Some(&s.start) {
                        fresh.push(s);
                    }
                }
            }
            // A root in `D` waits for a `vfork` child that has not exec'd yet (it
            // carries the same command line): then nothing is spared, or the root
            // never stops.
            let root_state = stat(self.root).map(|s| s.state);
            let spare = spare.filter(|_| root_state != Some('D'));
            fresh.retain(|s| {
                !(spare.is_some()
                    && s.ppid == self.root
                    && std::fs::read(format!("/proc/{}/cmdline", s.pid))
                        .ok()
                        .as_deref()
                        == spare)
            });
            if fresh.is_empty() && cannot_fork(self.root) {
                return true;
            }
            for s in fresh {
                let mut fd = None;
                if signal(s.pid, s.start, &mut fd, Signal::KILL) {
                    killed.insert(s.pid, s.start);
                }
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }

    /// Kills the root and its process group (the root is not reaped: the group id is
    /// still this call's).
    fn kill_root(&self, killed: &mut Vec<Killed>) {
        if let Some(g) = i32::try_from(self.root).ok().and_then(Pid::from_raw) {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
        let mut fd = None;
        if signal(self.root, self.root_start, &mut fd, Signal::KILL) {
            killed.push(Killed {
                pid: self.root,
                start: self.root_start,
            });
        }
    }

    fn freeze_and_kill(&self, group: bool) -> Vec<Killed> {
        let me = std::process::id();
        let deadline = std::time::Instant::now() + STOP_GRACE;
        let mut members: HashMap<u32, (u64, Option<OwnedFd>)> = HashMap::new();
        let group_id = i32::try_from(self.root).ok().and_then(Pid::from_raw);
        // Scans in a row that found nothing new with every frozen process stopped.
        let mut quiet = 0;
        loop {
            // The group is frozen by one signal, which also reaches a child being
            // forked at that moment; the scan finds the rest.
            if let (true, Some(g)) = (group, group_id) {
                let _ = rustix::process::kill_process_group(g, Signal::STOP);
            }
            let parents = frozen_parents(&members);
            let settled_before = members
                .iter()
                .all(|(pid, (start, _))| *start == u64::MAX || settled(*pid, *start, &parents));
            let procs = all_processes();
            let mut new: Vec<Stat> = Vec::new();
            // Children may be listed before their parents: repeat until nothing joins.
            loop {
                let mut grew = false;
                for p in &procs {
                    if p.pid == me
                        || p.is_dead()
                        || p.start < self.root_start
                        || members.contains_key(&p.pid)
                        || new.iter().any(|n| n.pid == p.pid)
                    {
                        continue;
                    }
                    let ours = (p.pid == self.root && p.start == self.root_start)
                        || (group && p.pgrp == self.root)
                        || members.contains_key(&p.ppid)
                        || new.iter().any(|n| n.pid == p.ppid)
                        || environ_has(p.pid, &self.needle);
                    if ours {
                        new.push(*p);
                        grew = true;
                    }
                }
                if !grew {
                    break;
                }
            }
            let out_of_time = std::time::Instant::now() >= deadline;
            if new.is_empty() {
                // A scan lists the pids first and reads them after: a process that
                // forked and died in between shows only its death. Stable once two
                // scans in a row, each begun with every frozen process stopped (so
                // none is half-way through a fork), find nothing new.
                quiet = if settled_before { quiet + 1 } else { 0 };
                if quiet >= 2 || out_of_time {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_micros(200));
                continue;
            }
            quiet = 0;
            for p in new {
                let mut fd = None;
                if signal(p.pid, p.start, &mut fd, Signal::STOP) {
                    members.insert(p.pid, (p.start, fd));
                } else {
                    // Gone already, or not the process we saw: remember it so the scan
                    // does not pick it again, and do not signal it.
                    members.insert(p.pid, (u64::MAX, None));
                }
            }
            if out_of_time {
                break;
            }
        }
        if let (true, Some(g)) = (group, group_id) {
            let _ = rustix::process::kill_process_group(g, Signal::KILL);
        }
        let mut killed = Vec::new();
        for (pid, (start, mut fd)) in members {
            if start != u64::MAX && signal(pid, start, &mut fd, Signal::KILL) {
                killed.push(Killed { pid, start });
            }
        }
        killed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};
    use std::time::{Duration, Instant};

    /// Waits until `pid` is in one of `states`.
    fn wait_state(pid: u32, states: &[char]) -> Stat {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(s) = stat(pid).filter(|s| states.contains(&s.state)) {
                return s;
            }
            assert!(Instant::now() < deadline, "{pid} never reached {states:?}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A `vfork` parent whose child is frozen before its `exec` stays in `D` state: it
    /// counts as settled once the child is frozen, so a kill does not wait out the
    /// stop grace. The child is made to block before `exec` by `posix_spawn` opening
    /// a FIFO nobody writes to (glibc runs the file actions in the `vfork` child).
    #[test]
    fn a_vfork_parent_of_a_frozen_child_is_settled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let fifo = dir.path().join("fifo");
        let made = Command::new("mkfifo").arg(&fifo).status();
        if !made.is_ok_and(|s| s.success()) {
            eprintln!("skipped: mkfifo is not available");
            return;
        }
        let script = format!(
            "import os\nos.posix_spawn('/bin/sleep', ['sleep', '60'], os.environ, \
             file_actions=[(os.POSIX_SPAWN_OPEN, 0, {:?}, os.O_RDONLY, 0)])\n",
            fifo.display().to_string()
        );
        // The interpreter itself (`python3` may be a wrapper script that starts it).
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        let Some(python) = python.filter(|p| !p.is_empty()) else {
            eprintln!("skipped: python3 is not available");
            return;
        };
        let mut parent = Command::new(python)
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start python3");
        /// Kills what the test started, whatever happens.
        struct Cleanup(Vec<u32>);
        impl Drop for Cleanup {
            fn drop(&mut self) {
                for pid in &self.0 {
                    if let Some(p) = i32::try_from(*pid).ok().and_then(Pid::from_raw) {
                        let _ = rustix::process::kill_process(p, Signal::KILL);
                    }
                }
            }
        }
        let mut cleanup = Cleanup(vec![parent.id()]);
        let ppid = parent.id();
        // The parent waits in `D` for its `vfork` child, which blocks opening the FIFO.
        let child = {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                if let Some(c) = all_processes().into_iter().find(|p| p.ppid == ppid) {
                    break c;
                }
                assert!(Instant::now() < deadline, "the vfork child never appeared");
                std::thread::sleep(Duration::from_millis(5));
            }
        };
        cleanup.0.push(child.pid);
        let p = wait_state(ppid, &['D']);
        let mut members: HashMap<u32, (u64, Option<OwnedFd>)> = HashMap::new();
        members.insert(ppid, (p.start, None));
        members.insert(child.pid, (child.start, None));
        // Before the child is frozen the parent is not settled: it may yet run.
        assert!(!settled(ppid, p.start, &frozen_parents(&members)));
        let mut fd = None;
        assert!(signal(child.pid, child.start, &mut fd, Signal::STOP));
        wait_state(child.pid, &['T', 't']);
        assert_eq!(
            stat(ppid).map(|s| s.state),
            Some('D'),
            "the parent cannot stop"
        );
        assert!(settled(ppid, p.start, &frozen_parents(&members)));
        // The tree kills both.
        let tree = Tree::new(ppid, Shape::Subtree, "KEEL_REAP_TEST_UNSET", "x");
        let killed = tree.kill_all(true);
        assert!(killed.iter().any(|k| k.pid == child.pid), "{killed:?}");
        let _ = parent.wait();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !finished(child.pid, child.start) {
            assert!(Instant::now() < deadline, "the vfork child survived");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
