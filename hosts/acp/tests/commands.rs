//! Custom commands and skills over ACP: `available_commands_update` after a session
//! opens (after the answer that names it), and prompts starting with `/NAME` or
//! `/skill:NAME` expanded before the kernel sees them. The scripted model fails unless
//! the prompt it receives holds the expansion.

mod support;

use keel_acp::AcpOptions;
use serde_json::{json, Value};
use support::{start_with, Client};

fn write(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

/// Writes a project with a command, a command named like a REPL command, a good and
/// a broken skill, and a skill of the user's own; gives options that find them.
fn prepare(dir: &std::path::Path, ws: &std::path::Path) -> AcpOptions {
    write(
        &ws.join(".keel/commands/review.md"),
        "---\ndescription: Review a file\nargument-hint: <path>\n---\nReview $1 for bugs.\n",
    );
    write(
        &ws.join(".keel/commands/help.md"),
        "Shadows the REPL's /help.\n",
    );
    write(
        &ws.join(".agents/skills/pdf-tools/SKILL.md"),
        "---\nname: pdf-tools\ndescription: Extract text from PDF files.\n---\nRun scripts/extract.py.\n",
    );
    write(
        &ws.join(".agents/skills/broken/SKILL.md"),
        "no front matter\n",
    );
    write(
        &dir.join("user-skills/notes/SKILL.md"),
        "---\nname: notes\ndescription: Keep notes.\n---\nAppend to NOTES.md.\n",
    );
    AcpOptions {
        skills: Some(keel_skills::Settings {
            user_skill_dirs: vec![dir.join("user-skills")],
            configured_skill_dirs: Vec::new(),
            user_command_dirs: Vec::new(),
            trust: keel_skills::ProjectTrust::Only(vec![ws.to_owned()]),
        }),
        reserved_commands: vec!["/help".into(), "/status".into()],
        ..AcpOptions::default()
    }
}

fn is_commands_update(v: &Value) -> bool {
    v["method"] == "session/update"
        && v["params"]["update"]["sessionUpdate"] == "available_commands_update"
}

async fn prompt(c: &mut Client, id: u64, sid: &str, text: &str) -> Value {
    c.call(
        id,
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
    )
    .await
}

#[tokio::test]
async fn commands_and_skills_are_announced_and_expanded() {
    let script = json!({"turns": [
        { "expectLastMessageContains": "Review src/main.rs for bugs.", "text": "Reviewed." },
        { "expectLastMessageContains": "<skill_content name=\"pdf-tools\">\nRun scripts/extract.py.\n</skill_content>", "text": "Used the skill." },
        { "expectLastMessageContains": "The request: read a.pdf", "text": "Read it." },
        { "expectLastMessageContains": "/not-a-command stays as typed", "text": "Plain." }
    ]});
    let (mut c, server, _dir, ws) = start_with(script, prepare);
    c.call(1, "initialize", json!({"protocolVersion": 1})).await;
    let answer = c
        .call(2, "session/new", json!({"cwd": ws, "mcpServers": []}))
        .await;
    let sid = support::session_id(&answer);
    assert!(
        !c.seen.iter().any(is_commands_update),
        "the commands come after the answer that names the session"
    );
    let update = c.until(is_commands_update).await;
    assert_eq!(update["params"]["sessionId"], sid.as_str());
    let list = update["params"]["update"]["availableCommands"]
        .as_array()
        .expect("a list")
        .clone();
    let names: Vec<&str> = list.iter().filter_map(|c| c["name"].as_str()).collect();
    assert_eq!(names, vec!["review", "skill:notes", "skill:pdf-tools"]);
    assert_eq!(list[0]["description"], "Review a file");
    assert_eq!(list[0]["input"]["hint"], "<path>");
    assert_eq!(list[0]["_meta"]["keel"]["kind"], "command");
    assert_eq!(list[0]["_meta"]["keel"]["source"], "project");
    assert_eq!(list[2]["description"], "Extract text from PDF files.");
    assert_eq!(list[2]["_meta"]["keel"]["kind"], "skill");
    assert_eq!(list[1]["_meta"]["keel"]["source"], "user");

    let end = |v: &Value| v["result"]["stopReason"].clone();
    assert_eq!(
        end(&prompt(&mut c, 3, &sid, "/review src/main.rs").await),
        "end_turn"
    );
    assert_eq!(
        end(&prompt(&mut c, 4, &sid, "/skill:pdf-tools").await),
        "end_turn"
    );
    assert_eq!(
        end(&prompt(&mut c, 5, &sid, "/skill:pdf-tools read a.pdf").await),
        "end_turn"
    );
    let bad = prompt(&mut c, 6, &sid, "/skill:nope").await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("unknown skill \"nope\""),
        "{bad}"
    );
    assert_eq!(
        end(&prompt(&mut c, 7, &sid, "/not-a-command stays as typed").await),
        "end_turn"
    );
    let texts: Vec<String> = c
        .seen
        .iter()
        .filter(|v| v["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|v| {
            v["params"]["update"]["content"]["text"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(texts.concat(), "Reviewed.Used the skill.Read it.Plain.");

    // Loading the session announces its commands again, after the answer.
    c.call(8, "session/close", json!({"sessionId": sid})).await;
    let before = c.seen.len();
    c.call(
        9,
        "session/load",
        json!({"sessionId": sid, "cwd": ws, "mcpServers": []}),
    )
    .await;
    assert!(!c.seen[before..].iter().any(is_commands_update));
    c.until(is_commands_update).await;
    drop(c);
    server.await.expect("server");
}

#[tokio::test]
async fn without_settings_nothing_is_announced_or_expanded() {
    let script = json!({"turns": [
        { "expectLastMessageContains": "/review src/main.rs", "text": "As typed." }
    ]});
    let (mut c, server, _dir, ws) = start_with(script, |d, w| AcpOptions {
        skills: None,
        ..prepare(d, w)
    });
    c.call(1, "initialize", json!({"protocolVersion": 1})).await;
    let sid = c.new_session(2, &ws, json!([])).await;
    let answer = prompt(&mut c, 3, &sid, "/review src/main.rs").await;
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert!(!c.seen.iter().any(is_commands_update));
    drop(c);
    server.await.expect("server");
}
