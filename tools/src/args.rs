//! A call's arguments decoded once, into the shape its row's analysis names. The
//! kernel decodes each call once and hands the value to the gate
//! ([`crate::policy::decide_decoded`]) and to the tool ([`crate::Tool::run_decoded`]).

use keel_envelope::tools::{
    EditFileArgs, GitArgs, ListDirArgs, ReadFileArgs, RunShellArgs, SearchFilesArgs, WriteFileArgs,
};
use serde::de::DeserializeOwned;

use crate::spec::Analysis;

/// The decoded arguments of one call.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArgs {
    /// `read_file`.
    ReadFile(ReadFileArgs),
    /// `list_dir`.
    ListDir(ListDirArgs),
    /// `search_files`.
    SearchFiles(SearchFilesArgs),
    /// `edit_file`.
    EditFile(EditFileArgs),
    /// `write_file`.
    WriteFile(WriteFileArgs),
    /// `run_shell`.
    RunShell(RunShellArgs),
    /// `git`.
    Git(GitArgs),
    /// A tool whose row names no analysis: its arguments are any JSON object, read by
    /// the tool itself.
    Untyped,
}

fn typed<T: DeserializeOwned>(
    args: &serde_json::Value,
    wrap: fn(T) -> ToolArgs,
) -> Result<ToolArgs, String> {
    T::deserialize(args).map(wrap).map_err(|e| e.to_string())
}

impl ToolArgs {
    /// Decodes `args` into the shape `analysis` names (for [`Analysis::None`]: checks
    /// that they are a JSON object). The error is the decoder's message.
    pub fn decode(analysis: Analysis, args: &serde_json::Value) -> Result<Self, String> {
        match analysis {
            Analysis::ReadPath => typed(args, ToolArgs::ReadFile),
            Analysis::ListPath => typed(args, ToolArgs::ListDir),
            Analysis::SearchPath => typed(args, ToolArgs::SearchFiles),
            Analysis::Edit => typed(args, ToolArgs::EditFile),
            Analysis::Write => typed(args, ToolArgs::WriteFile),
            Analysis::Shell => typed(args, ToolArgs::RunShell),
            Analysis::Git => typed(args, ToolArgs::Git),
            Analysis::None if args.is_object() => Ok(ToolArgs::Untyped),
            Analysis::None => Err("the arguments must be a JSON object".to_owned()),
        }
    }

    /// The analysis whose shape these are.
    pub fn analysis(&self) -> Analysis {
        match self {
            ToolArgs::ReadFile(_) => Analysis::ReadPath,
            ToolArgs::ListDir(_) => Analysis::ListPath,
            ToolArgs::SearchFiles(_) => Analysis::SearchPath,
            ToolArgs::EditFile(_) => Analysis::Edit,
            ToolArgs::WriteFile(_) => Analysis::Write,
            ToolArgs::RunShell(_) => Analysis::Shell,
            ToolArgs::Git(_) => Analysis::Git,
            ToolArgs::Untyped => Analysis::None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn each_analysis_decodes_its_own_shape() {
        let a = ToolArgs::decode(Analysis::ReadPath, &json!({"path": "a.rs"})).unwrap();
        assert!(matches!(&a, ToolArgs::ReadFile(r) if r.path == "a.rs"));
        assert_eq!(a.analysis(), Analysis::ReadPath);
        let a = ToolArgs::decode(Analysis::Shell, &json!({"command": "ls"})).unwrap();
        assert!(matches!(&a, ToolArgs::RunShell(r) if r.command == "ls"));
        assert_eq!(
            ToolArgs::decode(Analysis::None, &json!({"any": 1})).unwrap(),
            ToolArgs::Untyped
        );
    }

    #[test]
    fn a_bad_shape_is_the_decoders_message() {
        let e = ToolArgs::decode(Analysis::ReadPath, &json!({})).unwrap_err();
        assert!(e.contains("missing field `path`"), "{e}");
        let e = ToolArgs::decode(Analysis::None, &json!([1])).unwrap_err();
        assert_eq!(e, "the arguments must be a JSON object");
        assert!(ToolArgs::decode(Analysis::Git, &serde_json::Value::Null).is_err());
    }

    #[test]
    fn the_gate_decides_decoded_arguments_as_it_decides_their_json() {
        use crate::policy::{decide_decoded, decide_with_spec, DecisionInput, Rules, ShellPolicy};
        use keel_envelope::types::PermissionMode;
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path().canonicalize().unwrap();
        std::fs::write(root.join("a.txt"), "old\n").unwrap();
        let custom = crate::ToolSpec::custom(
            "deploy",
            "",
            json!({"type": "object"}),
            keel_envelope::types::PermissionLevel::Execute,
            crate::PlanBehavior::Denied,
            crate::ApprovalRequirement::Always,
        );
        let calls = [
            ("read_file", json!({"path": "a.txt"}), None),
            ("read_file", json!({"path": "/etc/passwd"}), None),
            (
                "edit_file",
                json!({"path": "a.txt", "edits": [{"oldText": "old", "newText": "new"}]}),
                None,
            ),
            ("write_file", json!({"path": "b.txt", "content": "x"}), None),
            ("run_shell", json!({"command": "rm -rf /"}), None),
            (
                "run_shell",
                json!({"command": "cargo test", "background": true}),
                None,
            ),
            ("git", json!({"command": "push"}), None),
            ("list_dir", json!({"path": "."}), None),
            ("search_files", json!({"query": "x"}), None),
            ("deploy", json!({"env": "prod"}), Some(&custom)),
        ];
        let rules = Rules::default();
        let shell = ShellPolicy::default();
        for mode in [
            PermissionMode::Ask,
            PermissionMode::Auto,
            PermissionMode::Plan,
        ] {
            for (tool, args, spec) in &calls {
                let input = DecisionInput {
                    tool,
                    args,
                    mode: mode.clone(),
                    rules: &rules,
                    workspace: &root,
                    roots: crate::jail::Roots::none(),
                    shell: &shell,
                };
                let row = spec
                    .cloned()
                    .or_else(|| crate::spec::builtin_spec(tool))
                    .unwrap();
                let decoded = ToolArgs::decode(row.analysis, args).unwrap();
                assert_eq!(
                    decide_decoded(&input, &decoded, *spec),
                    decide_with_spec(&input, *spec),
                    "{tool} {args} in {mode:?}"
                );
            }
        }
        // Arguments decoded for another kind of tool are refused, not trusted.
        let input = DecisionInput {
            tool: "read_file",
            args: &json!({"path": "a.txt"}),
            mode: PermissionMode::Auto,
            rules: &rules,
            workspace: &root,
            roots: crate::jail::Roots::none(),
            shell: &shell,
        };
        let v = decide_decoded(&input, &ToolArgs::Untyped, None);
        assert_eq!(v.verdict.decision, keel_envelope::tools::Decision::Deny);
        assert_eq!(
            v.deny_code,
            Some(keel_envelope::ErrorCode::ToolArgumentsInvalid)
        );
    }
}
