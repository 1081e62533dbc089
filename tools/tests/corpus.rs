//! Data-driven corpora: shell commands (`tests/data/shell/`) and path arguments
//! (`tests/data/paths/`). Each corpus is run by one check function that reports every
//! mismatch, not just the first.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_envelope::tools::Decision;
use keel_envelope::types::{PermissionMode, RiskLevel};
use keel_envelope::ErrorCode;
use keel_tools::policy::{decide, DecisionInput, Rules, ShellPolicy, Verdict};
use keel_tools::{SandboxConfig, ToolContext};
use serde_json::json;

fn data(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/data")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn rows(text: &str) -> Vec<(usize, Vec<String>)> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.starts_with('#') && !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.split('\t').map(str::to_owned).collect()))
        .collect()
}

fn decide_in(
    tool: &str,
    args: serde_json::Value,
    mode: PermissionMode,
    ws: &PathBuf,
    shell: &ShellPolicy,
) -> Verdict {
    let rules = Rules::default();
    decide(&DecisionInput {
        tool,
        args: &args,
        mode,
        rules: &rules,
        workspace: ws,
        roots: keel_tools::jail::Roots::none(),
        shell,
    })
}

fn decision_str(d: &Decision) -> &str {
    d.as_str()
}

fn risk_str(r: &RiskLevel) -> &str {
    r.as_str()
}

/// A workspace with `src/`, `build/`, `target/` and a sibling outside directory.
fn shell_workspace() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = dir.path().join("ws");
    for d in ["src", "build", "target/debug", "empty"] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").expect("write");
    let ws = std::fs::canonicalize(&ws).expect("canonical");
    (dir, ws)
}

fn decision_of(s: &str) -> Option<Decision> {
    match s {
        "allow" => Some(Decision::Allow),
        "ask" => Some(Decision::Ask),
        "deny" => Some(Decision::Deny),
        _ => None,
    }
}

/// Checks one row of the shell corpus (`ask auto-edit auto plan risk command`) against
/// the gate in every mode; returns every mismatch. With `background`, the call is
/// `run_shell {background: true}`, which must be rated and decided the same and say
/// so in its reason.
fn check_shell_row(
    line: usize,
    cols: &[String],
    ws: &PathBuf,
    policy: &ShellPolicy,
    background: bool,
) -> Result<RiskLevel, Vec<String>> {
    let [ask, auto_edit, auto, plan, risk, command] = cols else {
        return Err(vec![format!(
            "line {line}: expected 6 tab-separated columns, got {}",
            cols.len()
        )]);
    };
    let mut out = Vec::new();
    let want_risk = match risk.as_str() {
        "low" => RiskLevel::Low,
        "medium" => RiskLevel::Medium,
        "high" => RiskLevel::High,
        other => return Err(vec![format!("line {line}: unknown risk `{other}`")]),
    };
    // `\n` in the corpus stands for a newline (here-documents).
    let command = &command.replace("\\n", "\n");
    let args = if background {
        json!({ "command": command, "background": true })
    } else {
        json!({ "command": command })
    };
    let line = if background {
        format!("{line} (background)")
    } else {
        line.to_string()
    };
    let wants = [
        (PermissionMode::Ask, ask),
        (PermissionMode::AutoEdit, auto_edit),
        (PermissionMode::Auto, auto),
        (PermissionMode::Plan, plan),
    ];
    // Every mode has a column.
    assert_eq!(wants.len(), PermissionMode::ALL.len());
    let hard_denied = ask == "deny";
    for (mode, want) in wants {
        let Some(want) = decision_of(want) else {
            out.push(format!("line {line}: unknown decision `{want}`"));
            continue;
        };
        let v = decide_in("run_shell", args.clone(), mode.clone(), ws, policy);
        if v.verdict.decision != want {
            out.push(format!(
                "line {line}: `{command}` in {}: expected {}, got {} ({})",
                mode.as_str(),
                decision_str(&want),
                decision_str(&v.verdict.decision),
                v.verdict.reason
            ));
        }
        if v.verdict.risk_level != want_risk {
            out.push(format!(
                "line {line}: `{command}` in {}: expected risk {risk}, got {} ({})",
                mode.as_str(),
                risk_str(&v.verdict.risk_level),
                v.verdict.reason
            ));
        }
        if mode == PermissionMode::Plan && v.verdict.decision == Decision::Deny {
            let want_code = if hard_denied {
                ErrorCode::ToolPermissionDenied
            } else {
                ErrorCode::PlanApprovalRequired
            };
            if v.deny_code.as_ref() != Some(&want_code) {
                out.push(format!(
                    "line {line}: `{command}` in plan: expected code {want_code}, got {:?}",
                    v.deny_code
                ));
            }
        }
        if mode == PermissionMode::Ask {
            if v.verdict.action_type != "shell.execute" {
                out.push(format!(
                    "line {line}: `{command}`: action type {}",
                    v.verdict.action_type
                ));
            }
            if v.verdict.reason.is_empty() {
                out.push(format!("line {line}: `{command}`: empty reason"));
            }
            if background != v.verdict.reason.contains("(runs in the background)") {
                out.push(format!(
                    "line {line}: `{command}`: the reason does not say where it runs: {}",
                    v.verdict.reason
                ));
            }
            let network = v.verdict.scope.iter().any(|s| s == "network");
            if network && v.verdict.level != keel_envelope::types::PermissionLevel::Elevated {
                out.push(format!(
                    "line {line}: `{command}`: network scope without the elevated level"
                ));
            }
        }
    }
    if out.is_empty() {
        Ok(want_risk)
    } else {
        Err(out)
    }
}

