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

/// Whether a process is gone: no `/proc` entry, a zombie, or another process that
/// reused its pid.
pub(crate) fn gone(pid: u32, start: u64) -> bool {
    match stat(pid) {
        None => true,
        Some(s) => s.is_dead() || s.start != start,
    }
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

/// The processes of one call.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    root: u32,
    root_start: u64,
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
    pub(crate) fn new(root: u32, marker_var: &str, marker: &str) -> Self {
        let root_start = stat(root).map(|s| s.start).unwrap_or(0);
        Self {
            root,
            root_start,
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
        let killed = self.freeze_and_kill(group);
        *done = Some(killed.clone());
        killed
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
        let tree = Tree::new(ppid, "KEEL_REAP_TEST_UNSET", "x");
        let killed = tree.kill_all(true);
        assert!(killed.iter().any(|k| k.pid == child.pid), "{killed:?}");
        let _ = parent.wait();
        let deadline = Instant::now() + Duration::from_secs(20);
        while !gone(child.pid, child.start) {
            assert!(Instant::now() < deadline, "the vfork child survived");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
