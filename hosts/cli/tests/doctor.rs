//! `keel doctor` through the real binary: a valid configuration with a model server
//! on loopback, an endpoint that refuses, a broken configuration, an unwritable
//! store, and with and without a sandbox.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};

use keel_testsupport::model_server::{openai, FakeResponse, FakeServer};
use keel_testsupport::runtime;
use serde_json::Value;

fn doctor(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_keel"));
    c.arg("doctor")
        .args(args)
        .env("KEEL_HOME", home)
        .env_remove("KEEL_MODEL")
        .env_remove("KEEL_LOG")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_BASE_URL")
        .env_remove("ANTHROPIC_API_KEY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn json_report(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not one JSON object ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn check<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name}: {report}"))
}

#[test]
fn a_valid_configuration_with_an_answering_endpoint() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start([])).unwrap();
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(
            200,
            &serde_json::json!({"object": "list", "data": [{"id": "gpt-test", "object": "model"}]}),
        ),
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "model = \"openai:gpt-test\"\n\n[providers.openai]\nbaseUrl = \"{}/v1\"\n",
            server.base_url()
        ),
    )
    .unwrap();
    let key = "sk-doctor-secret-0123";
    let out = doctor(
        home.path(),
        &["--json", "--timeout", "60"],
        &[("OPENAI_API_KEY", key)],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = json_report(&out);
    assert_eq!(report["ok"], true);
    assert_eq!(report["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(check(&report, "config")["status"], "ok");
    assert_eq!(check(&report, "KEEL_HOME")["status"], "ok");
    assert_eq!(check(&report, "session")["status"], "ok");
    let model = check(&report, "model openai:gpt-test");
    assert_eq!(model["status"], "ok", "{model}");
    let summary = model["summary"].as_str().unwrap();
    assert!(summary.contains("answers HTTP 200"), "{summary}");
    assert!(summary.contains("OPENAI_API_KEY is set"), "{summary}");
    // Neither /props nor the model list reports a window for a name Keel does not know.
    assert!(
        summary.contains("output cap 2048 tokens, the default for a model whose window"),
        "{summary}"
    );
    // The endpoint was really asked, with the key; the key is never printed.
    let asked = server.endpoint_requests();
    let req = asked.iter().find(|r| r.path == "/v1/models").unwrap();
    assert_eq!(req.method, "GET");
    assert_eq!(
        req.header("authorization"),
        Some(format!("Bearer {key}").as_str())
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains(key));
    // The text report says the same, one line per check.
    let out = doctor(
        home.path(),
        &["--timeout", "60"],
        &[("OPENAI_API_KEY", key)],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{text}");
    assert!(!text.contains('\x1b'), "no colour off a terminal");
    assert!(
        text.contains("keel doctor") && text.contains("Keel can run sessions"),
        "{text}"
    );
    assert!(text
        .lines()
        .any(|l| l.contains("ok") && l.contains("version")));
    assert!(!text.contains(key));
}

/// llama-server reports its window at `GET /props`: doctor shows the cap derived from
/// it, and a configured `maxOutputTokens` when there is one.
#[test]
fn the_output_cap_and_where_it_comes_from_are_shown() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start([])).unwrap();
    server.route(
        "GET",
        "/props",
        FakeResponse::json(200, &openai::llama_props(8192)),
    );
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(
            200,
            &openai::llama_models("/models/qwen2.5-0.5b-instruct-q4_k_m.gguf", 32_768),
        ),
    );
    let home = tempfile::tempdir().unwrap();
    let base = format!("{}/v1", server.base_url());
    let config = format!("model = \"openai:small\"\n[providers.openai]\nbaseUrl = \"{base}\"\n");
    std::fs::write(home.path().join("config.toml"), &config).unwrap();
    let out = doctor(home.path(), &["--json", "--timeout", "60"], &[]);
    let report = json_report(&out);
    let model = check(&report, "model openai:small");
    assert_eq!(model["status"], "ok", "{model}");
    let summary = model["summary"].as_str().unwrap();
    assert!(
        summary.contains(
            "output cap 2048 tokens, from the window of 8192 tokens the server reports (GET /props)"
        ),
        "{summary}"
    );
    assert!(server
        .endpoint_requests()
        .iter()
        .any(|r| r.path == "/props"));
    // The text report carries it too.
    let out = doctor(home.path(), &["--timeout", "60"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("output cap 2048 tokens"), "{text}");

    std::fs::write(
        home.path().join("config.toml"),
        format!("maxOutputTokens = 384\n{config}"),
    )
    .unwrap();
    let report = json_report(&doctor(home.path(), &["--json", "--timeout", "60"], &[]));
    let summary = check(&report, "model openai:small")["summary"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        summary.contains("output cap 384 tokens, configured (maxOutputTokens)"),
        "{summary}"
    );
}

#[test]
fn an_endpoint_that_refuses_is_a_warning_with_a_fix() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[[availableModels]]\nid = \"anthropic:claude-test\"\n",
    )
    .unwrap();
    let url = format!("http://127.0.0.1:{port}");
    let out = doctor(
        home.path(),
        &["--json"],
        &[("ANTHROPIC_BASE_URL", &url), ("ANTHROPIC_API_KEY", "k")],
    );
    assert_eq!(out.status.code(), Some(0), "the main job still runs");
    let report = json_report(&out);
    let model = check(&report, "model anthropic:claude-test");
    assert_eq!(model["status"], "warn", "{model}");
    assert!(model["summary"]
        .as_str()
        .unwrap()
        .contains("does not answer"));
    assert!(model["fix"]
        .as_str()
        .unwrap()
        .contains("ANTHROPIC_BASE_URL"));
}

