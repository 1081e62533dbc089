//! Lays out the functions that short runs of `keel` execute together at the start of the
//! text segment (release builds linked by LLD, Rust's default linker on
//! x86_64-unknown-linux-gnu). The list is `link/keel.order`, written by `link/order.py`;
//! why it matters is in docs/performance.md. Set `KEEL_NO_SYMBOL_ORDER=1` to link without it.

use std::env;
use std::path::Path;
use std::process::Command;

/// Whether `rustc` links with its own LLD: the default on this target from Rust 1.90 on
/// in the Rust project's own builds, which ship it (`gcc-ld/ld.lld` in the sysroot).
/// Before, or in a build without it (some distributions'), the C compiler's default
/// linker is used, which does not know the option.
fn links_with_lld(rustc: &str) -> bool {
    let ask = |arg: &str| {
        Command::new(rustc)
            .arg(arg)
            .output()
            .ok()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let minor = ask("-vV").and_then(|text| {
        text.lines()
            .find_map(|line| line.strip_prefix("release: 1."))
            .and_then(|rest| rest.split('.').next())
            .and_then(|minor| minor.parse::<u32>().ok())
    });
    let shipped = ask("--print=sysroot").is_some_and(|sysroot| {
        Path::new(sysroot.trim())
            .join("lib/rustlib/x86_64-unknown-linux-gnu/bin/gcc-ld/ld.lld")
            .is_file()
    });
    minor.is_some_and(|minor| minor >= 90) && shipped
}

fn main() {
    println!("cargo:rerun-if-changed=link/keel.order");
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    // Another linker (GNU ld, one configured for the target or chosen by a flag) may
    // not know the option.
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    let own_linker =
        var("RUSTC_LINKER").is_empty() && !flags.contains("linker") && !flags.contains("fuse-ld");
    if var("PROFILE") != "release"
        || var("TARGET") != "x86_64-unknown-linux-gnu"
        || !own_linker
        || !var("KEEL_NO_SYMBOL_ORDER").is_empty()
        || !links_with_lld(&var("RUSTC"))
    {
        return;
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join("link/keel.order");
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}
