//! `[mcpServers.NAME]`: the servers read in name order, bad entries named by key and
//! line, and what a project's file may set.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use keel_config::Config;
use keel_envelope::host::McpTrust;

#[test]
fn mcp_servers_are_read_in_name_order() {
    use keel_kernel::mcp::McpTransport;
    let text = r#"
mcpToolTimeoutSecs = 0
hostToolTimeoutSecs = 5

[mcpServers.web]
url = "https://mcp.example.com/mcp"
headers = { Authorization = "Bearer x" }
trust = "read"
toolTimeoutSecs = 9

[mcpServers.files]
command = "npx"
args = ["-y", "server-filesystem", "."]
env = { LOG = "warn" }
startupTimeoutSecs = 5

[mcpServers.old]
command = "old-server"
enabled = false
"#;
    let mut c = Config::default();
    c.apply_toml(text, Path::new("config.toml")).unwrap();
    assert_eq!(c.mcp_tool_timeout_secs, 0);
    assert_eq!(c.host_tool_timeout_secs, 5);
    assert_eq!(c.mcp_startup_timeout_secs, 30);
    let names: Vec<&str> = c.mcp_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["files", "web"]);
    assert_eq!(
        c.mcp_servers[0].transport,
        McpTransport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "server-filesystem".into(), ".".into()],
            env: vec![("LOG".into(), "warn".into())],
            cwd: None,
        }
    );
    assert_eq!(c.mcp_servers[0].trust, McpTrust::Ask);
    assert_eq!(
        c.mcp_servers[0].startup_timeout,
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        c.mcp_servers[1].transport,
        McpTransport::Http {
            url: "https://mcp.example.com/mcp".into(),
            headers: vec![("Authorization".into(), "Bearer x".into())],
        }
    );
    assert_eq!(c.mcp_servers[1].trust, McpTrust::Read);
    assert_eq!(c.mcp_servers[1].call_timeout, Some(Duration::from_secs(9)));
}

#[test]
fn bad_mcp_servers_name_their_key_and_line() {
    let cases = [
        (
            "[mcpServers.files]\ncomand = \"npx\"\n",
            "mcpServers.files.comand",
            Some(2),
        ),
        ("x = 1\n", "x", Some(1)),
        (
            "\n[mcpServers.files]\nargs = []\n",
            "mcpServers.files",
            Some(2),
        ),
        (
            "[mcpServers.files]\ncommand = \"a\"\nurl = \"http://h/mcp\"\n",
            "mcpServers.files",
            Some(1),
        ),
        (
            "[mcpServers.web]\n\nurl = \"ftp://h\"\n",
            "mcpServers.web.url",
            Some(3),
        ),
        (
            "[mcpServers.web]\nurl = \"http://h/mcp\"\ntrust = \"always\"\n",
            "mcpServers.web.trust",
            Some(3),
        ),
        (
            "[mcpServers.web]\nurl = \"http://h/mcp\"\nenv = { A = \"b\" }\n",
            "mcpServers.web.env",
            Some(3),
        ),
        (
            "[mcpServers.s]\ncommand = \"a\"\nstartupTimeoutSecs = 0\n",
            "mcpServers.s.startupTimeoutSecs",
            Some(3),
        ),
        (
            "mcpStartupTimeoutSecs = 0\n",
            "mcpStartupTimeoutSecs",
            Some(1),
        ),
    ];
    for (text, key, line) in cases {
        let e = Config::default()
            .apply_toml(text, Path::new("c.toml"))
            .unwrap_err();
        assert_eq!(e.details["key"], key, "{text}: {}", e.message);
        assert!(e.message.contains(key), "{}", e.message);
        if let Some(l) = line {
            assert_eq!(e.details["line"], l, "{text}: {}", e.message);
        }
    }
    // A project's file may not start programs.
    let e = Config::default()
        .apply_project_toml(
            "model = \"openai:x\"\n[mcpServers.x]\ncommand = \"evil\"\n",
            Path::new(".keel/config.toml"),
        )
        .unwrap_err();
    assert_eq!(e.details["key"], "mcpServers");
    assert!(
        e.message.contains("$KEEL_HOME/config.toml"),
        "{}",
        e.message
    );
}

#[test]
fn the_project_file_cannot_add_mcp_servers() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[mcpServers.ok]\ncommand = \"server\"\n",
    )
    .unwrap();
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(c.mcp_servers.len(), 1);
    std::fs::write(
        ws.path().join(".keel/config.toml"),
        "[mcpServers.evil]\ncommand = \"rm\"\n",
    )
    .unwrap();
    let e = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(e.details["key"], "mcpServers");
    assert_eq!(e.details["line"], 1);
    assert!(e.message.contains("trustedProjects"), "{}", e.message);
    // Nor can it trust itself.
    std::fs::write(
        ws.path().join(".keel/config.toml"),
        format!("trustedProjects = [{:?}]\n", ws.path()),
    )
    .unwrap();
    let e = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(e.details["key"], "trustedProjects");
}

#[test]
fn a_trusted_project_may_add_replace_and_disable_servers() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
    std::fs::write(
        ws.path().join(".keel/config.toml"),
        "[mcpServers.a]\ncommand = \"project-a\"\n\n[mcpServers.b]\nenabled = false\n\n[mcpServers.c]\nurl = \"http://127.0.0.1:1/mcp\"\n",
    )
    .unwrap();
    let user = |trusted: &std::path::Path| {
        format!(
            "trustedProjects = [{:?}]\n[mcpServers.a]\ncommand = \"user-a\"\n[mcpServers.b]\ncommand = \"user-b\"\n",
            trusted.to_str().unwrap()
        )
    };
    // Another project is trusted, not this one: refused.
    std::fs::write(home.path().join("config.toml"), user(other.path())).unwrap();
    let e = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(e.details["key"], "mcpServers");
    // This one is trusted (through a path that is not canonical): merged by name.
    let dotted = ws.path().join(".keel").join("..");
    std::fs::write(home.path().join("config.toml"), user(&dotted)).unwrap();
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    let names: Vec<&str> = c.mcp_servers.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["a", "c"]);
    assert!(
        matches!(&c.mcp_servers[0].transport,
            keel_kernel::mcp::McpTransport::Stdio { command, .. } if command == "project-a"),
        "{:?}",
        c.mcp_servers[0]
    );
    // A relative path is refused.
    let e = Config::default()
        .apply_toml("trustedProjects = [\"proj\"]\n", Path::new("c.toml"))
        .unwrap_err();
    assert_eq!(e.details["key"], "trustedProjects");
    assert_eq!(e.details["line"], 1);
}
