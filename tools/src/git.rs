//! The `git` tool's risk classes and its safe invocation.
//!
//! Git always runs with a configuration that cannot start other programs on its
//! own: no pager, no external diff, no textconv filters, no fsmonitor hook, no
//! terminal prompts, no editor.

use keel_envelope::{ErrorCode, ErrorPayload};

/// How risky a git invocation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitClass {
    /// Reads the repository only (`status`, `diff`, `log`, `show`, branch listing, …).
    /// Allowed in plan mode.
    ReadOnly,
    /// Changes the index or working tree in an easily undone way (`add`, `stash`).
    Write {
        /// Why.
        reason: String,
    },
    /// Changes history or the working tree (`commit`, `checkout`, `merge`, …).
    High {
        /// Why.
        reason: String,
    },
    /// Rewrites or discards history or work, or reaches the network (`reset --hard`,
    /// `rebase`, `clean -f`, `push`, `fetch`, `pull`).
    Elevated {
        /// Why.
        reason: String,
        /// Whether it reaches the network.
        network: bool,
    },
}

/// Options that let git run other programs, write arbitrary files or escape the
/// repository; their presence makes any subcommand at least high risk.
const DANGEROUS_OPTIONS: &[&str] = &[
    "--output",
    "--ext-diff",
    "--textconv",
    "--no-index",
    "-O",
    "--open-files-in-pager",
    "--exec",
    "--upload-pack",
    "--receive-pack",
    "-c",
    "--config-env",
    "--git-dir",
    "--work-tree",
    "--exec-path",
    "--paginate",
    "-p",
];

fn has_dangerous_option(sub: &str, args: &[String]) -> Option<String> {
    for a in args {
        let name = a.split('=').next().unwrap_or(a);
        // `-p` is "patch" for log/show/diff, not "paginate".
        if name == "-p"
            && matches!(
                sub,
                "log" | "show" | "diff" | "stash" | "whatchanged" | "reflog"
            )
        {
            continue;
        }
        if DANGEROUS_OPTIONS.contains(&name) {
            return Some(format!(
                "`git {sub} {name}` can run programs or write files"
            ));
        }
    }
    None
}

/// Validates the subcommand name given to the `git` tool.
pub fn validate_subcommand(command: &str) -> Result<(), ErrorPayload> {
    let ok = !command.is_empty()
        && command.len() <= 64
        && command
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase())
        && command
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(ErrorPayload::new(
            ErrorCode::ToolArgumentsInvalid,
            format!("`{command}` is not a git subcommand name; pass options in `args`"),
        )
        .with_detail("field", "command"))
    }
}

fn positional(args: &[String]) -> Vec<&str> {
    args.iter()
        .map(String::as_str)
        .filter(|a| !a.starts_with('-'))
        .collect()
}

fn has(args: &[String], names: &[&str]) -> bool {
    args.iter().any(|a| {
        let name = a.split('=').next().unwrap_or(a);
        names.contains(&name)
    })
}

/// Classifies `git <args…>` where `args[0]` is the subcommand (global options before
/// it make the call high risk).
pub fn classify_cli(args: &[String]) -> GitClass {
    let Some(sub) = args.first() else {
        return GitClass::ReadOnly;
    };
    if sub.starts_with('-') {
        if matches!(sub.as_str(), "--version" | "--help") && args.len() == 1 {
            return GitClass::ReadOnly;
        }
        let global = GitClass::High {
            reason: format!("git global option `{sub}` can change what git runs"),
        };
        // The subcommand after the global options counts too: `git -c x=y push` is
        // at least as strict as `git push`.
        let mut i = 0;
        while let Some(a) = args.get(i) {
            if !a.starts_with('-') {
                break;
            }
            let takes_value = matches!(
                a.as_str(),
                "-C" | "-c"
                    | "--git-dir"
                    | "--work-tree"
                    | "--namespace"
                    | "--config-env"
                    | "--super-prefix"
                    | "--exec-path"
            );
            i += if takes_value { 2 } else { 1 };
        }
        return match args.get(i) {
            Some(s) => stricter(global, classify(s, &args[i + 1..])),
            None => global,
        };
    }
    classify(sub, &args[1..])
}

/// The stricter of two classes (elevated > high > write > read-only).
fn stricter(a: GitClass, b: GitClass) -> GitClass {
    let rank = |c: &GitClass| match c {
        GitClass::ReadOnly => 0,
        GitClass::Write { .. } => 1,
        GitClass::High { .. } => 2,
        GitClass::Elevated { network: false, .. } => 3,
        GitClass::Elevated { network: true, .. } => 4,
    };
    if rank(&b) > rank(&a) {
        b
    } else {
        a
    }
}

