//! Wrappers and launchers: programs that run another command given in their
//! arguments (`env`, `timeout`, `sudo`, `watch`, `tmux new`, `at`, …). The command
//! they run is found and rated; some wrappers add a risk of their own (a floor).

use keel_envelope::types::RiskLevel;

use super::{
    analyze_script, classify_argv, dangerous_env, path_inside, Acc, Ctx, Finding, Stdin, PRIVILEGE,
};

mod privilege;
use privilege::privilege;

/// How many wrappers one command may nest (`env env env … ls`) before it is denied as
/// too deep to analyse.
const MAX_WRAPS: u8 = 16;

/// Rates the command a wrapper runs (`argv` without the wrapper), counting the nesting.
pub(super) fn inner(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let n = ctx.wraps.get();
    if n >= MAX_WRAPS {
        return Finding::too_deep("the command nests wrappers too deeply to analyse");
    }
    ctx.wraps.set(n + 1);
    let f = classify_argv(argv, ctx);
    ctx.wraps.set(n);
    f
}

/// Rates a script a wrapper hands to a shell (`watch 'cmd'`, `su -c 'cmd'`).
pub(super) fn script(text: &str, ctx: &Ctx<'_>) -> Finding {
    let mut sub = Acc::new();
    let parsed = analyze_script(text, &ctx.nested(), &mut sub, None);
    let mut f = sub.finding("an empty script");
    f.safe &= parsed;
    f
}

/// Skips options from `start`: returns the index of the first operand. A word in
/// `long` or a short option whose letter is in `letters` takes the next word as its
/// value (unless attached: `-n5`, `--user=x`); `--` ends the options. A computed word
/// counts as an operand.
pub(super) fn skip_options(
    argv: &[Option<String>],
    start: usize,
    letters: &str,
    long: &[&str],
) -> usize {
    let mut i = start;
    while let Some(Some(w)) = argv.get(i) {
        if w == "--" {
            return i + 1;
        }
        if !w.starts_with('-') || w.len() < 2 {
            return i;
        }
        if long.contains(&w.as_str()) {
            i += 2;
            continue;
        }
        if w.starts_with("--") {
            i += 1;
            continue;
        }
        let flags = &w[1..];
        match flags.char_indices().find(|(_, c)| letters.contains(*c)) {
            Some((pos, c)) if pos + c.len_utf8() == flags.len() => i += 2,
            _ => i += 1,
        }
    }
    i
}

fn lit(argv: &[Option<String>], i: usize) -> Option<&str> {
    argv.get(i).and_then(|a| a.as_deref())
}

/// Whether the options (before `upto`) contain the short letter `c` (in a cluster) or
/// one of `long`.
fn has_flag(argv: &[Option<String>], upto: usize, c: char, long: &[&str]) -> bool {
    argv[..upto.min(argv.len())].iter().skip(1).any(|w| {
        w.as_deref().is_some_and(|w| {
            long.iter()
                .any(|l| w == *l || w.starts_with(&format!("{l}=")))
                || (w.starts_with('-') && !w.starts_with("--") && w[1..].contains(c))
        })
    })
}

/// `VAR=value` words that set a variable changing what runs (`env LD_PRELOAD=…`).
fn assignments(words: impl IntoIterator<Item = String>) -> Option<Finding> {
    for w in words {
        if let Some((name, _)) = w.split_once('=') {
            if dangerous_env(name) {
                return Some(Finding::hijack(name));
            }
        }
    }
    None
}

/// A file a wrapper writes (`time -o FILE`, `strace -o FILE`).
fn output_file(name: &str, path: &str, ctx: &Ctx<'_>) -> Finding {
    if path_inside(path, ctx) || path == "/dev/null" {
        Finding::medium(format!("`{name}` writes {path}"))
    } else {
        Finding::outside_high(format!("`{name}` writes {path}, outside the workspace"))
    }
}

