//! Rating one simple command by its program and arguments.

use super::*;

pub(super) fn lit(argv: &[Option<String>], i: usize) -> Option<&str> {
    argv.get(i).and_then(|a| a.as_deref())
}

/// Classifies one simple command given its words (`None` for a computed word).
pub(super) fn classify_argv(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    if !argv.is_empty() {
        ctx.seen.borrow_mut().push(
            argv.iter()
                .map(|w| w.as_deref().map_or_else(|| COMPUTED_WORD.to_owned(), quote))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    let Some(program) = lit(argv, 0) else {
        // `$RUNNER rm -rf x`: the computed program may be a wrapper, so what follows
        // is rated too.
        let f = Finding::medium("the program name is computed at run time");
        if lit(argv, 1).is_some() {
            return f.merge(wrappers::inner(&argv[1..], ctx));
        }
        return f;
    };
    // `timeout 5 LD_PRELOAD=x ls`: an assignment where a wrapper expects the program is
    // rated as `env` would run it.
    if program
        .split_once('=')
        .is_some_and(|(var, _)| is_identifier(var))
    {
        let mut with_env = vec![Some("env".to_owned())];
        with_env.extend(argv.iter().cloned());
        return wrappers::inner(&with_env, ctx);
    }
    let name = basename(program);
    let all_literal = argv.iter().all(Option::is_some);
    let words: Vec<&str> = argv.iter().map(|a| a.as_deref().unwrap_or("")).collect();

    // Configured high-risk entries first, then the configured whitelist.
    for pat in &ctx.policy.high_risk {
        if pattern_matches(pat, &words, all_literal)
            || (!pat.contains(' ') && pat.trim_end_matches('*') == name)
        {
            return Finding::high(format!("matches the configured high-risk entry `{pat}`"));
        }
    }
    let destructive_or_high = inner_danger(name, argv, ctx);
    if let Some(f) = destructive_or_high {
        return f;
    }
    if all_literal {
        for pat in BUILTIN_WHITELIST
            .iter()
            .copied()
            .map(str::to_owned)
            .chain(ctx.policy.whitelist.iter().cloned())
        {
            if pattern_matches(&pat, &words, true) {
                return Finding::low(format!("matches the whitelist entry `{pat}`"));
            }
        }
    }

    if let Some(f) = wrappers::classify_wrapper(name, argv, ctx) {
        return f;
    }
    if DISK.contains(&name) || name.starts_with("mkfs") {
        return Finding::destructive(format!("`{name}` formats or partitions a disk"));
    }
    if NETWORK.contains(&name) {
        return Finding::network(format!("`{name}` reaches the network"));
    }
    if name.eq_ignore_ascii_case("powershell")
        || name.eq_ignore_ascii_case("powershell.exe")
        || name.eq_ignore_ascii_case("pwsh")
    {
        let encoded = words.iter().skip(1).any(|w| {
            let l = w.to_ascii_lowercase();
            l.starts_with('-')
                && l.len() >= 2
                && ("-encodedcommand".starts_with(&l)
                    && l.len() >= 2
                    && l != "-"
                    && (l.starts_with("-e") || l == "-ec"))
        });
        if encoded {
            return Finding::high("`powershell -EncodedCommand` runs a hidden script");
        }
        return Finding::medium("runs PowerShell");
    }
    if HIGH.contains(&name) {
        return Finding::high(format!("`{name}` is on the high-risk list"));
    }
    if let Some(lang) = inline::lang_of(name) {
        return inline::classify_interpreter(lang, name, &argv[1..], ctx);
    }
    match name {
        "chmod" | "chown" | "chgrp" => {
            let mut f = if has_flag(&words, 'R', "--recursive") {
                Finding::high(format!("`{name} -R` changes permissions recursively"))
            } else {
                Finding::medium(format!("`{name}` changes file permissions"))
            };
            // The first operand is the mode or owner.
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')).skip(1) {
                if !path_inside(w, ctx) {
                    f = f.merge(Finding::outside_high(format!(
                        "`{name}` changes {w}, outside the workspace"
                    )));
                }
            }
            return f;
        }
        "export" | "declare" | "typeset" | "readonly" | "local" => {
            let mut f = Finding::medium(format!("`{name}` sets shell variables"));
            for w in words.iter().skip(1) {
                if let Some((var, _)) = w.split_once('=') {
                    if dangerous_env(var) {
                        f = f.merge(Finding::hijack(var));
                    }
                }
            }
            return f;
        }
        "alias" => {
            // An alias body is a script that may run later in the same shell.
            let mut f = Finding::medium("`alias` defines a command");
            for w in words.iter().skip(1) {
                if let Some((_, body)) = w.split_once('=') {
                    f = f.merge(wrappers::script(body, ctx).within("the alias runs"));
                }
            }
            return f;
        }
        "eval" => {
            let f = Finding::medium("`eval` runs a computed script");
            return if all_literal {
                f.merge(wrappers::script(&words[1..].join(" "), ctx).within("`eval`"))
            } else {
                f
            };
        }
        "source" | "." => return Finding::medium("runs a script file in the shell"),
        "find" => return classify_find(&words, argv, ctx),
        _ => {}
    }
    if SHELLS.contains(&name) {
        return classify_shell(name, argv, ctx);
    }
    if name == "git" {
        if !all_literal {
            return Finding::medium("`git` with computed arguments");
        }
        let args: Vec<String> = words[1..].iter().map(|s| (*s).to_owned()).collect();
        return match git::classify_cli(&args) {
            GitClass::ReadOnly => Finding::low("read-only git"),
            GitClass::Write { reason } => Finding::medium(reason),
            GitClass::High { reason } => Finding::high(reason),
            GitClass::Elevated { reason, network } => {
                if network {
                    Finding::network(reason)
                } else {
                    Finding::elevated(reason)
                }
            }
        };
    }
    if name == "cd" {
        // Later commands of the list run there: follow it, so `cd .. && rm -rf x` is
        // judged from the right place. An unknown target counts as outside.
        let target = words.get(1).copied().filter(|t| !t.starts_with('-'));
        let next = match (target, all_literal) {
            (Some(t), true) if !t.starts_with('~') => {
                jail::resolve_from(&ctx.root, &ctx.cwd.borrow(), t)
                    .map(|r| r.abs)
                    .unwrap_or_else(|_| PathBuf::from("/"))
            }
            _ => PathBuf::from("/"),
        };
        let inside = next.starts_with(&ctx.root);
        *ctx.cwd.borrow_mut() = next;
        return if inside && all_literal {
            Finding::low("`cd` inside the workspace")
        } else {
            Finding::outside("`cd` leaves the workspace")
        };
    }
    // Reading outside the workspace needs an approval; what the command does besides
    // (`sed -i`, `sort -o`) is rated too, and the worse counts.
    let mut read_outside = None;
    if READ_ONLY.contains(&name) || matches!(name, "rg" | "find" | "sed") {
        if !matches!(
            name,
            "echo"
                | "printf"
                | "which"
                | "type"
                | "expr"
                | "test"
                | "["
                | "seq"
                | "sleep"
                | "whereis"
                | "basename"
                | "dirname"
        ) {
            // `sed SCRIPT FILE…`: the script (`/re/d`) is not a path.
            let sed_script = (name == "sed"
                && !words.iter().any(|w| {
                    matches!(*w, "-e" | "-f" | "--expression" | "--file")
                        || w.starts_with("--expression=")
                        || w.starts_with("--file=")
                }))
            .then(|| words.iter().skip(1).position(|w| !w.starts_with('-')))
            .flatten()
            .map(|p| p + 1);
            let outside = words
                .iter()
                .enumerate()
                .skip(1)
                .filter(|(i, _)| Some(*i) != sed_script)
                .map(|(_, w)| w)
                .filter(|w| !w.starts_with('-') || w.contains('/'))
                .find(|w| {
                    let path = w
                        .split_once('=')
                        .map(|(_, v)| v)
                        .filter(|_| w.starts_with("--"))
                        .unwrap_or(w);
                    (path.starts_with('/')
                        || path.starts_with('~')
                        || path.starts_with("..")
                        || path.contains("/.."))
                        && !matches!(
                            path,
                            "/dev/null" | "/dev/stdin" | "/dev/stdout" | "/dev/stderr"
                        )
                        && !path_inside(path, ctx)
                });
            if let Some(p) = outside {
                read_outside = Some(Finding::outside(format!(
                    "`{name}` reads {p}, outside the workspace"
                )));
            }
        }
        if read_outside.is_none() && !ctx.cwd.borrow().starts_with(&ctx.root) {
            read_outside = Some(Finding::outside(format!(
                "`{name}` runs outside the workspace"
            )));
        }
    }
    let finding = match name {
        "rg" => {
            if words
                .iter()
                .any(|w| w.starts_with("--pre") || *w == "-z" || *w == "--search-zip")
            {
                Finding::medium("`rg --pre`/`-z` runs other programs")
            } else {
                Finding::low("`rg` only reads")
            }
        }
        "sed" => {
            let in_place = words.iter().skip(1).any(|w| {
                *w == "-i"
                    || w.starts_with("--in-place")
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains('i'))
            });
            let simple_print = words.len() >= 3 && words[1] == "-n" && is_sed_print(words[2]);
            if in_place {
                let mut f = Finding::medium("`sed -i` edits files in place");
                // The operands are the files, after the script unless `-e`/`-f` gave it.
                let script_given = words.iter().any(|w| {
                    matches!(*w, "-e" | "-f" | "--expression" | "--file")
                        || w.starts_with("--expression=")
                        || w.starts_with("--file=")
                });
                let mut skip_value = false;
                let mut operands = Vec::new();
                for w in words.iter().skip(1) {
                    if std::mem::take(&mut skip_value) {
                        continue;
                    }
                    if matches!(*w, "-e" | "-f" | "--expression" | "--file" | "-l") {
                        skip_value = true;
                    } else if !w.starts_with('-') {
                        operands.push(*w);
                    }
                }
                let files = if script_given {
                    &operands[..]
                } else {
                    operands.get(1..).unwrap_or(&[])
                };
                for w in files {
                    if !path_inside(w, ctx) {
                        f = Finding::outside_high(format!(
                            "`sed -i` edits {w}, outside the workspace"
                        ));
                    }
                }
                f
            } else if simple_print {
                Finding::low("`sed -n` prints lines")
            } else {
                Finding::medium("`sed` scripts can write files or run commands")
            }
        }
        "sort"
            if words
                .iter()
                .any(|w| *w == "-o" || w.starts_with("--output") || w.starts_with("-o")) =>
        {
            match option_target(&words, "-o", "--output") {
                Some(t) if !path_inside(t, ctx) => {
                    Finding::outside_high(format!("`sort -o` writes {t}, outside the workspace"))
                }
                _ => Finding::medium("`sort -o` writes a file"),
            }
        }
        "sort" if words.iter().any(|w| w.starts_with("--compress-program")) => {
            Finding::medium("`sort --compress-program` runs another program")
        }
        "tree"
            if words
                .iter()
                .any(|w| *w == "-o" || w.starts_with("--output")) =>
        {
            match option_target(&words, "-o", "--output") {
                Some(t) if !path_inside(t, ctx) => {
                    Finding::outside_high(format!("`tree -o` writes {t}, outside the workspace"))
                }
                _ => Finding::medium("`tree -o` writes a file"),
            }
        }
        "file" if words.iter().any(|w| *w == "-C" || *w == "--compile") => {
            Finding::medium("`file -C` writes a compiled magic file")
        }
        "uniq" if words.iter().skip(1).filter(|w| !w.starts_with('-')).count() > 1 => {
            Finding::medium("`uniq` with two files writes the second")
        }
        "date" if words.iter().any(|w| *w == "-s" || w.starts_with("--set")) => {
            Finding::high("`date -s` sets the clock")
        }
        "hostname" if words.len() > 1 && !words[1].starts_with('-') => {
            Finding::high("`hostname NAME` renames the machine")
        }
        "tee" => {
            let mut f = Finding::medium("`tee` writes files");
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')) {
                if matches!(*w, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty") {
                    continue;
                }
                if w.starts_with("/dev/") {
                    return Finding::destructive(format!("writes directly to the device {w}"));
                }
                if !path_inside(w, ctx) {
                    f = Finding::outside_high(format!("`tee` writes {w}, outside the workspace"));
                }
            }
            f
        }
        "cargo" => classify_cargo(&words),
        "npm" | "pnpm" | "yarn" => classify_npm(name, &words),
        "npx" => Finding::medium("`npx` may download and run packages"),
        "pip" | "pip3" | "gem" | "go" | "apt" | "apt-get" | "brew" | "yum" | "dnf" | "apk" => {
            let sub = words.get(1).copied().unwrap_or("");
            match (name, sub) {
                ("go", "test" | "build" | "vet" | "version" | "env" | "list" | "fmt") => {
                    if sub == "fmt" {
                        Finding::medium("`go fmt` rewrites files")
                    } else {
                        Finding::low(format!("`go {sub}` builds or checks code"))
                    }
                }
                (_, "install" | "get" | "update" | "upgrade" | "download" | "add" | "mod") => {
                    Finding::network(format!("`{name} {sub}` downloads packages"))
                }
                _ => Finding::medium(format!("`{name}` changes the environment")),
            }
        }
        "mv" | "cp" | "mkdir" | "touch" | "ln" | "install" | "patch" | "tar" | "zip" | "unzip"
        | "gzip" | "gunzip" => {
            let mut f = Finding::medium(format!("`{name}` changes files"));
            let dest = words.iter().skip(1).rfind(|w| !w.starts_with('-'));
            if let Some(d) = dest.filter(|d| d.starts_with("/dev/") && **d != "/dev/null") {
                if matches!(name, "cp" | "mv" | "install" | "ln" | "dd" | "tar") {
                    return Finding::destructive(format!("`{name}` writes to the device {d}"));
                }
            }
            for w in words.iter().skip(1).filter(|w| !w.starts_with('-')) {
                if !path_inside(w, ctx) && !w.is_empty() {
                    f = Finding::outside_high(format!(
                        "`{name}` touches {w}, outside the workspace"
                    ));
                }
            }
            f
        }
        n if READ_ONLY.contains(&n) => {
            if all_literal {
                Finding::low(format!("`{n}` only reads"))
            } else {
                Finding::medium(format!("`{n}` with computed arguments"))
            }
        }
        _ => Finding::medium(format!("`{name}` is not a known read-only command")),
    };
    let finding = match read_outside {
        Some(r) => r.merge(finding),
        None => finding,
    };
    if finding.safe && !all_literal {
        return finding.unsafe_();
    }
    finding
}

/// The §6.7 whitelist.
pub(super) const BUILTIN_WHITELIST: &[&str] = &[
    "npm run test:*",
    "npm run lint",
    "npm run build:*",
    "npx playwright test <file>",
    "git status",
    "git diff",
    "rg <pattern>",
];