/// Classifies `git <sub> <args…>`.
pub fn classify(sub: &str, args: &[String]) -> GitClass {
    let class = classify_subcommand(sub, args);
    match has_dangerous_option(sub, args) {
        // A dangerous option never makes a call less strict than its subcommand.
        Some(reason) => stricter(GitClass::High { reason }, class),
        None => class,
    }
}

fn classify_subcommand(sub: &str, args: &[String]) -> GitClass {
    let pos = positional(args);
    let ro = GitClass::ReadOnly;
    let high = |r: &str| GitClass::High {
        reason: r.to_owned(),
    };
    let elevated = |r: &str| GitClass::Elevated {
        reason: r.to_owned(),
        network: false,
    };
    let network = |r: &str| GitClass::Elevated {
        reason: r.to_owned(),
        network: true,
    };
    match sub {
        "status" | "diff" | "log" | "show" | "shortlog" | "blame" | "annotate" | "rev-parse"
        | "rev-list" | "ls-files" | "ls-tree" | "cat-file" | "describe" | "grep" | "show-ref"
        | "merge-base" | "name-rev" | "whatchanged" | "count-objects" | "version"
        | "check-ignore" | "diff-tree" | "diff-files" | "diff-index" | "for-each-ref" | "var" => ro,
        "reflog" => match pos.first() {
            None | Some(&"show") => ro,
            Some(_) => elevated("`git reflog expire/delete` discards history"),
        },
        "branch" => {
            let listing_flags = [
                "-a",
                "-r",
                "-v",
                "-vv",
                "--list",
                "-l",
                "--all",
                "--remotes",
                "--show-current",
                "--contains",
                "--no-contains",
                "--merged",
                "--no-merged",
                "--sort",
                "--format",
                "--color",
                "--no-color",
                "--column",
                "--no-column",
                "--points-at",
                "--verbose",
            ];
            let flags_ok = args
                .iter()
                .filter(|a| a.starts_with('-'))
                .all(|a| listing_flags.contains(&a.split('=').next().unwrap_or(a)));
            let list_mode = has(
                args,
                &[
                    "--list",
                    "-l",
                    "--contains",
                    "--merged",
                    "--no-merged",
                    "--points-at",
                    "--no-contains",
                ],
            );
            if flags_ok && (pos.is_empty() || list_mode) {
                ro
            } else if has(
                args,
                &[
                    "-D", "--delete", "-d", "-M", "-m", "--move", "-C", "--force", "-f",
                ],
            ) {
                if has(args, &["-D", "-M", "-C", "--force", "-f"]) {
                    elevated("`git branch -D` deletes a branch that may not be merged")
                } else {
                    high("`git branch -d/-m` deletes or renames a branch")
                }
            } else {
                GitClass::Write {
                    reason: "`git branch NAME` creates a branch".to_owned(),
                }
            }
        }
        "tag" => {
            if pos.is_empty()
                && args.iter().all(|a| {
                    matches!(
                        a.split('=').next().unwrap_or(a),
                        "-l" | "--list"
                            | "-n"
                            | "--sort"
                            | "--contains"
                            | "--points-at"
                            | "--merged"
                            | "--no-merged"
                            | "--format"
                            | "--column"
                    )
                })
                || has(args, &["-l", "--list"])
                    && !has(args, &["-d", "--delete", "-f", "--force", "-a", "-s", "-m"])
            {
                ro
            } else if has(args, &["-d", "--delete"]) {
                high("`git tag -d` deletes a tag")
            } else {
                GitClass::Write {
                    reason: "`git tag` creates a tag".to_owned(),
                }
            }
        }
        "remote" => match pos.first() {
            None | Some(&"get-url")
                if !has(args, &["--push"]) || pos.first() == Some(&"get-url") =>
            {
                ro
            }
            Some(&"show") | Some(&"update") | Some(&"prune") => {
                network("`git remote show/update` contacts the remote")
            }
            _ => high("`git remote` changes the configured remotes"),
        },
        "config" => {
            if has(
                args,
                &[
                    "--get",
                    "--get-all",
                    "--get-regexp",
                    "--list",
                    "-l",
                    "--get-urlmatch",
                    "--show-origin",
                ],
            ) && !has(
                args,
                &[
                    "--unset",
                    "--unset-all",
                    "--add",
                    "--replace-all",
                    "--edit",
                    "-e",
                    "--rename-section",
                    "--remove-section",
                ],
            ) || pos.first() == Some(&"get")
                || pos.first() == Some(&"list")
            {
                ro
            } else {
                high("`git config` changes configuration that can run programs")
            }
        }
        "stash" => match pos.first() {
            Some(&"list") | Some(&"show") => ro,
            Some(&"drop") | Some(&"clear") => {
                elevated("`git stash drop/clear` discards stashed work")
            }
            Some(&"pop") | Some(&"apply") | Some(&"branch") => {
                high("`git stash pop/apply` changes the working tree")
            }
            _ => GitClass::Write {
                reason: "`git stash` sets work aside".to_owned(),
            },
        },
        "worktree" => match pos.first() {
            Some(&"list") => ro,
            _ => high("`git worktree` changes worktrees"),
        },
        "add" | "mv" | "notes" | "init" | "switch" | "sparse-checkout" => GitClass::Write {
            reason: format!("`git {sub}` changes the index or working tree"),
        },
        "commit" => {
            if has(args, &["--amend"]) {
                elevated("`git commit --amend` rewrites history")
            } else {
                high("`git commit` records history")
            }
        }
        "reset" => {
            if has(args, &["--hard", "--keep", "--merge"])
                || !pos.is_empty()
                    && !has(args, &["--"])
                    && args.iter().any(|a| {
                        a.contains("HEAD~") || a.contains("HEAD^") || a.starts_with("origin/")
                    })
            {
                elevated("`git reset` to another commit or with `--hard` discards work or rewrites history")
            } else {
                high("`git reset` changes the index")
            }
        }
        "checkout" => {
            if has(args, &["--", "-f", "--force", "."]) || pos.contains(&".") {
                elevated("`git checkout --`/`-f` discards uncommitted changes")
            } else {
                high("`git checkout` changes the working tree")
            }
        }
        "restore" => high("`git restore` discards uncommitted changes"),
        "clean" => {
            if has(args, &["-n", "--dry-run"]) && !has(args, &["-f", "--force"]) {
                ro
            } else {
                elevated("`git clean` deletes untracked files")
            }
        }
        "rebase" => elevated("`git rebase` rewrites history"),
        "filter-branch" | "filter-repo" | "update-ref" | "replace" | "prune" | "gc" => {
            elevated(&format!("`git {sub}` rewrites or discards history"))
        }
        "push" => {
            if has(
                args,
                &[
                    "--force",
                    "-f",
                    "--force-with-lease",
                    "--delete",
                    "--mirror",
                    "--prune",
                ],
            ) || pos.iter().any(|p| p.starts_with('+') || p.starts_with(':'))
            {
                network("`git push --force/--delete` rewrites remote history over the network")
            } else {
                network("`git push` sends commits over the network")
            }
        }
        "fetch" | "pull" | "clone" | "ls-remote" | "submodule" | "archive" | "request-pull"
        | "send-email" | "svn" => network(&format!("`git {sub}` reaches the network")),
        "merge" | "cherry-pick" | "revert" | "am" | "apply" | "rm" | "bisect" | "format-patch"
        | "pack-refs" | "repack" | "maintenance" => {
            high(&format!("`git {sub}` changes history or the working tree"))
        }
        _ => high(&format!(
            "`git {sub}` is not a known git subcommand (it may be an alias or an external command)"
        )),
    }
}

