//! Invariants of the code base that docs/ARCHITECTURE.md states: every workspace member
//! is named in its codemap, the library crates never print, and no source file grows
//! past 800 lines unless it is generated.

use std::path::{Path, PathBuf};

const MAX_LINES: usize = 800;
/// Crates that must never write to stdout or stderr: hosts own the terminal.
const LIBRARIES: [&str; 6] = [
    "envelope",
    "kernel",
    "tools",
    "adapters",
    "skills",
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
