//! Lays out the functions that short runs of `keel` execute together at the start of the
//! text segment (release builds linked by LLD, Rust's default linker on
//! x86_64-unknown-linux-gnu). The list is `link/keel.order`, written by `link/order.py`;
//! why it matters is in docs/performance.md. Set `KEEL_NO_SYMBOL_ORDER=1` to link without it.

use std::env;
use std::path::Path;
use std::process::Command;

/// Rust links with LLD by default on this target from 1.90 on; before, with the C
/// compiler's default linker, which does not know the option.
fn links_with_lld(rustc: &str) -> bool {
    let Ok(out) = Command::new(rustc).arg("-vV").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let minor = text
        .lines()
        .find_map(|line| line.strip_prefix("release: 1."))
        .and_then(|rest| rest.split('.').next())
        .and_then(|minor| minor.parse::<u32>().ok());
    minor.is_some_and(|minor| minor >= 90)
}

fn main() {
    println!("cargo:rerun-if-changed=link/keel.order");
    println!("cargo:rerun-if-env-changed=KEEL_NO_SYMBOL_ORDER");
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    // Another linker (GNU ld, a configured one) would refuse the option.
    let own_linker = var("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("linker");
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
