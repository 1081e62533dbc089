//! Faults: a file written while the baseline reads it, unreadable files, no inotify
//! (past the watch limit), and the store's disk full.

use keel_tools::checkpoint::CheckpointHome;

use super::*;

/// A genuine state of a file rewritten (truncated, then written from the start) again
/// and again: all `a` lines or all `b` lines, possibly cut short where the writer was.
fn genuine(body: &str) -> bool {
    let uniform =
        |c: &str| body.len() % 2 == 0 && body.as_bytes().chunks(2).all(|p| p == c.as_bytes());
    uniform("a\n") || uniform("b\n")
}

/// A file rewritten again and again while checkpoints read it is recorded as one of
/// the contents it really had, or noted as changing: never torn (half old, half new).
#[test]
fn a_file_that_changes_while_it_is_read_is_never_recorded_torn() {
    let w = ws();
    w.write("other.txt", "other\n");
    let mut writer = Command::new("sh")
        .arg("-c")
        .arg("while [ ! -e \"$STOP\" ]; do yes a | head -c 2000000 > big.txt; yes b | head -c 2000000 > big.txt; done")
        .env("STOP", w.outside.join("stop"))
        .current_dir(&w.root)
        .spawn()
        .expect("writer");
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut cps = w.open(false);
    let mut ids = Vec::new();
    for i in 0..8 {
        let id = format!("c{i}");
        cps.checkpoint(&id, json!(null)).expect("checkpoint");
        ids.push(id);
        std::thread::sleep(std::time::Duration::from_millis(15));
    }
    fs::write(w.outside.join("stop"), "").expect("stop");
    assert!(writer.wait().expect("writer").success());
    let last = w.read("big.txt").expect("big");
    cps.checkpoint("settled", json!(null)).expect("settled");
    let (mut whole, mut noted) = (0, 0);
    for id in &ids {
        w.write("big.txt", "final\n");
        let report = cps.restore(id).expect("restore");
        let body = w.read("big.txt").expect("big.txt is never lost");
        match report.not_restorable.iter().find(|n| n.path == "big.txt") {
            Some(n) => {
                assert!(n.reason.contains("being written"), "{n:?}");
                assert_eq!(body, "final\n", "left as it was");
                noted += 1;
            }
            None => {
                assert!(genuine(&body), "torn: {} bytes", body.len());
                whole += 1;
            }
        }
    }
    assert_eq!(whole + noted, ids.len());
    // Once the writes stop, the next checkpoint records the file's last content.
    cps.restore("settled").expect("restore settled");
    assert_eq!(w.read("big.txt"), Some(last));
}

/// The body of the unreadable-file check; run as a user that cannot read the file
/// (as root, in a child process that gave up root).
pub(super) fn unreadable_scenario(root: &Path, store: &Path) {
    let sh = |script: &str| {
        let ok = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(root)
            .status()
            .expect("sh")
            .success();
        assert!(ok, "{script}");
    };
    sh("echo secret > secret.txt && chmod 000 secret.txt && echo open > open.txt");
    let mut cps =
        Checkpoints::open(root, store, "unreadable", CheckpointConfig::default()).expect("open");
    cps.checkpoint("c1", json!(null)).expect("c1");
    sh("chmod 600 secret.txt && echo changed > secret.txt && chmod 000 secret.txt && echo edited > open.txt");
    cps.checkpoint("c2", json!(null)).expect("c2");
    let report = cps.restore("c1").expect("restore");
    let failed: Vec<&str> = report
        .not_restorable
        .iter()
        .map(|n| n.path.as_str())
        .collect();
    assert_eq!(failed, vec!["secret.txt"], "{report:?}");
    assert!(report.not_restorable[0]
        .reason
        .contains("could not be read"));
    assert_eq!(
        fs::read_to_string(root.join("open.txt")).expect("open"),
        "open\n"
    );
    // Never lost: the unreadable file is still there, untouched.
    sh("test -e secret.txt");
}

