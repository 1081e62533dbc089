//! The small `/bin/sh` program every command started by `exec` runs under: it ties the
//! command's processes to this process's life, grandchildren included.
//!
//! The parent-death signal (see [`crate::spawn`]) reaches only a direct child, and
//! bubblewrap's inner processes are not ours to arm. So the root of every call is
//! this wrapper, whose standard input is the read end of this process's lifeline
//! ([`crate::spawn::lifeline`]). It moves the lifeline to fd 3, gives the command
//! `/dev/null` as its standard input, and forks a watcher that blocks reading the
//! lifeline: the read returns end-of-file only when this process has died, however
//! it died, and then the watcher kills the command's processes with SIGKILL.
//!
//! - In bubblewrap's PID namespace (the wrapper is pid 2, after bubblewrap's own
//!   init): every process of the namespace (`kill -9 -1`); bubblewrap's init then has
//!   no child left and exits, which ends the namespace and the sandbox.
//! - Elsewhere: the call's process group (`kill -9 0`).
//!
//! The watcher is forked before the command, and end-of-file on a pipe stays
//! end-of-file: there is no moment at which this process can die unseen. When the
//! command ends, the wrapper kills its watcher and exits with the command's status
//! (128 + the signal number for a command killed by a signal). The command itself is
//! run as `"$@"` with fd 3 closed, so it sees neither the lifeline nor the watcher.

/// The wrapper's script; `$@` is the command and its arguments.
const SCRIPT: &str = r#"exec 3<&0 0</dev/null
{ read _ <&3; if [ "$$" = 2 ]; then kill -9 -1; else kill -9 0; fi; } >/dev/null 2>&1 &
w=$!
"$@" 3<&-
s=$?
kill -9 $w 2>/dev/null
exit $s"#;

/// The name the wrapper runs under (`$0`), visible in `ps`.
pub(crate) const NAME: &str = "keel-run";

/// The argument list that runs `command` (program, then its arguments) under the
/// wrapper: give it to `/bin/sh`, with the lifeline as standard input.
pub(crate) fn args(command: &[String]) -> Vec<String> {
    let mut a = Vec::with_capacity(command.len() + 3);
    a.extend(["-c".to_owned(), SCRIPT.to_owned(), NAME.to_owned()]);
    a.extend(command.iter().cloned());
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_follows_the_script_and_its_name() {
        let a = args(&["true".into(), "x y".into()]);
        assert_eq!(a[0], "-c");
        assert!(a[1].contains("read _ <&3"));
        assert_eq!(&a[2..], [NAME, "true", "x y"]);
    }
}
