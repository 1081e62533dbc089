//! The workspace forbids `unsafe` code everywhere but in `tools/src/spawn.rs` (the code
//! run between `fork` and `exec`): this crate's lint table must be the workspace's
//! with `unsafe_code = "deny"` instead of `"forbid"`, every other crate must inherit
//! the workspace's, and no other source file of this crate may allow `unsafe_code`.

use std::path::Path;

fn manifest(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).expect("read manifest");
    text.parse().expect("parse manifest")
}

#[test]
fn only_the_spawn_module_may_use_unsafe_code() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.parent().expect("workspace root");
    let workspace = manifest(&root.join("Cargo.toml"));
    let mut expected = workspace["workspace"]["lints"].clone();
    assert_eq!(expected["rust"]["unsafe_code"].as_str(), Some("forbid"));
    expected["rust"]["unsafe_code"] = toml::Value::String("deny".into());
    let tools = manifest(&here.join("Cargo.toml"));
    assert_eq!(
        tools["lints"], expected,
        "tools/Cargo.toml's [lints] drifted from the workspace's"
    );
    // Every other member inherits the workspace's lints (`forbid`).
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("members");
    for m in members {
        let m = m.as_str().expect("member");
        if m == "tools" {
            continue;
        }
        let t = manifest(&root.join(m).join("Cargo.toml"));
        assert_eq!(
            t.get("lints").and_then(|l| l.get("workspace")),
            Some(&toml::Value::Boolean(true)),
            "{m} does not inherit the workspace's lints"
        );
    }
    // In this crate, only `spawn.rs` says `allow(unsafe_code)`.
    let mut stack = vec![here.join("src")];
    let mut allowing = Vec::new();
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read src") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let text = std::fs::read_to_string(&p).expect("read source");
                if text.contains("allow(unsafe_code)") {
                    allowing.push(p.strip_prefix(here).expect("prefix").to_owned());
                }
            }
        }
    }
    assert_eq!(allowing, [Path::new("src/spawn.rs")]);
}
