//! Interpreters given inline code (`python -c`, `node -e`, `perl -e`, `ruby -e`,
//! `php -r`, `awk 'PROGRAM'`, …) and interpreters reading their program from standard
//! input.
//!
//! Inline code is at least medium. It is high when it calls something obviously
//! destructive (deleting files, changing permissions, killing processes), runs other
//! programs (`os.system`, `subprocess`, `child_process`, backticks, …: the string
//! literals of the code are then analysed as shell commands too, so
//! `os.system('rm -rf /')` is as destructive as `rm -rf /`), reaches the network
//! (`urllib`, `requests`, `socket`, `fetch`, `Net::HTTP`, …: network, elevated), names a
//! secret location, or writes or deletes while naming a path outside the workspace. A
//! recursive delete (`shutil.rmtree`, `FileUtils.rm_rf`, `fs.rmSync(…, {recursive})`)
//! of the root, the home directory or a path outside the workspace is destructive.

use keel_envelope::types::RiskLevel;

use super::{
    analyze_script, dangerous_delete_target, path_inside, secrets, Acc, Ctx, Finding, Stdin,
};

mod scan;
use scan::*;

/// An interpreter that takes inline code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Node,
    Deno,
    Perl,
    Ruby,
    Php,
    Lua,
    R,
    AppleScript,
    Awk,
}

impl Lang {
    fn name(self) -> &'static str {
        match self {
            Lang::Python => "Python",
            Lang::Node => "JavaScript",
            Lang::Deno => "JavaScript",
            Lang::Perl => "Perl",
            Lang::Ruby => "Ruby",
            Lang::Php => "PHP",
            Lang::Lua => "Lua",
            Lang::R => "R",
            Lang::AppleScript => "AppleScript",
            Lang::Awk => "awk",
        }
    }
    /// Whether backticks run a shell command in this language.
    fn backticks_run(self) -> bool {
        matches!(self, Lang::Perl | Lang::Ruby | Lang::Php)
    }
}

/// The language of a program name (`python3.12` → Python).
pub(super) fn lang_of(name: &str) -> Option<Lang> {
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit() || c == '.');
    let strip = |prefix: &str| name.strip_prefix(prefix).is_some_and(digits);
    Some(match name {
        _ if strip("python") || strip("pypy") => Lang::Python,
        "node" | "nodejs" | "bun" => Lang::Node,
        "deno" => Lang::Deno,
        _ if strip("perl") => Lang::Perl,
        _ if strip("ruby") => Lang::Ruby,
        _ if strip("php") => Lang::Php,
        n if strip("lua") || n == "luajit" => Lang::Lua,
        "Rscript" | "R" => Lang::R,
        "osascript" => Lang::AppleScript,
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => Lang::Awk,
        _ => return None,
    })
}

/// What an interpreter's arguments say it runs.
#[derive(Debug, Default)]
struct Invocation {
    /// Inline code (several `-e` are joined by newlines).
    code: Option<String>,
    /// A script file, module or subcommand it runs instead.
    other: Option<String>,
    /// A computed argument where code or options were expected.
    computed: bool,
    /// Edits files in place (`perl -i`, `ruby -i`, `awk -i inplace`).
    in_place: bool,
    /// The arguments after the code (input files, or script arguments).
    rest: Vec<String>,
    /// Reads its program from standard input (no code, no script, or `-`).
    stdin: bool,
    /// Modules loaded by options (`perl -MLWP::Simple`, `ruby -rsocket`).
    modules: Vec<String>,
}

/// Options that take a value, per language (the value is not code).
fn value_options(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::Python => &["-W", "-X", "-Q", "--check-hash-based-pycs"],
        Lang::Node => &[
            "-r",
            "--require",
            "--import",
            "--loader",
            "--experimental-loader",
            "-C",
            "--conditions",
            "--input-type",
            "--env-file",
            "--title",
        ],
        Lang::Perl => &["-I", "-M", "-m", "-x", "-0", "-l"],
        Lang::Ruby => &["-r", "-I", "-C", "-E", "--encoding"],
        Lang::Php => &["-c", "-d", "-z", "-t"],
        Lang::Lua => &["-l"],
        Lang::R => &["--file"],
        Lang::AppleScript => &["-l", "-s"],
        Lang::Awk => &["-v", "-F", "--assign", "--field-separator"],
        Lang::Deno => &[],
    }
}

