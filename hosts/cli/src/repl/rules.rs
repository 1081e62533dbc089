//! The always-allow rules the REPL keeps across sessions, in
//! `KEEL_HOME/approval-rules.json`:
//! `{"global": ["read_file"], "projects": {"/abs/workspace": ["write_file(NOTES.md)"]}}`.
//!
//! The kernel reports a rule added by an "always" approval with `session.rules_updated`;
//! the host keeps it and gives the rules to the next session of the same project.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_envelope::types::ApprovalRules;
use serde_json::{json, Value};

/// The file's content: global rules, and rules per project (keyed by workspace).
type Stored = (Vec<String>, BTreeMap<String, Vec<String>>);

/// The rules file.
#[derive(Debug)]
pub(crate) struct RulesFile {
    path: PathBuf,
    workspace: String,
}

impl RulesFile {
    pub(crate) fn new(home: &Path, workspace: &Path) -> Self {
        RulesFile {
            path: home.join("approval-rules.json"),
            workspace: workspace.display().to_string(),
        }
    }

    /// Reads the whole file: `Ok(None)` when it does not exist.
    fn read(&self) -> Result<Option<Stored>, String> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", self.path.display())),
        };
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not valid JSON: {e}", self.path.display()))?;
        let list = |v: Option<&Value>| -> Vec<String> {
            v.and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default()
        };
        let global = list(v.get("global"));
        let projects = v
            .get("projects")
            .and_then(Value::as_object)
            .map(|m| m.iter().map(|(k, v)| (k.clone(), list(Some(v)))).collect())
            .unwrap_or_default();
        Ok(Some((global, projects)))
    }

    /// The rules for this workspace (empty when there is no file).
    pub(crate) fn load(&self) -> Result<ApprovalRules, String> {
        let Some((global, mut projects)) = self.read()? else {
            return Ok(ApprovalRules::default());
        };
        Ok(ApprovalRules {
            always_allow_global: global,
            always_allow_project: projects.remove(&self.workspace).unwrap_or_default(),
            ..ApprovalRules::default()
        })
    }

    /// Stores the rules in force for this workspace (and the global ones).
    pub(crate) fn save(&self, rules: &ApprovalRules) -> Result<(), String> {
        let (_, mut projects) = self.read()?.unwrap_or_default();
        if rules.always_allow_project.is_empty() {
            projects.remove(&self.workspace);
        } else {
            projects.insert(self.workspace.clone(), rules.always_allow_project.clone());
        }
        let v = json!({ "global": rules.always_allow_global, "projects": projects });
        let text = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text + "\n")
            .and_then(|()| std::fs::rename(&tmp, &self.path))
            .map_err(|e| format!("{}: {e}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_round_trip_per_project() {
        let dir = std::env::temp_dir().join(format!("keel-rules-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        let a = RulesFile::new(&dir, Path::new("/projects/a"));
        let b = RulesFile::new(&dir, Path::new("/projects/b"));
        assert_eq!(a.load(), Ok(ApprovalRules::default()));
        let rules = ApprovalRules {
            always_allow_global: vec!["read_file".into()],
            always_allow_project: vec!["write_file".into()],
            ..ApprovalRules::default()
        };
        assert_eq!(a.save(&rules), Ok(()));
        assert_eq!(a.load(), Ok(rules));
        let other = b.load();
        assert_eq!(
            other.map(|r| (r.always_allow_global, r.always_allow_project)),
            Ok((vec!["read_file".to_owned()], Vec::new()))
        );
        std::fs::write(dir.join("approval-rules.json"), "{not json").ok();
        assert!(a.load().is_err());
        std::fs::remove_dir_all(&dir).ok();
    }
}
