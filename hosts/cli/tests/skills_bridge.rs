//! A skill, a custom command and a trace end to end through `keel bridge`: the real
//! binary, skills and commands in temporary folders, a scripted model that activates
//! a skill, and a real OTLP/HTTP receiver on loopback that decodes what the bridge
//! exports. `HOME` is a temporary folder, so the user's own `~/.agents/skills` is not
//! read.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::time::Duration;

use keel_envelope::Event;
use keel_telemetry::testing::Receiver;
use keel_testsupport::bridge::{Bridge, Setup};
use serde_json::json;

const KEEL: &str = env!("CARGO_BIN_EXE_keel");
const HOST_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const HOST_SPAN: &str = "b7ad6b7169203331";

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_skill_a_command_and_a_trace_through_the_bridge() {
    let receiver = Receiver::start().unwrap();
    let root = tempfile::tempdir().unwrap();
    let (home, ws) = (root.path().join("home"), root.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    write(
        &home.join("config.toml"),
        &format!("[telemetry]\nendpoint = \"{}\"\n", receiver.endpoint()),
    );
    write(
        &home.join("skills/release-notes/SKILL.md"),
        "---\nname: release-notes\ndescription: Writes release notes from the changelog.\n---\nRead CHANGELOG.md first. SKILL-BODY-7\n",
    );
    write(&home.join("skills/broken/SKILL.md"), "no front matter\n");
    write(
        &home.join("commands/fix-issue.md"),
        "---\ndescription: Fix an issue\n---\nFix issue $ARGUMENTS.\n",
    );
    let script = root.path().join("script.json");
    std::fs::write(
        &script,
        json!({"turns": [
            {"toolCalls": [{"name": "activate_skill", "arguments": {"name": "release-notes"}}]},
            {"whenLastToolResultContains": "SKILL-BODY-7", "text": "Used the skill."},
            {"text": "The skill was not read."}
        ]})
        .to_string(),
    )
    .unwrap();
    let model = format!("scripted:{}", script.display());
    let home_dir = root.path().display().to_string();
    let env = [("HOME", home_dir.as_str())];
    let mut b = Bridge::start(Setup {
        env: &env,
        ..Setup::new(KEEL, &home, &ws, &model)
    });

    // The broken skill is a warning on the start's stream; the session starts.
    b.send(r#"{"version":"1.0","type":"session.start","requestId":"r1","payload":{}}"#);
    let started = b.until_on("r1", "session.started");
    let sid = started.last().unwrap().session_id.clone().unwrap();
    b.send(&format!(
        r#"{{"version":"1.0","type":"skills.list","requestId":"r2","sessionId":"{sid}","payload":{{}}}}"#
    ));
    let read = b.until_on("r2", "skills.list");
    let warning = b
        .seen
        .iter()
        .find_map(|e| match &e.event {
            Event::Warning(w) if e.request_id == "r1" => Some(w.clone()),
            _ => None,
        })
        .expect("a warning for the broken skill");
    assert_eq!(warning.code.as_str(), "SKILL_SKIPPED");
    assert!(warning.details["path"]
        .as_str()
        .unwrap()
        .ends_with("broken/SKILL.md"));
    let Event::SkillsList(l) = &read.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(l.skills.len(), 1);
    assert_eq!(l.skills[0].name, "release-notes");
    assert_eq!(l.skills[0].source, "user");

    // The command palette's list.
    b.send(&format!(
        r#"{{"version":"1.0","type":"commands.list","requestId":"r3","sessionId":"{sid}","payload":{{}}}}"#
    ));
    let read = b.until_on("r3", "commands.list");
    let Event::CommandsList(l) = &read.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(l.commands.len(), 1);
    assert_eq!(l.commands[0].name, "fix-issue");
    assert_eq!(l.commands[0].description.as_deref(), Some("Fix an issue"));

    // A request in the host's trace: the model activates the skill.
    b.request(
        &sid,
        "r4",
        &format!(
            r#"{{"message":"write the notes","traceparent":"00-{HOST_TRACE}-{HOST_SPAN}-01"}}"#
        ),
    );
    let run = b.until_on("r4", "session.completed");
    let Event::SessionCompleted(done) = &run.last().unwrap().event else {
        unreachable!()
    };
    assert_eq!(done.final_text.as_deref(), Some("Used the skill."));
    for e in run.iter().filter(|e| e.request_id == "r4") {
        let t = e.meta.as_ref().and_then(|m| m.trace_id.as_deref());
        assert_eq!(t, Some(HOST_TRACE), "{}", e.type_name());
    }
    b.stop();

    // The bridge flushed its spans at exit.
    let got = receiver.wait_until(Duration::from_secs(20), |r| {
        r.spans()
            .iter()
            .any(|s| s.trace_id == HOST_TRACE && s.name == "invoke_agent keel")
    });
    assert!(got, "{:#?}", receiver.spans());
    let spans: Vec<_> = receiver
        .spans()
        .into_iter()
        .filter(|s| s.trace_id == HOST_TRACE)
        .collect();
    let root_span = spans
        .iter()
        .find(|s| s.name == "invoke_agent keel")
        .unwrap();
    assert_eq!(root_span.parent_span_id.as_deref(), Some(HOST_SPAN));
    assert_eq!(root_span.str("gen_ai.conversation.id"), Some(sid.as_str()));
    let tool = spans
        .iter()
        .find(|s| s.name == "execute_tool activate_skill")
        .unwrap();
    assert_eq!(
        tool.parent_span_id.as_deref(),
        Some(root_span.span_id.as_str())
    );
    assert_eq!(tool.str("keel.permission.decision"), Some("allow"));
    assert_eq!(
        spans
            .iter()
            .filter(|s| s.name.starts_with("chat ")
                && s.parent_span_id.as_deref() == Some(root_span.span_id.as_str()))
            .count(),
        2
    );
    // No content by default.
    assert!(spans
        .iter()
        .all(|s| !format!("{:?}", s.attributes).contains("SKILL-BODY-7")));
    assert_eq!(receiver.bad_requests(), 0);
}