/// The options whose value is inline code.
fn code_options(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::Python => &["-c"],
        Lang::Node => &["-e", "--eval", "-p", "--print"],
        Lang::Perl => &["-e", "-E"],
        Lang::Ruby => &["-e"],
        Lang::Php => &["-r", "-R", "-B", "-E"],
        Lang::Lua => &["-e"],
        Lang::R => &["-e", "--expr"],
        Lang::AppleScript => &["-e"],
        Lang::Awk => &["-e", "--source"],
        Lang::Deno => &[],
    }
}

/// Single-letter flags that may be clustered before a code flag (`perl -ne`,
/// `python -Bc`), per language, with the letter that takes code.
fn cluster_code_letters(lang: Lang) -> &'static [char] {
    match lang {
        Lang::Python => &['c'],
        Lang::Perl => &['e', 'E'],
        Lang::Ruby => &['e'],
        Lang::Lua => &['e'],
        _ => &[],
    }
}

fn parse_invocation(lang: Lang, args: &[Option<String>]) -> Invocation {
    let mut inv = Invocation::default();
    let mut code: Vec<String> = Vec::new();
    let mut i = 0;
    if lang == Lang::Deno {
        // `deno eval CODE`; `deno run FILE` and other subcommands run files.
        match args.first().map(Option::as_deref) {
            Some(Some("eval")) => {
                let mut j = 1;
                while let Some(Some(w)) = args.get(j) {
                    if w.starts_with('-') {
                        j += 1;
                    } else {
                        break;
                    }
                }
                match args.get(j) {
                    Some(Some(c)) => inv.code = Some(c.clone()),
                    Some(None) => inv.computed = true,
                    None => inv.stdin = true,
                }
            }
            Some(Some(sub)) => inv.other = Some(format!("deno {sub}")),
            Some(None) => inv.computed = true,
            None => inv.other = Some("the Deno shell".into()),
        }
        return inv;
    }
    let values = value_options(lang);
    let codes = code_options(lang);
    let letters = cluster_code_letters(lang);
    while i < args.len() {
        let Some(w) = args[i].as_deref() else {
            inv.computed = true;
            return inv;
        };
        if w == "--" {
            i += 1;
            break;
        }
        if w == "-" {
            inv.stdin = true;
            i += 1;
            break;
        }
        if !w.starts_with('-') || w.len() < 2 {
            break;
        }
        // `--eval=CODE`.
        if let Some((opt, v)) = w.split_once('=') {
            if codes.contains(&opt) {
                code.push(v.to_owned());
            }
            i += 1;
            continue;
        }
        if codes.contains(&w) {
            match args.get(i + 1) {
                Some(Some(c)) => code.push(c.clone()),
                Some(None) => inv.computed = true,
                None => {}
            }
            i += 2;
            continue;
        }
        if values.contains(&w) {
            if matches!(
                (lang, w),
                (Lang::Perl, "-M" | "-m")
                    | (Lang::Ruby, "-r")
                    | (Lang::Node, "-r" | "--require" | "--import")
            ) {
                if let Some(Some(m)) = args.get(i + 1) {
                    inv.modules.push(m.clone());
                }
            }
            i += 2;
            continue;
        }
        // `-MLWP::Simple`, `-rsocket`: a module attached to its option.
        if let Some(m) = match lang {
            Lang::Perl => w.strip_prefix("-M").or_else(|| w.strip_prefix("-m")),
            Lang::Ruby => w.strip_prefix("-r"),
            _ => None,
        } {
            inv.modules.push(m.to_owned());
            i += 1;
            continue;
        }
        if lang == Lang::Python && w == "-m" {
            inv.other = args
                .get(i + 1)
                .and_then(|m| m.clone())
                .map(|m| format!("the module {m}"));
            if inv.other.is_none() {
                inv.computed = true;
            }
            inv.rest = args[(i + 2).min(args.len())..]
                .iter()
                .map(|a| a.clone().unwrap_or_default())
                .collect();
            return inv;
        }
        if matches!(lang, Lang::Php | Lang::Awk) && w == "-f" {
            inv.other = Some(format!(
                "the script file {}",
                lit(args.get(i + 1)).unwrap_or("?")
            ));
            return inv;
        }
        if lang == Lang::Awk && (w == "-i" || w == "--include") {
            if lit(args.get(i + 1)) == Some("inplace") {
                inv.in_place = true;
            }
            i += 2;
            continue;
        }
        if !w.starts_with("--") {
            let flags = &w[1..];
            if matches!(lang, Lang::Perl | Lang::Ruby) {
                if let Some(pos) = flags.find('i') {
                    // `-i`, `-i.bak`, `-pi`, `-pie` (the suffix may hold the code flag).
                    inv.in_place = true;
                    let before = &flags[..pos];
                    if before.chars().any(|c| letters.contains(&c)) {
                        // A code letter before `i` (`-ei`) is unusual; treat it as code.
                        if let Some(Some(c)) = args.get(i + 1) {
                            code.push(c.clone());
                        }
                        i += 2;
                        continue;
                    }
                    if flags.ends_with('e') || flags.ends_with('E') {
                        if let Some(Some(c)) = args.get(i + 1) {
                            code.push(c.clone());
                        } else if let Some(None) = args.get(i + 1) {
                            inv.computed = true;
                        }
                        i += 2;
                        continue;
                    }
                    i += 1;
                    continue;
                }
            }
            if let Some(pos) = flags.find(|c| letters.contains(&c)) {
                let attached = &flags[pos + 1..];
                if !attached.is_empty() && lang == Lang::Python {
                    code.push(attached.to_owned());
                    i += 1;
                } else {
                    match args.get(i + 1) {
                        Some(Some(c)) => code.push(c.clone()),
                        Some(None) => inv.computed = true,
                        None => {}
                    }
                    i += 2;
                }
                continue;
            }
        }
        i += 1;
    }
    if !code.is_empty() {
        inv.code = Some(code.join("\n"));
        inv.rest = args[i.min(args.len())..]
            .iter()
            .map(|a| a.clone().unwrap_or_default())
            .collect();
        return inv;
    }
    match args.get(i) {
        _ if inv.stdin => {}
        None => inv.stdin = lang != Lang::Awk,
        Some(Some(w)) if lang == Lang::Awk => {
            // awk's program is its first operand.
            inv.code = Some(w.clone());
            inv.rest = args[i + 1..]
                .iter()
                .map(|a| a.clone().unwrap_or_default())
                .collect();
        }
        Some(Some(w)) => inv.other = Some(format!("the script {w}")),
        Some(None) => inv.computed = true,
    }
    inv
}

