//! One skill: its `SKILL.md` checked against the Agent Skills format, and what
//! activation reads (the body, the list of the skill's other files, one of them).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::frontmatter;
use crate::{Source, Warning, WarningKind};

/// The file that makes a folder a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// The largest `SKILL.md` read, in bytes; a larger one is left out.
pub const MAX_SKILL_BYTES: u64 = 256 * 1024;
/// The longest name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description, in characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The longest `compatibility`, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// At most this many of a skill's other files are listed on activation.
pub const MAX_LISTED_FILES: usize = 200;
/// Folders of a skill deeper than this are not listed.
const MAX_LIST_DEPTH: usize = 4;
/// At most this many folders of a skill are read to list its files.
const MAX_LISTED_DIRS: usize = 500;

/// A skill as discovery found it: what goes into the model's context, and where the
/// rest is.
#[derive(Debug, Clone, PartialEq)]
pub struct Skill {
    /// Its name: lowercase letters, digits and hyphens, the same as its folder's.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// `license`, as written.
    pub license: Option<String>,
    /// `compatibility`, as written.
    pub compatibility: Option<String>,
    /// `metadata`, as written (a mapping).
    pub metadata: serde_json::Map<String, serde_json::Value>,
    /// `allowed-tools` (experimental in the format; kept, not enforced): a YAML list,
    /// or a string cut at spaces and commas outside parentheses.
    pub allowed_tools: Vec<String>,
    /// Its `SKILL.md`, as found.
    pub path: PathBuf,
    /// Its folder's real path: the files of the skill are those inside it.
    pub dir: PathBuf,
    /// Where it was found.
    pub source: Source,
    /// For a project's skill, the workspace's real path: its files must stay inside.
    pub(crate) jail: Option<PathBuf>,
}

/// What activating a skill reads.
#[derive(Debug, Clone, PartialEq)]
pub struct Activation {
    /// The skill's name.
    pub name: String,
    /// Its `SKILL.md`.
    pub path: PathBuf,
    /// Its folder (real path).
    pub dir: PathBuf,
    /// The Markdown body, without the front matter.
    pub body: String,
    /// Its other files, relative to `dir`, `/`-separated, sorted (at most
    /// [`MAX_LISTED_FILES`]; hidden files, links leading out of the folder and
    /// folders deeper than four levels are left out).
    pub files: Vec<String>,
    /// Whether files were left out because there were more than [`MAX_LISTED_FILES`]
    /// (or more than 500 folders to read).
    pub more_files: bool,
}

/// The front matter keys of the format; others (those of other agents) are ignored.
#[derive(Debug, Deserialize)]
struct RawMeta {
    name: Option<String>,
    description: Option<String>,
    license: Option<String>,
    compatibility: Option<String>,
    metadata: Option<serde_json::Map<String, serde_json::Value>>,
    #[serde(rename = "allowed-tools")]
    allowed_tools: Option<AllowedTools>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum AllowedTools {
    List(Vec<String>),
    Text(String),
}

/// Why a name is not a skill name, if it is not.
pub(crate) fn name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Some(format!(
            "the name is longer than {MAX_NAME_CHARS} characters"
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        return Some(format!(
            "the name {name:?} may only hold lowercase letters, digits and hyphens"
        ));
    }
    if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        return Some(format!(
            "the name {name:?} may not start or end with a hyphen, nor hold two in a row"
        ));
    }
    None
}

/// Cuts `allowed-tools` text at spaces and commas that are not inside parentheses
/// (`Bash(git log:*) Read` is two tools).
fn tool_list(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth = depth.saturating_sub(1);
                cur.push(c);
            }
            c if depth == 0 && (c.is_whitespace() || c == ',') => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The parts of a `SKILL.md` that discovery keeps, and its body.
pub(crate) struct Parsed {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) license: Option<String>,
    pub(crate) compatibility: Option<String>,
    pub(crate) metadata: serde_json::Map<String, serde_json::Value>,
    pub(crate) allowed_tools: Vec<String>,
    pub(crate) body: String,
}

