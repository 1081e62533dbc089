//! `keel exec --worktree` on a 10,000-file repository, stopped while its session
//! starts: Ctrl-C (SIGINT) gives the start up and takes its worktree back before the
//! exit (code 130), and SIGKILL at any moment leaves at most a leftover that `keel
//! doctor` removes. Afterwards every worktree left belongs to a stored session,
//! git knows no other, and no `keel/` branch is left without one.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use keel_testsupport::{git, Busy, Rng};

struct Fixture {
    tmp: tempfile::TempDir,
    repo: PathBuf,
}

impl Fixture {
    fn new() -> Self {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        for d in 0..100 {
            let dir = repo.join(format!("d{d:03}"));
            std::fs::create_dir_all(&dir).unwrap();
            for f in 0..100 {
                std::fs::write(dir.join(format!("f{f:03}.txt")), format!("{d}/{f}\n")).unwrap();
            }
        }
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", "ten thousand files"]);
        std::fs::create_dir_all(tmp.path().join("home")).unwrap();
        std::fs::write(
            tmp.path().join("script.json"),
            r#"{"turns":[{"text":"done"}]}"#,
        )
        .unwrap();
        Self { tmp, repo }
    }

    fn home(&self) -> PathBuf {
        self.tmp.path().join("home")
    }

    fn keel(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
        c.env("KEEL_HOME", self.home())
            .env("KEEL_SOCKET", self.tmp.path().join("none.sock"))
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .stdin(Stdio::null());
        c
    }

    fn exec(&self) -> std::process::Child {
        self.keel()
            .args(["exec", "hello", "--json", "--worktree", "--workspace"])
            .arg(&self.repo)
            .arg("--model")
            .arg(format!(
                "scripted:{}",
                self.tmp.path().join("script.json").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// The ids of the stored sessions.
    fn sessions(&self) -> Vec<String> {
        let out = self
            .keel()
            .args(["sessions", "list", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s["sessionId"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The records kept under the worktree folder: (name, state, session).
    fn records(&self) -> Vec<(String, String, String)> {
        let dir = self.home().join("worktrees/records");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .map(|p| {
                let v: serde_json::Value =
                    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
                (
                    v["name"].as_str().unwrap().to_owned(),
                    v["state"].as_str().unwrap().to_owned(),
                    v["sessionId"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// What is left is whole: every record ready and its session stored, one
    /// folder per record, git's worktrees and `keel/` branches one per record.
    fn assert_whole(&self, after: &str) {
        let sessions = self.sessions();
        let records = self.records();
        for (name, state, session) in &records {
            assert_eq!(state, "ready", "{after}: {name} is {state}");
            assert!(
                sessions.contains(session),
                "{after}: {name}'s session {session} is not stored ({sessions:?})"
            );
        }
        let folder = self.home().join("worktrees");
        let folders = std::fs::read_dir(&folder)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| n != "records")
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(folders, records.len(), "{after}: folders without a record");
        let listed = git(&self.repo, &["worktree", "list", "--porcelain"]);
        assert_eq!(
            listed.matches("worktree ").count(),
            records.len() + 1,
            "{after}: {listed}"
        );
        let branches = git(&self.repo, &["branch", "--list", "keel/*"]);
        assert_eq!(
            branches.lines().count(),
            records.len(),
            "{after}: {branches}"
        );
        assert_eq!(git(&self.repo, &["status", "--porcelain"]), "", "{after}");
    }
}

fn signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
}

/// How long one whole `keel exec --worktree` takes here.
fn whole_run(f: &Fixture) -> Duration {
    let t0 = Instant::now();
    let out = f.exec().wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    t0.elapsed()
}

#[test]
fn ctrl_c_while_the_worktree_is_made_takes_it_back() {
    let f = Fixture::new();
    let full = whole_run(&f);
    f.assert_whole("a whole run");
    let _busy = Busy::start(1);
    let mut rng = Rng::new(0x26_c7_1c);
    let mut given_up = 0;
    for round in 0..8 {
        let child = f.exec();
        std::thread::sleep(full.mul_f64(rng.below(100) as f64 / 100.0));
        signal(child.id(), "-INT");
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        match out.status.code() {
            // Finished first, or the request itself was interrupted.
            Some(0) | Some(130) => {}
            // Before the handler was installed: nothing was made yet.
            None => {}
            other => panic!("round {round}: exit {other:?}: {stderr}"),
        }
        if stderr.contains("interrupted while the session was starting") {
            given_up += 1;
            assert_eq!(out.status.code(), Some(130), "{stderr}");
        }
        f.assert_whole(&format!("SIGINT round {round}"));
    }
    // The start (a checkout of 10,000 files) is most of a run.
    assert!(given_up > 0, "no Ctrl-C came while a session started");
}

#[test]
fn sigkill_while_the_worktree_is_made_leaves_what_keel_doctor_removes() {
    let f = Fixture::new();
    let full = whole_run(&f);
    let _busy = Busy::start(1);
    let mut rng = Rng::new(0x26_9111);
    for _ in 0..8 {
        let mut child = f.exec();
        std::thread::sleep(full.mul_f64(rng.below(100) as f64 / 100.0));
        signal(child.id(), "-KILL");
        let _ = child.wait();
    }
    let out = f
        .keel()
        .args(["doctor", "--json", "--timeout", "5"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let check = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "worktrees")
        .unwrap()
        .clone();
    assert_eq!(check["status"], "ok", "{check}");
    f.assert_whole("eight SIGKILLs and keel doctor");
    // A second doctor finds nothing more to do.
    let again = f.keel().args(["doctor", "--json"]).output().unwrap();
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(!text.contains("removed "), "{text}");
}
