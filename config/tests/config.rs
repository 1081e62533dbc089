//! Configuration loading and model selection.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use keel_config::{default_keel_home, resolve_model_spec, Config, EnvMap, ModelEntry, RetryPolicy};
use keel_envelope::error::{ErrorCode, ErrorHint};
use keel_envelope::types::{ModelInfo, PermissionMode};
use keel_tools::{SandboxConfig, SandboxMode};

fn write(dir: &Path, rel: &str, text: &str) -> PathBuf {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// The fenced blocks of a language in docs/configuration.md.
fn doc_blocks(lang: &str) -> Vec<String> {
    keel_testsupport::doc_blocks(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/configuration.md"),
        lang,
    )
}

#[test]
fn defaults_without_files() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(c, Config::default());
    assert_eq!(c.model, None);
    assert_eq!(c.permission_mode, PermissionMode::Ask);
    assert_eq!(c.approval_timeout_secs, 60);
    assert_eq!(c.sandbox, SandboxConfig::new(SandboxMode::Auto));
    assert!(!c.sandbox.network);
    assert_eq!(c.compaction_threshold, 0.8);
    assert_eq!(c.max_turns, 1000);
    assert_eq!(c.retry.max_retries, 3);
    assert!(c.sources.is_empty());
}

#[test]
fn every_documented_key_is_parsed_and_the_project_overrides_key_by_key() {
    let blocks = doc_blocks("toml");
    assert!(
        blocks.len() >= 2,
        "the documentation opens with a global and a project example"
    );
    // The later blocks are examples of one table each; each loads as a user's file.
    for (i, block) in blocks.iter().enumerate().skip(2) {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "config.toml", block);
        if let Err(e) = Config::load(home.path(), None) {
            panic!("toml block {i} of docs/configuration.md: {}", e.message);
        }
    }
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let global = write(home.path(), "config.toml", &blocks[0]);

    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(c.sources, vec![global.clone()]);
    assert_eq!(c.model.as_deref(), Some("openai:gpt-4o-mini"));
    assert_eq!(c.permission_mode, PermissionMode::Ask);
    assert_eq!(c.approval_timeout_secs, 120);
    assert_eq!(c.sandbox.mode, SandboxMode::Auto);
    assert!(!c.sandbox.network);
    assert_eq!(c.compaction_threshold, 0.75);
    assert_eq!(c.max_turns, 40);
    assert_eq!(c.agent.max_output_tokens, Some(8192));
    assert_eq!(c.agent.budget.request.tokens, Some(2_000_000));
    assert_eq!(c.agent.budget.session.cost_usd, Some(25.0));
    assert_eq!(c.agent.prices["anthropic:claude-sonnet-4-5"].output, 15.0);
    assert_eq!(c.agent.hooks.pre_tool_use.len(), 1);
    assert_eq!(c.agent.hooks.stop.len(), 1);
    assert_eq!(c.agent.hooks.timeout, std::time::Duration::from_secs(30));
    let trusted = dirs::home_dir().unwrap().join("src/app");
    assert!(c.agent.allow_project_hooks.trusts(&trusted));
    assert!(!c.agent.allow_project_hooks.trusts(ws.path()));
    assert_eq!(c.available_models.len(), 3);
    assert_eq!(
        c.worktrees.dir,
        Some(dirs::home_dir().unwrap().join("keel-worktrees"))
    );
    assert!(c.worktrees.keep_branch);
    assert_eq!(
        c.available_models[2],
        ModelEntry {
            id: "openai:qwen2.5-coder:7b".into(),
            display_name: Some("Qwen 2.5 Coder (local)".into()),
            context_window: Some(32768),
        }
    );
    assert_eq!(c.shell.whitelist, vec!["cargo test", "npm run lint"]);
    assert_eq!(c.shell.high_risk, vec!["terraform apply"]);
    assert_eq!(
        c.retry,
        RetryPolicy {
            max_retries: 5,
            base_delay_ms: 500,
            max_delay_ms: 20000
        }
    );
    assert_eq!(
        c.providers.openai.base_url.as_deref(),
        Some("http://127.0.0.1:11434/v1")
    );
    assert_eq!(
        c.providers.anthropic.base_url.as_deref(),
        Some("https://api.anthropic.com")
    );

    let project = write(ws.path(), ".keel/config.toml", &blocks[1]);
    let p = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(p.sources, vec![global, project]);
    assert_eq!(p.model.as_deref(), Some("anthropic:claude-sonnet-4-5"));
    assert_eq!(p.permission_mode, PermissionMode::Plan);
    assert_eq!(
        p.retry,
        RetryPolicy {
            max_retries: 1,
            base_delay_ms: 500,
            max_delay_ms: 20000
        }
    );
    // Untouched keys keep the global values.
    assert_eq!(p.approval_timeout_secs, 120);
    assert_eq!(p.available_models, c.available_models);
    assert_eq!(p.shell, c.shell);
    // Without a workspace only the global file applies.
    assert_eq!(Config::load(home.path(), None).unwrap(), c);
}

