//! The command decoder never panics, and a decoded command survives a round trip:
//! decoding its encoding gives the same command.
#![no_main]

use keel_envelope::codec::{decode_command, encode_command, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_line_bytes: 64 * 1024,
    };
    if let Ok(cmd) = decode_command(data, limits) {
        let line = encode_command(&cmd);
        let again = decode_command(line.strip_suffix(b"\n").unwrap_or(&line), Limits::default());
        assert_eq!(again.as_ref().ok(), Some(&cmd), "round trip of {cmd:?}");
    }
});
