//! `keel-mcp-test-server`: the test MCP server of `keel_mcp::testing` on stdio.
//!
//! Flags: `--journal PATH` appends what the server sees to PATH; `--fail-start` exits
//! at once with status 2 (a server that cannot start); `--hang-start` never answers
//! the MCP handshake (a server that hangs at start); `--max-starts N` fails to start
//! once the journal holds N starts (a server that cannot be restarted); `--garbage`
//! answers every line it reads with a line that is not JSON-RPC (a server that never
//! speaks the protocol). It logs to
//! stderr only: stdout carries the protocol. It writes `exit` to the journal when its
//! client closes the connection.

use keel_mcp::testing::{Journal, TestServer};
use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut journal = Journal::None;
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--journal" => {
                if let Some(p) = args.get(i + 1) {
                    journal = Journal::File(p.into());
                }
                i += 1;
            }
            "--max-starts" => {
                let max: usize = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or(1);
                let starts = journal.lines().iter().filter(|l| *l == "start").count();
                journal.write("start attempt");
                if starts >= max {
                    eprintln!("keel-mcp-test-server: refusing start number {}", starts + 1);
                    std::process::exit(2);
                }
                i += 1;
            }
            "--fail-start" => {
                eprintln!("keel-mcp-test-server: failing at start on purpose");
                std::process::exit(2);
            }
            "--garbage" => {
                use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
                eprintln!("keel-mcp-test-server: writing garbage on purpose");
                let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
                let mut out = tokio::io::stdout();
                while let Ok(Some(_)) = lines.next_line().await {
                    let _ = out.write_all(b"garbage, not JSON-RPC\n").await;
                    let _ = out.flush().await;
                }
                std::process::exit(0);
            }
            "--hang-start" => {
                eprintln!("keel-mcp-test-server: hanging at start on purpose");
                journal.write("hang-start");
                std::future::pending::<()>().await;
            }
            other => {
                eprintln!("keel-mcp-test-server: unknown argument {other:?}");
                std::process::exit(64);
            }
        }
        i += 1;
    }
    eprintln!("keel-mcp-test-server: serving on stdio");
    let server = TestServer::new(journal.clone(), true);
    match server.serve(rmcp::transport::stdio()).await {
        Ok(running) => {
            let _ = running.waiting().await;
            journal.write("exit");
            eprintln!("keel-mcp-test-server: the client closed the connection");
        }
        Err(e) => {
            eprintln!("keel-mcp-test-server: {e}");
            std::process::exit(1);
        }
    }
}
