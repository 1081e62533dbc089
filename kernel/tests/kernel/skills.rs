//! Agent Skills and custom commands in sessions: found when a session opens, only
//! names and descriptions in the system prompt, `activate_skill` returning the body
//! or a file of the skill's folder (and nothing outside it), `skills.list` and
//! `commands.list`, a bad skill or command a `warning` `SKILL_SKIPPED` that never
//! stops the session, and the bad input of the commands and the tool.

use super::*;
use keel_envelope::commands::{CommandsListCmd, SkillsListCmd};
use keel_kernel::skills::{ProjectTrust, Settings};

const BODY: &str = "Step one: read the changelog. SECRET-BODY-MARKER";

/// A workspace with one good skill (and a file beside it), one with bad front
/// matter, a good command and one named like a reserved command.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    let good = ws.path().join(".keel/skills/release-notes");
    std::fs::create_dir_all(good.join("docs")).unwrap();
    std::fs::write(
        good.join("SKILL.md"),
        format!("---\nname: release-notes\ndescription: Writes release notes from the changelog.\n---\n{BODY}\n"),
    )
    .unwrap();
    std::fs::write(good.join("docs/style.md"), "Short sentences.").unwrap();
    std::fs::write(ws.path().join("outside.txt"), "not the skill's").unwrap();
    let bad = ws.path().join(".agents/skills/broken");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("SKILL.md"), "---\nname: [unclosed\n").unwrap();
    let cmds = ws.path().join(".keel/commands");
    std::fs::create_dir_all(&cmds).unwrap();
    std::fs::write(
        cmds.join("review.md"),
        "---\ndescription: Review a file\nargument-hint: <file>\n---\nReview $ARGUMENTS carefully.\n",
    )
    .unwrap();
    std::fs::write(cmds.join("help.md"), "Shadowing a built-in.\n").unwrap();
    ws
}

fn kernel_with(ws: &std::path::Path, model: Arc<TestModel>, skills: bool) -> Kernel {
    let mut b = Kernel::builder()
        .workspace(ws)
        .model(model)
        .memory_store()
        .builtin_tools(false);
    if skills {
        let settings = Settings {
            trust: ProjectTrust::All,
            ..Settings::default()
        };
        b = b.skills(settings, vec!["help".to_owned()]);
    }
    b.build().unwrap()
}

async fn open(k: &Kernel) -> (SessionHandle, EventStream, Vec<Envelope>) {
    let (s, mut events) = k.start_session(SessionOptions::default()).await.unwrap();
    // What the start said: `session.started`, then the warnings of discovery.
    let mut said = until(&mut events, "session.started").await;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(300), events.recv()).await {
        said.push(e);
    }
    (s, events, said)
}

