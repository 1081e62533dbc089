//! Generation of the checked-in JSON Schema and TypeScript definitions.
//!
//! `KEEL_UPDATE_GENERATED=1 cargo test -p keel-envelope generated` rewrites the files;
//! without the variable the same test fails when a checked-in file is stale.

use std::collections::BTreeMap;

use schemars::{Schema, SchemaGenerator};
use serde_json::{json, Map, Value};
use ts_rs::{TypeVisitor, TS};

use crate::{commands, events, ErrorCode, PROTOCOL_VERSION};

/// A generated file: its path relative to the repository root and its content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedFile {
    /// Path relative to the repository root.
    pub path: &'static str,
    /// Full content.
    pub content: String,
}

fn generator() -> SchemaGenerator {
    schemars::generate::SchemaSettings::draft2020_12().into_generator()
}

/// `v` with every object's keys in sorted order, whatever order its maps keep (a
/// dependency may turn on `serde_json`'s `preserve_order`), so the files are the same
/// in every build.
pub fn sorted(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), sorted(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
        other => other.clone(),
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(&sorted(v)).unwrap_or_default();
    s.push('\n');
    s
}

/// The JSON Schema of the envelope: one `oneOf` branch per event type.
pub fn events_schema() -> Value {
    let mut gen = generator();
    let source = gen.subschema_for::<crate::Source>();
    let meta = gen.subschema_for::<crate::Meta>();
    let branches: Vec<Value> = events::payload_schemas(&mut gen)
        .into_iter()
        .map(|(name, payload)| {
            json!({
                "type": "object",
                "properties": { "type": { "const": name }, "payload": payload },
                "required": ["type", "payload"]
            })
        })
        .collect();
    let defs = gen.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "keel/envelope.schema.json",
        "title": "Envelope",
        "description": format!("A Keel event envelope, protocol {PROTOCOL_VERSION}. Consumers must ignore event types they do not know."),
        "type": "object",
        "properties": {
            "version": { "type": "string", "pattern": "^1\\.[0-9]+$" },
            "sessionId": { "type": ["string", "null"] },
            "requestId": { "type": "string" },
            "eventId": { "type": "string" },
            "type": { "type": "string" },
            "timestamp": { "type": "integer", "minimum": 0 },
            "source": source,
            "sequence": { "type": "integer", "minimum": 1 },
            "payload": { "type": "object" },
            "meta": meta,
        },
        "required": ["version", "sessionId", "requestId", "eventId", "type", "timestamp", "source", "sequence", "payload"],
        "oneOf": branches,
        "$defs": defs,
    })
}

/// The JSON Schema of a command line: one `oneOf` branch per command type.
pub fn commands_schema() -> Value {
    let mut gen = generator();
    let branches: Vec<Value> = commands::payload_schemas(&mut gen)
        .into_iter()
        .map(|(name, payload)| {
            let needs = commands::CommandType::from_name(name).is_some_and(|t| t.needs_session());
            let mut required = vec!["type"];
            if needs {
                required.push("sessionId");
            }
            json!({
                "type": "object",
                "properties": { "type": { "const": name }, "payload": payload },
                "required": required
            })
        })
        .collect();
    let defs = gen.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "keel/command.schema.json",
        "title": "Command",
        "description": format!("A Keel command line, protocol {PROTOCOL_VERSION}. `payload` may be omitted when the command has no required field."),
        "type": "object",
        "properties": {
            "version": { "type": "string", "pattern": "^1\\.[0-9]+$" },
            "type": { "type": "string" },
            "requestId": { "type": "string", "minLength": 1 },
            "sessionId": { "type": ["string", "null"] },
            "payload": { "type": "object" },
        },
        "required": ["version", "type", "requestId"],
        "oneOf": branches,
        "$defs": defs,
    })
}

