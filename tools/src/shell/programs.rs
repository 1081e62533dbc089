//! Rules for single programs: rule patterns, `sed`, shells, `find`, `cargo`, `npm`, and
//! targets of deletes.

use super::*;

/// Matches a whitelist or high-risk pattern against the words of one command.
///
/// A pattern is words separated by spaces. A final word ending in `*` matches any word
/// with that prefix followed by any further words; `<name>` matches exactly one word
/// that is not an option; other words match exactly.
pub fn pattern_matches(pattern: &str, words: &[&str], all_literal: bool) -> bool {
    if !all_literal {
        return false;
    }
    let pat: Vec<&str> = pattern.split_whitespace().collect();
    if pat.is_empty() {
        return false;
    }
    for (i, p) in pat.iter().enumerate() {
        let last = i + 1 == pat.len();
        if last && p.ends_with('*') {
            let prefix = &p[..p.len() - 1];
            return match words.get(i) {
                Some(w) => w.starts_with(prefix),
                None => prefix.is_empty(),
            };
        }
        let Some(w) = words.get(i) else {
            return false;
        };
        if p.starts_with('<') && p.ends_with('>') {
            if w.starts_with('-') {
                return false;
            }
        } else if p != w {
            return false;
        }
    }
    words.len() == pat.len()
}

pub(super) fn is_sed_print(script: &str) -> bool {
    let Some(body) = script.strip_suffix('p') else {
        return false;
    };
    let mut parts = body.split(',');
    let ok = |s: Option<&str>| {
        s.is_some_and(|s| !s.is_empty() && (s.chars().all(|c| c.is_ascii_digit()) || s == "$"))
    };
    match (parts.next(), parts.next(), parts.next()) {
        (a, None, None) => ok(a),
        (a, b, None) => ok(a) && ok(b),
        _ => false,
    }
}

pub(super) fn has_flag(words: &[&str], short: char, long: &str) -> bool {
    words.iter().skip(1).any(|w| {
        *w == long
            || (w.starts_with('-') && !w.starts_with("--") && w.chars().skip(1).any(|c| c == short))
    })
}

