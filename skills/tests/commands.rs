//! Custom command discovery on real files in temporary folders: what is found, which
//! file wins a name, and every bad case giving its warning.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use keel_skills::{Discovered, Settings, Source, WarningKind};

const BUILTINS: &[&str] = &["/help", "/status", "/exit", "/skills"];

struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    user: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let d = Dirs {
        ws: base.join("ws"),
        user: base.join("home/commands"),
        outside: base.join("outside"),
        _root: root,
    };
    for p in [&d.ws, &d.user, &d.outside] {
        std::fs::create_dir_all(p).unwrap();
    }
    d
}

fn write(path: &Path, text: impl AsRef<[u8]>) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn find(d: &Dirs) -> Discovered<keel_skills::Command> {
    let s = Settings {
        user_command_dirs: vec![d.user.clone()],
        ..Settings::default()
    };
    s.commands(&d.ws, BUILTINS)
}

#[test]
fn commands_are_found_with_their_front_matter() {
    let d = dirs();
    write(
        &d.ws.join(".keel/commands/fix-issue.md"),
        "---\ndescription: Fix a numbered issue\nargument-hint: <number>\nallowed-tools: Bash\n---\nFix issue #$ARGUMENTS.\n",
    );
    write(
        &d.user.join("standup.md"),
        "Write my standup notes from `git log`.\n",
    );
    // Not commands: other files, folders, hidden files.
    write(&d.ws.join(".keel/commands/notes.txt"), "x");
    write(&d.ws.join(".keel/commands/sub/inner.md"), "x");
    write(&d.ws.join(".keel/commands/.draft.md"), "x");
    std::fs::create_dir_all(d.ws.join(".keel/commands/dir.md")).unwrap();
    let found = find(&d);
    assert_eq!(found.warnings, vec![]);
    let got: Vec<(&str, Source, String)> = found
        .items
        .iter()
        .map(|c| (c.name.as_str(), c.source, c.summary()))
        .collect();
    assert_eq!(
        got,
        vec![
            (
                "fix-issue",
                Source::Project,
                "Fix a numbered issue".to_owned()
            ),
            (
                "standup",
                Source::User,
                "Write my standup notes from `git log`.".to_owned()
            ),
        ]
    );
    let fix = &found.items[0];
    assert_eq!(fix.argument_hint.as_deref(), Some("<number>"));
    assert_eq!(fix.template, "Fix issue #$ARGUMENTS.\n");
    assert_eq!(fix.expand("42"), "Fix issue #42.\n");
    assert_eq!(fix.path, d.ws.join(".keel/commands/fix-issue.md"));
}

#[test]
fn the_projects_command_wins_over_the_users() {
    let d = dirs();
    write(&d.ws.join(".keel/commands/review.md"), "Project review.");
    write(&d.user.join("review.md"), "My review.");
    let found = find(&d);
    assert_eq!(found.items.len(), 1);
    assert_eq!(found.items[0].template, "Project review.");
    assert_eq!(found.warnings.len(), 1);
    assert_eq!(found.warnings[0].kind, WarningKind::Duplicate);
    assert_eq!(found.warnings[0].path, d.user.join("review.md"));
}

/// One bad command file `name` in the workspace: the warning's kind and a piece of its
/// message; a good command beside it is still found.
fn check_bad(name: &str, text: &[u8], kind: WarningKind, says: &str) {
    let d = dirs();
    let path = d.ws.join(".keel/commands").join(name);
    write(&path, text);
    write(&d.ws.join(".keel/commands/good.md"), "Fine.");
    let found = find(&d);
    let names: Vec<&str> = found.items.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["good"], "{name}");
    assert_eq!(found.warnings.len(), 1, "{name}: {:#?}", found.warnings);
    let w = &found.warnings[0];
    assert_eq!((w.path.as_path(), w.kind), (path.as_path(), kind), "{w}");
    assert!(w.message.contains(says), "{name}: {w}");
    assert!(w.message.ends_with("the command was skipped"), "{w}");
}

#[test]
fn bad_commands_are_skipped_with_a_warning_naming_the_file() {
    use WarningKind::*;
    check_bad(
        "help.md",
        b"Shadow the help.",
        BuiltinName,
        "/help is a built-in command",
    );
    check_bad("exit.md", b"x", BuiltinName, "built-in");
    check_bad("skills.md", b"x", BuiltinName, "built-in");
    check_bad("Fix.md", b"x", BadName, "lowercase letters");
    check_bad("a b.md", b"x", BadName, "lowercase letters");
    check_bad("-x.md", b"x", BadName, "starts with a letter or digit");
    check_bad("a:b.md", b"x", BadName, "lowercase letters");
    check_bad(
        &format!("{}.md", "a".repeat(65)),
        b"x",
        BadName,
        "1 to 64 characters",
    );
    check_bad(
        "x.md",
        b"---\ndescription: [oops\n---\nbody",
        Malformed,
        "not valid: line",
    );
    check_bad(
        "x.md",
        b"---\ndescription: 3\nargument-hint: [a, b]\n---\nbody",
        Malformed,
        "argument-hint",
    );
    check_bad(
        "x.md",
        b"---\ndescription: x\nbody",
        Malformed,
        "no closing `---`",
    );
    check_bad(
        "x.md",
        b"---\ndescription: only front matter\n---\n\n",
        Malformed,
        "template is empty",
    );
    check_bad("x.md", b"", Malformed, "template is empty");
    let long = format!("---\ndescription: {}\n---\nbody", "d".repeat(1025));
    check_bad("x.md", long.as_bytes(), Malformed, "longer than 1024");
    check_bad(
        "x.md",
        &[b'x'; 64 * 1024 + 1],
        TooLarge,
        "larger than 64 KiB",
    );
    check_bad("x.md", b"\xff\xfe", Unreadable, "not UTF-8");
}

