use super::*;

#[test]
fn patch_preview_is_a_key() {
    let mut c = Config::default();
    assert!(!c.patch_preview);
    c.apply_toml("patchPreview = true\n", Path::new("config.toml"))
        .unwrap();
    assert!(c.patch_preview);
    // A project file may turn it off again.
    c.apply_toml("patchPreview = false\n", Path::new(".keel/config.toml"))
        .unwrap();
    assert!(!c.patch_preview);
    let e = c
        .apply_toml(
            "# preview\npatchPreview = \"yes\"\n",
            Path::new("config.toml"),
        )
        .unwrap_err();
    assert_eq!(e.details["key"], "patchPreview");
    assert_eq!(e.details["line"], 2);
}

#[test]
fn durability_and_session_limit_are_keys() {
    let mut c = Config::default();
    assert!(!c.fsync_each_event);
    assert_eq!(c.max_open_sessions, 1000);
    c.apply_toml(
        "fsyncEachEvent = true\nmaxOpenSessions = 20\n",
        Path::new("config.toml"),
    )
    .unwrap();
    assert!(c.fsync_each_event);
    assert_eq!(c.max_open_sessions, 20);
    let e = c
        .apply_toml("maxOpenSessions = -1\n", Path::new("config.toml"))
        .unwrap_err();
    assert_eq!(e.details["key"], "maxOpenSessions");
    let e = c
        .apply_toml("\nfsyncEachEvent = \"always\"\n", Path::new("config.toml"))
        .unwrap_err();
    assert_eq!(
        (e.details["key"].as_str(), e.details["line"].as_u64()),
        (Some("fsyncEachEvent"), Some(2))
    );
}

#[test]
fn bad_values_name_their_key_and_line() {
    let mut c = Config::default();
    let text = "model = \"openai:gpt-4o\"\n\n[retry]\nmaxRetries = 2\n\n[shell]\n\ncompactionThreshold = 3.0\n";
    // compactionThreshold sits under [shell] here: an unknown key of that table.
    let e = c.apply_toml(text, Path::new("c.toml")).unwrap_err();
    assert_eq!(e.details["key"], "shell.compactionThreshold");
    let text = "model = \"openai:gpt-4o\"\ncompactionThreshold = 3.0\n";
    let e = c.apply_toml(text, Path::new("c.toml")).unwrap_err();
    assert_eq!(e.details["key"], "compactionThreshold");
    assert_eq!(e.details["line"], 2);
    assert!(
        e.message.starts_with("c.toml:2: invalid value"),
        "{}",
        e.message
    );
    let e = c
        .apply_toml("maxTurns = 0\n", Path::new("c.toml"))
        .unwrap_err();
    assert_eq!(e.details["line"], 1);
}

#[test]
fn keys_are_found_in_tables() {
    let text = "a = 1\n[retry]\nmaxRetries = 2\n[[availableModels]]\nid = \"x\"\n";
    assert_eq!(key_line(text, "a"), Some(1));
    assert_eq!(key_line(text, "retry.maxRetries"), Some(3));
    assert_eq!(
        key_line("retry.maxRetries = 1\n", "retry.maxRetries"),
        Some(1)
    );
    assert_eq!(key_line(text, "model"), None);
    assert_eq!(key_line(text, "availableModels[0].id"), Some(5));
    assert_eq!(key_line(text, "availableModels[1].id"), None);
}

#[test]
fn line_and_column_are_one_based() {
    assert_eq!(line_col("ab\ncd", 0), (1, 1));
    assert_eq!(line_col("ab\ncd", 4), (2, 2));
}
