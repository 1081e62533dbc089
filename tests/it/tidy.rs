//! Invariants of the code base that docs/ARCHITECTURE.md states: every workspace member
//! is named in its codemap, the library crates never print, no source file grows past
//! 800 lines unless it is generated, and the modules of `adapters/` and `config/` import
//! each other without a circle.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;
/// Crates that must never write to stdout or stderr: hosts own the terminal.
const LIBRARIES: [&str; 8] = [
    "envelope",
    "kernel",
    "tools",
    "config",
    "adapters",
    "skills",
    "store-pg",
    "telemetry",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if matches!(name.as_str(), "target" | "node_modules" | ".git") {
                continue;
            }
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

fn workspace_members() -> Vec<String> {
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let start = manifest.find("members = [").expect("a members list");
    let list = &manifest[start..];
    let list = &list[..list.find(']').unwrap()];
    list.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_workspace_member_is_named_in_the_architecture() {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let members = workspace_members();
    assert!(members.len() >= 7, "{members:?}");
    let missing: Vec<&String> = members
        .iter()
        .filter(|m| !doc.contains(&format!("### `{m}")))
        .collect();
    assert!(
        missing.is_empty(),
        "workspace members without a codemap entry (`### `<path>…` heading) in docs/ARCHITECTURE.md: {missing:?}"
    );
}

#[test]
fn library_crates_never_print() {
    let printers = [
        "println!",
        "print!(",
        "eprintln!",
        "eprint!(",
        "dbg!(",
        "io::stdout(",
        "io::stderr(",
    ];
    let mut found = Vec::new();
    for lib in LIBRARIES {
        let mut files = Vec::new();
        rust_files(&root().join(lib).join("src"), &mut files);
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (i, line) in text.lines().enumerate() {
                // A unit-test module (at the end of its file) may say why it skips.
                if line.trim() == "#[cfg(test)]" {
                    break;
                }
                let code = line.split("//").next().unwrap_or("");
                if printers.iter().any(|p| code.contains(p)) {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "library crates must not print (hosts own stdout and stderr):\n{}",
        found.join("\n")
    );
}

/// Whether a file says in its first lines that it is generated.
fn generated(text: &str) -> bool {
    text.lines()
        .take(5)
        .any(|l| l.contains("@generated") || l.contains("Generated"))
}

#[test]
fn no_source_file_is_over_800_lines() {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    let mut long: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).ok()?;
            let n = text.lines().count();
            (n > MAX_LINES && !generated(&text)).then(|| {
                format!(
                    "{} ({n} lines)",
                    f.strip_prefix(root()).unwrap_or(f).display()
                )
            })
        })
        .collect();
    long.sort();
    assert!(
        long.is_empty(),
        "split these by job (at most {MAX_LINES} lines):\n{}",
        long.join("\n")
    );
}

/// The modules of crate `krate` (`adapters`, `config`) that each file's non-test code
/// names through `crate::…` (in `use` lines, `use crate::{a, b}` groups and paths),
/// by module name; `lib.rs` is left out (it declares and re-exports).
fn crate_imports(krate: &str) -> std::collections::BTreeMap<String, Vec<String>> {
    let src = root().join(krate).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let name = |f: &Path| {
        let rel = f.strip_prefix(&src).unwrap().with_extension("");
        rel.to_string_lossy().replace('/', "::")
    };
    let modules: Vec<String> = files.iter().map(|f| name(f)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for f in &files {
        let me = name(f);
        if me == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(f).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut named = Vec::new();
        for (i, _) in code.match_indices("crate::") {
            let rest = &code[i + "crate::".len()..];
            let group = rest
                .strip_prefix('{')
                .map(|g| g.split('}').next().unwrap_or(""));
            let heads: Vec<&str> = match group {
                Some(g) => g.split(',').map(|p| p.trim()).collect(),
                None => vec![rest],
            };
            for head in heads {
                let m: String = head
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                    .collect();
                if m != me && modules.contains(&m) && !named.contains(&m) {
                    named.push(m);
                }
            }
        }
        graph.insert(me, named);
    }
    graph
}

#[test]
fn the_adapters_and_the_configuration_have_no_import_circle() {
    for krate in ["adapters", "config"] {
        let graph = crate_imports(krate);
        assert!(graph.len() > 3, "{krate}: {graph:?}");
        // Depth-first search; a module met again on the current path closes a circle.
        fn visit<'a>(
            m: &'a str,
            graph: &'a std::collections::BTreeMap<String, Vec<String>>,
            path: &mut Vec<&'a str>,
            done: &mut Vec<&'a str>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| *p == m) {
                let mut circle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
                circle.push(m.to_owned());
                return Some(circle);
            }
            if done.contains(&m) {
                return None;
            }
            path.push(m);
            for next in graph.get(m).into_iter().flatten() {
                if let Some(c) = visit(next, graph, path, done) {
                    return Some(c);
                }
            }
            path.pop();
            done.push(m);
            None
        }
        let mut done = Vec::new();
        for m in graph.keys() {
            let circle = visit(m, &graph, &mut Vec::new(), &mut done);
            assert!(
                circle.is_none(),
                "{krate}/src has an import circle: {}",
                circle.unwrap_or_default().join(" -> ")
            );
        }
    }
}
