//! Bad configuration gets a clear error, never a panic or a hang: a malformed URL, a
//! wrong password, an unknown user, an unreachable host (nothing listening, a server
//! that never answers, no socket), a missing database, a database that belongs to
//! something else, a database newer than this binary. And migrations: nodes starting
//! together on a new database apply each migration once.

use std::time::Duration;

use keel_envelope::ErrorPayload;
use keel_store_pg::migrate::{Migrated, SCHEMA_VERSION, VERSION_TABLE};
use keel_store_pg::testing::{PgServer, PASSWORD, PASSWORD_USER};
use keel_store_pg::{kind_of, PgOptions, PgStore, StoreErrorKind};

async fn open_err(url: &str) -> ErrorPayload {
    match PgStore::open(url).await {
        Ok(s) => panic!("{url} opened: {s:?}"),
        Err(e) => e,
    }
}

fn database_of(url: &str) -> String {
    url.rsplit('/').next().unwrap_or_default().to_owned()
}

fn check(e: &ErrorPayload, kind: StoreErrorKind, says: &[&str]) {
    assert_eq!(kind_of(e), Some(kind), "{e:?}");
    for s in says {
        assert!(e.message.contains(s), "{:?} does not say {s:?}", e.message);
    }
}

#[tokio::test]
async fn a_malformed_url_is_refused() {
    for url in [
        "postgres://u@h:port/db",
        "postgres://u@h/db?sslmode=sometimes",
        "keel.db",
    ] {
        let e = open_err(url).await;
        check(&e, StoreErrorKind::InvalidUrl, &["postgres://"]);
        assert!(!e.retryable);
    }
    let e = open_err("postgres://u@h/db?sslmode=require").await;
    check(&e, StoreErrorKind::InvalidUrl, &["sslmode", "TLS"]);
}

#[tokio::test]
async fn a_wrong_password_is_told_apart() {
    let server = PgServer::shared();
    let db = database_of(&server.create_database());
    let secret = "wrong-password-never-shown";
    let e = open_err(&server.url_as(PASSWORD_USER, secret, &db)).await;
    check(
        &e,
        StoreErrorKind::AuthFailed,
        &["password", PASSWORD_USER, "store URL"],
    );
    assert!(!e.message.contains(secret), "{}", e.message);
    assert!(!e.details.to_string().contains(secret), "{}", e.details);
    let e = open_err(&format!(
        "postgres://{PASSWORD_USER}@{}",
        server
            .url(&db)
            .split_once('@')
            .map(|(_, rest)| rest)
            .unwrap_or_default()
    ))
    .await;
    check(&e, StoreErrorKind::AuthFailed, &["password"]);
    // The right password opens it: the test above fails for the password alone.
    let store = PgStore::open(&server.url_as(PASSWORD_USER, PASSWORD, &db)).await;
    assert!(store.is_ok(), "{store:?}");
}

#[tokio::test]
async fn an_unknown_user_is_refused() {
    let server = PgServer::shared();
    let url = server
        .url(&database_of(&server.create_database()))
        .replace("postgres://postgres@", "postgres://nobody_here@");
    let e = open_err(&url).await;
    check(&e, StoreErrorKind::AuthFailed, &["nobody_here"]);
}

#[tokio::test]
async fn nothing_listening_is_unreachable() {
    // A port just freed: connecting is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let e = open_err(&format!("postgres://keel:pw@127.0.0.1:{port}/keel")).await;
    check(
        &e,
        StoreErrorKind::Unreachable,
        &[&format!("127.0.0.1:{port}"), "server runs"],
    );
    assert!(e.retryable);
    assert!(!e.message.contains(":pw@"), "{}", e.message);
    // No socket in the directory.
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("postgresql:///keel?host={}&port=5999", dir.path().display());
    let e = open_err(&url).await;
    check(&e, StoreErrorKind::Unreachable, &["5999"]);
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    // Accepts connections and says nothing: only the connect timeout ends the wait.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            open.push(s);
        }
    });
    let mut options =
        PgOptions::from_url(&format!("postgres://keel@127.0.0.1:{port}/keel")).expect("url");
    options.connect_timeout = Duration::from_millis(300);
    let e = match PgStore::connect(options).await {
        Ok(s) => panic!("connected to a silent server: {s:?}"),
        Err(e) => e,
    };
    check(
        &e,
        StoreErrorKind::Unreachable,
        &["did not answer", "0.3 s"],
    );
    held.abort();
}