/// The full argument list for running `git <command> <args…>` safely.
pub fn safe_invocation(command: &str, args: &[String]) -> Vec<String> {
    let mut out: Vec<String> = [
        "--no-pager",
        "-c",
        "core.pager=cat",
        "-c",
        "diff.external=",
        "-c",
        "core.fsmonitor=false",
        "-c",
        "color.ui=false",
        "-c",
        "core.quotepath=false",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    out.push(command.to_owned());
    if matches!(command, "diff" | "log" | "show" | "whatchanged") {
        out.push("--no-ext-diff".to_owned());
        out.push("--no-textconv".to_owned());
    }
    out.extend(args.iter().cloned());
    out
}

/// Environment for every git invocation.
pub fn safe_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("GIT_PAGER", "cat"),
        ("PAGER", "cat"),
        ("GIT_TERMINAL_PROMPT", "0"),
        ("GIT_EDITOR", "true"),
        ("GIT_SEQUENCE_EDITOR", "true"),
        ("GIT_ASKPASS", "true"),
        ("SSH_ASKPASS", "true"),
        ("GIT_OPTIONAL_LOCKS", "0"),
        ("LC_ALL", "C"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(line: &str) -> GitClass {
        let args: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        classify_cli(&args)
    }

    #[test]
    fn classes() {
        assert_eq!(c("status"), GitClass::ReadOnly);
        assert_eq!(c("log --oneline"), GitClass::ReadOnly);
        assert_eq!(c("branch"), GitClass::ReadOnly);
        assert!(matches!(c("branch feature"), GitClass::Write { .. }));
        assert!(matches!(c("diff --output=/tmp/x"), GitClass::High { .. }));
        assert!(matches!(c("commit -m x"), GitClass::High { .. }));
        assert!(matches!(
            c("reset --hard"),
            GitClass::Elevated { network: false, .. }
        ));
        assert!(matches!(
            c("push"),
            GitClass::Elevated { network: true, .. }
        ));
        assert!(matches!(c("frobnicate"), GitClass::High { .. }));
        assert!(validate_subcommand("-c").is_err());
        assert!(validate_subcommand("status").is_ok());
    }
}
