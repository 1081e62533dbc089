//! Privilege escalation (`sudo`, `doas`, `su -c`, `pkexec`, …): the command they run is
//! rated, and the escalation itself is elevated.

use super::*;

pub(super) fn privilege(name: &str, argv: &[Option<String>], ctx: &Ctx<'_>) -> Finding {
    let mut f = Finding::elevated(format!(
        "`{name}` runs a command with elevated privileges, outside the sandbox"
    ));
    let g = match name {
        "su" | "runuser" => {
            // `su [opts] [-] [user] [-c CMD]`; `runuser -u USER [--] CMD…`.
            let mut cmd: Option<Option<String>> = None;
            for (i, w) in argv.iter().enumerate().skip(1) {
                let Some(w) = w.as_deref() else { continue };
                if w == "--" {
                    break;
                }
                if w == "-c" || w == "--command" {
                    cmd = Some(argv.get(i + 1).cloned().flatten());
                } else if let Some(c) = w.strip_prefix("--command=") {
                    cmd = Some(Some(c.to_owned()));
                } else if w.starts_with("-c") && w.len() > 2 {
                    cmd = Some(Some(w[2..].to_owned()));
                }
            }
            let start = skip_options(
                argv,
                1,
                "ugGsw",
                &[
                    "--user",
                    "--group",
                    "--supp-group",
                    "--shell",
                    "--whitelist-environment",
                ],
            );
            match cmd {
                Some(Some(c)) => Some(script(&c, ctx).within(&format!("`{name} -c`"))),
                Some(None) => Some(Finding::unverifiable(format!(
                    "`{name} -c` runs a computed script"
                ))),
                None if name == "runuser"
                    && has_flag(argv, start, 'u', &["--user"])
                    && start < argv.len() =>
                {
                    Some(inner(&argv[start..], ctx))
                }
                None => None,
            }
        }
        _ => {
            let (letters, long): (&str, &[&str]) = match name {
                "sudo" => (
                    "ugChpUrtDRT",
                    &[
                        "--user",
                        "--group",
                        "--close-from",
                        "--host",
                        "--prompt",
                        "--other-user",
                        "--role",
                        "--type",
                        "--chdir",
                        "--chroot",
                        "--command-timeout",
                    ],
                ),
                "doas" => ("uC", &[]),
                "pkexec" => ("", &["--user"]),
                "run0" => (
                    "uDg",
                    &[
                        "--user",
                        "--chdir",
                        "--group",
                        "--unit",
                        "--property",
                        "--description",
                        "--slice",
                        "--setenv",
                    ],
                ),
                _ => ("", &[]),
            };
            let mut i = skip_options(argv, 1, letters, long);
            // `sudo VAR=value cmd`.
            let mut h = None;
            while let Some(Some(w)) = argv.get(i) {
                match w.split_once('=') {
                    Some((n, _)) if !n.is_empty() && !n.starts_with('-') && !n.contains('/') => {
                        if dangerous_env(n) && h.is_none() {
                            h = Some(Finding::hijack(n));
                        }
                        i += 1;
                    }
                    _ => break,
                }
            }
            let g = (i < argv.len()).then(|| inner(&argv[i..], ctx));
            match (g, h) {
                (Some(g), Some(h)) => Some(g.merge(h)),
                (g, h) => g.or(h),
            }
        }
    };
    if let Some(g) = g {
        let destructive = g.destructive;
        let reason = g.reason.clone();
        f = f.merge(g);
        if destructive {
            f.reason = reason;
        }
    }
    f
}