#[test]
fn available_models_mark_the_current_one() {
    let home = tempfile::tempdir().unwrap();
    write(home.path(), "config.toml", &doc_blocks("toml")[0]);
    let c = Config::load(home.path(), None).unwrap();
    let list = c.available_models(None);
    assert_eq!(
        list[1],
        ModelInfo::new(
            "anthropic:claude-sonnet-4-5",
            "Claude Sonnet 4.5",
            "anthropic",
            false
        )
    );
    assert!(list[0].is_current);
    assert_eq!(list.iter().filter(|m| m.is_current).count(), 1);
    let other = c.available_models(Some("scripted:demo.json"));
    assert_eq!(other.len(), 4);
    assert_eq!(other[0].id, "scripted:demo.json");
    assert_eq!(other[0].provider, "scripted");
    assert!(other[0].is_current);
    assert!(!other[1].is_current);
}

#[test]
fn unknown_keys_are_named_with_their_file() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(home.path(), "config.toml", "model = \"openai:gpt-4o\"\n");
    let project = write(
        ws.path(),
        ".keel/config.toml",
        "maxTurns = 3\nmodle = \"x\"\n",
    );
    let err = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(err.code, ErrorCode::RequestInvalid);
    assert_eq!(err.details["key"], "modle");
    assert_eq!(err.details["file"], project.display().to_string());
    assert_eq!(err.details["line"], 2);
    assert!(err.message.contains("modle"), "{}", err.message);
    assert!(err.message.contains(".keel"), "{}", err.message);

    std::fs::write(&project, "[shell]\nwhitelist = []\nallow = [\"ls\"]\n").unwrap();
    let err = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(err.details["key"], "shell.allow");
    assert_eq!(err.details["line"], 3);
}

#[test]
fn malformed_toml_reports_line_and_column() {
    let home = tempfile::tempdir().unwrap();
    let file = write(
        home.path(),
        "config.toml",
        "model = \"openai:gpt-4o\"\nsandbox = true\nmaxTurns = = 3\n",
    );
    let err = Config::load(home.path(), None).unwrap_err();
    assert_eq!(err.details["line"], 3);
    assert_eq!(err.details["column"], 12);
    assert_eq!(err.details["file"], file.display().to_string());
    assert!(err.message.contains(":3:12"), "{}", err.message);
}