/// Checks a `SKILL.md` of the folder `folder`: the kind of problem and a sentence,
/// or what it holds.
pub(crate) fn parse(text: &str, folder: &str) -> Result<Parsed, (WarningKind, String)> {
    let malformed = |m: String| (WarningKind::Malformed, m);
    let split = frontmatter::split(text).map_err(malformed)?;
    let Some(yaml) = split.yaml else {
        return Err(malformed(
            "it has no front matter (a first line `---`, then `name:` and `description:`, then `---`)".into(),
        ));
    };
    let raw: RawMeta = frontmatter::parse(yaml)
        .map_err(|e| malformed(format!("the front matter is not valid: {e}")))?;
    let name = raw.name.unwrap_or_default();
    if name.trim().is_empty() {
        return Err((
            WarningKind::BadName,
            "the front matter has no `name`".into(),
        ));
    }
    if let Some(p) = name_problem(&name) {
        return Err((WarningKind::BadName, p));
    }
    if name != folder {
        return Err((
            WarningKind::BadName,
            format!("the name {name:?} differs from its folder's name {folder:?}"),
        ));
    }
    let description = raw.description.unwrap_or_default().trim().to_owned();
    if description.is_empty() {
        return Err(malformed("the front matter has no `description`".into()));
    }
    if description.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(malformed(format!(
            "the description is longer than {MAX_DESCRIPTION_CHARS} characters"
        )));
    }
    if let Some(c) = &raw.compatibility {
        if c.chars().count() > MAX_COMPATIBILITY_CHARS {
            return Err(malformed(format!(
                "`compatibility` is longer than {MAX_COMPATIBILITY_CHARS} characters"
            )));
        }
    }
    let allowed_tools = match raw.allowed_tools {
        None => Vec::new(),
        Some(AllowedTools::List(l)) => l,
        Some(AllowedTools::Text(t)) => tool_list(&t),
    };
    Ok(Parsed {
        name,
        description,
        license: raw.license,
        compatibility: raw.compatibility,
        metadata: raw.metadata.unwrap_or_default(),
        allowed_tools,
        body: split.body.to_owned(),
    })
}

/// Reads a regular UTF-8 file of at most `max` bytes; the kind of problem and a
/// sentence otherwise.
pub(crate) fn read_text(path: &Path, max: u64) -> Result<String, (WarningKind, String)> {
    let bytes = keel_tools::jail::read_regular(path, max).map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            (
                WarningKind::TooLarge,
                format!("the file is larger than {} KiB", max / 1024),
            )
        } else {
            (WarningKind::Unreadable, format!("it cannot be read: {e}"))
        }
    })?;
    String::from_utf8(bytes).map_err(|_| (WarningKind::Unreadable, "it is not UTF-8 text".into()))
}

impl Skill {
    pub(crate) fn from_parsed(
        p: Parsed,
        path: PathBuf,
        dir: PathBuf,
        source: Source,
        jail: Option<PathBuf>,
    ) -> Skill {
        Skill {
            name: p.name,
            description: p.description,
            license: p.license,
            compatibility: p.compatibility,
            metadata: p.metadata,
            allowed_tools: p.allowed_tools,
            path,
            dir,
            source,
            jail,
        }
    }

    /// Whether `real` (a real path) is where this skill may read: inside its folder,
    /// and for a project's skill inside the workspace.
    fn may_read(&self, real: &Path) -> bool {
        real.starts_with(&self.dir) && self.jail.as_ref().is_none_or(|j| real.starts_with(j))
    }