#[tokio::test]
async fn a_missing_database_says_how_to_create_it() {
    let server = PgServer::shared();
    let e = open_err(&server.url("no_such_database")).await;
    check(
        &e,
        StoreErrorKind::DatabaseMissing,
        &["no_such_database", "createdb no_such_database"],
    );
}

#[tokio::test]
async fn a_database_of_something_else_is_refused() {
    let server = PgServer::shared();
    let url = server.create_database();
    let db = database_of(&url);
    server
        .psql(
            &db,
            "CREATE TABLE users (id int); CREATE TABLE orders (id int)",
        )
        .expect("their tables");
    let e = open_err(&url).await;
    check(
        &e,
        StoreErrorKind::ForeignDatabase,
        &["orders, users", "CREATE DATABASE", "search_path"],
    );
    // Nothing of Keel's was created beside them.
    let tables = server
        .psql(
            &db,
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'keel%'",
        )
        .expect("count");
    assert_eq!(tables.trim(), "0");

    // A table under Keel's version table's name that is not Keel's.
    let url = server.create_database();
    server
        .psql(
            &database_of(&url),
            &format!("CREATE TABLE {VERSION_TABLE} (v text)"),
        )
        .expect("a look-alike");
    let e = open_err(&url).await;
    check(&e, StoreErrorKind::ForeignDatabase, &["not Keel's"]);

    // A schema of its own in the same database works.
    let db = database_of(&server.create_database());
    server
        .psql(&db, "CREATE TABLE users (id int); CREATE SCHEMA keel")
        .expect("schema");
    let url = format!("{}?options=-c%20search_path%3Dkeel", server.url(&db));
    let store = PgStore::open(&url).await;
    assert!(store.is_ok(), "{store:?}");
    let n = server
        .psql(
            &db,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'keel'",
        )
        .expect("count");
    assert!(n.trim().parse::<u32>().unwrap_or(0) >= 6, "{n}");
}

#[tokio::test]
async fn a_newer_database_is_refused() {
    let server = PgServer::shared();
    let url = server.create_database();
    let store = PgStore::open(&url).await.expect("open");
    assert_eq!(
        store.migrated(),
        Migrated {
            from: 0,
            to: SCHEMA_VERSION
        }
    );
    drop(store);
    let again = PgStore::open(&url).await.expect("open again");
    assert_eq!(
        again.migrated().from,
        SCHEMA_VERSION,
        "nothing to do the second time"
    );
    drop(again);
    let future = SCHEMA_VERSION + 1;
    server
        .psql(
            &database_of(&url),
            &format!(
                "INSERT INTO {VERSION_TABLE} (version, name, keel_version) \
                 VALUES ({future}, 'from the future', '99.0.0')"
            ),
        )
        .expect("a newer version");
    let e = open_err(&url).await;
    check(
        &e,
        StoreErrorKind::DatabaseNewer,
        &["upgrade keel", &future.to_string()],
    );
    assert_eq!(e.details["databaseVersion"], future);
    assert_eq!(e.details["supportedVersion"], SCHEMA_VERSION);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_migrate_once() {
    let server = PgServer::shared();
    let url = server.create_database();
    let opened = futures::future::join_all((0..8).map(|_| PgStore::open(&url))).await;
    let mut fresh = 0;
    for o in opened {
        match o {
            Ok(s) => fresh += usize::from(s.migrated().from == 0),
            Err(e) => panic!("a node failed to start: {e:?}"),
        }
    }
    assert_eq!(fresh, 1, "one node migrated, the others found it done");
    let rows = server
        .psql(
            &database_of(&url),
            &format!("SELECT string_agg(version::text, ',' ORDER BY version) FROM {VERSION_TABLE}"),
        )
        .expect("versions");
    let expected: Vec<String> = (1..=SCHEMA_VERSION).map(|v| v.to_string()).collect();
    assert_eq!(rows.trim(), expected.join(","));
}
