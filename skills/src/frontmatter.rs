//! Front matter: a file that starts with a `---` line has YAML up to the next `---`
//! line, then its Markdown body.

use serde::de::DeserializeOwned;

/// A file cut in two.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Split<'a> {
    /// The YAML between the two `---` lines, if the file starts with one.
    pub(crate) yaml: Option<&'a str>,
    /// The rest.
    pub(crate) body: &'a str,
}

fn is_fence(line: &str) -> bool {
    line.trim_end() == "---"
}

/// Cuts `text` into its front matter and body. A leading byte-order mark is skipped.
/// A first `---` line without a closing one is an error.
pub(crate) fn split(text: &str) -> Result<Split<'_>, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some((first, rest)) = text.split_once('\n') else {
        return if is_fence(text) {
            Err("the front matter has no closing `---` line".into())
        } else {
            Ok(Split {
                yaml: None,
                body: text,
            })
        };
    };
    if !is_fence(first) {
        return Ok(Split {
            yaml: None,
            body: text,
        });
    }
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if is_fence(line) {
            return Ok(Split {
                yaml: Some(&rest[..offset]),
                body: &rest[offset + line.len()..],
            });
        }
        offset += line.len();
    }
    Err("the front matter has no closing `---` line".into())
}

/// Reads front matter YAML as `T`. Empty front matter reads as an empty mapping.
/// Errors name the line in the file (the YAML starts on line 2).
pub(crate) fn parse<T: DeserializeOwned>(yaml: &str) -> Result<T, String> {
    let yaml = if yaml.trim().is_empty() { "{}" } else { yaml };
    yaml_serde::from_str(yaml).map_err(|e| {
        let text = e.to_string();
        match e.location() {
            Some(at) => {
                // The library ends its message with "at line L column C" (counted in
                // the YAML); say where it is in the file instead.
                let cut = text.find(" at line ").map_or(text.as_str(), |i| &text[..i]);
                format!("line {}: {cut}", at.line() + 1)
            }
            None => text,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_cut_at_the_fences() {
        let s = split("---\nname: a\n---\nbody\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.yaml, Some("name: a\n"));
        assert_eq!(s.body, "body\n");
        let s = split("\u{feff}---\r\nname: a\r\n---\r\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.yaml, Some("name: a\r\n"));
        assert_eq!(s.body, "");
        let s = split("no front matter\n---\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.yaml, None);
        assert!(split("---\nname: a\n").is_err());
        assert!(split("---").is_err());
        assert_eq!(split("").map(|s| s.yaml), Ok(None));
    }

    #[test]
    fn yaml_errors_name_the_line_of_the_file() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct T {
            name: String,
        }
        let e = parse::<T>("name: [unclosed\n").err().unwrap_or_default();
        assert!(e.starts_with("line "), "{e}");
        let e = parse::<T>("other: 1\nname: [1, 2]\n")
            .err()
            .unwrap_or_default();
        assert!(e.starts_with("line 3: name: invalid type"), "{e}");
    }
}