/// The value of option `opt` (`-o FILE`, `-oFILE`, `--output=FILE`).
fn option_value<'a>(
    argv: &'a [Option<String>],
    upto: usize,
    opt: &str,
    long: &str,
) -> Option<&'a str> {
    for i in 1..upto.min(argv.len()) {
        let w = lit(argv, i)?;
        if w == opt || w == long {
            return lit(argv, i + 1);
        }
        if let Some(v) = w.strip_prefix(&format!("{long}=")) {
            return Some(v);
        }
        if w.len() > opt.len() && w.starts_with(opt) && !w.starts_with("--") {
            return Some(&w[opt.len()..]);
        }
    }
    None
}

/// A launcher described by data: options, operands before the command, and the risk
/// it adds.
struct Launcher {
    letters: &'static str,
    long: &'static [&'static str],
    /// Operands before the command (`timeout DURATION`, `chroot NEWROOT`).
    operands: usize,
    floor: RiskLevel,
    floor_reason: &'static str,
    /// Rating when no command is given.
    bare: fn(&str) -> Finding,
}

fn bare_medium(name: &str) -> Finding {
    Finding::medium(format!("`{name}` without a command"))
}
fn bare_low(name: &str) -> Finding {
    Finding::low(format!("`{name}` without a command only prints"))
}
fn bare_high(name: &str) -> Finding {
    Finding::high(format!("`{name}` without a command starts a shell"))
}

fn launcher(name: &str) -> Option<Launcher> {
    use RiskLevel::{High, Low, Medium};
    let l = |letters, long, operands, floor, floor_reason, bare| Launcher {
        letters,
        long,
        operands,
        floor,
        floor_reason,
        bare,
    };
    Some(match name {
        "nohup" => l("", &[], 0, Low, "", bare_medium as fn(&str) -> Finding),
        "builtin" => l("", &[], 0, Low, "", bare_medium),
        "timeout" => l(
            "sk",
            &["--signal", "--kill-after"],
            1,
            Low,
            "",
            bare_medium,
        ),
        "nice" => l("n", &["--adjustment"], 0, Low, "", bare_low),
        "stdbuf" => l("ioe", &["--input", "--output", "--error"], 0, Low, "", bare_medium),
        "setsid" => l(
            "",
            &[],
            0,
            Medium,
            "`setsid` runs the command in a new session, outside the process group that is stopped on timeout",
            bare_medium,
        ),
        "chroot" => l(
            "",
            &["--userspec", "--groups"],
            1,
            High,
            "`chroot` runs the command under another root directory",
            bare_high,
        ),
        "systemd-run" => l(
            "puEMHtSs",
            &[
                "--property",
                "--unit",
                "--setenv",
                "--machine",
                "--host",
                "--description",
                "--slice",
                "--uid",
                "--gid",
                "--nice",
                "--working-directory",
                "--on-active",
                "--on-calendar",
            ],
            0,
            High,
            "`systemd-run` starts the command as a service, outside the sandbox",
            bare_high,
        ),
        "unshare" => l(
            "SGRw",
            &["--setuid", "--setgid", "--root", "--wd"],
            0,
            Medium,
            "`unshare` runs the command in new namespaces",
            bare_high,
        ),
        "nsenter" => l(
            "tSG",
            &["--target", "--setuid", "--setgid", "--root", "--wd"],
            0,
            High,
            "`nsenter` runs the command in another process's namespaces",
            bare_high,
        ),
        "strace" | "ltrace" => l(
            "oepsabEIXPuU",
            &[],
            0,
            Medium,
            "tracing a program",
            bare_medium,
        ),
        "fakeroot" => l("lsi", &[], 0, Low, "", bare_high),
        "faketime" => l("", &[], 1, Low, "", bare_medium),
        "unbuffer" | "catchsegv" | "busybox" | "toybox" | "torsocks" | "torify" => {
            l("", &[], 0, Low, "", bare_medium)
        }
        "proxychains" | "proxychains4" => l("f", &[], 0, Low, "", bare_medium),
        "caffeinate" => l("tw", &[], 0, Low, "", bare_medium),
        "cgexec" => l("g", &[], 0, Low, "", bare_medium),
        "firejail" => l("", &[], 0, Low, "", bare_high),
        _ => return None,
    })
}

