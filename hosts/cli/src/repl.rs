//! `keel` without a subcommand: the interactive REPL.

/// Runs the REPL; returns the exit code.
pub fn run(_args: &[String]) -> i32 {
    eprintln!("keel: the interactive REPL is not available in this build; use `keel exec` or `keel bridge`");
    2
}