#[test]
fn unreadable_files_are_noted_not_restorable_and_never_lost() {
    let w = ws();
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !is_root {
        unreadable_scenario(&w.root, &w.store);
        return;
    }
    // Root reads every file: play the scenario as `nobody`.
    let base = w.root.parent().expect("base");
    let ok = Command::new("chown")
        .args(["-R", "65534:65534"])
        .arg(base)
        .status()
        .expect("chown")
        .success();
    assert!(ok);
    fs::set_permissions(base, fs::Permissions::from_mode(0o755)).expect("chmod");
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(exe)
        .args(["--exact", "child_role", "--nocapture", "--test-threads=1"])
        .env("KEEL_CP_CHILD", "unreadable")
        .env("KEEL_CP_WS", &w.root)
        .env("KEEL_CP_STORE", &w.store)
        .output()
        .expect("setpriv");
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
fn past_the_watch_limit_checkpoints_fall_back_to_scanning() {
    let w = ws();
    for d in 0..10 {
        w.write(&format!("d{d}/f.txt"), &format!("{d}\n"));
    }
    let config = CheckpointConfig {
        max_watches: 3,
        watch_min_paths: 0,
        ..CheckpointConfig::default()
    };
    let mut cps = Checkpoints::open(&w.root, &w.store, "s", config).expect("open");
    assert_eq!(cps.detection(), Detection::Watch);
    cps.checkpoint("c1", json!(null)).expect("c1");
    assert_eq!(cps.detection(), Detection::Scan, "watch limit reached");
    w.sh("echo x > d7/f.txt && rm d2/f.txt && echo n > d9/new.txt");
    let c2 = cps.checkpoint("c2", json!(null)).expect("c2");
    assert!(cps.last_stats().full);
    assert_eq!(
        changed(&c2),
        vec![
            ("d2/f.txt".to_string(), ChangeKind::Deleted),
            ("d7/f.txt".to_string(), ChangeKind::Modified),
            ("d9/new.txt".to_string(), ChangeKind::Created),
        ]
    );
    cps.restore("c1").expect("restore");
    assert_eq!(w.read("d7/f.txt").as_deref(), Some("7\n"));
    assert_eq!(w.read("d2/f.txt").as_deref(), Some("2\n"));
    assert_eq!(w.read("d9/new.txt"), None);
}

/// A tiny tmpfs, unmounted when dropped.
struct Tmpfs(PathBuf);

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

fn tmpfs(path: &Path, size: &str) -> Option<Tmpfs> {
    fs::create_dir_all(path).expect("mkdir");
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
        .arg(path)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Tmpfs(path.to_path_buf()))
}

#[test]
fn a_full_disk_is_a_warning_and_damages_nothing_already_stored() {
    let w = ws();
    let Some(_mount) = tmpfs(&w.store, "2m") else {
        eprintln!("cannot mount a tmpfs here (not root?): the full-disk test needs one");
        return;
    };
    for i in 0..20 {
        w.write(&format!("src/f{i}.txt"), &format!("file {i}\n"));
    }
    let mut cps = w.open(true);
    cps.checkpoint("c1", json!(null)).expect("c1");
    // Bigger than the free space, smaller than the file size limit.
    w.write("big.txt", &"x".repeat(3 * 1024 * 1024));
    w.write("src/f1.txt", "edited\n");
    let err = cps.checkpoint("c2", json!(null)).expect_err("disk full");
    assert!(err.is_disk_full(), "{err}");
    assert!(err.to_string().contains("no space left"), "{err}");
    assert_eq!(cps.list().len(), 1, "nothing recorded");
    let home = CheckpointHome::new(&w.store);
    assert!(home.verify().expect("verify").is_empty());
    // What was stored is intact: the earlier checkpoint restores.
    fs::remove_file(w.root.join("big.txt")).expect("rm");
    let report = cps.restore("c1").expect("restore");
    assert!(report.not_restorable.is_empty(), "{report:?}");
    assert_eq!(w.read("src/f1.txt").as_deref(), Some("file 1\n"));
    // With room again, checkpoints go on.
    w.write("src/f2.txt", "later\n");
    let c3 = cps.checkpoint("c3", json!(null)).expect("c3");
    assert_eq!(
        changed(&c3),
        vec![("src/f2.txt".to_string(), ChangeKind::Modified)]
    );
    assert!(home.verify().expect("verify").is_empty());
}