fn lit(a: Option<&Option<String>>) -> Option<&str> {
    a.and_then(|a| a.as_deref())
}

/// Rates `PROGRAM ARGS…` for an interpreter.
pub(super) fn classify_interpreter(
    lang: Lang,
    name: &str,
    args: &[Option<String>],
    ctx: &Ctx<'_>,
) -> Finding {
    let inv = parse_invocation(lang, args);
    if inv.computed {
        return Finding::medium(format!("`{name}` runs code given by a computed argument"));
    }
    let mut f = match (&inv.code, &inv.other) {
        (Some(code), _) => {
            // Loaded modules count as part of the code (`-MLWP::Simple`).
            let code = if inv.modules.is_empty() {
                code.clone()
            } else {
                let quoted: Vec<String> =
                    inv.modules.iter().map(|m| format!("{m} '{m}'")).collect();
                format!("{}\n{code}", quoted.join("\n"))
            };
            classify_code(lang, &code, ctx).within(&format!("`{name}`"))
        }
        (None, Some(other)) => {
            if lang == Lang::Python
                && (other.ends_with(" pip") || other.ends_with(" ensurepip"))
                && inv
                    .rest
                    .first()
                    .is_some_and(|s| matches!(s.as_str(), "install" | "download" | "wheel"))
            {
                return Finding::network(format!("`{name} -m pip` downloads packages"));
            }
            Finding::medium(format!("`{name}` runs {other}"))
        }
        (None, None) => match ctx.stdin() {
            Stdin::Text(code) => ctx
                .with_stdin(Stdin::Terminal, || classify_code(lang, &code, ctx))
                .within(&format!("`{name}` reads a program from standard input")),
            _ => Finding::medium(format!("`{name}` runs a program read from standard input")),
        },
    };
    if inv.in_place {
        let mut g = Finding::medium(format!("`{name} -i` edits files in place"));
        for file in inv.rest.iter().filter(|w| !w.starts_with('-')) {
            if !path_inside(file, ctx) {
                g = Finding::outside_high(format!(
                    "`{name} -i` edits {file}, outside the workspace"
                ));
            }
        }
        f = f.merge(g);
    }
    f
}

