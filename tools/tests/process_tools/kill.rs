//! Kills at random moments of a shell command's start-up, with both cores busy: after
//! each, `run` has returned and no process started for the call survives.

use keel_testsupport::{Busy, Rng};

use super::*;

/// `/proc/<pid>/stat` flags bit of a process that is exiting.
const PF_EXITING: u64 = 0x4;

/// The processes whose command line holds `token` and that are neither dead nor
/// doomed (exiting, or with a SIGKILL pending).
fn survivors(token: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return found;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !cmdline.contains(token) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        let state = rest.first().copied().unwrap_or("X");
        let flags: u64 = rest.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
        if matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0 {
            continue;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let pending = status
            .lines()
            .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
            .fold(0, |a, b| a | b);
        if pending & (1 << 8) != 0 {
            continue;
        }
        if status.is_empty() {
            continue; // gone between the reads
        }
        found.push(format!("{pid} {state} {cmdline} | {stat}"));
    }
    found
}

/// Commands that fork grandchildren, call `setsid`, keep stdout open in a
/// background child, and exit at once leaving that child behind. `T` is replaced by
/// a number unique to the iteration, so every process of the call shows it.
const COMMANDS: [&str; 6] = [
    "sleep T & sleep T & wait",
    "setsid sleep T & sleep T",
    "sh -c 'setsid sh -c \"sleep T & sleep T\" & sleep T'",
    "sleep T & exit 0",
    "(setsid sleep T &); exec sleep T",
    "sh -c 'sleep T & sleep T' & setsid sh -c 'sleep T & exec sleep T' & wait",
];

/// Only with a PID namespace: a grandchild that leaves the group and clears its
/// environment (so neither the group nor the marker finds it).
const NAMESPACE_ONLY: &str = "setsid env -i sleep T & sleep T";

async fn stress(mode: SandboxMode, iterations: u64, seed: u64) {
    let w = ws();
    let _busy = Busy::start(2);
    let mut rng = Rng(seed);
    let mut tokens = Vec::new();
    for i in 0..iterations {
        let token = format!("7{}.{:03}{:05}", std::process::id(), mode as u8, i);
        let pick = (rng.next() % (COMMANDS.len() as u64 + 1)) as usize;
        let template = match COMMANDS.get(pick) {
            Some(c) => *c,
            None if mode == SandboxMode::Bubblewrap => NAMESPACE_ONLY,
            None => COMMANDS[0],
        };
        let cmd = template.replace('T', &token);
        let (ctx, _) = ctx_config(&w.root, SandboxConfig::new(mode), false);
        let cancel = ctx.cancel.clone();
        // Anywhere from before the call starts to well after the sandbox is up.
        let delay = match rng.next() % 8 {
            0 => None,
            _ => Some(Duration::from_micros(rng.next() % 30_000)),
        };
        let task = tokio::spawn(async move {
            tool("run_shell")
                .run(json!({"command": cmd, "timeoutMs": 600_000}), ctx)
                .await
        });
        match delay {
            None => cancel.cancel(),
            Some(d) => {
                tokio::time::sleep(d).await;
                cancel.cancel();
            }
        }
        // A hang guard, not a timing assertion: `run` must come back.
        let r = tokio::time::timeout(Duration::from_secs(60), task)
            .await
            .unwrap_or_else(|_| panic!("{mode}: run never returned ({template}, {delay:?})"))
            .expect("join");
        match r {
            Err(e) => assert_eq!(e.code, ErrorCode::Interrupted, "{mode}: {e:?}"),
            // A command that exits at once may finish before the cancel.
            Ok(v) => assert!(template.contains("exit 0"), "{mode}: {template}: {v}"),
        }
        let left = survivors(&token);
        assert!(
            left.is_empty(),
            "{mode}: iteration {i} (seed {seed}, {template}, {delay:?}) left {left:?}"
        );
        tokens.push(token);
    }
    // Every doomed process does die (bounded, generous under load).
    for _ in 0..1000 {
        if tokens
            .iter()
            .all(|t| survivors(t).is_empty() && !any_process(t))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let left: Vec<String> = tokens.iter().flat_map(|t| survivors(t)).collect();
    assert!(left.is_empty(), "{mode}: still alive: {left:?}");
}

/// Whether any live (non-zombie) process shows `token`.
fn any_process(token: &str) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten().any(|e| {
        let pid = e.file_name();
        let Some(pid) = pid.to_str() else {
            return false;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmd)
            .replace('\0', " ")
            .contains(token)
            && !process_gone(pid.parse().unwrap_or(0))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_bubblewrap_start_up_leave_no_survivor() {
    assert_eq!(
        keel_tools::sandbox_report(&SandboxConfig::new(SandboxMode::Bubblewrap)).sandbox,
        SandboxKind::Bubblewrap,
        "bubblewrap must be usable for this test"
    );
    stress(SandboxMode::Bubblewrap, 200, 0x5eed_0001).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_during_landlock_start_up_leave_no_survivor() {
    if let Err(why) = keel_tools::sandbox_report(&SandboxConfig::default()).landlock {
        println!("skipped: {why}");
        return;
    }
    stress(SandboxMode::Landlock, 200, 0x5eed_0002).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kills_of_unsandboxed_commands_leave_no_survivor() {
    stress(SandboxMode::Off, 200, 0x5eed_0003).await;
}