#[test]
fn a_refused_key_and_a_missing_key_are_warnings() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start([])).unwrap();
    server.route(
        "GET",
        "/v1/models",
        FakeResponse::json(
            401,
            &openai::error_body("Incorrect API key provided", "invalid_request_error", None),
        ),
    );
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "model = \"openai:gpt-test\"\n[[availableModels]]\nid = \"anthropic:claude-x\"\n",
    )
    .unwrap();
    let base = format!("{}/v1", server.base_url());
    let out = doctor(
        home.path(),
        &["--json", "--timeout", "60"],
        &[("OPENAI_BASE_URL", &base), ("OPENAI_API_KEY", "sk-wrong")],
    );
    assert_eq!(out.status.code(), Some(0));
    let report = json_report(&out);
    let m = check(&report, "model openai:gpt-test");
    assert_eq!(m["status"], "warn");
    assert!(m["summary"].as_str().unwrap().contains("refused"), "{m}");
    let m = check(&report, "model anthropic:claude-x");
    assert_eq!(m["status"], "warn");
    assert!(
        m["fix"].as_str().unwrap().contains("ANTHROPIC_API_KEY"),
        "{m}"
    );
}

#[test]
fn a_broken_configuration_names_its_line_and_key_and_fails() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "model = \"scripted:x.json\"\n\nmaxTurnz = 3\n",
    )
    .unwrap();
    let out = doctor(home.path(), &[], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text.lines().find(|l| l.contains("config")).unwrap();
    assert!(line.contains("FAIL"), "{line}");
    assert!(
        text.contains("config.toml:3:") && text.contains("maxTurnz"),
        "{text}"
    );
    assert!(
        text.contains("fix: in ") && text.contains("line 3"),
        "{text}"
    );
    assert!(text.contains("Keel cannot run sessions"), "{text}");
    // A bad value: its key and line too.
    std::fs::write(
        home.path().join("config.toml"),
        "sandbox = true\nmaxTurns = 0\n",
    )
    .unwrap();
    let out = doctor(home.path(), &["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_report(&out);
    let c = check(&report, "config");
    assert_eq!(c["status"], "fail");
    assert!(c["summary"].as_str().unwrap().contains(":2:"), "{c}");
    assert!(c["fix"].as_str().unwrap().contains("`maxTurns`"), "{c}");
}

#[test]
fn an_unwritable_store_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "not a directory").unwrap();
    // Under a regular file nothing can be created, even as root.
    let home = file.join("keel");
    let out = doctor(&home, &["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let report = json_report(&out);
    assert_eq!(report["ok"], false);
    let c = check(&report, "KEEL_HOME");
    assert_eq!(c["status"], "fail");
    assert!(c["fix"].as_str().unwrap().contains("KEEL_HOME"));
    assert_eq!(check(&report, "logs")["status"], "warn");
}

#[test]
fn without_a_sandbox_rg_or_git_the_main_job_still_runs() {
    let home = tempfile::tempdir().unwrap();
    // bubblewrap forced, and not on the PATH: no sandbox can run.
    std::fs::write(
        home.path().join("config.toml"),
        "sandbox = \"bubblewrap\"\n",
    )
    .unwrap();
    let bin = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/bin/sh", bin.path().join("sh")).unwrap();
    let path = bin.path().to_str().unwrap();
    let out = doctor(home.path(), &["--json"], &[("PATH", path)]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let report = json_report(&out);
    let s = check(&report, "sandbox");
    assert_eq!(s["status"], "warn");
    assert!(s["summary"].as_str().unwrap().starts_with("none"), "{s}");
    assert!(s["fix"].as_str().unwrap().contains("bubblewrap"));
    for p in ["rg", "git"] {
        assert_eq!(check(&report, p)["status"], "warn", "{p}");
    }
    // Turned off in the configuration: said so.
    std::fs::write(home.path().join("config.toml"), "sandbox = false\n").unwrap();
    let report = json_report(&doctor(home.path(), &["--json"], &[]));
    let s = check(&report, "sandbox");
    assert!(
        s["summary"].as_str().unwrap().contains("sandbox = false"),
        "{s}"
    );
}

#[test]
fn with_a_working_bubblewrap_the_sandbox_is_reported() {
    // What the tools find in this environment (same PATH), asked directly.
    let kind = keel_tools::sandbox_report(&keel_tools::SandboxConfig::default()).sandbox;
    let home = tempfile::tempdir().unwrap();
    let report = json_report(&doctor(home.path(), &["--json"], &[]));
    let s = check(&report, "sandbox");
    assert!(
        s["summary"].as_str().unwrap().starts_with(kind.as_str()),
        "{s}"
    );
    let want = if kind == keel_tools::SandboxKind::None {
        "warn"
    } else {
        "ok"
    };
    assert_eq!(s["status"], want, "{s}");
}

#[test]
fn bad_flags_are_usage_errors() {
    let home = tempfile::tempdir().unwrap();
    for bad in [
        vec!["--bogus"],
        vec!["--timeout"],
        vec!["--timeout", "soon"],
        vec!["extra"],
    ] {
        let out = doctor(home.path(), &bad, &[]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn mcp_servers_are_reached_and_listed_without_their_secrets() {
    let rt = runtime();
    let server = rt
        .block_on(keel_mcp::testing::serve_http(Some("Bearer mcp-secret-77")))
        .unwrap();
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[mcpServers.web]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer mcp-secret-77\" }}\n\n\
             [mcpServers.refused]\nurl = \"{url}\"\nheaders = {{ Authorization = \"Bearer wrong-secret-88\" }}\n\n\
             [mcpServers.broken]\ncommand = \"/nonexistent/keel-no-such-server\"\nenv = {{ TOKEN = \"env-secret-99\" }}\n",
            url = server.url()
        ),
    )
    .unwrap();
    let out = doctor(home.path(), &["--json", "--timeout", "30"], &[]);
    let report = json_report(&out);
    // Servers that do not answer are warnings: the main job still runs.
    assert_eq!(out.status.code(), Some(0), "{report}");
    let web = check(&report, "mcp web");
    assert_eq!(web["status"], "ok", "{web}");
    let summary = web["summary"].as_str().unwrap();
    assert!(
        summary.contains(&server.url()) && summary.contains("echo"),
        "{summary}"
    );
    for name in ["mcp refused", "mcp broken"] {
        let c = check(&report, name);
        assert_eq!(c["status"], "warn", "{c}");
        assert!(c["fix"].as_str().is_some_and(|f| !f.is_empty()), "{c}");
    }
    assert!(
        check(&report, "mcp broken")["summary"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/keel-no-such-server"),
        "{report}"
    );
    let everything = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for secret in ["mcp-secret-77", "wrong-secret-88", "env-secret-99"] {
        assert!(
            !everything.contains(secret),
            "{secret} was printed: {everything}"
        );
    }
    // The human report names them too.
    let text = doctor(home.path(), &["--timeout", "30"], &[]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("mcp web") && text.contains("mcp broken"),
        "{text}"
    );
}

#[test]
fn skills_and_commands_are_counted_and_skipped_files_named() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let write = |p: std::path::PathBuf, t: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, t).unwrap();
    };
    write(
        home.path().join("skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Keep notes.\n---\nAppend.\n",
    );
    write(
        ws.path().join(".keel/commands/check-diff.md"),
        "Review the diff.\n",
    );
    write(
        ws.path().join(".agents/skills/tool/SKILL.md"),
        "---\nname: tool\n---\n",
    );
    let user_home = home.path().join("user-home");
    std::fs::create_dir_all(&user_home).unwrap();
    let home_env = user_home.to_str().unwrap();
    let wsarg = ws.path().to_str().unwrap();
    let out = doctor(
        home.path(),
        &["--json", "--workspace", wsarg],
        &[("HOME", home_env)],
    );
    let report = json_report(&out);
    let skills = check(&report, "skills");
    assert_eq!(skills["status"], "warn", "{skills}");
    assert_eq!(
        skills["summary"], "1 skill, 1 custom command; 1 file skipped",
        "{skills}"
    );
    let fix = skills["fix"].as_str().unwrap();
    assert!(
        fix.contains(".agents/skills/tool/SKILL.md: this project is not trusted"),
        "{fix}"
    );
    // Trusted, the project's skill is read, and its missing description is the reason.
    let canon = std::fs::canonicalize(ws.path()).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!("trustedProjects = [{:?}]\n", canon.display().to_string()),
    )
    .unwrap();
    let out = doctor(
        home.path(),
        &["--json", "--workspace", wsarg],
        &[("HOME", home_env)],
    );
    let report = json_report(&out);
    let fix = check(&report, "skills")["fix"].as_str().unwrap().to_owned();
    assert!(
        fix.contains("no `description`; the skill was skipped"),
        "{fix}"
    );
    // A project trusted for its hooks is trusted for its skills too.
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            "[hooks]\nallowProjectHooks = [{:?}]\n",
            canon.display().to_string()
        ),
    )
    .unwrap();
    let out = doctor(
        home.path(),
        &["--json", "--workspace", wsarg],
        &[("HOME", home_env)],
    );
    let report = json_report(&out);
    let fix = check(&report, "skills")["fix"].as_str().unwrap().to_owned();
    assert!(
        fix.contains("no `description`; the skill was skipped"),
        "{fix}"
    );
    // Nothing skipped: ok.
    std::fs::remove_dir_all(ws.path().join(".agents")).unwrap();
    let out = doctor(
        home.path(),
        &["--json", "--workspace", wsarg],
        &[("HOME", home_env)],
    );
    let report = json_report(&out);
    assert_eq!(check(&report, "skills")["status"], "ok", "{report}");
}
