//! Finding the line where a key is set in a TOML text, for error messages that name a
//! value's key: `model`, `retry.maxRetries`, `prices."openai:gpt-4.1".input`,
//! `hooks.PreToolUse[1].matcher` (the second `[[hooks.PreToolUse]]` entry).

/// One segment of a dotted key: its name and, for an array of tables, the index.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seg {
    name: String,
    index: Option<usize>,
}

/// Splits `a."b.c"[2].d` into segments (quotes removed, dots inside quotes kept).
fn segments(key: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut name = String::new();
    let mut index: Option<String> = None;
    let mut quoted = false;
    let mut push = |name: &mut String, index: &mut Option<String>| {
        out.push(Seg {
            name: std::mem::take(name).trim().to_owned(),
            index: index.take().and_then(|i| i.trim().parse().ok()),
        });
    };
    for c in key.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => push(&mut name, &mut index),
            '[' if !quoted => index = Some(String::new()),
            ']' if !quoted => {}
            c => match &mut index {
                Some(i) if !quoted => i.push(c),
                _ => name.push(c),
            },
        }
    }
    push(&mut name, &mut index);
    out
}

fn names(segs: &[Seg]) -> Vec<&str> {
    segs.iter().map(|s| s.name.as_str()).collect()
}

/// A header line's table path and whether it is an array of tables (`[[…]]`).
fn header(line: &str) -> Option<(Vec<Seg>, bool)> {
    let rest = line.strip_prefix('[')?;
    let array = rest.starts_with('[');
    let rest = rest.trim_start_matches('[');
    let mut quoted = false;
    let end = rest
        .char_indices()
        .find(|(_, c)| {
            if *c == '"' {
                quoted = !quoted;
            }
            *c == ']' && !quoted
        })
        .map(|(i, _)| i)
        .unwrap_or(rest.len());
    Some((segments(&rest[..end]), array))
}

/// The left-hand side of `key = value`, as segments.
fn assigned(line: &str) -> Option<Vec<Seg>> {
    let mut quoted = false;
    let eq = line.char_indices().find(|(_, c)| {
        if *c == '"' {
            quoted = !quoted;
        }
        *c == '=' && !quoted
    })?;
    Some(segments(&line[..eq.0]))
}

/// The 1-based line where `key` is set: `name = …` at the top level, under its
/// `[table]`, or dotted (`table.name = …`); inside the n-th `[[array]]` entry for
/// `array[n].name` (the entry's header line for `array[n]` and for `array`, its
/// first entry).
pub(crate) fn key_line(text: &str, key: &str) -> Option<usize> {
    let segs = segments(key);
    let (path, rest, index) = match segs.iter().position(|s| s.index.is_some()) {
        Some(p) => (
            names(&segs[..=p]).join("."),
            segs[p + 1..].to_vec(),
            segs[p].index,
        ),
        None => (String::new(), segs.clone(), None),
    };
    let mut current: Vec<String> = Vec::new();
    let mut entries = 0usize;
    let mut inside = index.is_none();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('#') {
            continue;
        }
        if let Some((h, array)) = header(line) {
            current = names(&h).iter().map(|s| (*s).to_owned()).collect();
            if let Some(n) = index {
                inside = array && current.join(".") == path && {
                    entries += 1;
                    entries == n + 1
                };
                if inside && rest.is_empty() {
                    return Some(i + 1);
                }
            }
            continue;
        }
        if !inside {
            continue;
        }
        let Some(lhs) = assigned(line) else {
            continue;
        };
        let full: Vec<&str> = if index.is_some() {
            names(&lhs)
        } else {
            current
                .iter()
                .map(String::as_str)
                .chain(names(&lhs))
                .collect()
        };
        if full == names(&rest) {
            return Some(i + 1);
        }
    }
    // A whole table or array of tables: its first header, or the first header of a
    // table inside it (`[mcpServers.files]` for `mcpServers`).
    if index.is_none() && !segs.is_empty() {
        let want = names(&segs).join(".");
        let inner = format!("{want}.");
        for (i, raw) in text.lines().enumerate() {
            if let Some((h, _)) = header(raw.trim()) {
                let name = names(&h).join(".");
                if name == want || name.starts_with(&inner) {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_in_tables_arrays_and_quotes() {
        let text = "a = 1\n[retry]\nmaxRetries = 2\n[[hooks.PreToolUse]]\ncommand = \"x\"\n\
                    [[hooks.PreToolUse]]\n# a comment = no\nmatcher = \"(\"\ncommand = \"y\"\n\
                    [prices.\"openai:gpt-4.1\"]\ninput = -1\n[budget]\nrequest.tokens = 5\n";
        assert_eq!(key_line(text, "a"), Some(1));
        assert_eq!(key_line(text, "retry.maxRetries"), Some(3));
        assert_eq!(key_line(text, "hooks.PreToolUse[0].command"), Some(5));
        assert_eq!(key_line(text, "hooks.PreToolUse[1].matcher"), Some(8));
        assert_eq!(key_line(text, "hooks.PreToolUse[1]"), Some(6));
        assert_eq!(key_line(text, "hooks.PreToolUse"), Some(4));
        assert_eq!(key_line(text, "hooks.PreToolUse[2].command"), None);
        assert_eq!(key_line(text, "prices.\"openai:gpt-4.1\".input"), Some(11));
        assert_eq!(key_line(text, "budget.request.tokens"), Some(13));
        assert_eq!(key_line(text, "model"), None);
    }
}