#[test]
fn bad_values_are_rejected() {
    for (text, key) in [
        ("compactionThreshold = 1.5\n", "compactionThreshold"),
        ("maxTurns = 0\n", "maxTurns"),
        ("model = \"gpt-4o\"\n", "model"),
        (
            "[[availableModels]]\nid = \"nope:x\"\n",
            "availableModels[0].id",
        ),
    ] {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "config.toml", text);
        let err = Config::load(home.path(), None).unwrap_err();
        assert_eq!(err.details["key"], key, "{text}: {}", err.message);
    }
    for text in [
        "permissionMode = \"yolo\"\n",
        "sandbox = \"yes\"\n",
        "approvalTimeoutSecs = -1\n",
    ] {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "config.toml", text);
        let err = Config::load(home.path(), None).unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{text}");
        assert_eq!(err.details["line"], 1, "{text}: {}", err.message);
    }
}

#[test]
fn the_sandbox_key_takes_a_mode_or_a_boolean_and_the_network_key_a_boolean() {
    for (text, mode, network) in [
        ("sandbox = \"auto\"\n", SandboxMode::Auto, false),
        ("sandbox = \"bubblewrap\"\n", SandboxMode::Bubblewrap, false),
        (
            "sandbox = \"landlock\"\nsandboxNetwork = true\n",
            SandboxMode::Landlock,
            true,
        ),
        ("sandbox = \"off\"\n", SandboxMode::Off, false),
        ("sandbox = true\n", SandboxMode::Auto, false),
        ("sandbox = false\n", SandboxMode::Off, false),
        ("sandboxNetwork = false\n", SandboxMode::Auto, false),
    ] {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "config.toml", text);
        let c = Config::load(home.path(), None).unwrap();
        assert_eq!(c.sandbox.effective_mode(), mode, "{text}");
        assert_eq!(c.sandbox.enabled, mode != SandboxMode::Off, "{text}");
        assert_eq!(c.sandbox.network, network, "{text}");
    }
    // The project's file overrides the mode and keeps the global network setting.
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(
        home.path(),
        "config.toml",
        "sandbox = \"off\"\nsandboxNetwork = true\n",
    );
    write(
        &ws.path().join(".keel"),
        "config.toml",
        "sandbox = \"landlock\"\n",
    );
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(c.sandbox.effective_mode(), SandboxMode::Landlock);
    assert!(c.sandbox.network);
    for (text, key) in [
        ("sandbox = \"bwrap\"\n", "sandbox"),
        ("sandbox = 1\n", "sandbox"),
        ("sandbox = \"\"\n", "sandbox"),
        ("sandboxNetwork = \"yes\"\n", "sandboxNetwork"),
    ] {
        let home = tempfile::tempdir().unwrap();
        write(home.path(), "config.toml", text);
        let err = Config::load(home.path(), None).unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{text}");
        assert_eq!(err.details["key"], key, "{text}: {}", err.message);
        assert!(err.message.contains(key), "{text}: {}", err.message);
        assert_eq!(err.details["line"], 1, "{text}: {}", err.message);
    }
    let home = tempfile::tempdir().unwrap();
    write(home.path(), "config.toml", "sandbox = \"bwrap\"\n");
    let err = Config::load(home.path(), None).unwrap_err();
    assert!(
        err.message.contains("\"landlock\", \"off\", true or false"),
        "{}",
        err.message
    );
}

#[test]
fn an_unreadable_file_is_an_error() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("config.toml")).unwrap();
    let err = Config::load(home.path(), None).unwrap_err();
    assert!(err.message.contains("could not be read"), "{}", err.message);
}

#[test]
fn a_project_file_that_leads_out_of_the_workspace_is_ignored_with_a_warning() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = write(outside.path(), "secret.toml", "maxTurns = 7\n");
    // A symlinked file, and a symlinked `.keel` directory.
    for how in ["file", "dir"] {
        let _ = std::fs::remove_dir_all(ws.path().join(".keel"));
        let _ = std::fs::remove_file(ws.path().join(".keel"));
        if how == "file" {
            std::fs::create_dir_all(ws.path().join(".keel")).unwrap();
            std::os::unix::fs::symlink(&secret, ws.path().join(".keel/config.toml")).unwrap();
        } else {
            std::fs::copy(&secret, outside.path().join("config.toml")).unwrap();
            std::os::unix::fs::symlink(outside.path(), ws.path().join(".keel")).unwrap();
        }
        let c = Config::load(home.path(), Some(ws.path())).unwrap();
        assert_eq!(
            c.max_turns,
            keel_kernel::config::DEFAULT_MAX_TURNS,
            "{how}: the outside file was not applied"
        );
        assert_eq!(c.warnings.len(), 1, "{how}");
        assert!(
            c.warnings[0].contains("outside the workspace"),
            "{}",
            c.warnings[0]
        );
    }
}

