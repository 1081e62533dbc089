//! The conformance suite of the kernel's store interface, run against every backend
//! a kernel can use: the file store (two handles on one directory, as two processes
//! would have), the memory store, and PostgreSQL (two stores on one fresh database
//! of the shared test server, as two nodes).

use std::sync::Arc;

use keel_kernel::store::{FileStore, MemoryStore, Store};
use keel_store_pg::testing::PgServer;
use keel_store_pg::PgKernelStore;

type Pair = (Arc<dyn Store>, Arc<dyn Store>);

mod file {
    use super::*;

    fn fresh() -> Pair {
        // Kept for the whole process: the directory outlives the test's handles.
        let dir = tempfile::tempdir().expect("tempdir").keep();
        (
            Arc::new(FileStore::new(&dir)),
            Arc::new(FileStore::new(&dir)),
        )
    }

    keel_store_pg::kernel_store_tests!(fresh());
}

mod memory {
    use super::*;

    fn fresh() -> Pair {
        let s: Arc<dyn Store> = Arc::new(MemoryStore::default());
        (s.clone(), s)
    }

    keel_store_pg::kernel_store_tests!(fresh());
}

mod postgres {
    use super::*;

    fn fresh() -> Pair {
        let url = PgServer::shared().create_database();
        let open = || match PgKernelStore::open(&url) {
            Ok(s) => Arc::new(s) as Arc<dyn Store>,
            Err(e) => panic!("cannot open {url}: {e:?}"),
        };
        (open(), open())
    }

    keel_store_pg::kernel_store_tests!(fresh());
}
