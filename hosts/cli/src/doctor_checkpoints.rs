//! `keel doctor`'s `checkpoints` check: whether checkpoints are on, the size of the
//! checkpoint stores under `KEEL_HOME/checkpoints`, and what pruning by the configured
//! limits would free now (a dry run: nothing is changed).

use std::path::Path;

use keel_config::Config;
use keel_tools::checkpoint::{CheckpointHome, PruneRules};

use crate::doctor_cmd::Check;

/// Bytes for people: `512 B`, `3.4 KB`, `12.3 MB`, `2.1 GB` (powers of 1000).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KB", "MB", "GB", "TB"];
    if n < 1000 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1000.0;
    let mut unit = UNITS[0];
    for u in &UNITS[1..] {
        if v < 1000.0 {
            break;
        }
        v /= 1000.0;
        unit = u;
    }
    format!("{v:.1} {unit}")
}

/// The configured limits, as pruning from outside a running kernel applies them: the
/// sessions some process holds open lose nothing (one of them may be running a
/// request).
pub(crate) fn rules(config: &Config, older_than: Option<std::time::Duration>) -> PruneRules {
    PruneRules {
        max_bytes: config.checkpoints.max_bytes,
        max_age: older_than.or(config.checkpoints.max_age()),
        pin_held_open: true,
        ..PruneRules::default()
    }
}

fn limits(config: &Config) -> String {
    let size = config
        .checkpoints
        .max_bytes
        .map_or("no size limit".to_owned(), |b| {
            format!("at most {}", human_bytes(b))
        });
    let age = config
        .checkpoints
        .max_age_days
        .map_or("no age limit".to_owned(), |d| format!("{d} days"));
    format!("{size}, {age}")
}

/// The `checkpoints` check: `ok` with the stores' size and what pruning would free;
/// `warn` when the stores cannot be read or hold damaged records.
pub(crate) async fn checkpoints_check(config: &Config, home: &Path) -> Check {
    let root = home.join("checkpoints");
    let shown = root.display().to_string();
    let rules = rules(config, None);
    let enabled = config.checkpoints.enabled;
    let looked = tokio::task::spawn_blocking(move || {
        let home = CheckpointHome::new(root);
        let usage = home.usage()?;
        let report = home.prune(&rules, true)?;
        Ok::<_, keel_tools::checkpoint::CheckpointError>((usage, report))
    })
    .await;
    let (usage, report) = match looked {
        Ok(Ok(found)) => found,
        Ok(Err(e)) => {
            return Check::warn(
                "checkpoints",
                format!("{shown} cannot be read: {e}"),
                "make KEEL_HOME/checkpoints readable and writable, or turn checkpoints off with `[checkpoints] enabled = false`",
            )
        }
        Err(e) => return Check::warn("checkpoints", e.to_string(), "run keel doctor again"),
    };
    let bytes: u64 = usage.iter().map(|u| u.bytes).sum();
    let count: usize = usage.iter().map(|u| u.checkpoints).sum();
    let state = if enabled {
        "on"
    } else {
        "off ([checkpoints] enabled = false)"
    };
    let summary = format!(
        "{state}; {shown}: {} in {} workspace store(s), {count} checkpoint(s) ({}); pruning now would free {} ({} checkpoint(s))",
        human_bytes(bytes),
        usage.len(),
        limits(config),
        human_bytes(report.bytes_freed()),
        report.dropped.len(),
    );
    if !report.damaged.is_empty() {
        return Check::warn(
            "checkpoints",
            format!("{summary}; damaged: {}", report.damaged.join("; ")),
            "damaged records are left out of rewinds; `keel sessions prune` removes what no checkpoint reaches",
        );
    }
    Check::ok("checkpoints", summary)
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(super::human_bytes(0), "0 B");
        assert_eq!(super::human_bytes(999), "999 B");
        assert_eq!(super::human_bytes(1500), "1.5 KB");
        assert_eq!(super::human_bytes(2_147_483_648), "2.1 GB");
    }
}