/// Destructive and high-risk checks that look at arguments (`rm -rf /`, `dd of=/dev/…`,
/// recursive permission changes outside the workspace).
pub(super) fn inner_danger(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Option<Finding> {
    let words: Vec<&str> = argv.iter().map(|a| a.as_deref().unwrap_or("")).collect();
    match name {
        "rm" | "del" | "rd" | "rmdir" | "shred" | "unlink" | "srm" => {
            let recursive = has_flag(&words, 'r', "--recursive")
                || has_flag(&words, 'R', "--recursive")
                || words.iter().any(|w| w.eq_ignore_ascii_case("/s"));
            if words.contains(&"--no-preserve-root") {
                return Some(Finding::destructive(
                    "`rm --no-preserve-root` can delete the whole system",
                ));
            }
            let mut after_ddash = false;
            for (i, a) in argv.iter().enumerate().skip(1) {
                let Some(w) = a.as_deref() else {
                    if recursive {
                        return Some(Finding::destructive(
                            "a recursive delete of a path computed at run time",
                        ));
                    }
                    continue;
                };
                if w == "--" {
                    after_ddash = true;
                    continue;
                }
                if w.starts_with('-') && !after_ddash {
                    continue;
                }
                let _ = i;
                if dangerous_delete_target(w, ctx) {
                    return Some(if recursive || name == "rd" {
                        Finding::destructive(format!(
                            "a recursive delete of {w}, outside the workspace"
                        ))
                    } else {
                        Finding::outside_high(format!("deletes {w}, outside the workspace"))
                    });
                }
            }
            None
        }
        "dd" => {
            let mut f = Finding::high("`dd` copies raw data");
            for w in &words[1..] {
                if let Some(target) = w.strip_prefix("of=") {
                    if target.starts_with("/dev/") && target != "/dev/null" {
                        return Some(Finding::destructive(format!(
                            "`dd` writes directly to the device {target}"
                        )));
                    }
                    if target != "/dev/null" && !path_inside(target, ctx) {
                        f = Finding::outside_high(format!(
                            "`dd` writes {target}, outside the workspace"
                        ));
                    }
                }
            }
            Some(f)
        }
        "truncate" => {
            let mut skip_value = false;
            for w in &words[1..] {
                if std::mem::take(&mut skip_value) {
                    continue;
                }
                if matches!(*w, "-s" | "-r" | "--size" | "--reference") {
                    skip_value = true;
                    continue;
                }
                if !w.starts_with('-') && !path_inside(w, ctx) {
                    return Some(Finding::outside_high(format!(
                        "`truncate` empties {w}, outside the workspace"
                    )));
                }
            }
            None
        }
        "chmod" | "chown" | "chgrp" => {
            let recursive = has_flag(&words, 'R', "--recursive");
            if recursive {
                for w in words.iter().skip(2).filter(|w| !w.starts_with('-')) {
                    if dangerous_delete_target(w, ctx) {
                        return Some(Finding::destructive(format!(
                            "`{name} -R` on {w}, outside the workspace"
                        )));
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// Whether deleting `target` reaches outside the workspace (or is the root or home).
pub(super) fn dangerous_delete_target(target: &str, ctx: &Ctx<'_>) -> bool {
    if target.starts_with('~') || target.starts_with("$HOME") {
        return true;
    }
    let t = target.trim_end_matches('*');
    let t = if t.is_empty() { "." } else { t };
    if t == "/" || t.chars().all(|c| c == '/') {
        return true;
    }
    if t.starts_with('~') {
        return true;
    }
    match jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), t) {
        // The workspace root itself counts: deleting all of it is not an edit.
        Ok(r) => !r.inside || r.abs == ctx.root,
        Err(_) => true,
    }
}

/// The value of an option that names a file (`-o FILE`, `-oFILE`, `--output=FILE`).
pub(super) fn option_target<'a>(words: &[&'a str], short: &str, long: &str) -> Option<&'a str> {
    for (i, w) in words.iter().enumerate().skip(1) {
        if *w == short || *w == long {
            return words.get(i + 1).copied();
        }
        if let Some(v) = w.strip_prefix(long).and_then(|v| v.strip_prefix('=')) {
            return Some(v);
        }
        if w.len() > short.len() && w.starts_with(short) && !w.starts_with("--") {
            return Some(&w[short.len()..]);
        }
    }
    None
}

pub(super) fn classify_shell(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    // `sh -c SCRIPT`, `bash -lc SCRIPT`, `bash -e -o pipefail -c SCRIPT`.
    let mut i = 1;
    let mut script = None;
    let mut stdin_flag = false;
    while i < argv.len() {
        let Some(w) = argv[i].as_deref() else {
            return Finding::medium(format!("`{name}` with computed arguments"));
        };
        if w == "--" || w == "-" {
            i += 1;
            stdin_flag |= w == "-";
            break;
        }
        if matches!(w, "-o" | "+o" | "-O" | "+O" | "--rcfile" | "--init-file") {
            i += 2;
            continue;
        }
        if w.starts_with("--") {
            i += 1;
            continue;
        }
        if (w.starts_with('-') || w.starts_with('+')) && w.len() > 1 {
            if w.starts_with('-') && w.contains('c') {
                script = argv.get(i + 1).cloned();
                if script.is_none() {
                    return Finding::medium(format!("`{name} -c` without a script"));
                }
                break;
            }
            stdin_flag |= w.starts_with('-') && w.contains('s');
            i += 1;
            continue;
        }
        break;
    }
    match script {
        Some(Some(s)) => wrappers::script(&s, ctx).within(&format!("`{name} -c`")),
        Some(None) => Finding::medium(format!("`{name} -c` of a computed script")),
        None if i < argv.len() && !stdin_flag => Finding::high(format!(
            "`{name}` runs the script file {}, which cannot be checked",
            lit(argv, i).unwrap_or("(computed)")
        )),
        None => match ctx.stdin() {
            Stdin::Text(text) => {
                // The script's own commands do not read it again.
                let g = ctx.with_stdin(Stdin::Terminal, || wrappers::script(&text, ctx));
                if g.risk == RiskLevel::High {
                    g.within("feeds a script to a shell")
                } else {
                    g.at_least(RiskLevel::High, "feeds a script to a shell")
                }
            }
            Stdin::Computed => Finding::unverifiable(
                "pipes computed text into a shell, so what runs cannot be checked",
            ),
            Stdin::File | Stdin::Terminal => Finding::high(format!(
                "`{name}` runs a script from a file or standard input, which cannot be checked"
            )),
        },
    }
}

pub(super) fn classify_find(words: &[&str], argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let mut f = Finding::low("`find` only lists files");
    let roots: Vec<&str> = words
        .iter()
        .skip(1)
        .take_while(|w| !w.starts_with('-') && **w != "(" && **w != "!")
        .copied()
        .collect();
    let outside = roots
        .iter()
        .find(|r| r.starts_with('~') || !path_inside(r, ctx))
        .copied();
    if let Some(r) = outside {
        f = Finding::outside(format!("`find` reads {r}, outside the workspace"));
    }
    let mut i = 1;
    while i < words.len() {
        let w = words[i];
        match w {
            "-delete" if outside.is_some() => {
                f = f.merge(Finding::destructive("`find -delete` outside the workspace"))
            }
            "-delete" => f = f.merge(Finding::high("`find -delete` deletes files")),
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = words[i + 1..]
                    .iter()
                    .position(|x| *x == ";" || *x == "+")
                    .map(|p| i + 1 + p)
                    .unwrap_or(words.len());
                // Under an outside root, `{}` names files outside the workspace.
                let cmd: Vec<Option<String>> = argv[i + 1..end]
                    .iter()
                    .map(|a| match (a.as_deref(), outside) {
                        (Some(x), Some(root)) if x.contains("{}") => {
                            Some(x.replace("{}", &format!("{}/{{}}", root.trim_end_matches('/'))))
                        }
                        _ => a.clone(),
                    })
                    .collect();
                let g = ctx
                    .with_stdin(Stdin::Computed, || wrappers::inner(&cmd, ctx))
                    .unsafe_()
                    .within(&format!("`find {w}` runs a command for each file"));
                f = f.merge(g);
                i = end;
            }
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                let target = words.get(i + 1).copied().unwrap_or("");
                f = f.merge(if path_inside(target, ctx) {
                    Finding::medium(format!("`find {w}` writes a file"))
                } else {
                    Finding::outside_high(format!(
                        "`find {w}` writes {target}, outside the workspace"
                    ))
                });
            }
            _ => {}
        }
        i += 1;
    }
    f
}

