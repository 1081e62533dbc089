//! The lasting rules the REPL keeps across sessions, in `KEEL_HOME/approval-rules.json`:
//! `{"global": ["read_file"], "projects": {"/abs/workspace": ["write_file(NOTES.md)"]},
//! "denyGlobal": ["run_shell(rm -rf *)"], "denyProjects": {"/abs/workspace": ["git(push*)"]}}`.
//!
//! The kernel reports a rule added by an "always" approval with `session.rules_updated`;
//! the host keeps it and gives the rules to the next session of the same project. Deny
//! rules are written by hand (or kept from an earlier file): every save writes them back
//! as they are in force, so saving an allow rule never drops them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use keel_envelope::types::ApprovalRules;
use serde_json::{json, Value};

/// The file's content: allow and deny rules, global and per project (keyed by
/// workspace).
#[derive(Debug, Default)]
struct Stored {
    global: Vec<String>,
    projects: BTreeMap<String, Vec<String>>,
    deny_global: Vec<String>,
    deny_projects: BTreeMap<String, Vec<String>>,
}

/// The rules file.
#[derive(Debug)]
pub(crate) struct RulesFile {
    path: PathBuf,
    workspace: String,
}

fn list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn per_project(v: Option<&Value>) -> BTreeMap<String, Vec<String>> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), list(Some(v)))).collect())
        .unwrap_or_default()
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
        Ok(Some(Stored {
            global: list(v.get("global")),
            projects: per_project(v.get("projects")),
            deny_global: list(v.get("denyGlobal")),
            deny_projects: per_project(v.get("denyProjects")),
        }))
    }

    /// The rules for this workspace (empty when there is no file).
    pub(crate) fn load(&self) -> Result<ApprovalRules, String> {
        let Some(mut stored) = self.read()? else {
            return Ok(ApprovalRules::default());
        };
        Ok(ApprovalRules::new(
            stored.global,
            stored.projects.remove(&self.workspace).unwrap_or_default(),
            stored.deny_global,
            stored
                .deny_projects
                .remove(&self.workspace)
                .unwrap_or_default(),
        ))
    }

    /// Stores the rules in force for this workspace (and the global ones).
    pub(crate) fn save(&self, rules: &ApprovalRules) -> Result<(), String> {
        let mut stored = self.read()?.unwrap_or_default();
        let put = |map: &mut BTreeMap<String, Vec<String>>, rules: &Vec<String>| {
            if rules.is_empty() {
                map.remove(&self.workspace);
            } else {
                map.insert(self.workspace.clone(), rules.clone());
            }
        };
        put(&mut stored.projects, &rules.always_allow_project);
        put(&mut stored.deny_projects, &rules.always_deny_project);
        let mut v = json!({ "global": rules.always_allow_global, "projects": stored.projects });
        if !rules.always_deny_global.is_empty() {
            v["denyGlobal"] = json!(rules.always_deny_global);
        }
        if !stored.deny_projects.is_empty() {
            v["denyProjects"] = json!(stored.deny_projects);
        }
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
        let rules = ApprovalRules::new(
            vec!["read_file".into()],
            vec!["write_file".into()],
            Vec::new(),
            Vec::new(),
        );
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

    #[test]
    fn deny_rules_are_read_and_written_back_beside_allow_rules() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("approval-rules.json"),
            r#"{"global": [], "projects": {}, "denyGlobal": ["run_shell(rm -rf *)"],
                "denyProjects": {"/projects/a": ["git(push*)"], "/projects/b": ["write_file"]}}"#,
        )
        .expect("write");
        let a = RulesFile::new(dir.path(), Path::new("/projects/a"));
        let mut rules = a.load().expect("load");
        assert_eq!(rules.always_deny_global, vec!["run_shell(rm -rf *)"]);
        assert_eq!(rules.always_deny_project, vec!["git(push*)"]);
        // An "always" approval adds an allow rule: saving keeps every deny rule.
        rules.always_allow_project.push("read_file".into());
        assert_eq!(a.save(&rules), Ok(()));
        assert_eq!(a.load(), Ok(rules));
        let b = RulesFile::new(dir.path(), Path::new("/projects/b"))
            .load()
            .expect("load");
        assert_eq!(b.always_deny_project, vec!["write_file"]);
        assert_eq!(b.always_deny_global, vec!["run_shell(rm -rf *)"]);
    }
}