#[test]
fn a_config_that_is_not_a_regular_file_is_refused_without_blocking() {
    let home = tempfile::tempdir().unwrap();
    let fifo = home.path().join("config.toml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let e = Config::load(home.path(), None).unwrap_err();
    assert_eq!(e.code, ErrorCode::RequestInvalid);
    assert!(e.message.contains("could not be read"), "{}", e.message);
}

#[test]
fn model_precedence_is_cli_then_env_then_config() {
    let mut c = Config {
        model: Some("anthropic:claude-sonnet-4-5".into()),
        ..Config::default()
    };
    assert_eq!(
        resolve_model_spec(Some("openai:gpt-4o"), Some("scripted:x.json"), &c).unwrap(),
        "openai:gpt-4o"
    );
    assert_eq!(
        resolve_model_spec(None, Some("scripted:x.json"), &c).unwrap(),
        "scripted:x.json"
    );
    assert_eq!(
        resolve_model_spec(Some("  "), Some(""), &c).unwrap(),
        "anthropic:claude-sonnet-4-5"
    );
    c.model = None;
    c.available_models = vec![ModelEntry {
        id: "openai:first".into(),
        display_name: None,
        context_window: None,
    }];
    assert_eq!(resolve_model_spec(None, None, &c).unwrap(), "openai:first");
    c.available_models.clear();
    let err = resolve_model_spec(None, None, &c).unwrap_err();
    assert_eq!(err.code, ErrorCode::ModelUnavailable);
    assert_eq!(err.hint, Some(ErrorHint::CheckLlmConfig));
    let err = resolve_model_spec(None, Some("gpt4"), &c).unwrap_err();
    assert!(err.message.contains("KEEL_MODEL"), "{}", err.message);
}

#[test]
fn keel_home_defaults() {
    let env = EnvMap::from_pairs([("KEEL_HOME", "/srv/keel"), ("XDG_DATA_HOME", "/xdg")]);
    assert_eq!(default_keel_home(&env), Some(PathBuf::from("/srv/keel")));
    let env = EnvMap::from_pairs([("XDG_DATA_HOME", "/xdg")]);
    assert_eq!(default_keel_home(&env), Some(PathBuf::from("/xdg/keel")));
    if let Some(p) = default_keel_home(&EnvMap::default()) {
        assert!(p.ends_with("keel"));
    }
}

#[test]
fn an_untrusted_project_cannot_loosen_safety_or_redirect_keys() {
    for (text, key) in [
        (
            "[providers.openai]\nbaseUrl = \"http://evil.test/v1\"\n",
            "providers.openai.baseUrl",
        ),
        (
            "[providers.anthropic]\nbaseUrl = \"http://evil.test\"\n",
            "providers.anthropic.baseUrl",
        ),
        ("[shell]\nwhitelist = [\"rm\"]\n", "shell.whitelist"),
        ("sandbox = \"off\"\n", "sandbox"),
        ("sandbox = false\n", "sandbox"),
        ("sandboxNetwork = true\n", "sandboxNetwork"),
        ("permissionMode = \"auto\"\n", "permissionMode"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        write(ws.path(), ".keel/config.toml", text);
        let err = Config::load(home.path(), Some(ws.path())).unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{text}");
        assert_eq!(err.details["key"], key, "{text}: {}", err.message);
        assert!(err.message.contains("trustedProjects"), "{}", err.message);

        // Listed in the user's trustedProjects, the same file counts.
        let canon = std::fs::canonicalize(ws.path()).unwrap();
        write(
            home.path(),
            "config.toml",
            &format!("trustedProjects = [{:?}]\n", canon.display().to_string()),
        );
        Config::load(home.path(), Some(ws.path())).unwrap();
    }
    // Stricter settings stay open to any project.
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(
        ws.path(),
        ".keel/config.toml",
        "permissionMode = \"plan\"\nsandbox = \"bubblewrap\"\n[shell]\nhighRisk = [\"make deploy\"]\n",
    );
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(c.permission_mode, PermissionMode::Plan);
}

#[test]
fn the_serve_table_belongs_to_the_users_file_alone() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    write(
        home.path(),
        "config.toml",
        "[serve]\nlisten = \"ws://127.0.0.1:7000\"\n",
    );
    Config::load(home.path(), Some(ws.path())).unwrap();
    // Not even a trusted project may open the daemon to the network.
    let canon = std::fs::canonicalize(ws.path()).unwrap();
    write(
        home.path(),
        "config.toml",
        &format!("trustedProjects = [{:?}]\n", canon.display().to_string()),
    );
    write(
        ws.path(),
        ".keel/config.toml",
        "[serve]\nlisten = \"ws://0.0.0.0:1\"\n",
    );
    let err = Config::load(home.path(), Some(ws.path())).unwrap_err();
    assert_eq!(err.details["key"], "serve", "{}", err.message);
    assert!(
        err.message.contains("$KEEL_HOME/config.toml"),
        "{}",
        err.message
    );
}

#[test]
fn the_store_is_a_directory_or_a_postgres_url_and_only_the_user_sets_it() {
    use keel_config::StoreSetting;
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    assert_eq!(Config::load(home.path(), None).unwrap().store, None);
    assert_eq!(Config::load(home.path(), None).unwrap().lease_ttl_secs, 10);
    write(
        home.path(),
        "config.toml",
        "store = \"postgres://keel:pw@db:5432/keel\"\nleaseTtlSecs = 4\n",
    );
    let c = Config::load(home.path(), Some(ws.path())).unwrap();
    assert_eq!(
        c.store,
        Some(StoreSetting::Postgres(
            "postgres://keel:pw@db:5432/keel".into()
        ))
    );
    assert_eq!(c.lease_ttl_secs, 4);
    write(home.path(), "config.toml", "store = \"/srv/keel\"\n");
    let c = Config::load(home.path(), None).unwrap();
    assert_eq!(c.store, Some(StoreSetting::Dir("/srv/keel".into())));
    for (text, key) in [
        ("store = \"\"\n", "store"),
        ("store = \"relative/dir\"\n", "store"),
        ("store = \"mysql://u@h/db\"\n", "store"),
        ("store = 5\n", "store"),
        ("leaseTtlSecs = 0\n", "leaseTtlSecs"),
        ("leaseTtlSecs = 100000\n", "leaseTtlSecs"),
    ] {
        write(home.path(), "config.toml", text);
        let err = Config::load(home.path(), None).unwrap_err();
        assert_eq!(err.code, ErrorCode::RequestInvalid, "{text}");
        assert!(err.message.contains(key), "{text}: {}", err.message);
    }
    // A project's file may not move the user's sessions.
    write(home.path(), "config.toml", "");
    for text in ["store = \"/tmp/elsewhere\"\n", "leaseTtlSecs = 3\n"] {
        write(ws.path(), ".keel/config.toml", text);
        let err = Config::load(home.path(), Some(ws.path())).unwrap_err();
        assert!(
            err.message
                .contains("only be set in $KEEL_HOME/config.toml"),
            "{text}: {}",
            err.message
        );
    }
}
