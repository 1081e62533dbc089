//! Shell analysis never panics on any line, and keeps its invariant: a command that
//! contains a program anywhere in its parse is never rated below that program nor
//! decided less strictly in any permission mode. Three shapes of input, by the first
//! byte: a raw line; a program hidden by layers of wrappers, quoting and composition
//! chosen by the bytes (the vocabulary of the property test); a program followed by a
//! raw line.
#![no_main]

#[path = "../../tools/tests/support/shell_shapes.rs"]
mod shapes;

use std::path::PathBuf;
use std::sync::OnceLock;

use keel_envelope::types::PermissionMode;
use keel_tools::policy::ShellPolicy;
use libfuzzer_sys::fuzz_target;

fn workspace() -> &'static PathBuf {
    static WS: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &WS.get_or_init(shapes::workspace).1
}

fuzz_target!(|data: &[u8]| {
    let ws = workspace();
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    match mode % 3 {
        0 => {
            let line = String::from_utf8_lossy(rest);
            let an = keel_tools::shell::analyze(&line, ws, None, &ShellPolicy::default());
            if an.destructive {
                assert!(!an.safe);
            }
            let _ = keel_tools::shell::canonical_command(&line);
            for m in PermissionMode::ALL {
                let _ = shapes::verdict(ws, &line, m.clone());
            }
        }
        1 => {
            let Some((&program, rest)) = rest.split_first() else {
                return;
            };
            let layers: Vec<(u8, u8)> =
                rest.chunks_exact(2).take(5).map(|c| (c[0], c[1])).collect();
            let shape = shapes::build(usize::from(program), program >= 250, &layers);
            if let Err(e) = shapes::check(ws, shape.program, &shape.command) {
                panic!("{e}\ncommand:\n{}", shape.command);
            }
        }
        _ => {
            let Some((&program, rest)) = rest.split_first() else {
                return;
            };
            let program = shapes::PROGRAMS[usize::from(program) % shapes::PROGRAMS.len()];
            let tail = String::from_utf8_lossy(rest);
            // The program is a complete first line: what follows cannot change its
            // parse, so when the whole parses, the program is in it.
            let command = format!("{program}\n{tail}");
            let an = keel_tools::shell::analyze(&command, ws, None, &ShellPolicy::default());
            if an.parsed {
                if let Err(e) = shapes::check(ws, program, &command) {
                    panic!("{e}\ncommand:\n{command}");
                }
            }
        }
    }
});
