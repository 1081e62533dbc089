//! `keel doctor`'s `skills` check: the skills and custom commands of the workspace and
//! the user, and the files that were skipped, each with its reason.

use std::path::Path;

use keel_config::Config;

use crate::doctor_cmd::Check;

/// At most this many skipped files are named in the fix.
const NAMED: usize = 5;

/// The `skills` check: `ok` with what was found, `warn` when files were skipped.
pub(crate) fn skills_check(config: &Config, home: &Path, workspace: Option<&Path>) -> Check {
    let settings = crate::setup::skill_settings(config, home);
    let ws = workspace
        .and_then(|w| std::fs::canonicalize(w).ok())
        .unwrap_or_else(|| home.to_owned());
    let catalog = settings.catalog(&ws, &crate::repl::reserved_commands_str());
    let count =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let summary = format!(
        "{}, {}",
        count(catalog.skills.items.len(), "skill", "skills"),
        count(
            catalog.commands.items.len(),
            "custom command",
            "custom commands"
        )
    );
    let skipped: Vec<String> = catalog.warnings().map(|w| w.to_string()).collect();
    if skipped.is_empty() {
        return Check::ok("skills", summary);
    }
    let mut fix = skipped
        .iter()
        .take(NAMED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    if skipped.len() > NAMED {
        fix.push_str(&format!(
            "; and {} more (the REPL's /skills lists them all)",
            skipped.len() - NAMED
        ));
    }
    Check::warn(
        "skills",
        format!(
            "{summary}; {} skipped",
            count(skipped.len(), "file", "files")
        ),
        fix,
    )
}