/// The rating of a wrapper or launcher, or `None` when `name` is not one.
pub(super) fn classify_wrapper(
    name: &str,
    argv: &[Option<String>],
    ctx: &Ctx<'_>,
) -> Option<Finding> {
    let all_literal = argv.iter().all(Option::is_some);
    let f = match name {
        "env" => env(argv, all_literal, ctx),
        "command" => {
            let start = skip_options(argv, 1, "", &[]);
            if has_flag(argv, start, 'v', &[]) || has_flag(argv, start, 'V', &[]) {
                Finding::low("`command -v` looks a program up")
            } else if start >= argv.len() {
                bare_medium(name)
            } else {
                inner(&argv[start..], ctx)
            }
        }
        "exec" => {
            let start = skip_options(argv, 1, "a", &[]);
            if start >= argv.len() {
                Finding::medium("`exec` changes the shell's file descriptors")
            } else {
                inner(&argv[start..], ctx)
                    .unsafe_()
                    .within("`exec` replaces the shell")
            }
        }
        "time" => {
            let start = skip_options(argv, 1, "fo", &["--format", "--output"]);
            let mut f = if start >= argv.len() {
                Finding::low("`time` without a command")
            } else {
                inner(&argv[start..], ctx)
            };
            if let Some(out) = option_value(argv, start, "-o", "--output") {
                f = f.merge(output_file(name, out, ctx));
            }
            f
        }
        "ionice" => {
            let start = skip_options(
                argv,
                1,
                "cnpPu",
                &["--class", "--classdata", "--pid", "--pgid", "--uid"],
            );
            if has_flag(argv, start, 'p', &["--pid"])
                || has_flag(argv, start, 'P', &["--pgid"])
                || has_flag(argv, start, 'u', &["--uid"])
            {
                Finding::medium("`ionice -p` changes another process")
            } else if start >= argv.len() {
                bare_low(name)
            } else {
                inner(&argv[start..], ctx)
            }
        }
        "taskset" | "chrt" => {
            let letters = if name == "chrt" { "TPD" } else { "" };
            let start = skip_options(argv, 1, letters, &[]);
            if has_flag(argv, start, 'p', &["--pid"]) {
                Finding::medium(format!("`{name} -p` changes another process"))
            } else if start + 1 >= argv.len() {
                bare_low(name)
            } else {
                inner(&argv[start + 1..], ctx)
            }
        }
        "xargs" => {
            let start = skip_options(
                argv,
                1,
                "InLPdsEa",
                &[
                    "--max-args",
                    "--max-procs",
                    "--delimiter",
                    "--arg-file",
                    "--max-lines",
                    "--max-chars",
                    "--replace",
                    "--eof",
                    "--process-slot-var",
                ],
            );
            if start >= argv.len() {
                if all_literal {
                    bare_low(name)
                } else {
                    Finding::medium("`xargs` with computed arguments")
                }
            } else {
                // `echo / | xargs rm -rf`: literal input becomes arguments. The command
                // is rated with and without them (extra arguments must not make it
                // look milder, e.g. to git's option checks).
                let plain = ctx.with_stdin(Stdin::Computed, || inner(&argv[start..], ctx));
                match ctx.stdin() {
                    Stdin::Text(text) => {
                        let mut cmd = argv[start..].to_vec();
                        cmd.extend(text.split_whitespace().take(64).map(|w| Some(w.to_owned())));
                        plain.merge(ctx.with_stdin(Stdin::Computed, || inner(&cmd, ctx)))
                    }
                    _ => plain,
                }
            }
        }
        "flock" => flock(argv, ctx),
        "watch" => watch(argv, ctx),
        "screen" => screen(argv, ctx),
        "tmux" => tmux(argv, ctx),
        "at" | "batch" => at(name, argv, ctx),
        "atq" => Finding::low("`atq` lists scheduled jobs"),
        "script" => {
            let start = skip_options(
                argv,
                1,
                "cEIOTB",
                &[
                    "--command",
                    "--echo",
                    "--log-in",
                    "--log-out",
                    "--log-timing",
                    "--log-io",
                ],
            );
            let mut f = Finding::medium("`script` records a terminal session to a file");
            if let Some(cmd) = option_value(argv, start, "-c", "--command") {
                f = f.merge(script(cmd, ctx).within("`script -c`"));
            }
            f
        }
        n if PRIVILEGE.contains(&n) || n == "runuser" => privilege(name, argv, ctx),
        _ => {
            let spec = launcher(name)?;
            let start = skip_options(argv, 1, spec.letters, spec.long);
            let cmd_at = start + spec.operands;
            let mut f = if cmd_at >= argv.len() {
                (spec.bare)(name)
            } else {
                inner(&argv[cmd_at..], ctx)
            };
            if spec.floor > RiskLevel::Low {
                f = f.at_least(spec.floor, spec.floor_reason);
            }
            if matches!(name, "strace" | "ltrace") {
                if let Some(out) = option_value(argv, start, "-o", "--output") {
                    f = f.merge(output_file(name, out, ctx));
                }
            }
            if let Some(h) = assignments(argv[1..start.min(argv.len())].iter().flatten().cloned()) {
                f = f.merge(h);
            }
            f
        }
    };
    Some(f)
}

