//! Invariants of the code base that docs/ARCHITECTURE.md states: every workspace member
//! is named in its codemap, the library crates never print, no source file grows past
//! 800 lines unless it is generated, the modules of `adapters/` and `config/` import
//! each other without a circle, and no module of the kernel imports a layer above its
//! own.

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

/// The kernel's layers, bottom first, as the table under "Inner layers" in
/// docs/ARCHITECTURE.md lists them (`| 1 | `base/` | … |`).
fn kernel_layers(doc: &str) -> Vec<String> {
    let start = doc
        .find("#### Inner layers")
        .expect("an \"Inner layers\" section");
    let mut layers: Vec<(usize, String)> = Vec::new();
    for line in doc[start..].lines().skip(1) {
        if line.starts_with("#### ") || line.starts_with("### ") {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // ["", "1", "`base/`", "…", ""]
        if cells.len() < 4 {
            continue;
        }
        let (Ok(n), Some(folder)) = (
            cells[1].parse::<usize>(),
            cells[2]
                .strip_prefix('`')
                .and_then(|c| c.strip_suffix("/`")),
        ) else {
            continue;
        };
        layers.push((n, folder.to_owned()));
    }
    layers.sort();
    layers.into_iter().map(|(_, f)| f).collect()
}

/// The first segment of every `crate::` path in the code of `text` (comments left
/// out), with its line number: `crate::a::b` gives `a`, `crate::{a::x, b}` gives `a`
/// and `b`.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            // `keel_crate::` or `super_crate::` are other names.
            let before = rest[..at].chars().last();
            rest = &rest[at + "crate::".len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let first = item.trim().split("::").next().unwrap_or("").trim();
                    if !first.is_empty() {
                        out.push((i + 1, first.to_owned()));
                    }
                }
            } else {
                let first: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                out.push((i + 1, first));
            }
        }
    }
    out
}

/// The imports of `text`, a file of layer `own`, that point to a layer above it.
fn upward_imports(layers: &[String], own: &str, text: &str) -> Vec<(usize, String)> {
    let Some(level) = layers.iter().position(|l| l == own) else {
        return Vec::new();
    };
    crate_paths(text)
        .into_iter()
        .filter(|(_, seg)| {
            layers
                .iter()
                .position(|l| l == seg)
                .is_some_and(|p| p > level)
        })
        .collect()
}

#[test]
fn the_layer_check_catches_an_upward_import() {
    let layers: Vec<String> = ["base", "session", "work"].map(str::to_owned).to_vec();
    let text = "use crate::base::model::Message;\n\
                // crate::work::x in a comment does not count\n\
                use crate::{base::store, work::request::Active};\n\
                fn f() { crate::session::Session::new(); }\n";
    assert_eq!(
        upward_imports(&layers, "session", text),
        vec![(3, "work".to_owned())]
    );
    assert_eq!(
        upward_imports(&layers, "base", text),
        vec![(3, "work".to_owned()), (4, "session".to_owned())]
    );
    assert!(upward_imports(&layers, "work", text).is_empty());
}

#[test]
fn no_kernel_module_imports_a_layer_above_its_own() {
    let doc = std::fs::read_to_string(root().join("docs/ARCHITECTURE.md")).unwrap();
    let layers = kernel_layers(&doc);
    assert!(
        layers.len() >= 4,
        "docs/ARCHITECTURE.md lists the kernel's layers in a table under \"Inner layers\": {layers:?}"
    );
    let src = root().join("kernel/src");
    // Every folder of kernel/src is a layer, and every file at its top is the crate root.
    let mut stray = Vec::new();
    for e in std::fs::read_dir(&src).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.path().is_dir() {
            if !layers.contains(&name) {
                stray.push(format!(
                    "kernel/src/{name}/ is not a layer of docs/ARCHITECTURE.md"
                ));
            }
        } else if !matches!(name.as_str(), "lib.rs" | "fuzzing.rs") {
            stray.push(format!("kernel/src/{name} belongs in a layer's folder"));
        }
    }
    assert!(stray.is_empty(), "{}", stray.join("\n"));
    let mut found = Vec::new();
    for layer in &layers {
        let mut files = Vec::new();
        rust_files(&src.join(layer), &mut files);
        assert!(!files.is_empty(), "the layer {layer} has no files");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (line, up) in upward_imports(&layers, layer, &text) {
                let rel = f.strip_prefix(root()).unwrap_or(&f).display().to_string();
                found.push(format!(
                    "{rel}:{line}: layer {layer} imports {up}, a layer above it"
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "kernel modules import only their own layer and those below it (docs/ARCHITECTURE.md):\n{}",
        found.join("\n")
    );
}
