//! Workspace-jail path resolution, in a temporary workspace with symlinks inside,
//! outside, up, to the root, dangling and looping. Invariant: a path the jail calls
//! inside really is inside the root once every symlink is followed, and one it calls
//! outside is not; a `cwd` it accepts is an existing directory inside. Never a panic.
#![no_main]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use keel_tools::jail;
use libfuzzer_sys::fuzz_target;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    bases: Vec<PathBuf>,
}

fn fixture() -> &'static Fixture {
    static F: OnceLock<Fixture> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(dir.path()).expect("canonical");
        let root = base.join("ws");
        let out = base.join("outside");
        for d in ["src/deep/nested", ".git", "docs"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        std::fs::create_dir_all(&out).expect("mkdir");
        std::fs::write(root.join("src/a.rs"), "a").expect("write");
        std::fs::write(out.join("secret"), "s").expect("write");
        let links: &[(&str, &str)] = &[
            ("link_in", "src"),
            ("link_file", "src/a.rs"),
            ("link_up", ".."),
            ("src/deep/link_up2", "../../.."),
            ("link_root", "/"),
            ("dangling_in", "src/new.rs"),
            ("loop_a", "loop_b"),
            ("loop_b", "loop_a"),
            ("chain", "link_in/deep"),
        ];
        for (name, target) in links {
            symlink(target, root.join(name)).expect("symlink");
        }
        symlink(&out, root.join("link_out")).expect("symlink");
        symlink(out.join("missing/x"), root.join("dangling_out")).expect("symlink");
        let bases = vec![
            root.clone(),
            root.join("src"),
            root.join("src/deep/nested"),
            out.clone(),
        ];
        Fixture {
            _dir: dir,
            root,
            bases,
        }
    })
}

/// The real location of `p`: its deepest existing ancestor, canonicalised, plus the
/// rest.
fn real(p: &Path) -> Option<PathBuf> {
    let mut existing = p.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return Some(out);
        }
        let name = existing.file_name()?.to_owned();
        rest.push(name);
        if !existing.pop() {
            return None;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let f = fixture();
    let Some((&sel, raw)) = data.split_first() else {
        return;
    };
    let raw = String::from_utf8_lossy(raw);
    if raw.len() > 4096 {
        return;
    }
    let base = &f.bases[usize::from(sel) % f.bases.len()];
    if let Ok(r) = jail::resolve_from(&f.root, base, &raw) {
        assert!(r.abs.is_absolute(), "{raw:?}: {r:?}");
        assert_eq!(r.inside, r.abs.starts_with(&f.root), "{raw:?}: {r:?}");
        if let Some(real) = real(&r.abs) {
            // Whatever exists of it is where the jail says it is.
            assert_eq!(
                r.inside,
                real.starts_with(&f.root),
                "{raw:?}: {r:?} is really {real:?}"
            );
        }
        if r.inside {
            assert!(
                !r.display.starts_with('/') && !r.display.split('/').any(|c| c == ".."),
                "{raw:?}: {r:?}"
            );
        }
        if r.exists {
            assert_eq!(
                std::fs::canonicalize(&r.abs).ok().as_ref(),
                Some(&r.abs),
                "{raw:?}: {r:?}"
            );
        }
    }
    if let Ok(cwd) = jail::resolve_cwd(&f.root, Some(&raw)) {
        assert!(cwd.starts_with(&f.root), "{raw:?}: {cwd:?}");
        assert!(cwd.is_dir(), "{raw:?}: {cwd:?}");
        assert_eq!(
            std::fs::canonicalize(&cwd).ok().as_ref(),
            Some(&cwd),
            "{raw:?}: {cwd:?}"
        );
    }
});
