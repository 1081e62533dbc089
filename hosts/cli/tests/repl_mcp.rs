//! The REPL's `/mcp` and an MCP tool call as a person sees them: the real `keel`
//! binary in a pseudo-terminal, a configured MCP server over streamable HTTP on
//! loopback (in this process), a scripted model. Every wait has a hang guard; nothing
//! asserts on timing.
#![allow(clippy::unwrap_used)]

#[path = "repl/support.rs"]
mod support;

use std::time::Duration;

use support::{dirs, Term};

#[test]
fn mcp_servers_are_listed_and_their_tools_called() {
    // A real MCP server over streamable HTTP on loopback, in this process.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt
        .block_on(keel_mcp::testing::serve_http(Some("Bearer t0k")))
        .unwrap();
    let d = dirs(&serde_json::json!({
        "turns": [
            {
                "text": "Asking the web server.",
                "toolCalls": [{ "name": "mcp__web__echo", "arguments": { "text": "from the REPL" } }]
            },
            { "whenLastToolResultContains": "echo: from the REPL", "text": "The server echoed it." },
            { "text": "The call did not work." }
        ]
    }));
    std::fs::write(
        d.home.join("config.toml"),
        format!(
            "[mcpServers.web]\nurl = \"{}\"\nheaders = {{ Authorization = \"Bearer t0k\" }}\n\n[mcpServers.broken]\ncommand = \"/nonexistent/keel-no-such-server\"\n",
            server.url()
        ),
    )
    .unwrap();
    let mut t = Term::start(&d.workspace, &d.home, &d.script, &[]);
    t.expect("ask › ");
    // The servers start with the session; /mcp shows where they are.
    let mut listed = String::new();
    for _ in 0..200 {
        t.line("/mcp");
        listed = t.expect("ask › ");
        if !listed.contains("starting") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(listed.contains("web"), "{listed}");
    assert!(listed.contains("http · trust ask · config"), "{listed}");
    assert!(listed.contains("mcp__web__echo"), "{listed}");
    assert!(listed.contains("broken"), "{listed}");
    assert!(listed.contains("failed: could not start"), "{listed}");

    // The model calls one of its tools: asked first (trust ask), then run.
    t.line("echo something");
    let approval = t.expect("allow? [y/s/a/n]");
    assert!(approval.contains("mcp__web__echo"), "{approval}");
    t.line("y");
    t.expect("The server echoed it.");
    t.expect("ask › ");
    assert!(server.journal.lines().contains(&"call echo".to_owned()));
    t.keys("\x04");
    assert_eq!(t.exit_code(), 0, "screen:\n{}", t.screen());
}
