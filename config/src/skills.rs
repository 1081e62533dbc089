//! `[skills]`: folders of Agent Skills besides the workspace's and the user's own
//! (`paths`), read by the hosts (`keel-skills`).

use std::path::PathBuf;

use keel_envelope::error::ErrorPayload;
use serde::Deserialize;

/// `[skills]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawSkills {
    paths: Option<Vec<String>>,
}

/// `[skills]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillsConfig {
    /// `skills.paths`: folders whose sub-folders are skills, after the user's own, in
    /// order (absolute; `~/` is expanded).
    pub paths: Vec<PathBuf>,
}

impl SkillsConfig {
    /// Lays one file's `[skills]` over this one. `untrusted_project`: the file is a
    /// project's that the user does not trust, where `[skills]` is refused (it would
    /// make Keel read instructions from anywhere on the machine).
    pub(crate) fn apply(
        &mut self,
        raw: RawSkills,
        untrusted_project: bool,
        invalid: &dyn Fn(&str, String) -> ErrorPayload,
    ) -> Result<(), ErrorPayload> {
        let Some(paths) = raw.paths else {
            return Ok(());
        };
        if untrusted_project {
            return Err(invalid(
                "skills.paths",
                "a project's configuration may name skill folders only if you trust the project: \
                 add its path to `trustedProjects` in $KEEL_HOME/config.toml"
                    .into(),
            ));
        }
        let mut out = Vec::with_capacity(paths.len());
        for (i, raw) in paths.iter().enumerate() {
            let path = match raw.strip_prefix("~/").or((raw == "~").then_some("")) {
                Some(rest) => dirs::home_dir()
                    .ok_or_else(|| {
                        invalid(
                            &format!("skills.paths[{i}]"),
                            "the home folder is unknown".into(),
                        )
                    })?
                    .join(rest),
                None => PathBuf::from(raw),
            };
            if !path.is_absolute() {
                return Err(invalid(
                    &format!("skills.paths[{i}]"),
                    format!("{raw:?} is not an absolute folder (nor one under `~/`)"),
                ));
            }
            out.push(path);
        }
        self.paths = out;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::Config;

    #[test]
    fn skill_folders_are_absolute_and_only_in_files_the_user_trusts() {
        let mut c = Config::default();
        c.apply_toml(
            "[skills]\npaths = [\"/opt/skills\", \"~/team\"]\n",
            Path::new("config.toml"),
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(c.skills.paths[0], Path::new("/opt/skills"));
        assert!(c.skills.paths[1].ends_with("team") && c.skills.paths[1].is_absolute());
        let e = c
            .apply_toml("[skills]\npaths = [\"rel\"]\n", Path::new("config.toml"))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(
            e.contains("`skills.paths[0]`") && e.contains("not an absolute folder"),
            "{e}"
        );
        let e = c
            .apply_toml("[skills]\npath = []\n", Path::new("config.toml"))
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("unknown"), "{e}");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(".keel/config.toml");
        let e = c
            .apply_project_toml("[skills]\npaths = [\"/etc\"]\n", &file)
            .err()
            .map(|e| e.message)
            .unwrap_or_default();
        assert!(e.contains("only if you trust the project"), "{e}");
        c.trusted_projects = vec![dir.path().to_owned()];
        c.apply_project_toml("[skills]\npaths = [\"/etc\"]\n", &file)
            .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(c.skills.paths, vec![Path::new("/etc")]);
    }
}
