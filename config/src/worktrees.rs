//! Isolated workspaces: `isolation` (where new sessions work) and `[worktrees]`
//! (`dir`: the folder of the worktrees, only in `$KEEL_HOME/config.toml`;
//! `keepBranch`; `subAgents`: where sub-agents work).

use std::path::PathBuf;

use keel_envelope::error::ErrorPayload;
use keel_envelope::worktree::Isolation;
use serde::Deserialize;

/// `[worktrees]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawWorktrees {
    dir: Option<String>,
    keep_branch: Option<bool>,
    #[serde(default, deserialize_with = "keel_envelope::wire::strict::opt")]
    sub_agents: Option<Isolation>,
}

/// `isolation` and `[worktrees]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WorktreesConfig {
    /// `isolation`: where a new session works when its start names nothing
    /// (`"none"`: in the workspace; `"worktree"`: in a new git worktree).
    pub isolation: Isolation,
    /// `worktrees.subAgents`: where a sub-agent works when its call names nothing.
    pub sub_agents: Isolation,
    /// `worktrees.dir`: the folder holding the worktrees (absolute, `~/` expanded;
    /// default `$KEEL_HOME/worktrees`).
    pub dir: Option<PathBuf>,
    /// `worktrees.keepBranch`: whether deleting a session keeps its worktree's branch.
    pub keep_branch: bool,
}

impl WorktreesConfig {
    /// Lays one file's settings over these. `project`: the file is a project's, where
    /// `worktrees.dir` is refused (a project would choose where Keel writes).
    pub(crate) fn apply(
        &mut self,
        isolation: Option<Isolation>,
        raw: Option<RawWorktrees>,
        project: bool,
        invalid: &dyn Fn(&str, String) -> ErrorPayload,
    ) -> Result<(), ErrorPayload> {
        if let Some(i) = isolation {
            self.isolation = i;
        }
        let Some(raw) = raw else {
            return Ok(());
        };
        if let Some(k) = raw.keep_branch {
            self.keep_branch = k;
        }
        if let Some(i) = raw.sub_agents {
            self.sub_agents = i;
        }
        if let Some(dir) = raw.dir {
            if project {
                return Err(invalid(
                    "worktrees.dir",
                    "can only be set in $KEEL_HOME/config.toml: a project cannot choose where Keel writes"
                        .into(),
                ));
            }
            let path = match dir.strip_prefix("~/") {
                Some(rest) => dirs::home_dir()
                    .ok_or_else(|| invalid("worktrees.dir", "the home folder is unknown".into()))?
                    .join(rest),
                None => PathBuf::from(&dir),
            };
            if !path.is_absolute() {
                return Err(invalid(
                    "worktrees.dir",
                    format!("{dir:?} is not an absolute folder (nor one under `~/`)"),
                ));
            }
            self.dir = Some(path);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use keel_envelope::worktree::Isolation;

    use crate::Config;

    fn err(c: &mut Config, text: &str) -> String {
        c.apply_toml(text, Path::new("config.toml"))
            .err()
            .map(|e| e.message)
            .unwrap_or_default()
    }

    #[test]
    fn isolation_and_the_worktree_table_are_keys() {
        let mut c = Config::default();
        assert_eq!(c.worktrees.isolation, Isolation::None);
        c.apply_toml(
            "isolation = \"worktree\"\n[worktrees]\ndir = \"/srv/wt\"\nkeepBranch = true\nsubAgents = \"worktree\"\n",
            Path::new("config.toml"),
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(c.worktrees.isolation, Isolation::Worktree);
        assert_eq!(c.worktrees.sub_agents, Isolation::Worktree);
        assert_eq!(c.worktrees.dir.as_deref(), Some(Path::new("/srv/wt")));
        assert!(c.worktrees.keep_branch);
        let e = err(&mut c, "isolation = \"copy-on-write\"\n");
        assert!(e.contains("isolation"), "{e}");
        let e = err(&mut c, "[worktrees]\ndir = \"rel\"\n");
        assert!(
            e.contains("`worktrees.dir`") && e.contains("not an absolute"),
            "{e}"
        );
        let e = err(&mut c, "[worktrees]\nfolder = \"/x\"\n");
        assert!(e.contains("unknown"), "{e}");
        let e = err(&mut c, "[worktrees]\nsubAgents = \"elsewhere\"\n");
        assert!(e.contains("subAgents"), "{e}");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(".keel/config.toml");
        let e = c
            .apply_project_toml("[worktrees]\ndir = \"/etc\"\n", &file)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("only be set in $KEEL_HOME"), "{e}");
        c.apply_project_toml("isolation = \"none\"\n", &file)
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(c.worktrees.isolation, Isolation::None);
    }
}