/// Rates inline code (also a program read from a here-document).
pub(super) fn classify_code(lang: Lang, code: &str, ctx: &Ctx<'_>) -> Finding {
    let mut f = Finding::medium(format!("runs inline {} code", lang.name()));
    let idents = identifiers(code, lang);
    let literals = string_literals(code, lang);
    let has = |names: &[&str]| {
        idents
            .iter()
            .any(|chain| chain.last().is_some_and(|l| names.contains(&l.as_str())))
    };
    let has_segment = |names: &[&str]| {
        idents
            .iter()
            .any(|chain| chain.iter().any(|s| names.contains(&s.as_str())))
    };
    let has_chain = |chains: &[&[&str]]| {
        idents.iter().any(|chain| {
            chains.iter().any(|want| {
                chain.len() >= want.len()
                    && chain
                        .windows(want.len())
                        .any(|w| w.iter().zip(want.iter()).all(|(a, b)| a == b))
            })
        })
    };
    let literal_is = |names: &[&str]| literals.iter().any(|l| names.contains(&l.as_str()));

    // Deleting files, changing permissions, killing processes.
    let deletes = has(&[
        "unlink",
        "unlinkSync",
        "rmtree",
        "rmdir",
        "rmdirSync",
        "removedirs",
        "rm",
        "rmSync",
        "removeSync",
        "rm_rf",
        "rm_r",
        "rm_f",
        "remove_tree",
        "remove_dir_all",
        "remove_file",
        "truncate",
        "truncateSync",
        "kill",
        "killpg",
        "chmod",
        "chmodSync",
        "chown",
        "chownSync",
        "lchown",
        "shred",
    ]) || has_chain(&[
        &["os", "remove"],
        &["fs", "remove"],
        &["File", "delete"],
        &["Files", "delete"],
        &["FileUtils", "remove"],
        &["Dir", "delete"],
        &["Deno", "remove"],
        &["shutil", "move"],
    ]);
    let recursive_delete = has(&[
        "rmtree",
        "rm_rf",
        "rm_r",
        "remove_tree",
        "remove_dir_all",
        "removedirs",
    ]) || (has(&["rm", "rmSync"]) && code.contains("recursive"));
    // Running other programs.
    let mut shells = has(&[
        "system",
        "popen",
        "Popen",
        "exec",
        "execSync",
        "execFile",
        "execFileSync",
        "spawn",
        "spawnSync",
        "execv",
        "execve",
        "execvp",
        "execvpe",
        "execl",
        "execle",
        "execlp",
        "execlpe",
        "spawnl",
        "spawnlp",
        "spawnv",
        "spawnvp",
        "shell_exec",
        "passthru",
        "proc_open",
        "pcntl_exec",
        "check_output",
        "check_call",
        "getoutput",
        "getstatusoutput",
        "capture2",
        "capture2e",
        "capture3",
        "eval",
    ]) || has_segment(&["subprocess", "child_process", "Open3", "pty"])
        || has_chain(&[
            &["os", "execute"],
            &["io", "popen"],
            &["Deno", "Command"],
            &["Deno", "run"],
            &["Bun", "spawn"],
            &["Bun", "$"],
        ])
        || literal_is(&["child_process", "node:child_process"])
        || code.contains("do shell script");
    if lang.backticks_run() && code.contains('`') {
        shells = true;
    }
    if lang == Lang::Perl && (code.contains("qx") || code.contains("open(") && code.contains('|')) {
        shells = true;
    }
    if lang == Lang::Ruby && code.contains("%x") {
        shells = true;
    }
    if lang == Lang::Awk && (code.contains('|') && code.contains('"')) {
        // `print | "cmd"` and `"cmd" | getline` run commands.
        shells = true;
    }
    // Reaching the network.
    let network = has_segment(&[
        "urllib",
        "urllib2",
        "urllib3",
        "urlopen",
        "urlretrieve",
        "requests",
        "httpx",
        "aiohttp",
        "httplib",
        "smtplib",
        "ftplib",
        "paramiko",
        "socket",
        "create_connection",
        "fetch",
        "XMLHttpRequest",
        "WebSocket",
        "axios",
        "LWP",
        "TCPSocket",
        "UDPSocket",
        "curl_init",
        "curl_exec",
        "fsockopen",
        "stream_socket_client",
        "dgram",
    ]) || has_chain(&[
        &["http", "client"],
        &["http", "get"],
        &["https", "get"],
        &["http", "request"],
        &["https", "request"],
        &["net", "connect"],
        &["net", "createConnection"],
        &["tls", "connect"],
        &["Net", "HTTP"],
        &["IO", "Socket"],
        &["HTTP", "Tiny"],
    ]) || literal_is(&[
        "http",
        "https",
        "net",
        "dgram",
        "tls",
        "node:http",
        "node:https",
        "node:net",
        "open-uri",
        "net/http",
        "socket",
    ]);
    // Writing files.
    let writes = deletes
        || has(&[
            "write",
            "writeFile",
            "writeFileSync",
            "appendFile",
            "appendFileSync",
            "write_text",
            "write_bytes",
            "fwrite",
            "file_put_contents",
            "copyfile",
            "copy",
            "copy2",
            "copytree",
            "copyFile",
            "copyFileSync",
            "move",
            "rename",
            "renameSync",
            "mkdir",
            "makedirs",
            "mkdirSync",
            "symlink",
            "symlinkSync",
            "link",
            "touch",
            "cp",
            "mv",
            "mkdir_p",
        ])
        || (has(&["open", "fopen"])
            && literal_is(&[
                "w", "wb", "a", "ab", "w+", "a+", "r+", "x", "wt", "at", ">", ">>",
            ]))
        || (lang == Lang::Perl && code.contains("open") && code.contains('>'))
        || (lang == Lang::Awk && code.contains('>'));

    if deletes {
        f = f.merge(Finding::high(
            "calls a function that deletes files, changes permissions or kills processes",
        ));
    }
    if shells {
        f = f.merge(Finding::high("runs other programs"));
        for script in shell_candidates(&literals, code, lang) {
            let mut sub = Acc::new();
            analyze_script(&script, &ctx.nested(), &mut sub, None);
            let g = sub.finding("runs other programs");
            if g.weight() >= 3 {
                f = f.merge(g.within("runs the shell command"));
            }
        }
    }
    if network {
        f = f.merge(Finding::network("reaches the network"));
    }
    for lit in &literals {
        let path = lit.trim();
        if path.is_empty() || path.contains('\n') || path.len() > 4096 {
            continue;
        }
        if secrets::is_secret_path(path) && !path_inside(path, ctx) {
            f = f.merge(Finding::outside_high(format!(
                "names the secret location {path}"
            )));
            continue;
        }
        let looks_like_path = path.starts_with('/')
            || path.starts_with('~')
            || path.starts_with("$HOME")
            || path == ".."
            || path.starts_with("../");
        if !looks_like_path || path_inside(path, ctx) {
            continue;
        }
        if recursive_delete && dangerous_delete_target(path, ctx) {
            f = f.merge(Finding::destructive(format!(
                "a recursive delete of {path}, outside the workspace"
            )));
        } else if writes {
            f = f.merge(Finding::outside_high(format!(
                "writes or deletes while naming {path}, outside the workspace"
            )));
        } else if !matches!(
            path,
            "/dev/null" | "/dev/stdin" | "/dev/stdout" | "/dev/stderr"
        ) {
            f = f.merge(Finding::outside(format!(
                "names {path}, outside the workspace"
            )));
        }
    }
    if f.risk < RiskLevel::Medium {
        f.risk = RiskLevel::Medium;
    }
    f.safe = false;
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(lang: Lang, args: &[&str]) -> Invocation {
        let a: Vec<Option<String>> = args.iter().map(|s| Some((*s).to_owned())).collect();
        parse_invocation(lang, &a)
    }

    #[test]
    fn invocations() {
        assert_eq!(
            inv(Lang::Python, &["-c", "print(1)"]).code.as_deref(),
            Some("print(1)")
        );
        assert_eq!(inv(Lang::Python, &["-Bc", "x"]).code.as_deref(), Some("x"));
        assert_eq!(inv(Lang::Python, &["-cx"]).code.as_deref(), Some("x"));
        assert!(inv(Lang::Python, &[]).stdin);
        assert!(inv(Lang::Python, &["-u", "-"]).stdin);
        assert!(inv(Lang::Python, &["x.py"]).other.is_some());
        assert!(inv(Lang::Python, &["-m", "pytest"]).other.is_some());
        assert_eq!(
            inv(Lang::Perl, &["-ne", "print", "f"]).code.as_deref(),
            Some("print")
        );
        let p = inv(Lang::Perl, &["-pi", "-e", "s/a/b/", "f"]);
        assert!(p.in_place);
        assert_eq!(p.code.as_deref(), Some("s/a/b/"));
        assert_eq!(p.rest, vec!["f".to_owned()]);
        assert!(inv(Lang::Perl, &["-pie", "s/a/b/", "f"]).in_place);
        assert_eq!(
            inv(Lang::Node, &["--eval=1+1"]).code.as_deref(),
            Some("1+1")
        );
        assert_eq!(
            inv(Lang::Awk, &["-F,", "{print $1}", "f"]).code.as_deref(),
            Some("{print $1}")
        );
        assert_eq!(
            inv(Lang::Awk, &["-F", ",", "{print}"]).code.as_deref(),
            Some("{print}")
        );
        assert_eq!(inv(Lang::Deno, &["eval", "1"]).code.as_deref(), Some("1"));
        assert_eq!(
            inv(Lang::Php, &["-r", "x();"]).code.as_deref(),
            Some("x();")
        );
    }

    #[test]
    fn identifier_chains() {
        let ids = identifiers(
            "import os; os.path.join('a rm'); File::Path::rmtree($d); x.unlink()",
            Lang::Python,
        );
        assert!(!ids.iter().any(|c| c.iter().any(|s| s == "rm")));
        assert!(ids.contains(&vec!["os".into(), "path".into(), "join".into()]));
        assert!(ids.contains(&vec!["File".into(), "Path".into(), "rmtree".into()]));
        assert!(ids.contains(&vec!["x".into(), "unlink".into()]));
    }

    #[test]
    fn literals() {
        assert_eq!(
            string_literals(r#"a('x', "y\"z") `w`"#, Lang::Perl),
            vec!["x".to_owned(), "y\"z".to_owned(), "w".to_owned()]
        );
    }
}