pub(super) fn classify_cargo(words: &[&str]) -> Finding {
    let sub = words
        .iter()
        .skip(1)
        .find(|w| !w.starts_with('+') && !w.starts_with('-'))
        .copied()
        .unwrap_or("");
    match sub {
        "check" | "test" | "build" | "clippy" | "doc" | "tree" | "metadata" | "bench"
        | "nextest" | "" => {
            if words.contains(&"--fix") {
                Finding::medium("`cargo --fix` rewrites files")
            } else {
                Finding::low(format!("`cargo {sub}` builds or checks code"))
            }
        }
        "fmt" if words.contains(&"--check") => Finding::low("`cargo fmt --check` only checks"),
        "fmt" => Finding::medium("`cargo fmt` rewrites files"),
        "install" | "add" | "update" | "publish" | "login" | "search" | "fetch" => {
            Finding::network(format!("`cargo {sub}` reaches the network"))
        }
        _ => Finding::medium(format!("`cargo {sub}` may run arbitrary code")),
    }
}

pub(super) fn classify_npm(name: &str, words: &[&str]) -> Finding {
    let sub = words.get(1).copied().unwrap_or("");
    match sub {
        "test" | "t" | "ls" | "list" | "--version" | "-v" | "outdated" | "view" => {
            Finding::low(format!("`{name} {sub}` only reads or tests"))
        }
        "install" | "i" | "ci" | "add" | "update" | "publish" | "exec" | "dlx" => {
            Finding::network(format!("`{name} {sub}` downloads or publishes packages"))
        }
        _ => Finding::medium(format!("`{name} {sub}` runs a project script")),
    }
}