#[test]
fn command_links_out_of_the_workspace_are_refused() {
    let d = dirs();
    write(&d.outside.join("leak.md"), "Read ~/.ssh for me.");
    write(&d.outside.join("cmds/other.md"), "Outside.");
    std::fs::create_dir_all(d.ws.join(".keel/commands")).unwrap();
    symlink(
        d.outside.join("leak.md"),
        d.ws.join(".keel/commands/leak.md"),
    )
    .unwrap();
    write(&d.ws.join("docs/inner.md"), "Inside.");
    symlink(
        d.ws.join("docs/inner.md"),
        d.ws.join(".keel/commands/inner.md"),
    )
    .unwrap();
    // The user's own folder may link.
    symlink(d.outside.join("leak.md"), d.user.join("mine.md")).unwrap();
    let found = find(&d);
    let names: Vec<(&str, Source)> = found
        .items
        .iter()
        .map(|c| (c.name.as_str(), c.source))
        .collect();
    assert_eq!(
        names,
        vec![("inner", Source::Project), ("mine", Source::User)]
    );
    assert_eq!(found.warnings.len(), 1, "{:#?}", found.warnings);
    assert_eq!(found.warnings[0].kind, WarningKind::OutsideRoot);
    assert_eq!(found.warnings[0].path, d.ws.join(".keel/commands/leak.md"));

    // The whole folder behind a link that leads outside.
    let d = dirs();
    std::fs::create_dir_all(d.ws.join(".keel")).unwrap();
    symlink(d.outside.join("cmds"), d.ws.join(".keel/commands")).unwrap();
    write(&d.outside.join("cmds/other.md"), "Outside.");
    let found = find(&d);
    assert!(found.items.is_empty());
    assert_eq!(found.warnings[0].kind, WarningKind::OutsideRoot);
    assert_eq!(found.warnings[0].path, d.ws.join(".keel/commands"));
}

#[test]
fn the_catalog_holds_both_and_finds_by_name() {
    let d = dirs();
    write(&d.ws.join(".keel/commands/one.md"), "One $1.");
    let s = Settings {
        user_command_dirs: vec![d.user.clone()],
        ..Settings::default()
    };
    let catalog = s.catalog(&d.ws, BUILTINS);
    assert_eq!(
        catalog.command("one").map(|c| c.expand("a b")),
        Some("One a.".to_owned())
    );
    assert!(catalog.command("two").is_none());
    assert!(catalog.skill("one").is_none());
    assert_eq!(catalog.warnings().count(), 0);
}

#[test]
fn slash_prompts_expand_to_commands_and_skills() {
    use keel_skills::{SlashError, SlashKind};
    let d = dirs();
    write(&d.ws.join(".keel/commands/one.md"), "One $1.");
    let skills = d.outside.join("skills");
    write(
        &skills.join("pdf/SKILL.md"),
        "---\nname: pdf\ndescription: PDFs.\n---\nUse pdftotext.\n",
    );
    let s = Settings {
        user_skill_dirs: vec![skills.clone()],
        ..Settings::default()
    };
    let catalog = s.catalog(&d.ws, BUILTINS);
    let one = catalog.expand_slash("/one a b").unwrap().unwrap();
    assert_eq!(
        (one.kind, one.name.as_str(), one.text.as_str()),
        (SlashKind::Command, "one", "One a.")
    );
    let pdf = catalog
        .expand_slash("/skill:pdf  read x.pdf")
        .unwrap()
        .unwrap();
    assert_eq!(pdf.kind, SlashKind::Skill);
    assert!(
        pdf.text
            .contains("<skill_content name=\"pdf\">\nUse pdftotext.\n</skill_content>"),
        "{}",
        pdf.text
    );
    assert!(
        pdf.text.ends_with("The request: read x.pdf\n"),
        "{}",
        pdf.text
    );
    for typed in ["/two", "one", "/etc/hosts", "//one"] {
        assert_eq!(catalog.expand_slash(typed), Ok(None), "{typed}");
    }
    assert_eq!(
        catalog.expand_slash("/skill:nope x"),
        Err(SlashError::UnknownSkill("nope".into()))
    );
    std::fs::write(skills.join("pdf/SKILL.md"), "broken").unwrap();
    match catalog.expand_slash("/skill:pdf") {
        Err(SlashError::Unreadable(w)) => assert_eq!(w.kind, WarningKind::Malformed),
        other => panic!("{other:?}"),
    }
}
