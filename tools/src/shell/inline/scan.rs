//! Scanning inline code: chains of identifiers, string literals, and the literals that
//! look like shell commands.

use super::*;

/// Chains of identifiers (`os.path.join` → `[os, path, join]`, `File::Path::rmtree`
/// → `[File, Path, rmtree]`, `.unlink(` → `[unlink]`).
pub(super) fn identifiers(code: &str, lang: Lang) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut word = String::new();
    let flush_word = |word: &mut String, cur: &mut Vec<String>| {
        if !word.is_empty() {
            cur.push(std::mem::take(word));
        }
    };
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        // String literals hold no identifiers (`'rm x'` is not a call of `rm`).
        if c == '\'' || c == '"' || (c == '`' && (lang.backticks_run() || lang == Lang::Node)) {
            while let Some(d) = chars.next() {
                if d == '\\' && c != '\'' {
                    chars.next();
                } else if d == c {
                    break;
                }
            }
            flush_word(&mut word, &mut cur);
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_alphanumeric() || c == '_' || c == '$' {
            word.push(c);
        } else if c == '.' || (c == ':' && chars.peek() == Some(&':')) {
            if c == ':' {
                chars.next();
            }
            flush_word(&mut word, &mut cur);
        } else {
            flush_word(&mut word, &mut cur);
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
        }
        if out.len() > 10_000 {
            break;
        }
    }
    flush_word(&mut word, &mut cur);
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// The string literals of the code: `'…'`, `"…"` (with backslash escapes), and
/// backtick strings where backticks run commands.
pub(super) fn string_literals(code: &str, lang: Lang) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        let quote = match c {
            '\'' | '"' => c,
            '`' if lang.backticks_run() || lang == Lang::Node => c,
            _ => continue,
        };
        let mut s = String::new();
        let mut closed = false;
        while let Some(d) = chars.next() {
            if d == '\\' && quote != '\'' {
                if let Some(e) = chars.next() {
                    match e {
                        'n' => s.push('\n'),
                        't' => s.push('\t'),
                        other => s.push(other),
                    }
                }
                continue;
            }
            if d == quote {
                closed = true;
                break;
            }
            s.push(d);
        }
        out.push(s);
        if !closed || out.len() > 10_000 {
            break;
        }
    }
    out
}

/// The shell commands a code may run: each literal, and runs of literals separated
/// by commas (`['rm', '-rf', '/']` → `rm -rf /`).
pub(super) fn shell_candidates(literals: &[String], code: &str, lang: Lang) -> Vec<String> {
    let mut out: Vec<String> = literals
        .iter()
        .filter(|l| !l.trim().is_empty())
        .take(64)
        .cloned()
        .collect();
    // Join literals of one list: find `[` … `]` spans and take their literals.
    let mut depth = 0usize;
    let mut start = None;
    for (i, c) in code.char_indices() {
        match c {
            '[' => {
                if depth == 0 {
                    start = Some(i);
                }
                depth += 1;
            }
            ']' if depth > 0 => {
                depth -= 1;
                if depth == 0 {
                    if let Some(s) = start.take() {
                        let inner = string_literals(&code[s + 1..i], lang);
                        if inner.len() > 1 {
                            out.push(
                                inner
                                    .iter()
                                    .map(|w| crate::shell::quote(w))
                                    .collect::<Vec<_>>()
                                    .join(" "),
                            );
                        }
                    }
                }
            }
            _ => {}
        }
        if out.len() > 80 {
            break;
        }
    }
    out
}
