//! `keel demo`: an offline session on the built-in scripted model, shown as a person
//! sees it in the REPL. It needs no network and no key.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_adapters::ScriptedModel;
use keel_envelope::ids::{IdGen, IdKind, UlidGen};
use keel_envelope::types::{ApprovalDecision, PermissionMode};
use keel_envelope::Event;
use keel_kernel::{Kernel, SessionOptions};

use crate::render::{colors, width, Renderer};

const SCRIPT: &str = include_str!("demo_script.json");
const PROMPT: &str = "The greeting is wrong. Fix it and make sure ./check.sh passes.";

const FILES: &[(&str, &str)] = &[
    (
        "README.md",
        "# Greeter\n\nA tiny project: `src/greeting.txt` holds the greeting, `./check.sh` checks it.\n",
    ),
    ("src/greeting.txt", "Hello, wrold!\n"),
    (
        "check.sh",
        "#!/bin/sh\nif grep -q \"Hello, world!\" src/greeting.txt; then\n  echo \"check passed\"\nelse\n  echo \"check failed: the greeting is wrong\" >&2\n  exit 1\nfi\n",
    ),
];

fn write_project(root: &Path) -> std::io::Result<()> {
    for (path, content) in FILES {
        let p = root.join(path);
        if let Some(dir) = p.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(p, content)?;
    }
    Ok(())
}

/// Runs the demo; returns the exit code.
pub fn run() -> i32 {
    let base = std::env::temp_dir().join(
        UlidGen::default()
            .next_id(IdKind::Session)
            .replace("sess_", "keel-demo-"),
    );
    let workspace = base.join("project");
    let store = base.join("store");
    if let Err(e) = write_project(&workspace) {
        eprintln!(
            "keel demo: cannot create the demo project in {}: {e}",
            workspace.display()
        );
        return 1;
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("keel demo: cannot start the runtime: {e}");
            return 1;
        }
    };
    rt.block_on(demo(workspace, store))
}

async fn demo(workspace: PathBuf, store: PathBuf) -> i32 {
    let script = match serde_json::from_str(SCRIPT)
        .map_err(|e| e.to_string())
        .and_then(|v| ScriptedModel::from_json(v).map_err(|e| e.message))
    {
        Ok(m) => m.with_id("scripted:demo"),
        Err(e) => {
            eprintln!("keel demo: the built-in script is broken: {e}");
            return 1;
        }
    };
    let kernel = match Kernel::builder()
        .workspace(&workspace)
        .model(Arc::new(script))
        .store_dir(&store)
        .permission_mode(PermissionMode::Plan)
        .telemetry(crate::telemetry::recorder())
        .build()
    {
        Ok(k) => k,
        Err(e) => {
            eprintln!("keel demo: {}", e.message);
            return 1;
        }
    };
    let mut r = Renderer::new(colors(), width());
    println!("Keel demo: an offline session on the built-in scripted model.");
    println!(
        "Workspace: {} (a tiny project with a typo)",
        workspace.display()
    );
    println!("Mode: plan (reads run; changes wait for an approved plan)\n");
    let (session, mut events) = match kernel
        .start_session(SessionOptions {
            workspace_path: None,
            permission_mode: None,
            model: None,
            title: Some("demo".into()),
        })
        .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("keel demo: {}", e.message);
            return 1;
        }
    };
    println!("you › {PROMPT}\n");
    let rid = match session.send(PROMPT).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("keel demo: {}", e.message);
            return 1;
        }
    };
    let mut ok = false;
    while let Some(env) = events.recv().await {
        r.print(&env);
        match &env.event {
            Event::PlanApprovalRequired(p) => {
                println!("    approve the plan? [y/n] y   (auto-answered by the demo)");
                if let Err(e) = session
                    .approve_plan(&p.plan_id, Some(PermissionMode::Ask))
                    .await
                {
                    eprintln!("keel demo: {}", e.message);
                }
            }
            Event::ApprovalRequested(a) => {
                println!("    [y] allow once  [s] for this session  [a] always for this project  [n] deny › y   (auto-answered by the demo)");
                if let Err(e) = session
                    .respond_approval(&a.approval_id, ApprovalDecision::AllowOnce)
                    .await
                {
                    eprintln!("keel demo: {}", e.message);
                }
            }
            Event::SessionCompleted(c) if env.request_id == rid => {
                ok = c.stop_reason == keel_envelope::types::StopReason::EndTurn;
                break;
            }
            Event::SessionInterrupted(_) => break,
            _ => {}
        }
    }
    let fixed = std::fs::read_to_string(workspace.join("src/greeting.txt")).unwrap_or_default();
    let _ = session.close().await;
    kernel.shutdown("demo").await;
    println!();
    println!("src/greeting.txt now reads: {}", fixed.trim());
    println!(
        "Session log (one envelope per line): {}",
        store
            .join("sessions")
            .join(session.id())
            .join("events.jsonl")
            .display()
    );
    println!(
        "List it with: KEEL_HOME={} keel sessions list",
        store.display()
    );
    if ok && fixed.contains("Hello, world!") {
        0
    } else {
        eprintln!("keel demo: the session did not finish as expected");
        1
    }
}