#[test]
fn shell_corpus() {
    let text = data("shell/commands.tsv");
    let (_dir, ws) = shell_workspace();
    let policy = ShellPolicy::default();
    let mut mismatches = Vec::new();
    let (mut dangerous, mut harmless) = (0, 0);
    for (line, cols) in rows(&text) {
        // A background command is rated and decided like the same command in the
        // foreground.
        if let Err(e) = check_shell_row(line, &cols, &ws, &policy, true) {
            mismatches.extend(e);
        }
        match check_shell_row(line, &cols, &ws, &policy, false) {
            Ok(RiskLevel::High) => dangerous += 1,
            Ok(RiskLevel::Low) => harmless += 1,
            Ok(_) => {}
            Err(e) => mismatches.extend(e),
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} shell corpus mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert!(
        dangerous >= 300,
        "the shell corpus needs at least 300 dangerous (high-risk) commands, has {dangerous}"
    );
    assert!(
        harmless >= 100,
        "the shell corpus needs at least 100 harmless (low-risk) commands, has {harmless}"
    );
}

#[test]
fn shell_keys_corpus() {
    let text = data("shell/keys.tsv");
    let (_dir, ws) = shell_workspace();
    let mut mismatches = Vec::new();
    for (line, cols) in rows(&text) {
        let [rel, a, b] = cols.as_slice() else {
            mismatches.push(format!("line {line}: expected 3 columns"));
            continue;
        };
        let ka = keel_tools::canonical_key("run_shell", &json!({ "command": a }), &ws);
        let kb = keel_tools::canonical_key("run_shell", &json!({ "command": b }), &ws);
        let same = ka == kb;
        let want_same = rel == "same";
        if same != want_same {
            mismatches.push(format!(
                "line {line}: `{a}` / `{b}`: expected {rel}, keys `{ka}` and `{kb}`"
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} key mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[test]
fn configured_shell_policy() {
    let (_dir, ws) = shell_workspace();
    let policy = ShellPolicy {
        whitelist: vec!["make test".into(), "just check*".into()],
        high_risk: vec!["terraform".into(), "npm run deploy*".into()],
    };
    let cases = [
        ("make test", "allow", "low"),
        ("make", "ask", "medium"),
        ("just check-all", "allow", "low"),
        ("terraform plan", "ask", "high"),
        ("npm run deploy:prod", "ask", "high"),
        ("make test && terraform apply", "ask", "high"),
        ("make test > out.txt", "ask", "medium"),
    ];
    let mut mismatches = Vec::new();
    for (cmd, want, risk) in cases {
        let v = decide_in(
            "run_shell",
            json!({ "command": cmd }),
            PermissionMode::Ask,
            &ws,
            &policy,
        );
        if decision_str(&v.verdict.decision) != want || risk_str(&v.verdict.risk_level) != risk {
            mismatches.push(format!(
                "`{cmd}`: expected {want}/{risk}, got {:?}/{:?} ({})",
                v.verdict.decision, v.verdict.risk_level, v.verdict.reason
            ));
        }
    }
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

struct PathFixture {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    out: PathBuf,
}

fn path_fixture() -> PathFixture {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let ws = base.join("ws");
    let out = base.join("outside");
    for d in ["src/deep/nested", "docs", ".git"] {
        std::fs::create_dir_all(ws.join(d)).expect("mkdir");
    }
    std::fs::create_dir_all(&out).expect("mkdir");
    for (f, c) in [
        ("src/a.rs", "fn a() {}\n"),
        ("src/lib.rs", "pub mod a;\n"),
        ("src/deep/nested/file.txt", "nested\n"),
        ("docs/readme.md", "# docs\n"),
        ("file with spaces.txt", "spaces\n"),
        ("ünïcödé.txt", "unicode\n"),
        (".hidden", "hidden\n"),
        (".git/config", "[core]\n"),
    ] {
        std::fs::write(ws.join(f), c).expect("write");
    }
    std::fs::write(out.join("secret.txt"), "secret\n").expect("write");
    symlink("src", ws.join("link_in")).expect("symlink");
    symlink("src/a.rs", ws.join("link_in_file")).expect("symlink");
    symlink(&out, ws.join("link_out")).expect("symlink");
    symlink("../outside", ws.join("link_out_rel")).expect("symlink");
    symlink("/etc", ws.join("src/deep/link_etc")).expect("symlink");
    symlink("../../..", ws.join("src/deep/link_up")).expect("symlink");
    symlink("../..", ws.join("src/deep/link_root")).expect("symlink");
    symlink(out.join("missing/x"), ws.join("dangling_out")).expect("symlink");
    symlink("src/new_file.rs", ws.join("dangling_in")).expect("symlink");
    symlink("chain2", ws.join("chain1")).expect("symlink");
    symlink("link_out", ws.join("chain2")).expect("symlink");
    symlink("loop_b", ws.join("loop_a")).expect("symlink");
    symlink("loop_a", ws.join("loop_b")).expect("symlink");
    let status = std::process::Command::new("mkfifo")
        .arg(ws.join("fifo"))
        .status()
        .expect("mkfifo");
    assert!(status.success(), "mkfifo failed");
    PathFixture { _dir: dir, ws, out }
}

fn ctx(ws: &Path) -> ToolContext {
    ToolContext {
        workspace: ws.to_path_buf(),
        cancel: tokio_util::sync::CancellationToken::new(),
        progress: Arc::new(|_, _| {}),
        elevated: false,
        sandbox: SandboxConfig::default(),
        roots: keel_tools::jail::Roots::none(),
    }
}

#[tokio::test]
async fn path_corpus() {
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let policy = ShellPolicy::default();
    let tools = keel_tools::builtin_tools();
    let read_file = tools
        .iter()
        .find(|t| t.spec().name == "read_file")
        .expect("read_file");
    let mut mismatches = Vec::new();
    let mut count = 0;
    for (line, cols) in rows(&text) {
        let (op, want, raw) = match cols.as_slice() {
            [op, want, raw] => (op.as_str(), want.as_str(), raw.as_str()),
            [op, want] => (op.as_str(), want.as_str(), ""),
            _ => {
                mismatches.push(format!("line {line}: expected 3 columns"));
                continue;
            }
        };
        count += 1;
        let path = raw
            .replace("{ws}", &fx.ws.to_string_lossy())
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let (tool, args) = match op {
            "read" => ("read_file", json!({ "path": path })),
            "write" => ("write_file", json!({ "path": path, "content": "x\n" })),
            other => {
                mismatches.push(format!("line {line}: unknown op {other}"));
                continue;
            }
        };
        let v = decide_in(tool, args.clone(), PermissionMode::Ask, &fx.ws, &policy);
        let got = match &v.verdict.decision {
            Decision::Deny => format!(
                "deny:{}",
                v.deny_code.as_ref().map(|c| c.as_str()).unwrap_or("?")
            ),
            d => decision_str(d).to_owned(),
        };
        if got != want {
            mismatches.push(format!(
                "line {line}: {op} `{raw}`: expected {want}, got {got} ({})",
                v.verdict.reason
            ));
        }
        if op == "read"
            && want == "ask"
            && (v.verdict.level != keel_envelope::types::PermissionLevel::Elevated
                || v.verdict.risk_level != RiskLevel::High
                || !v.elevated)
        {
            mismatches.push(format!(
                "line {line}: read `{raw}` outside must be elevated/high, got {:?}/{:?}",
                v.verdict.level, v.verdict.risk_level
            ));
        }
        if op == "write" && want == "ask" {
            let auto_edit = decide_in(
                tool,
                args.clone(),
                PermissionMode::AutoEdit,
                &fx.ws,
                &policy,
            );
            if auto_edit.verdict.decision != Decision::Allow {
                mismatches.push(format!(
                    "line {line}: write `{raw}` inside should be allowed in auto-edit"
                ));
            }
        }
        if op == "write" && want.starts_with("deny") {
            for mode in PermissionMode::ALL {
                let m = decide_in(tool, args.clone(), mode.clone(), &fx.ws, &policy);
                if m.verdict.decision != Decision::Deny {
                    mismatches.push(format!(
                        "line {line}: write `{raw}` must be denied in {} mode",
                        mode.as_str()
                    ));
                }
            }
        }
        // The tool itself enforces the jail too: without an elevated context, reads the
        // gate would not allow outright never succeed.
        if op == "read" && want != "allow" {
            match read_file.run(args, ctx(&fx.ws)).await {
                Ok(v) => mismatches.push(format!(
                    "line {line}: read_file `{raw}` succeeded without approval: {v}"
                )),
                Err(e)
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace | ErrorCode::ToolArgumentsInvalid
                    ) => {}
                Err(e) => mismatches.push(format!(
                    "line {line}: read_file `{raw}` failed with {} instead of a jail error",
                    e.code
                )),
            }
        }
    }
    // No write through the corpus may have created anything outside.
    let outside: Vec<_> = std::fs::read_dir(&fx.out)
        .expect("read outside")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "the outside directory changed: {outside:?}"
    );
    assert!(
        count >= 100,
        "the path corpus needs at least 100 cases, has {count}"
    );
    assert!(
        mismatches.is_empty(),
        "{} path corpus mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

#[tokio::test]
async fn writes_through_the_tool_follow_the_corpus() {
    // Every write the corpus denies is refused by write_file itself too.
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let tools = keel_tools::builtin_tools();
    let write_file = tools
        .iter()
        .find(|t| t.spec().name == "write_file")
        .expect("write_file");
    let mut mismatches = Vec::new();
    for (line, cols) in rows(&text) {
        let [op, want, raw] = cols.as_slice() else {
            continue;
        };
        if op != "write" || !want.starts_with("deny") {
            continue;
        }
        let path = raw
            .replace("{ws}", &fx.ws.to_string_lossy())
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let base = fx.ws.parent().expect("base").to_string_lossy().into_owned();
        if (path.starts_with('/') && !path.starts_with(&base))
            || path.starts_with('~')
            || path.contains("link_etc")
        {
            // Only attempt writes whose target would land in the temporary directory,
            // even though they are expected to be refused.
            continue;
        }
        match write_file
            .run(json!({ "path": path, "content": "pwned\n" }), ctx(&fx.ws))
            .await
        {
            Ok(v) => mismatches.push(format!("line {line}: write_file `{raw}` succeeded: {v}")),
            Err(e)
                if e.code == ErrorCode::PathOutsideWorkspace
                    || e.code == ErrorCode::ToolArgumentsInvalid
                    || e.code == ErrorCode::ToolExecutionFailed => {}
            Err(e) => mismatches.push(format!("line {line}: unexpected code {}", e.code)),
        }
    }
    let outside: Vec<_> = std::fs::read_dir(&fx.out)
        .expect("read outside")
        .filter_map(Result::ok)
        .map(|e| e.file_name())
        .collect();
    assert_eq!(
        outside.len(),
        1,
        "the outside directory changed: {outside:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fx.out.join("secret.txt")).expect("secret"),
        "secret\n"
    );
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}

/// How the root under test is given to the session.
#[derive(Debug, Clone, Copy)]
enum RootCase {
    /// A `write` root, by its real path.
    Write,
    /// A `read` root, by its real path.
    Read,
    /// A `write` root given as a symlink to it (the session keeps its target), and
    /// its paths named through the symlink.
    WriteViaSymlink,
}

/// The path corpus against an extra root: the fixture's `ws` is an extra root of a
/// session whose workspace is a sibling `main`. A relative corpus path is named
/// absolutely inside the root (tools name paths in extra roots by absolute path);
/// absolute ones, `~` and the empty path stay as they are. Decisions are the
/// workspace corpus's, except that a `read` root refuses every write with
/// `PATH_OUTSIDE_WORKSPACE` (also a write naming one of its folders). The tools enforce the same: reads outside fail, reads
/// the gate allows never fail with a jail error, writes the gate denies fail, writes
/// it asks for succeed in a `write` root, and nothing outside the root changes.
async fn path_corpus_in_root(case: RootCase) {
    use keel_tools::jail::{extra_roots, Roots};
    let text = data("paths/cases.tsv");
    let fx = path_fixture();
    let base = fx.ws.parent().expect("base").to_path_buf();
    let main = base.join("main");
    std::fs::create_dir_all(&main).expect("mkdir");
    std::fs::write(main.join("keep.txt"), "keep\n").expect("write");
    let named = match case {
        RootCase::WriteViaSymlink => {
            let link = base.join("root-link");
            std::os::unix::fs::symlink(&fx.ws, &link).expect("symlink");
            link
        }
        _ => fx.ws.clone(),
    };
    let writable = !matches!(case, RootCase::Read);
    let roots: Roots =
        extra_roots(&main, &[(named.to_str().expect("utf-8"), writable)]).expect("a valid root");
    let listed: Vec<_> = roots.iter().map(|r| r.path.clone()).collect();
    assert_eq!(listed, vec![fx.ws.clone()], "the root is kept canonical");
    let prefix = named.to_string_lossy().into_owned();
    let policy = ShellPolicy::default();
    let rules = Rules::default();
    let decide_root = |tool: &str, args: &serde_json::Value, mode: PermissionMode| {
        decide(&DecisionInput {
            tool,
            args,
            mode,
            rules: &rules,
            workspace: &main,
            roots: roots.clone(),
            shell: &policy,
        })
    };
    let ctx = ToolContext {
        roots: roots.clone(),
        ..ctx(&main)
    };
    let tools = keel_tools::builtin_tools();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t.spec().name == name)
            .expect("tool")
            .clone()
    };
    let (read_file, write_file) = (tool("read_file"), tool("write_file"));
    let mut mismatches = Vec::new();
    let mut count = 0;
    for (line, cols) in rows(&text) {
        let (op, want, raw) = match cols.as_slice() {
            [op, want, raw] => (op.as_str(), want.as_str(), raw.as_str()),
            [op, want] => (op.as_str(), want.as_str(), ""),
            _ => {
                mismatches.push(format!("line {line}: expected 3 columns"));
                continue;
            }
        };
        count += 1;
        let path = raw
            .replace("{ws}", &prefix)
            .replace("{out}", &fx.out.to_string_lossy())
            .replace("\\0", "\0");
        let path = if path.is_empty() || path.starts_with('/') || path.starts_with('~') {
            path
        } else {
            format!("{prefix}/{path}")
        };
        // A read root refuses a write before looking at what is there (a folder).
        let refused_here =
            want == "ask" || (want == "deny:TOOL_ARGUMENTS_INVALID" && !raw.is_empty());
        let want = if op == "write" && !writable && refused_here {
            "deny:PATH_OUTSIDE_WORKSPACE"
        } else {
            want
        };
        let args = match op {
            "read" => json!({ "path": path }),
            "write" => json!({ "path": path, "content": "x\n" }),
            other => {
                mismatches.push(format!("line {line}: unknown op {other}"));
                continue;
            }
        };
        let tool_name = if op == "read" {
            "read_file"
        } else {
            "write_file"
        };
        let v = decide_root(tool_name, &args, PermissionMode::Ask);
        let got = match &v.verdict.decision {
            Decision::Deny => format!(
                "deny:{}",
                v.deny_code.as_ref().map(|c| c.as_str()).unwrap_or("?")
            ),
            d => decision_str(d).to_owned(),
        };
        if got != want {
            mismatches.push(format!(
                "{case:?} line {line}: {op} `{path:?}`: expected {want}, got {got} ({})",
                v.verdict.reason
            ));
            continue;
        }
        if op == "write" && want == "ask" {
            let auto_edit = decide_root(tool_name, &args, PermissionMode::AutoEdit);
            if auto_edit.verdict.decision != Decision::Allow {
                mismatches.push(format!(
                    "{case:?} line {line}: write `{path}` in a write root should be allowed in auto-edit"
                ));
            }
        }
        if op == "write" && want.starts_with("deny") {
            for mode in PermissionMode::ALL {
                if decide_root(tool_name, &args, mode.clone()).verdict.decision != Decision::Deny {
                    mismatches.push(format!(
                        "{case:?} line {line}: write `{path}` must be denied in {} mode",
                        mode.as_str()
                    ));
                }
            }
        }
        if op == "read" {
            let r = read_file.run(args.clone(), ctx.clone()).await;
            match (want, r) {
                ("allow", Err(e)) if e.code == ErrorCode::PathOutsideWorkspace => {
                    mismatches.push(format!(
                        "{case:?} line {line}: read_file `{path}` refused by the jail: {}",
                        e.message
                    ))
                }
                ("allow", _) => {}
                (_, Ok(v)) => mismatches.push(format!(
                    "{case:?} line {line}: read_file `{path}` succeeded without approval: {v}"
                )),
                (_, Err(e))
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace | ErrorCode::ToolArgumentsInvalid
                    ) => {}
                (_, Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: read_file `{path}` failed with {} instead of a jail error",
                    e.code
                )),
            }
        }
        if op == "write" {
            // Only writes that would land in the temporary directory are attempted.
            let base_text = base.to_string_lossy();
            let lands_here = (!path.starts_with('/') || path.starts_with(&*base_text))
                && !path.starts_with('~')
                && !path.contains("link_etc");
            if !lands_here {
                continue;
            }
            let r = write_file
                .run(json!({ "path": path, "content": "written\n" }), ctx.clone())
                .await;
            match (want, r) {
                ("ask", Ok(v)) => {
                    // It landed in the root.
                    let shown = v["path"].as_str().unwrap_or_default().to_owned();
                    if !shown.starts_with(&*fx.ws.to_string_lossy()) {
                        mismatches.push(format!(
                            "{case:?} line {line}: write_file `{path}` reported `{shown}`, not an absolute path in the root"
                        ));
                    }
                }
                ("ask", Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}` in a write root failed: {} {}",
                    e.code, e.message
                )),
                (_, Ok(v)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}` succeeded: {v}"
                )),
                (_, Err(e))
                    if matches!(
                        e.code,
                        ErrorCode::PathOutsideWorkspace
                            | ErrorCode::ToolArgumentsInvalid
                            | ErrorCode::ToolExecutionFailed
                    ) =>
                {
                    if !writable
                        && want == "deny:PATH_OUTSIDE_WORKSPACE"
                        && raw_is_plain(raw)
                        && e.code != ErrorCode::PathOutsideWorkspace
                    {
                        mismatches.push(format!(
                            "{case:?} line {line}: write_file `{path}` in a read root failed with {} instead of PATH_OUTSIDE_WORKSPACE",
                            e.code
                        ));
                    }
                }
                (_, Err(e)) => mismatches.push(format!(
                    "{case:?} line {line}: write_file `{path}`: unexpected code {}",
                    e.code
                )),
            }
        }
    }
    let names = |d: &Path| -> Vec<_> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .expect("read dir")
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .collect();
        v.sort();
        v
    };
    assert_eq!(
        names(&fx.out),
        ["secret.txt"],
        "the outside directory changed"
    );
    assert_eq!(
        std::fs::read_to_string(fx.out.join("secret.txt")).expect("secret"),
        "secret\n"
    );
    assert_eq!(
        names(&main),
        ["keep.txt"],
        "the session's workspace changed"
    );
    if !writable {
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("src/a.rs")).expect("a.rs"),
            "fn a() {}\n",
            "a read root was written"
        );
    } else {
        assert_eq!(
            std::fs::read_to_string(fx.ws.join("src/a.rs")).expect("a.rs"),
            "written\n",
            "writes in a write root land there"
        );
    }
    assert!(count >= 100, "the path corpus needs at least 100 cases");
    assert!(
        mismatches.is_empty(),
        "{} path corpus mismatches on an extra root:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// A corpus path with no NUL byte and no special file: a write refused for being in a
/// read root is refused as such, not for another reason first.
fn raw_is_plain(raw: &str) -> bool {
    !raw.contains("\\0") && !raw.contains("fifo") && !raw.contains("loop") && raw != "src"
}

#[tokio::test]
async fn path_corpus_in_a_write_root() {
    path_corpus_in_root(RootCase::Write).await;
}

#[tokio::test]
async fn path_corpus_in_a_read_root() {
    path_corpus_in_root(RootCase::Read).await;
}

#[tokio::test]
async fn path_corpus_in_a_root_given_as_a_symlink() {
    path_corpus_in_root(RootCase::WriteViaSymlink).await;
}

#[test]
fn extra_roots_refuse_bad_lists() {
    use keel_tools::jail::extra_roots;
    let dir = tempfile::tempdir().expect("tempdir");
    let base = std::fs::canonicalize(dir.path()).expect("canonical");
    let ws = base.join("ws");
    let a = base.join("a");
    for d in [ws.join("inner"), a.join("sub"), base.join("b")] {
        std::fs::create_dir_all(d).expect("mkdir");
    }
    std::fs::write(base.join("file"), "x").expect("write");
    std::os::unix::fs::symlink(&a, base.join("a-link")).expect("symlink");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let cases: Vec<(Vec<String>, usize, &str)> = vec![
        (vec!["relative/dir".into()], 0, "not an absolute path"),
        (vec![String::new()], 0, "empty"),
        (vec![s(&base.join("missing"))], 0, "cannot be used"),
        (vec![s(&base.join("file"))], 0, "not a directory"),
        (vec![s(&a), s(&a)], 1, "given twice"),
        (vec![s(&a), s(&base.join("a-link"))], 1, "given twice"),
        (vec![s(&a), s(&a.join("sub"))], 1, "overlaps"),
        (vec![s(&a.join("sub")), s(&a)], 1, "overlaps"),
        (vec![s(&ws)], 0, "the workspace itself"),
        (vec![s(&ws.join("inner"))], 0, "inside the workspace"),
        (vec![s(&base)], 0, "holds the workspace"),
        (vec!["/".into()], 0, "holds the workspace"),
        (vec![s(&base.join("b")), "a\0b".into()], 1, "NUL"),
    ];
    for (given, index, says) in cases {
        let pairs: Vec<(&str, bool)> = given.iter().map(|p| (p.as_str(), true)).collect();
        let e = extra_roots(&ws, &pairs).expect_err(&format!("{given:?} must be refused"));
        assert_eq!(e.index, index, "{given:?}: {e:?}");
        assert!(e.message.contains(says), "{given:?}: {}", e.message);
    }
    let ok = extra_roots(
        &ws,
        &[
            (&s(&base.join("a-link")), false),
            (&s(&base.join("b")), true),
        ],
    )
    .expect("valid");
    let got: Vec<_> = ok.iter().map(|r| (r.path.clone(), r.writable)).collect();
    assert_eq!(got, vec![(a.clone(), false), (base.join("b"), true)]);
}