fn env(argv: &[Option<String>], all_literal: bool, ctx: &Ctx<'_>) -> Finding {
    let words: Vec<&str> = argv.iter().map(|a| a.as_deref().unwrap_or("")).collect();
    if let Some(pos) = words.iter().position(|w| {
        *w == "-S" || w.starts_with("--split-string") || (w.starts_with("-S") && w.len() > 2)
    }) {
        // `env -S 'cmd args'` splits a string into a command: analyse it as one.
        let mut f = Finding::medium("`env -S` runs a command given as one string");
        if all_literal {
            let w = words[pos];
            let inline = w
                .strip_prefix("--split-string=")
                .or_else(|| w.strip_prefix("-S"))
                .unwrap_or("");
            let text = if inline.is_empty() {
                words[pos + 1..].join(" ")
            } else {
                std::iter::once(inline)
                    .chain(words[pos + 1..].iter().copied())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            f = f.merge(script(&text, ctx).within("`env -S`"));
        }
        return f;
    }
    let mut i = skip_options(argv, 1, "uC", &["--unset", "--chdir"]);
    let mut hijack = None;
    while let Some(Some(w)) = argv.get(i) {
        match w.split_once('=') {
            Some((name, _)) if !name.is_empty() && !name.starts_with('-') => {
                if dangerous_env(name) && hijack.is_none() {
                    hijack = Some(Finding::hijack(name));
                }
                i += 1;
            }
            _ => break,
        }
    }
    if i >= argv.len() {
        return if all_literal {
            bare_low("env")
        } else {
            Finding::medium("`env` with computed arguments")
        };
    }
    let f = inner(&argv[i..], ctx);
    match hijack {
        Some(h) => f.merge(h),
        None => f,
    }
}

fn flock(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    // `flock [opts] FILE -c CMD`, `flock [opts] FILE CMD ARGS…`, `flock [opts] FD`.
    let letters = "wEc";
    let long = ["--timeout", "--wait", "--conflict-exit-code", "--command"];
    let start = skip_options(argv, 1, letters, &long);
    let after = skip_options(argv, start + 1, letters, &long);
    if let Some(cmd) = option_value(argv, after, "-c", "--command") {
        return script(cmd, ctx).within("`flock -c`");
    }
    if after >= argv.len() {
        Finding::medium("`flock` takes a lock")
    } else {
        inner(&argv[after..], ctx)
    }
}

fn watch(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let start = skip_options(argv, 1, "nq", &["--interval", "--equexit"]);
    let reason = "`watch` runs the command repeatedly";
    if start >= argv.len() {
        return bare_medium("watch");
    }
    let f = if has_flag(argv, start, 'x', &["--exec"]) {
        inner(&argv[start..], ctx)
    } else {
        match argv[start..]
            .iter()
            .cloned()
            .collect::<Option<Vec<String>>>()
        {
            Some(words) => script(&words.join(" "), ctx),
            None => Finding::medium("`watch` runs a computed command"),
        }
    };
    f.at_least(RiskLevel::Medium, reason)
}

fn screen(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let reason = "`screen` runs the command in a detached terminal session";
    let mut i = 1;
    let mut attach = false;
    while let Some(Some(w)) = argv.get(i) {
        match w.as_str() {
            "-ls" | "-list" | "-wipe" | "-v" | "-version" => {
                return Finding::low("`screen -ls` lists sessions")
            }
            "-Logfile" | "-fn" | "-fa" | "-ln" => {
                i += if w == "-Logfile" { 2 } else { 1 };
                continue;
            }
            "-X" => {
                // `screen -X stuff 'text'` types into a running session.
                let text = argv[i + 1..]
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ");
                let text = strip_keys(&text);
                return script(&text, ctx).merge(Finding::unverifiable(
                    "`screen -X` sends a command to a running terminal session",
                ));
            }
            "--" => {
                i += 1;
                break;
            }
            _ => {}
        }
        if !w.starts_with('-') || w.len() < 2 {
            break;
        }
        let flags = &w[1..];
        if flags.contains(['r', 'R', 'x']) {
            attach = true;
        }
        match flags.char_indices().find(|(_, c)| "ScsthpeTX".contains(*c)) {
            Some((pos, _)) if pos + 1 == flags.len() => i += 2,
            _ => i += 1,
        }
    }
    if i >= argv.len() {
        return if attach {
            Finding::medium("`screen` attaches to a terminal session")
        } else {
            Finding::medium("`screen` starts a terminal session")
        };
    }
    inner(&argv[i..], ctx).at_least(RiskLevel::Medium, reason)
}

/// Removes key names and control sequences from typed text (`Enter`, `C-m`, `^M`).
fn strip_keys(text: &str) -> String {
    text.split(' ')
        .filter(|w| {
            !matches!(
                *w,
                "Enter" | "C-m" | "C-j" | "KPEnter" | "Escape" | "Tab" | "C-c" | "C-d" | "BSpace"
            )
        })
        .collect::<Vec<_>>()
        .join(" ")
        .replace("^M", "\n")
        .replace("\\n", "\n")
        .replace("\\r", "\n")
        .replace('\r', "\n")
}

fn tmux(argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let reason = "`tmux` runs the command in a detached terminal session";
    let start = skip_options(argv, 1, "LSfcT", &[]);
    let mut f = Finding::medium("`tmux` manages terminal sessions");
    if let Some(cmd) = option_value(argv, start, "-c", "-c") {
        f = f.merge(script(cmd, ctx).within("`tmux -c`"));
    }
    // Commands may be chained with `;` (written `\;`).
    let rest = argv.get(start..).unwrap_or(&[]);
    for cmd in rest.split(|w| w.as_deref() == Some(";")) {
        let Some(Some(sub)) = cmd.first() else {
            if !cmd.is_empty() {
                f = f.merge(Finding::medium("`tmux` with a computed command"));
            }
            continue;
        };
        let letters = match sub.as_str() {
            "new-session" | "new" => "cefFnstxy",
            "new-window" | "neww" => "ceFnt",
            "split-window" | "splitw" => "celtFp",
            "respawn-pane" | "respawnp" | "respawn-window" | "respawnw" => "cet",
            "display-popup" | "popup" => "bcdehsStTwxy",
            "run-shell" | "run" => "dt",
            "send-keys" | "send" => "Nt",
            "if-shell" | "if" => "t",
            "pipe-pane" | "pipep" => "t",
            _ => continue,
        };
        // A command slice starts with the subcommand, as `skip_options` expects.
        let at = skip_options(cmd, 1, letters, &[]);
        // `-e VAR=value` sets the environment of the new pane.
        for (i, w) in cmd.iter().enumerate().take(at) {
            let value = match w.as_deref() {
                Some("-e") => lit(cmd, i + 1),
                Some(w) if w.starts_with("-e") && w.len() > 2 => Some(&w[2..]),
                _ => None,
            };
            if let Some(h) = value.and_then(|v| assignments([v.to_owned()])) {
                f = f.merge(h);
            }
        }
        let operands = &cmd[at.min(cmd.len())..];
        let g = match sub.as_str() {
            "send-keys" | "send" => {
                let text = operands
                    .iter()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(" ");
                script(&strip_keys(&text), ctx).merge(Finding::unverifiable(
                    "`tmux send-keys` types into a terminal session",
                ))
            }
            "if-shell" | "if" | "pipe-pane" | "pipep" | "run-shell" | "run" => {
                match operands.first() {
                    Some(Some(s)) => script(s, ctx),
                    Some(None) => Finding::medium("`tmux` runs a computed command"),
                    None => continue,
                }
            }
            _ => match operands {
                [] => continue,
                [Some(one)] => script(one, ctx),
                many => inner(many, ctx),
            },
        };
        f = f.merge(g.at_least(RiskLevel::Medium, reason));
    }
    f
}

fn at(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let start = skip_options(argv, 1, "qftu", &[]);
    if has_flag(argv, start, 'l', &[]) || has_flag(argv, start, 'c', &[]) {
        return Finding::low(format!("`{name} -l` lists scheduled jobs"));
    }
    if has_flag(argv, start, 'r', &[]) || has_flag(argv, start, 'd', &[]) {
        return Finding::medium(format!("`{name} -r` removes scheduled jobs"));
    }
    if let Some(file) = option_value(argv, start, "-f", "-f") {
        return Finding::high(format!(
            "`{name} -f {file}` schedules a job file to run later, outside the sandbox"
        ));
    }
    // The job is read from standard input: a here-string, a here-document or a pipe.
    let reason =
        format!("`{name}` schedules a job to run later through the at daemon, outside the sandbox");
    match ctx.stdin() {
        Stdin::Text(job) => {
            // The job's commands do not read the job text.
            let g = ctx.with_stdin(Stdin::Terminal, || script(&job, ctx));
            if g.weight() >= 3 {
                g.within(&format!("`{name}` schedules"))
                    .merge(Finding::high(reason))
            } else {
                Finding::high(reason).merge(g)
            }
        }
        Stdin::Computed => Finding::unverifiable(format!(
            "feeds computed text to `{name}`, so the job cannot be checked"
        )),
        Stdin::File | Stdin::Terminal => Finding::high(reason),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(words: &[&str]) -> Vec<Option<String>> {
        words.iter().map(|w| Some((*w).to_owned())).collect()
    }

    #[test]
    fn options_are_skipped() {
        assert_eq!(
            skip_options(&v(&["timeout", "-s", "KILL", "5", "ls"]), 1, "sk", &[]),
            3
        );
        assert_eq!(skip_options(&v(&["nice", "-n5", "ls"]), 1, "n", &[]), 2);
        assert_eq!(skip_options(&v(&["nice", "-10", "ls"]), 1, "n", &[]), 2);
        assert_eq!(skip_options(&v(&["x", "--", "-rf"]), 1, "", &[]), 2);
        assert_eq!(
            skip_options(&v(&["screen", "-dmS", "n", "rm"]), 1, "S", &[]),
            3
        );
        assert_eq!(
            skip_options(&v(&["sudo", "--user", "root", "rm"]), 1, "", &["--user"]),
            3
        );
        assert_eq!(
            skip_options(&v(&["sudo", "--user=root", "rm"]), 1, "", &["--user"]),
            2
        );
    }

    #[test]
    fn keys_are_stripped() {
        assert_eq!(strip_keys("rm x Enter"), "rm x");
        assert_eq!(strip_keys("rm x^M"), "rm x\n");
    }
}