/// The schemas of the tool argument and result types.
pub fn tools_schema() -> Value {
    use crate::tools::*;
    let mut gen = generator();
    let mut props = Map::new();
    let pairs: Vec<(&str, Schema)> = vec![
        ("read_file.args", gen.subschema_for::<ReadFileArgs>()),
        ("read_file.result", gen.subschema_for::<ReadFileResult>()),
        ("list_dir.args", gen.subschema_for::<ListDirArgs>()),
        ("list_dir.result", gen.subschema_for::<ListDirResult>()),
        ("search_files.args", gen.subschema_for::<SearchFilesArgs>()),
        (
            "search_files.result",
            gen.subschema_for::<SearchFilesResult>(),
        ),
        ("edit_file.args", gen.subschema_for::<EditFileArgs>()),
        ("edit_file.result", gen.subschema_for::<FileChangeResult>()),
        ("write_file.args", gen.subschema_for::<WriteFileArgs>()),
        ("write_file.result", gen.subschema_for::<FileChangeResult>()),
        ("run_shell.args", gen.subschema_for::<RunShellArgs>()),
        ("run_shell.result", gen.subschema_for::<RunShellResult>()),
        ("git.args", gen.subschema_for::<GitArgs>()),
        ("git.result", gen.subschema_for::<RunShellResult>()),
        ("policy.verdict", gen.subschema_for::<PolicyVerdict>()),
        (
            "propose_plan.args",
            gen.subschema_for::<crate::kernel_tools::ProposePlanArgs>(),
        ),
        (
            "update_plan.args",
            gen.subschema_for::<crate::kernel_tools::UpdatePlanArgs>(),
        ),
        (
            "ask_user.args",
            gen.subschema_for::<crate::kernel_tools::AskUserArgs>(),
        ),
        (
            "task_graph.args",
            gen.subschema_for::<crate::kernel_tools::TaskGraphArgs>(),
        ),
        (
            "spawn_sub_agent.args",
            gen.subschema_for::<crate::kernel_tools::SpawnSubAgentArgs>(),
        ),
        (
            "activate_skill.args",
            gen.subschema_for::<crate::kernel_tools::ActivateSkillArgs>(),
        ),
    ];
    for (k, v) in pairs {
        props.insert(k.to_owned(), v.to_value());
    }
    let defs = gen.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "keel/tools.schema.json",
        "title": "Tool arguments and results (built-in and kernel tools)",
        "properties": props,
        "$defs": defs,
    })
}

/// The schema of one tool's arguments, as given to models.
pub fn args_schema<T: schemars::JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft07().with(|s| {
        s.inline_subschemas = true;
    });
    let mut schema: Schema = settings.into_generator().into_root_schema_for::<T>();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("$schema");
        obj.remove("title");
    }
    schema.to_value()
}

#[derive(Default)]
struct Collect {
    decls: BTreeMap<String, String>,
}

impl TypeVisitor for Collect {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        if T::output_path().is_none() {
            return;
        }
        let name = T::ident();
        if self.decls.contains_key(&name) {
            return;
        }
        let mut decl = String::new();
        if let Some(docs) = T::docs() {
            decl.push_str(&docs);
        }
        decl.push_str("export ");
        // Integers travel as JSON numbers (ids and counters stay far below 2^53).
        decl.push_str(&T::decl().replace("bigint", "number"));
        self.decls.insert(name, decl);
        T::visit_dependencies(self);
    }
}

