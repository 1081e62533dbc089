//! `[checkpoints]`: whether sessions checkpoint their workspace (`enabled`), and the
//! limits that keep the checkpoint stores of `$KEEL_HOME/checkpoints` bounded
//! (`maxBytes`, `maxAgeDays`). Only in `$KEEL_HOME/config.toml`: the limits apply to
//! the stores of every workspace, so a project's file cannot set them.

use keel_envelope::error::ErrorPayload;
use serde::Deserialize;

/// Default of `checkpoints.maxBytes`: 2 GiB.
pub const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Default of `checkpoints.maxAgeDays`.
pub const DEFAULT_MAX_AGE_DAYS: u64 = 30;
/// The smallest `checkpoints.maxBytes` other than 0 (a smaller limit would drop every
/// checkpoint as soon as it is taken).
pub const MIN_MAX_BYTES: u64 = 1024 * 1024;
/// The largest `checkpoints.maxAgeDays`.
pub const MAX_AGE_DAYS: u64 = 36_500;

/// `[checkpoints]` as written.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct RawCheckpoints {
    enabled: Option<bool>,
    max_bytes: Option<u64>,
    max_age_days: Option<u64>,
}

/// `[checkpoints]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointsConfig {
    /// `checkpoints.enabled`: sessions checkpoint their workspace before each
    /// request and each tool call that may change files. Default true.
    pub enabled: bool,
    /// `checkpoints.maxBytes`: the stores together hold at most about this much
    /// (`None`: no limit, written `0`). Default 2 GiB.
    pub max_bytes: Option<u64>,
    /// `checkpoints.maxAgeDays`: checkpoints older than this many days go (`None`: no
    /// limit, written `0`). Default 30.
    pub max_age_days: Option<u64>,
}

impl Default for CheckpointsConfig {
    fn default() -> Self {
        CheckpointsConfig {
            enabled: true,
            max_bytes: Some(DEFAULT_MAX_BYTES),
            max_age_days: Some(DEFAULT_MAX_AGE_DAYS),
        }
    }
}

impl CheckpointsConfig {
    /// The age limit as a duration.
    pub fn max_age(&self) -> Option<std::time::Duration> {
        self.max_age_days
            .map(|d| std::time::Duration::from_secs(d.saturating_mul(24 * 60 * 60)))
    }

    /// Lays one file's `[checkpoints]` over this one.
    pub(crate) fn apply(
        &mut self,
        raw: RawCheckpoints,
        invalid: &dyn Fn(&str, String) -> ErrorPayload,
    ) -> Result<(), ErrorPayload> {
        if let Some(e) = raw.enabled {
            self.enabled = e;
        }
        if let Some(b) = raw.max_bytes {
            if b != 0 && b < MIN_MAX_BYTES {
                return Err(invalid(
                    "checkpoints.maxBytes",
                    format!(
                        "{b} bytes is less than 1 MiB ({MIN_MAX_BYTES}): every checkpoint would be dropped as soon as it is taken; 0 means no limit"
                    ),
                ));
            }
            self.max_bytes = (b != 0).then_some(b);
        }
        if let Some(d) = raw.max_age_days {
            if d > MAX_AGE_DAYS {
                return Err(invalid(
                    "checkpoints.maxAgeDays",
                    format!("{d} days is more than {MAX_AGE_DAYS}; 0 means no limit"),
                ));
            }
            self.max_age_days = (d != 0).then_some(d);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::Config;

    fn err(c: &mut Config, text: &str) -> (String, String, Option<u64>) {
        match c.apply_toml(text, Path::new("config.toml")) {
            Ok(()) => panic!("{text:?} was accepted"),
            Err(e) => (
                e.message.clone(),
                e.details["key"].as_str().unwrap_or_default().to_owned(),
                e.details.get("line").and_then(|l| l.as_u64()),
            ),
        }
    }

    #[test]
    fn defaults_values_and_no_limit() {
        let mut c = Config::default();
        assert!(c.checkpoints.enabled);
        assert_eq!(c.checkpoints.max_bytes, Some(2 * 1024 * 1024 * 1024));
        assert_eq!(c.checkpoints.max_age_days, Some(30));
        c.apply_toml(
            "[checkpoints]\nenabled = false\nmaxBytes = 5368709120\nmaxAgeDays = 7\n",
            Path::new("config.toml"),
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert!(!c.checkpoints.enabled);
        assert_eq!(c.checkpoints.max_bytes, Some(5_368_709_120));
        assert_eq!(
            c.checkpoints.max_age(),
            Some(std::time::Duration::from_secs(7 * 86_400))
        );
        // 0: no limit; a later file sets only what it names.
        c.apply_toml(
            "[checkpoints]\nmaxBytes = 0\nmaxAgeDays = 0\n",
            Path::new("config.toml"),
        )
        .unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(
            (
                c.checkpoints.enabled,
                c.checkpoints.max_bytes,
                c.checkpoints.max_age()
            ),
            (false, None, None)
        );
    }

    #[test]
    fn bad_values_name_their_key_and_line() {
        let mut c = Config::default();
        let (m, key, line) = err(&mut c, "[checkpoints]\n\nmaxBytes = 1000\n");
        assert_eq!(
            (key.as_str(), line),
            ("checkpoints.maxBytes", Some(3)),
            "{m}"
        );
        assert!(m.contains("less than 1 MiB"), "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nmaxBytes = -1\n");
        assert_eq!(key, "checkpoints.maxBytes", "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nmaxBytes = \"2GB\"\n");
        assert_eq!(key, "checkpoints.maxBytes", "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nmaxAgeDays = 100000\n");
        assert_eq!(key, "checkpoints.maxAgeDays", "{m}");
        assert!(m.contains("more than 36500"), "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nmaxAgeDays = 1.5\n");
        assert_eq!(key, "checkpoints.maxAgeDays", "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nenabled = \"no\"\n");
        assert_eq!(key, "checkpoints.enabled", "{m}");
        let (m, key, _) = err(&mut c, "[checkpoints]\nmaxSize = 1\n");
        assert_eq!(key, "checkpoints.maxSize", "{m}");
        assert!(m.contains("unknown key"), "{m}");
        let (m, key, _) = err(&mut c, "checkpoints = true\n");
        assert_eq!(key, "checkpoints", "{m}");
        // Nothing of the refused files was applied.
        assert_eq!(c.checkpoints, super::CheckpointsConfig::default());
    }

    #[test]
    fn a_project_cannot_set_them_trusted_or_not() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(".keel/config.toml");
        let mut c = Config::default();
        for trusted in [false, true] {
            if trusted {
                c.trusted_projects = vec![dir.path().to_owned()];
            }
            let e = c
                .apply_project_toml("[checkpoints]\nenabled = false\n", &file)
                .err()
                .map(|e| (e.message, e.details["key"].clone()))
                .unwrap_or_default();
            assert_eq!(e.1, "checkpoints", "{}", e.0);
            assert!(e.0.contains("$KEEL_HOME/config.toml"), "{}", e.0);
        }
        assert!(c.checkpoints.enabled);
    }
}