    /// Reads the skill for its activation: the `SKILL.md` again (it may have changed
    /// since discovery: the same checks apply, and it must still bear the same name)
    /// and the list of its other files.
    pub fn activate(&self) -> Result<Activation, Warning> {
        let fail = |(kind, message): (WarningKind, String)| {
            Warning::new(
                &self.path,
                kind,
                format!("{message}; the skill was not activated"),
            )
        };
        let real = std::fs::canonicalize(&self.path)
            .map_err(|e| fail((WarningKind::Unreadable, format!("it cannot be read: {e}"))))?;
        if !self.may_read(&real) {
            return Err(fail((
                WarningKind::OutsideRoot,
                format!(
                    "it now leads to {}, outside the skill's folder",
                    real.display()
                ),
            )));
        }
        let text = read_text(&real, MAX_SKILL_BYTES).map_err(fail)?;
        let folder = self
            .dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = parse(&text, &folder).map_err(fail)?;
        if parsed.name != self.name {
            return Err(fail((
                WarningKind::BadName,
                format!("its name changed to {:?}", parsed.name),
            )));
        }
        let (files, more_files) = self.list_files();
        Ok(Activation {
            name: self.name.clone(),
            path: self.path.clone(),
            dir: self.dir.clone(),
            body: parsed.body,
            files,
            more_files,
        })
    }

    /// The skill's files but its `SKILL.md` (see [`Activation::files`]).
    fn list_files(&self) -> (Vec<String>, bool) {
        let mut out = Vec::new();
        let mut more = false;
        let mut stack = vec![(self.dir.clone(), String::new(), 0usize)];
        let mut visited = 0usize;
        while let Some((dir, prefix, depth)) = stack.pop() {
            // A skill with a huge tree (a vendored `node_modules`) costs a bounded walk.
            visited += 1;
            if more || visited > MAX_LISTED_DIRS {
                more = true;
                break;
            }
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut names: Vec<(String, PathBuf)> = entries
                .flatten()
                .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
                .filter(|(n, _)| !n.starts_with('.'))
                .collect();
            names.sort();
            for (name, path) in names {
                let rel = format!("{prefix}{name}");
                if depth == 0 && name == SKILL_FILE {
                    continue;
                }
                let Ok(lmd) = std::fs::symlink_metadata(&path) else {
                    continue;
                };
                if lmd.is_dir() {
                    if depth + 1 < MAX_LIST_DEPTH {
                        stack.push((path, format!("{rel}/"), depth + 1));
                    }
                    continue;
                }
                let is_file = if lmd.file_type().is_symlink() {
                    // A link counts when it leads to a regular file inside the folder;
                    // linked folders are not walked.
                    std::fs::canonicalize(&path).is_ok_and(|r| self.may_read(&r) && r.is_file())
                } else {
                    lmd.is_file()
                };
                if !is_file {
                    continue;
                }
                if out.len() == MAX_LISTED_FILES {
                    more = true;
                    break;
                }
                out.push(rel);
            }
        }
        out.sort();
        (out, more)
    }

    /// Reads one file of the skill, named relative to its folder (`scripts/run.sh`): a
    /// regular UTF-8 file of at most `max` bytes whose real path is inside the
    /// skill's folder (and, for a project's skill, the workspace). The error is a
    /// sentence for the model.
    pub fn read_file(&self, rel: &str, max: u64) -> Result<String, String> {
        let r = keel_tools::jail::resolve(&self.dir, rel).map_err(|e| e.message)?;
        if !r.inside || !self.may_read(&r.abs) {
            return Err(format!(
                "{rel:?} is not a file of the skill {:?} (it leads outside its folder)",
                self.name
            ));
        }
        if !r.exists || r.is_dir {
            return Err(format!("the skill {:?} has no file {rel:?}", self.name));
        }
        read_text(&r.abs, max).map_err(|(_, m)| format!("{rel}: {m}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_format() {
        assert_eq!(name_problem("pdf-tools"), None);
        assert_eq!(name_problem("a1"), None);
        for bad in [
            "",
            "PDF",
            "pdf_tools",
            "-pdf",
            "pdf-",
            "pdf--x",
            "p df",
            "é",
        ] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
        assert!(name_problem(&"a".repeat(64)).is_none());
        assert!(name_problem(&"a".repeat(65)).is_some());
    }

    #[test]
    fn allowed_tools_text_is_cut_outside_parentheses() {
        assert_eq!(
            tool_list("Bash(git log:*) Read, Grep"),
            vec!["Bash(git log:*)", "Read", "Grep"]
        );
        assert!(tool_list("  ").is_empty());
    }
}