fn warnings(envs: &[Envelope]) -> Vec<&ErrorPayload> {
    envs.iter()
        .filter_map(|e| match &e.event {
            Event::Warning(w) => Some(w),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn bad_skills_and_commands_are_warnings_and_the_session_starts() {
    let ws = workspace();
    let k = kernel_with(ws.path(), TestModel::new(vec![]), true);
    let (s, _events, said) = open(&k).await;
    assert_eq!(said[0].type_name(), "session.started");
    let w = warnings(&said);
    assert_eq!(w.len(), 2, "{w:#?}");
    assert!(w.iter().all(|w| w.code == ErrorCode::SkillSkipped));
    let broken = w
        .iter()
        .find(|w| {
            w.details["path"]
                .as_str()
                .unwrap()
                .ends_with("broken/SKILL.md")
        })
        .expect("the broken skill is named");
    assert_eq!(broken.details["reason"], "malformed");
    let shadow = w
        .iter()
        .find(|w| w.details["path"].as_str().unwrap().ends_with("help.md"))
        .expect("the shadowing command is named");
    assert_eq!(shadow.details["reason"], "builtin_name");
    // The warnings are on the start's stream, after `session.started`.
    assert!(said.iter().all(|e| e.request_id == said[0].request_id));
    assert!(s.send("hi").await.is_ok());
}

#[tokio::test]
async fn the_lists_show_what_the_session_found() {
    let ws = workspace();
    let k = kernel_with(ws.path(), TestModel::new(vec![]), true);
    let (s, mut events, _) = open(&k).await;
    let rid = s
        .command(CommandPayload::SkillsList(SkillsListCmd::default()))
        .await
        .unwrap();
    let got = until(&mut events, "skills.list").await;
    let list = got.last().unwrap();
    assert_eq!(list.request_id, rid);
    let Event::SkillsList(l) = &list.event else {
        unreachable!()
    };
    assert_eq!(l.skills.len(), 1);
    assert_eq!(l.skills[0].name, "release-notes");
    assert_eq!(
        l.skills[0].description,
        "Writes release notes from the changelog."
    );
    assert_eq!(l.skills[0].source, "project");
    assert!(l.skills[0].path.ends_with("release-notes/SKILL.md"));

    s.command(CommandPayload::CommandsList(CommandsListCmd::default()))
        .await
        .unwrap();
    let got = until(&mut events, "commands.list").await;
    let Event::CommandsList(l) = &got.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(l.commands.len(), 1, "{l:?}");
    let c = &l.commands[0];
    assert_eq!(c.name, "review");
    assert_eq!(c.description.as_deref(), Some("Review a file"));
    assert_eq!(c.argument_hint.as_deref(), Some("<file>"));
    assert!(c.template.contains("$ARGUMENTS"));

    // A kernel without skill settings: both lists are empty.
    let k2 = kernel_with(ws.path(), TestModel::new(vec![]), false);
    let (s2, mut ev2, said) = open(&k2).await;
    assert!(warnings(&said).is_empty());
    s2.command(CommandPayload::SkillsList(SkillsListCmd::default()))
        .await
        .unwrap();
    let got = until(&mut ev2, "skills.list").await;
    let Event::SkillsList(l) = &got.last().unwrap().event else {
        unreachable!()
    };
    assert!(l.skills.is_empty());
}

#[tokio::test]
async fn the_list_commands_refuse_bad_input() {
    let ws = workspace();
    let k = kernel_with(ws.path(), TestModel::new(vec![]), true);
    let mut all = k.subscribe();
    for (i, (sid, payload)) in [
        (None, CommandPayload::SkillsList(SkillsListCmd::default())),
        (
            Some("sess_nope".to_owned()),
            CommandPayload::CommandsList(CommandsListCmd::default()),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let rid = format!("req_bad_{i}");
        let no_session = sid.is_none();
        let _ = k.execute(Command::new(&rid, sid, payload)).await;
        let err = loop {
            let e = all.recv().await.unwrap();
            if e.request_id == rid {
                break e;
            }
        };
        let Event::Error(e) = &err.event else {
            panic!("{err:?}")
        };
        if no_session {
            assert_eq!(e.code, ErrorCode::RequestInvalid);
            assert_eq!(e.details["field"], "sessionId");
        } else {
            assert_eq!(e.code, ErrorCode::SessionNotFound);
        }
    }
    // Undecodable payloads are the codec's: unknown fields are ignored, a payload
    // that is not an object is refused.
    let bad = keel_envelope::codec::decode_command(
        br#"{"version":"1.0","type":"skills.list","requestId":"r","sessionId":"s","payload":[]}"#,
        keel_envelope::codec::Limits::default(),
    );
    assert!(bad.is_err());
}

/// The text the model got as the result of the call `id`.
fn result_of(model: &TestModel, id: &str) -> (String, bool) {
    let seen = model.seen.lock().unwrap();
    for r in seen.iter() {
        for m in r.messages.as_slice() {
            if let keel_kernel::model::Message::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } = m
            {
                if tool_call_id == id {
                    return (content.clone(), *is_error);
                }
            }
        }
    }
    panic!("no result for {id}")
}

#[tokio::test]
async fn only_names_and_descriptions_reach_the_prompt_and_activation_reads_the_rest() {
    let ws = workspace();
    let calls = vec![
        (
            "activate_skill",
            serde_json::json!({"name": "release-notes"}),
        ),
        (
            "activate_skill",
            serde_json::json!({"name": "release-notes", "file": "docs/style.md"}),
        ),
        (
            "activate_skill",
            serde_json::json!({"name": "release-notes", "file": "../../../outside.txt"}),
        ),
        ("activate_skill", serde_json::json!({"name": "nope"})),
        ("activate_skill", serde_json::json!({"file": "x"})),
    ];
    let model = TestModel::new(vec![
        Turn {
            calls,
            ..Turn::default()
        },
        say("done"),
    ]);
    let k = kernel_with(ws.path(), model.clone(), true);
    let (s, mut events, _) = open(&k).await;
    s.send("write the notes").await.unwrap();
    let envs = until(&mut events, "session.completed").await;
    // The test model numbers its calls call_0, call_1, …
    let first = model.seen.lock().unwrap()[0].clone();
    assert!(first.system.contains(
        "<skill name=\"release-notes\">Writes release notes from the changelog.</skill>"
    ));
    assert!(!first.system.contains("SECRET-BODY-MARKER"));
    assert!(first.tools.iter().any(|t| t.name == "activate_skill"));

    let skipped: Vec<_> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallSkipped(t) => Some(t.error.code.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        skipped,
        vec![ErrorCode::ToolArgumentsInvalid],
        "a call without a name"
    );
    let completed: Vec<_> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallCompleted(t) => Some(t.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(completed.len(), 2);
    let body = completed[0].result["message"].as_str().unwrap();
    assert!(body.contains("SECRET-BODY-MARKER"), "{body}");
    assert!(body.contains("docs/style.md"), "{body}");
    assert_eq!(completed[1].result["message"], "Short sentences.");
    let failed: Vec<_> = envs
        .iter()
        .filter_map(|e| match &e.event {
            Event::ToolCallFailed(t) => Some(t.error.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 2, "{failed:#?}");
    assert!(failed[0].message.contains("outside"), "{:?}", failed[0]);
    assert_eq!(failed[1].code, ErrorCode::ToolArgumentsInvalid);
    assert!(failed[1].message.contains("release-notes"));
    // The file outside the skill's folder never reached the model.
    let (text, is_error) = result_of(&model, "call_2");
    assert!(is_error && !text.contains("not the skill's"), "{text}");

    // Without skills there is neither the section nor the tool.
    let plain = TestModel::new(vec![say("hi")]);
    let k2 = kernel_with(ws.path(), plain.clone(), false);
    let (s2, mut ev2, _) = open(&k2).await;
    s2.send("hi").await.unwrap();
    until(&mut ev2, "session.completed").await;
    let req = plain.seen.lock().unwrap()[0].clone();
    assert!(!req.system.contains("available_skills"));
    assert!(!req.tools.iter().any(|t| t.name == "activate_skill"));
}
