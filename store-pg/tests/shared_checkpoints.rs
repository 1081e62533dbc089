//! The kernel's checkpoint interface over PostgreSQL (`Store::shared_checkpoints`):
//! objects kept once per content, records read back in order, every write fenced by
//! the lease of the node that makes it, bad input refused with a structured error.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use keel_kernel::ownership::Claim;
use keel_kernel::store::{SharedCheckpoint, Store};
use keel_store_pg::testing::PgServer;
use keel_store_pg::{objects::hash, PgKernelStore};

fn open(url: &str) -> PgKernelStore {
    PgKernelStore::open(url).unwrap_or_else(|e| panic!("cannot open {url}: {e:?}"))
}

fn object(text: &str) -> (String, Vec<u8>) {
    (hash(text.as_bytes()), text.as_bytes().to_vec())
}

#[test]
fn checkpoints_are_kept_once_per_content_and_fenced_by_the_lease() {
    let url = PgServer::shared().create_database();
    let (a, b) = (open(&url), open(&url));
    let (sa, sb) = (
        a.shared_checkpoints().unwrap(),
        b.shared_checkpoints().unwrap(),
    );
    let sid = "sess_checkpoints_01";
    let (one, two) = (object("one\n"), object("two\n"));

    // No lease: refused, nothing written.
    let e = sa.put_objects(sid, std::slice::from_ref(&one)).unwrap_err();
    assert_eq!(e.details["reason"], "fenced", "{e:?}");
    assert_eq!(
        sa.missing_objects(&[one.0.clone()]).unwrap(),
        [one.0.clone()]
    );

    let ttl = Duration::from_secs(1);
    assert!(matches!(a.claim(sid, "a", ttl).unwrap(), Claim::Owned(_)));
    sa.put_objects(sid, &[one.clone(), two.clone()]).unwrap();
    assert!(sb
        .missing_objects(&[one.0.clone(), two.0.clone()])
        .unwrap()
        .is_empty());
    let first = SharedCheckpoint {
        seq: 1,
        body: serde_json::json!({"seq": 1, "root": one.0}),
        objects: vec![one.0.clone(), two.0.clone()],
    };
    sa.put_checkpoint(sid, &first).unwrap();
    // The same record again is a no-op.
    sa.put_checkpoint(sid, &first).unwrap();
    // A record naming an object the store does not hold is refused.
    let unknown = object("never stored\n");
    let e = sa
        .put_checkpoint(
            sid,
            &SharedCheckpoint {
                seq: 2,
                body: serde_json::json!({"seq": 2}),
                objects: vec![unknown.0.clone()],
            },
        )
        .unwrap_err();
    assert_eq!(e.details["reason"], "object_missing", "{e:?}");
    // An object whose bytes do not have its name is refused.
    let e = sa
        .put_objects(sid, &[(one.0.clone(), b"other bytes".to_vec())])
        .unwrap_err();
    assert_eq!(e.details["reason"], "invalid_input", "{e:?}");
    // A name that is not a hash is refused too, for reads as well.
    assert!(sb.objects(&["../etc/passwd".to_owned()]).is_err());
    assert!(sb.missing_objects(&["ZZ".to_owned()]).is_err());

    // Another node reads what a wrote.
    assert_eq!(sb.last_checkpoint(sid).unwrap(), 1);
    assert_eq!(sb.checkpoints(sid).unwrap(), [first.clone()]);
    let mut got = sb
        .objects(&[two.0.clone(), one.0.clone(), unknown.0.clone()])
        .unwrap();
    got.sort();
    let mut want = vec![one.clone(), two.clone()];
    want.sort();
    assert_eq!(got, want);

    // Once a's lease ran out and b took the session over, a's writes are refused.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(matches!(b.claim(sid, "b", ttl).unwrap(), Claim::Owned(_)));
    let second = SharedCheckpoint {
        seq: 2,
        body: serde_json::json!({"seq": 2}),
        objects: vec![two.0.clone()],
    };
    let e = sa.put_checkpoint(sid, &second).unwrap_err();
    assert_eq!(e.details["reason"], "fenced", "{e:?}");
    sb.put_checkpoint(sid, &second).unwrap();
    assert_eq!(sa.last_checkpoint(sid).unwrap(), 2);

    // Deleting the session removes the objects no other session refers to.
    assert!(b.delete(sid).unwrap());
    assert_eq!(sb.last_checkpoint(sid).unwrap(), 0);
    assert_eq!(
        sb.missing_objects(&[one.0.clone()]).unwrap(),
        [one.0.clone()]
    );
}
