use clap::{Arg, Command};

/// The marker before the generated tables in `docs/cli.md`.
pub const BEGIN: &str =
    "<!-- BEGIN GENERATED FLAGS: do not edit; regenerate with KEEL_UPDATE_GENERATED=1 cargo test -p keel-cli flag_tables -->";
/// The marker after them.
pub const END: &str = "<!-- END GENERATED FLAGS -->";

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn flag_name(a: &Arg) -> String {
    let value = a
        .get_value_names()
        .and_then(|v| v.first())
        .map(|v| v.to_string());
    let takes_value = a.get_action().takes_values();
    if a.is_positional() {
        return format!("`{}`", value.unwrap_or_else(|| a.get_id().to_string()));
    }
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("`-{s}`"));
    }
    if let Some(l) = a.get_long() {
        match (&value, takes_value) {
            (Some(v), true) => names.push(format!("`--{l} {v}`")),
            _ => names.push(format!("`--{l}`")),
        }
    }
    names.join(", ")
}

fn meaning(a: &Arg) -> String {
    let mut text = a
        .get_help()
        .map(|h| h.to_string())
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_owned();
    if !text.is_empty() {
        text.push('.');
    }
    let values: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| format!("`{}`", v.get_name()))
        .collect();
    if !values.is_empty() && a.get_action().takes_values() {
        text.push_str(&format!(" One of {}.", values.join(", ")));
    }
    let aliases: Vec<String> = a
        .get_all_aliases()
        .unwrap_or_default()
        .into_iter()
        .map(|l| format!("`--{l}`"))
        .collect();
    if !aliases.is_empty() {
        text.push_str(&format!(" Also {}.", aliases.join(", ")));
    }
    if a.is_positional() && a.is_required_set() {
        text.push_str(" Required.");
    }
    cell(text.trim())
}

fn default(a: &Arg) -> String {
    let d: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| format!("`{}`", v.to_string_lossy()))
        .collect();
    d.join(", ")
}

fn table(args: &[&Arg]) -> String {
    let mut out = String::from("| flag | default | meaning |\n| --- | --- | --- |\n");
    for a in args {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            flag_name(a),
            default(a),
            meaning(a)
        ));
    }
    out
}

fn shown(a: &Arg) -> bool {
    let id = a.get_id().as_str();
    !a.is_hide_set() && id != "help" && id != "version"
}

fn command(out: &mut String, path: &str, cmd: &Command) {
    let args: Vec<&Arg> = cmd
        .get_arguments()
        .filter(|a| shown(a) && !a.is_global_set())
        .collect();
    let subs: Vec<&Command> = cmd.get_subcommands().filter(|c| !c.is_hide_set()).collect();
    if !args.is_empty() || subs.is_empty() {
        out.push_str(&format!("### `{path}`\n\n"));
        if let Some(about) = cmd.get_about() {
            out.push_str(&format!("{about}.\n\n"));
        }
        if args.is_empty() {
            out.push_str("No flags.\n\n");
        } else {
            out.push_str(&table(&args));
            out.push('\n');
        }
    }
    for sub in subs {
        command(out, &format!("{path} {}", sub.get_name()), sub);
    }
}

/// Markdown: the global flags, then one table per command.
pub fn flag_tables(root: &Command) -> String {
    let mut out = String::new();
    let global: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| shown(a) && a.is_global_set())
        .collect();
    out.push_str("### Every command\n\n");
    out.push_str(&table(&global));
    out.push_str("| `-h`, `--help` |  | Prints the help (`keel help <command>` too). |\n");
    out.push_str("| `-V`, `--version` |  | Prints the version (`keel` only). |\n\n");
    // The REPL: `keel` itself, without a command.
    let repl: Vec<&Arg> = root
        .get_arguments()
        .filter(|a| shown(a) && !a.is_global_set())
        .collect();
    out.push_str("### `keel` (the REPL)\n\n");
    out.push_str(&table(&repl));
    out.push('\n');
    for sub in root.get_subcommands().filter(|c| !c.is_hide_set()) {
        command(&mut out, &format!("keel {}", sub.get_name()), sub);
    }
    out.trim_end().to_owned() + "\n"
}

/// `doc` with the part between the markers replaced by `generated`.
pub fn splice(doc: &str, generated: &str) -> Option<String> {
    let start = doc.find(BEGIN)? + BEGIN.len();
    let end = doc.find(END)?;
    (start <= end).then(|| format!("{}\n\n{}\n{}", &doc[..start], generated, &doc[end..]))
}

#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn flag_tables_in_docs_cli_md_are_fresh() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let want = splice(&doc, &flag_tables(&crate::cli::Cli::command()))
            .expect("docs/cli.md lacks the generated-flags markers");
        if doc != want {
            if std::env::var_os("KEEL_UPDATE_GENERATED").is_some() {
                std::fs::write(&path, &want).unwrap();
            } else {
                panic!(
                    "the flag tables in docs/cli.md are stale; regenerate with:\n\
                     KEEL_UPDATE_GENERATED=1 cargo test -p keel-cli flag_tables"
                );
            }
        }
    }

    #[test]
    fn every_command_and_shared_flag_is_in_the_tables() {
        let t = flag_tables(&crate::cli::Cli::command());
        for c in [
            "keel exec",
            "keel resume",
            "keel demo",
            "keel sessions list",
            "keel sessions delete",
            "keel sessions prune",
            "keel bridge",
            "keel serve",
            "keel serve token create",
            "keel serve token list",
            "keel serve token revoke",
            "keel attach",
            "keel acp",
            "keel policy check",
            "keel tool",
            "keel doctor",
            "keel completions",
        ] {
            assert!(t.contains(&format!("### `{c}`")), "{c} missing:\n{t}");
        }
        assert!(t.contains("`-w`, `--workspace DIR`"));
        assert!(t.contains("Also `--permission-mode`"));
        assert!(t.contains("`--log-stderr`"));
    }
}
