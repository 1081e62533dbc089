//! OpenTelemetry for every command: the `[telemetry]` table of the user's own
//! `config.toml` and the `OTEL_*` variables, resolved by `keel_telemetry`; when
//! export is on, a `Pipeline` whose layer [`crate::logging`] installs, flushed at exit
//! within a bound; its recorder is what [`recorder`] gives every kernel the command
//! builds, so the kernel's spans and metrics go out through it. A project's `.keel/config.toml` cannot turn export on or redirect
//! it (it would send your prompts where the project says), so only
//! `$KEEL_HOME/config.toml` is read here.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use keel_telemetry::{Pipeline, Recorder, Resolved, TelemetryConfig};

/// The running pipeline's recorder (set once, when export starts).
static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// The recorder for the kernel: the pipeline's when export is on, else one that
/// records nothing.
pub fn recorder() -> Recorder {
    RECORDER.get().cloned().unwrap_or_default()
}

/// The longest wait for the last export at exit.
const MAX_FLUSH: Duration = Duration::from_secs(5);

/// Whether export is on, for `keel doctor`.
#[derive(Debug, Clone, Default)]
pub struct TelemetryStatus {
    /// `on: …` or `off (…)`.
    pub summary: String,
    /// A bad setting or a failed start (export is then off).
    pub problem: Option<String>,
    /// The traces endpoint's host and port, when export is on.
    pub authority: Option<(String, u16)>,
}

/// The running export, if any.
#[derive(Debug, Default)]
pub struct Telemetry {
    /// The pipeline, when export is on.
    pub pipeline: Option<Pipeline>,
    /// How long the flush at exit may take.
    pub flush_bound: Duration,
}

/// Reads the settings and starts the export when it is on. Never fails: a problem
/// turns export off and is reported in the status (the caller warns).
pub fn start(home: Option<&Path>) -> (Telemetry, TelemetryStatus) {
    let off = |summary: String, problem: Option<String>| {
        (
            Telemetry::default(),
            TelemetryStatus {
                summary,
                problem,
                authority: None,
            },
        )
    };
    let file = match home.map(|h| h.join("config.toml")) {
        Some(path) => match read_table(&path) {
            Ok(t) => t,
            Err(e) => return off("off (bad [telemetry])".to_owned(), Some(e)),
        },
        None => TelemetryConfig::default(),
    };
    let env = |k: &str| std::env::var(k).ok();
    match keel_telemetry::resolve(&file, &env, env!("CARGO_PKG_VERSION")) {
        Ok(Resolved::Off(why)) => off(why.describe().to_owned(), None),
        Err(e) => off(
            "off (bad setting)".to_owned(),
            Some(format!("telemetry is off: {e}")),
        ),
        Ok(Resolved::On(settings)) => match Pipeline::start(&settings) {
            Ok(p) => {
                let _ = RECORDER.set(p.recorder());
                (
                    Telemetry {
                        pipeline: Some(p),
                        flush_bound: settings.export_timeout.min(MAX_FLUSH),
                    },
                    TelemetryStatus {
                        summary: settings.describe(),
                        problem: None,
                        authority: settings.traces_authority(),
                    },
                )
            }
            Err(e) => off(
                "off (could not start)".to_owned(),
                Some(format!("telemetry is off: {e}")),
            ),
        },
    }
}

/// The `[telemetry]` table of `path`; none when the file or the table is absent, or
/// the file is not TOML (loading the configuration reports that).
fn read_table(path: &Path) -> Result<TelemetryConfig, String> {
    const MAX_BYTES: u64 = 1 << 20;
    // A regular file only: a FIFO would block the start of every command.
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() && m.len() <= MAX_BYTES => {}
        _ => return Ok(TelemetryConfig::default()),
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(TelemetryConfig::default());
    };
    let Ok(table) = text.parse::<toml::Table>() else {
        return Ok(TelemetryConfig::default());
    };
    match table.get("telemetry") {
        None => Ok(TelemetryConfig::default()),
        Some(v @ toml::Value::Table(_)) => v.clone().try_into().map_err(|e| {
            format!(
                "{}: telemetry is off: invalid [telemetry]: {}",
                path.display(),
                e.message()
            )
        }),
        Some(_) => Err(format!(
            "{}: telemetry is off: `telemetry` must be a table ([telemetry])",
            path.display()
        )),
    }
}

/// Exports what is left, waiting at most the bound; logs what the export did.
pub fn finish(t: Telemetry) {
    let Some(p) = t.pipeline else {
        return;
    };
    let done = p.shutdown(t.flush_bound);
    let h = &done.health;
    if h.exports_failed > 0 || !done.flushed {
        tracing::warn!(
            target: keel_telemetry::LOG_TARGET,
            flushed = done.flushed,
            exports_ok = h.exports_ok,
            exports_failed = h.exports_failed,
            last_error = h.last_error.as_deref().unwrap_or(""),
            "telemetry: not everything was exported"
        );
    } else {
        tracing::debug!(target: keel_telemetry::LOG_TARGET, exports = h.exports_ok, "telemetry flushed");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_read_from_the_users_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        assert_eq!(read_table(&p).unwrap(), TelemetryConfig::default());
        std::fs::write(
            &p,
            "model = \"scripted:x\"\n[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nlogContent = true\n",
        )
        .unwrap();
        let t = read_table(&p).unwrap();
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!(t.log_content, Some(true));
    }

    #[test]
    fn a_bad_table_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        std::fs::write(&p, "[telemetry]\nlogcontent = true\n").unwrap();
        let e = read_table(&p).unwrap_err();
        assert!(e.contains("config.toml") && e.contains("logcontent"), "{e}");
        std::fs::write(&p, "telemetry = 3\n").unwrap();
        assert!(read_table(&p).unwrap_err().contains("must be a table"));
        std::fs::write(&p, "[telemetry]\nendpoint = 4318\n").unwrap();
        assert!(read_table(&p).unwrap_err().contains("invalid [telemetry]"));
        // Not TOML at all: the configuration loader reports it.
        std::fs::write(&p, "[[[").unwrap();
        assert_eq!(read_table(&p).unwrap(), TelemetryConfig::default());
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.toml");
        let made = std::process::Command::new("mkfifo")
            .arg(&p)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(read_table(&p).unwrap(), TelemetryConfig::default());
    }
}
