//! The role table of `docs/protocol.md` is generated from `keel_serve::roles`; this
//! test fails when the checked-in table is stale.

use keel_serve::roles::{role_table_markdown, DOC_BEGIN, DOC_END};

#[test]
fn roles_doc_table_in_protocol_md_is_fresh() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let start = doc
        .find(DOC_BEGIN)
        .expect("docs/protocol.md lacks the role table's markers")
        + DOC_BEGIN.len();
    let end = doc
        .find(DOC_END)
        .expect("docs/protocol.md lacks the role table's end marker");
    assert!(start <= end);
    let want = format!(
        "{}\n\n{}\n{}",
        &doc[..start],
        role_table_markdown(),
        &doc[end..]
    );
    if doc != want {
        if std::env::var_os("KEEL_UPDATE_GENERATED").is_some() {
            std::fs::write(&path, &want).unwrap();
        } else {
            panic!(
                "the role table in docs/protocol.md is stale; regenerate with:\n\
                 KEEL_UPDATE_GENERATED=1 cargo test -p keel-serve --test serve roles_doc"
            );
        }
    }
}
