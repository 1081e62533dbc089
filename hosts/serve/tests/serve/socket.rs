//! Start-up: the socket's place and mode, stale files, racing daemons, idle exit.

use super::*;
use keel_serve::{bind, Bind, ServeError, ServeOutcome, StopCause};
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().mode() & 0o7777
}

#[tokio::test]
async fn the_socket_is_0600_and_a_missing_directory_is_created_private() {
    let base = socket_dir();
    let dir = base.path().join("run");
    let path = dir.join("keel.sock");
    let Bind::Listening(l) = bind(&path).await.unwrap() else {
        panic!("not listening")
    };
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&keel_serve::lock_path(&path)), 0o600);
    assert!(std::fs::metadata(&path)
        .unwrap()
        .file_type()
        .is_socket_like());
    drop(l);
    assert!(!path.exists(), "dropping the listener removes the socket");
    // The lock file stays (removing it would race with a starting daemon); it does
    // not stand in the way of the next daemon.
    assert!(matches!(bind(&path).await.unwrap(), Bind::Listening(_)));
}

trait SocketLike {
    fn is_socket_like(&self) -> bool;
}
impl SocketLike for std::fs::FileType {
    fn is_socket_like(&self) -> bool {
        std::os::unix::fs::FileTypeExt::is_socket(self)
    }
}

#[tokio::test]
async fn a_directory_others_can_write_to_is_refused() {
    for (m, who) in [
        (0o777, "everyone"),
        (0o770, "the group"),
        (0o1777, "everyone"),
    ] {
        let base = socket_dir();
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(m)).unwrap();
        let path = base.path().join("keel.sock");
        let err = bind(&path).await.unwrap_err();
        let ServeError::UnsafeDirectory { why, .. } = &err else {
            panic!("{err}")
        };
        assert!(why.contains(who), "{why}");
        assert!(err.to_string().contains("refusing"), "{err}");
        assert!(!path.exists());
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_socket_is_left_alone() {
    let base = socket_dir();
    let path = base.path().join("keel.sock");
    std::fs::write(&path, b"precious").unwrap();
    let err = bind(&path).await.unwrap_err();
    assert!(matches!(err, ServeError::NotASocket(_)), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), b"precious");
}

#[tokio::test]
async fn a_stale_socket_file_is_replaced_and_a_live_one_is_reported() {
    let base = socket_dir();
    let path = base.path().join("keel.sock");
    // A daemon that died: its socket file remains, nothing listens.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());
    assert!(!keel_serve::answers(&path).await);
    let Bind::Listening(live) = bind(&path).await.unwrap() else {
        panic!("the stale file was not replaced")
    };
    assert!(keel_serve::answers(&path).await);
    match bind(&path).await.unwrap() {
        Bind::AlreadyRunning(p) => assert_eq!(p, path),
        Bind::Listening(_) => panic!("two listeners"),
    }
    drop(live);
}

/// Daemons started at the same moment, each in its own runtime on its own thread,
/// with the cores busy: exactly one listens, every other reports it.
#[test]
fn racing_daemons_end_with_exactly_one_listening() {
    let _load = cpu_load();
    for round in 0..10 {
        let base = socket_dir();
        let path = base.path().join("keel.sock");
        if round % 2 == 1 {
            // Half of the rounds start from a stale file.
            drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        }
        let barrier = Arc::new(std::sync::Barrier::new(4));
        let reported = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (path, barrier, tx) = (path.clone(), barrier.clone(), tx.clone());
                let reported = reported.clone();
                std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    barrier.wait();
                    rt.block_on(async {
                        let got = bind(&path).await.unwrap();
                        let listening = matches!(got, Bind::Listening(_));
                        tx.send(listening).unwrap();
                        reported.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        if let Bind::Listening(l) = got {
                            // Keep listening until every other daemon has answered.
                            while reported.load(std::sync::atomic::Ordering::SeqCst) < 4 {
                                tokio::time::sleep(Duration::from_millis(5)).await;
                            }
                            drop(l);
                        }
                    });
                })
            })
            .collect();
        drop(tx);
        let results: Vec<bool> = rx.iter().collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(results.len(), 4);
        assert_eq!(
            results.iter().filter(|l| **l).count(),
            1,
            "round {round}: {results:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_daemon_exits_but_not_while_a_request_waits_or_a_client_is_connected() {
    let (kernel, _m, _ws, _st) = super::kernel(vec![poke(), say(1)]);
    let dir = socket_dir();
    let socket = dir.path().join("keel.sock");
    let options = ServeOptions {
        socket: socket.clone(),
        connection: ConnectionOptions::default(),
        exit_when_idle: Some(Duration::from_secs(300)),
    };
    let task = tokio::spawn(keel_serve::serve(
        kernel.clone(),
        options,
        CancellationToken::new(),
    ));
    while !keel_serve::answers(&socket).await {
        tokio::task::yield_now().await;
    }
    // A client starts a request that waits for an approval, then leaves.
    let (c, mut rx) = connect(&socket).await;
    let sid = start_session(&c).await;
    send(&c, &sid, "poke").await;
    until(&mut rx, "approval", |e| {
        e.type_name() == "approval.requested"
    })
    .await;
    c.close().await;
    drop(c);
    // The approval waits 600 s; nothing exits while it does.
    tokio::time::sleep(Duration::from_secs(590)).await;
    assert!(!task.is_finished(), "exited while a request waited");
    assert!(kernel.is_busy());
    // Then it expires, the request ends, and 300 s later the daemon exits.
    tokio::time::sleep(Duration::from_secs(20)).await;
    assert!(!kernel.is_busy());
    tokio::time::sleep(Duration::from_secs(280)).await;
    assert!(!task.is_finished(), "exited before the idle time");
    tokio::time::sleep(Duration::from_secs(30)).await;
    match task.await.unwrap().unwrap() {
        ServeOutcome::Stopped(cause) => assert_eq!(cause, StopCause::Idle),
        other => panic!("{other:?}"),
    }
    assert!(!socket.exists());
}
