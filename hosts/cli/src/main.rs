//! The `keel` binary: flag parsing and glue only. The work lives in the library crates.

mod acp_cmd;
mod bridge_cmd;
mod policy_cmd;
mod repl;
mod setup;
mod tool_cmd;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--version") | Some("-V") => println!("keel {}", env!("CARGO_PKG_VERSION")),
        Some("policy") => std::process::exit(policy_cmd::run(&args[1..])),
        Some("tool") => std::process::exit(tool_cmd::run(&args[1..])),
        Some("acp") => std::process::exit(acp_cmd::run(&args[1..])),
        Some("bridge") => std::process::exit(bridge_cmd::run(&args[1..])),
        _ => std::process::exit(repl::run(&args)),
    }
}
