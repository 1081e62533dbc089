//! The store conformance suite against PostgreSQL: each case on a fresh database of
//! the shared test server.

use keel_store_pg::testing::PgServer;
use keel_store_pg::PgStore;

async fn fresh() -> PgStore {
    let url = PgServer::shared().create_database();
    match PgStore::open(&url).await {
        Ok(s) => s,
        Err(e) => panic!("cannot open {url}: {e:?}"),
    }
}

keel_store_pg::conformance_tests!(fresh());
