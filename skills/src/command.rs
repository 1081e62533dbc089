//! One custom command: a Markdown prompt template `NAME.md`, with optional front
//! matter (`description`, `argument-hint`), and its expansion.

use std::path::PathBuf;

use serde::Deserialize;

use crate::frontmatter;
use crate::{Source, WarningKind};

/// The largest command file read, in bytes; a larger one is left out.
pub const MAX_COMMAND_BYTES: u64 = 64 * 1024;
/// The longest command name, in characters.
const MAX_COMMAND_NAME: usize = 64;
/// The longest description, in characters.
const MAX_COMMAND_DESCRIPTION: usize = 1024;

/// A custom command as found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Its name (the file's name without `.md`), typed as `/NAME`.
    pub name: String,
    /// `description` of the front matter.
    pub description: Option<String>,
    /// `argument-hint` of the front matter (what to type after the name).
    pub argument_hint: Option<String>,
    /// The template: the file after its front matter.
    pub template: String,
    /// The file.
    pub path: PathBuf,
    /// Where it was found.
    pub source: Source,
}

#[derive(Debug, Deserialize)]
struct RawMeta {
    description: Option<String>,
    #[serde(rename = "argument-hint")]
    argument_hint: Option<String>,
}

/// Why a file name is not a command name, if it is not.
pub(crate) fn name_problem(name: &str) -> Option<String> {
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
    if name.is_empty() || name.chars().count() > MAX_COMMAND_NAME {
        return Some(format!(
            "a command name has 1 to {MAX_COMMAND_NAME} characters"
        ));
    }
    if !name.chars().all(ok_char) || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some(format!(
            "the command name {name:?} may only hold lowercase letters, digits, `-` and `_`, and starts with a letter or digit"
        ));
    }
    None
}

impl Command {
    /// Reads a command file's text.
    pub(crate) fn parse(
        name: &str,
        text: &str,
        path: PathBuf,
        source: Source,
    ) -> Result<Command, (WarningKind, String)> {
        let malformed = |m: String| (WarningKind::Malformed, m);
        let split = frontmatter::split(text).map_err(malformed)?;
        let raw = match split.yaml {
            Some(y) => frontmatter::parse::<RawMeta>(y)
                .map_err(|e| malformed(format!("the front matter is not valid: {e}")))?,
            None => RawMeta {
                description: None,
                argument_hint: None,
            },
        };
        let clean = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let description = clean(raw.description);
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_COMMAND_DESCRIPTION)
        {
            return Err(malformed(format!(
                "the description is longer than {MAX_COMMAND_DESCRIPTION} characters"
            )));
        }
        let template = split.body.trim_start_matches(['\n', '\r']).to_owned();
        if template.trim().is_empty() {
            return Err(malformed("the template is empty".into()));
        }
        Ok(Command {
            name: name.to_owned(),
            description,
            argument_hint: clean(raw.argument_hint),
            template,
            path,
            source,
        })
    }

    /// What the command does, for menus: its `description`, else the template's
    /// first line (at most 80 characters).
    pub fn summary(&self) -> String {
        if let Some(d) = &self.description {
            return d.clone();
        }
        let first = self
            .template
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("")
            .trim_start_matches('#')
            .trim();
        if first.chars().count() > 80 {
            let cut: String = first.chars().take(79).collect();
            format!("{cut}…")
        } else {
            first.to_owned()
        }
    }

    /// The prompt this command sends for `args` (see [`expand`]).
    pub fn expand(&self, args: &str) -> String {
        expand(&self.template, args)
    }
}

/// Splits arguments like a shell would, simply: at whitespace, with `"…"` and `'…'`
/// keeping their spaces.
fn words(args: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut any = false;
    for c in args.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => cur.push(c),
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                any = true;
            }
            None if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            None => cur.push(c),
        }
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Fills in a template: `$ARGUMENTS` becomes everything typed after the command's
/// name (trimmed), `$1` … `$9` its words (quotes keep spaces together; a missing word
/// is empty). A template that uses none of them and is given arguments gets them
/// appended on a last line, `ARGUMENTS: …`, so they are never lost.
pub fn expand(template: &str, args: &str) -> String {
    let args = args.trim();
    let words = words(args);
    let mut out = String::with_capacity(template.len() + args.len());
    let mut used = false;
    let mut rest = template;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix("ARGUMENTS") {
            out.push_str(args);
            used = true;
            rest = tail;
        } else if let Some(d) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
            let n = (d as usize) - ('1' as usize);
            if let Some(w) = words.get(n) {
                out.push_str(w);
            }
            used = true;
            rest = &after[1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    if !used && !args.is_empty() {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str("\nARGUMENTS: ");
        out.push_str(args);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(template: &str, args: &str, want: &str) {
        assert_eq!(expand(template, args), want, "{template:?} with {args:?}");
    }

    #[test]
    fn templates_are_filled_in() {
        check("Fix issue $ARGUMENTS now.", " 42 ", "Fix issue 42 now.");
        check("Fix issue $ARGUMENTS now.", "", "Fix issue  now.");
        check(
            "Review $1 for $2.",
            "src/a.rs \"memory leaks\"",
            "Review src/a.rs for memory leaks.",
        );
        check("Only $1 and $3.", "a", "Only a and .");
        check("$ARGUMENTS|$ARGUMENTS", "x", "x|x");
        check(
            "Costs $5 and $0 and $ alone, $ARG.",
            "",
            "Costs  and $0 and $ alone, $ARG.",
        );
        check("No placeholders.", "", "No placeholders.");
        check(
            "No placeholders.",
            "extra words",
            "No placeholders.\n\nARGUMENTS: extra words",
        );
        check(
            "Ends with a line\n",
            "x",
            "Ends with a line\n\nARGUMENTS: x",
        );
        check("Ünïcødé $1 ✓", "ß", "Ünïcødé ß ✓");
        check("$1$2", "'' b", "b");
    }

    #[test]
    fn command_names() {
        assert_eq!(name_problem("fix-issue"), None);
        assert_eq!(name_problem("run_tests2"), None);
        for bad in ["", "Fix", "-x", "_x", "a b", "a.b", "a/b", "a:b"] {
            assert!(name_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn summaries_fall_back_to_the_first_line() {
        let c = Command::parse(
            "x",
            "\n\n# Review the diff\n\nbody",
            PathBuf::from("x.md"),
            Source::Project,
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.summary(), "Review the diff");
        assert_eq!(c.template, "# Review the diff\n\nbody");
    }
}
