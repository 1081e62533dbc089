//! The `keel` binary: flag parsing and glue only. The work lives in the library crates.

mod acp_cmd;
mod bridge_cmd;
mod demo_cmd;
mod exec_cmd;
mod interrupt;
mod policy_cmd;
mod render;
mod repl;
mod sessions_cmd;
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
        Some("exec") => std::process::exit(exec_cmd::run(&args[1..])),
        Some("demo") => std::process::exit(demo_cmd::run(&args[1..])),
        Some("sessions") => std::process::exit(sessions_cmd::run(&args[1..])),
        Some("resume") => {
            // `keel resume <id> [flags]` is the REPL on a stored session.
            let mut rest: Vec<String> = Vec::new();
            match args.get(1) {
                Some(id) if !id.starts_with('-') => {
                    rest.push("--resume".into());
                    rest.push(id.clone());
                    rest.extend(args[2..].iter().cloned());
                }
                _ => {
                    eprintln!("usage: keel resume <session-id> [--workspace DIR] [--model M] [--mode MODE]");
                    std::process::exit(2);
                }
            }
            std::process::exit(repl::run(&rest))
        }
        _ => std::process::exit(repl::run(&args)),
    }
}