/// The TypeScript definitions: every payload type, the `KeelEvent` and `KeelCommand`
/// discriminated unions, the error codes, and the type-name lists.
pub fn typescript() -> String {
    let mut c = Collect::default();
    events::visit_payloads(&mut c);
    commands::visit_payloads(&mut c);
    c.visit::<crate::Source>();
    c.visit::<crate::Meta>();
    c.visit::<crate::tools::ReadFileArgs>();
    c.visit::<crate::tools::ReadFileResult>();
    c.visit::<crate::tools::ListDirArgs>();
    c.visit::<crate::tools::ListDirResult>();
    c.visit::<crate::tools::SearchFilesArgs>();
    c.visit::<crate::tools::SearchFilesResult>();
    c.visit::<crate::tools::EditFileArgs>();
    c.visit::<crate::tools::FileChangeResult>();
    c.visit::<crate::tools::WriteFileArgs>();
    c.visit::<crate::tools::RunShellArgs>();
    c.visit::<crate::tools::RunShellResult>();
    c.visit::<crate::tools::GitArgs>();
    c.visit::<crate::tools::PolicyVerdict>();
    c.visit::<crate::kernel_tools::ProposePlanArgs>();
    c.visit::<crate::kernel_tools::UpdatePlanArgs>();
    c.visit::<crate::kernel_tools::AskUserArgs>();
    c.visit::<crate::kernel_tools::TaskGraphArgs>();
    c.visit::<crate::kernel_tools::SpawnSubAgentArgs>();
    c.visit::<crate::kernel_tools::ActivateSkillArgs>();
    c.visit::<crate::remote::AuthMessage>();

    let mut out = String::new();
    out.push_str("// Generated from the keel-envelope crate. Do not edit by hand.\n");
    out.push_str(
        "// Regenerate: KEEL_UPDATE_GENERATED=1 cargo test -p keel-envelope generated\n\n",
    );
    out.push_str(&format!(
        "export const PROTOCOL_VERSION = \"{PROTOCOL_VERSION}\";\n\n"
    ));
    for decl in c.decls.values() {
        out.push_str(decl);
        out.push_str("\n\n");
    }

    out.push_str("/** Every event type and its payload. */\nexport interface EventPayloads {\n");
    for t in events::EventType::ALL {
        out.push_str(&format!(
            "  \"{}\": {};\n",
            t.as_str(),
            t.payload_type_name()
        ));
    }
    out.push_str("}\n\n");
    out.push_str("export type EventTypeName = keyof EventPayloads;\n\n");
    out.push_str("export const EVENT_TYPES: readonly EventTypeName[] = [\n");
    for t in events::EventType::ALL {
        out.push_str(&format!("  \"{}\",\n", t.as_str()));
    }
    out.push_str("];\n\n");
    out.push_str(
        "/** The envelope fields common to every event. */\n\
export interface EnvelopeBase {\n  version: string;\n  sessionId: string | null;\n  requestId: string;\n  eventId: string;\n  timestamp: number;\n  source: Source;\n  sequence: number;\n  meta?: Meta;\n}\n\n\
/** A known event: `type` narrows `payload`. */\n\
export type KeelEvent = { [K in EventTypeName]: EnvelopeBase & { type: K; payload: EventPayloads[K] } }[EventTypeName];\n\n\
/** An event of a type this version does not know; consumers must ignore it. */\n\
export type UnknownEvent = EnvelopeBase & { type: string; payload: Record<string, unknown> };\n\n",
    );

    out.push_str(
        "/** Every command type and its payload. */\nexport interface CommandPayloads {\n",
    );
    for t in commands::CommandType::ALL {
        out.push_str(&format!(
            "  \"{}\": {};\n",
            t.as_str(),
            t.payload_type_name()
        ));
    }
    out.push_str("}\n\n");
    out.push_str("export type CommandTypeName = keyof CommandPayloads;\n\n");
    out.push_str("export const COMMAND_TYPES: readonly CommandTypeName[] = [\n");
    for t in commands::CommandType::ALL {
        out.push_str(&format!("  \"{}\",\n", t.as_str()));
    }
    out.push_str("];\n\n");
    out.push_str("/** Commands that need `sessionId`. */\nexport const SESSION_COMMANDS: readonly CommandTypeName[] = [\n");
    for t in commands::CommandType::ALL
        .iter()
        .filter(|t| t.needs_session())
    {
        out.push_str(&format!("  \"{}\",\n", t.as_str()));
    }
    out.push_str("];\n\n");
    out.push_str(
        "/** A command line. */\n\
export type KeelCommand = { [K in CommandTypeName]: { version: string; type: K; requestId: string; sessionId?: string | null; payload: CommandPayloads[K] } }[CommandTypeName];\n\n",
    );
    out.push_str("export const ERROR_CODES: readonly ErrorCode[] = [\n");
    for code in ErrorCode::ALL {
        out.push_str(&format!("  \"{}\",\n", code.as_str()));
    }
    out.push_str("];\n");
    out
}

/// Every generated file.
pub fn all() -> Vec<GeneratedFile> {
    vec![
        GeneratedFile {
            path: "docs/schema/envelope.schema.json",
            content: pretty(&events_schema()),
        },
        GeneratedFile {
            path: "docs/schema/command.schema.json",
            content: pretty(&commands_schema()),
        },
        GeneratedFile {
            path: "docs/schema/tools.schema.json",
            content: pretty(&tools_schema()),
        },
        GeneratedFile {
            path: "hosts/electron/src/generated/protocol.ts",
            content: typescript(),
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fails when a checked-in generated file differs from what the types generate now.
    #[test]
    fn generated_files_are_fresh() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let update = std::env::var_os("KEEL_UPDATE_GENERATED").is_some();
        let mut stale = Vec::new();
        for file in all() {
            let path = root.join(file.path);
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            if current != file.content {
                if update {
                    if let Some(dir) = path.parent() {
                        std::fs::create_dir_all(dir).expect("create generated dir");
                    }
                    std::fs::write(&path, &file.content).expect("write generated file");
                } else {
                    stale.push(file.path);
                }
            }
        }
        assert!(
            stale.is_empty(),
            "generated files are stale: {stale:?}\nregenerate with: KEEL_UPDATE_GENERATED=1 cargo test -p keel-envelope generated"
        );
    }

    #[test]
    fn every_type_has_a_schema_branch_and_a_ts_entry() {
        let schema = events_schema();
        let branches = schema["oneOf"].as_array().map(Vec::len).unwrap_or(0);
        assert_eq!(branches, events::EventType::ALL.len());
        let ts = typescript();
        for t in events::EventType::ALL {
            assert!(
                ts.contains(&format!("\"{}\": {}", t.as_str(), t.payload_type_name())),
                "{}",
                t.as_str()
            );
        }
        for t in commands::CommandType::ALL {
            assert!(
                ts.contains(&format!("\"{}\": {}", t.as_str(), t.payload_type_name())),
                "{}",
                t.as_str()
            );
        }
    }
}
