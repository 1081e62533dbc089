//! The log: `tracing` events of every crate, filtered by `KEEL_LOG` (an `EnvFilter`
//! string, default `info`), written to `$KEEL_HOME/logs/keel-YYYY-MM-DD.log` (one file
//! per UTC day, the newest [`KEEP_FILES`] kept) and, with `--log-stderr`, to stderr
//! too. Never to stdout: the bridge's, ACP's and `exec --json`'s stdout carry protocol
//! lines only. Each line names the spans it was logged in, with their fields (a
//! request's session and request ids, for example).
//!
//! When OpenTelemetry export is on (see [`crate::telemetry`]), a third layer sends
//! Keel's spans (target `keel_telemetry::span`) to the collector. Those spans never
//! reach the log files, and with export off nothing listens to them, so they cost a
//! disabled span each.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// The environment variable holding the filter.
pub const ENV: &str = "KEEL_LOG";
/// The filter when `KEEL_LOG` is unset or empty.
pub const DEFAULT_FILTER: &str = "info";
/// How many daily files are kept.
pub const KEEP_FILES: usize = 7;
/// The log file name's prefix; files are `keel-YYYY-MM-DD.log`.
const PREFIX: &str = "keel-";
const SUFFIX: &str = ".log";

/// The log directory under a store directory.
pub fn log_dir(home: &Path) -> PathBuf {
    home.join("logs")
}

/// What [`init`] set up, for `keel doctor` and for messages.
#[derive(Debug, Clone, Default)]
pub struct LogSetup {
    /// The log directory, when the file log works.
    pub dir: Option<PathBuf>,
    /// Why there is no file log, when there is none.
    pub problem: Option<String>,
    /// Whether OpenTelemetry export is on, and where to.
    pub telemetry: crate::telemetry::TelemetryStatus,
}

/// The log filter: `KEEL_LOG` (or the default), minus Keel's telemetry spans.
fn log_filter(spec: &str) -> EnvFilter {
    let filter = EnvFilter::try_new(spec).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    match format!("{}=off", keel_telemetry::SPAN_TARGET).parse() {
        Ok(d) => filter.add_directive(d),
        Err(_) => filter,
    }
}

/// Installs the subscriber and starts the telemetry export when it is on. Problems
/// (a bad filter, an unwritable directory, bad telemetry settings) are reported once
/// on stderr and never stop the command.
pub fn init(log_stderr: bool) -> (LogSetup, crate::telemetry::Telemetry) {
    let spec = match std::env::var(ENV) {
        Ok(f) if !f.trim().is_empty() => match EnvFilter::try_new(&f) {
            Ok(_) => f,
            Err(e) => {
                eprintln!(
                    "keel: {ENV}={f:?} is not a valid filter ({e}); using {DEFAULT_FILTER:?}"
                );
                DEFAULT_FILTER.to_owned()
            }
        },
        _ => DEFAULT_FILTER.to_owned(),
    };
    let env = keel_config::EnvMap::from_process();
    let mut setup = LogSetup::default();
    let home = keel_config::default_keel_home(&env);
    let file = match &home {
        Some(home) => {
            let dir = log_dir(home);
            match DailyFile::open(&dir, KEEP_FILES) {
                Ok(f) => {
                    setup.dir = Some(dir);
                    Some(f)
                }
                Err(e) => {
                    setup.problem = Some(format!("cannot write logs in {}: {e}", dir.display()));
                    None
                }
            }
        }
        None => {
            setup.problem = Some("no store directory: set KEEL_HOME".to_owned());
            None
        }
    };
    let file_layer = file.map(|f| line_format(f, false).boxed());
    let stderr_layer = log_stderr.then(|| {
        line_format(
            std::io::stderr,
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        )
        .boxed()
    });
    if let (true, Some(p)) = (log_stderr, &setup.problem) {
        eprintln!("keel: {p}");
    }
    let (telemetry, status) = crate::telemetry::start(home.as_deref());
    let _ = subscriber(&spec, file_layer, stderr_layer, telemetry.pipeline.as_ref()).try_init();
    if let Some(p) = &status.problem {
        tracing::warn!("{p}");
        eprintln!("keel: {p}");
    } else if telemetry.pipeline.is_some() {
        tracing::info!(telemetry = %status.summary, "telemetry export on");
    }
    setup.telemetry = status;
    (setup, telemetry)
}

/// A boxed layer of the registry.
type Boxed = Box<dyn Layer<Registry> + Send + Sync>;

/// The subscriber: the log layers, each filtered by `spec` without Keel's telemetry
/// spans, and the OpenTelemetry layer when there is a pipeline.
fn subscriber(
    spec: &str,
    file: Option<Boxed>,
    stderr: Option<Boxed>,
    pipeline: Option<&keel_telemetry::Pipeline>,
) -> impl tracing::Subscriber + Send + Sync {
    let logs: Vec<Boxed> = [file, stderr]
        .into_iter()
        .flatten()
        .map(|l| l.with_filter(log_filter(spec)).boxed())
        .collect();
    tracing_subscriber::registry()
        .with(logs)
        .with(pipeline.map(|p| p.layer()))
}

/// The line format: UTC time, level, the spans the event is in with their fields
/// (`session{session_id=…}:request{request_id=…}:`), the module, the message and its
/// fields.
fn line_format<S, W>(writer: W, ansi: bool) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_ansi(ansi)
        .with_target(true)
        .with_writer(writer)
}

/// A log file per UTC day, `keel-YYYY-MM-DD.log`, appended to; when a new day's file
/// is opened, the oldest files beyond the number kept are removed.
#[derive(Debug)]
pub struct DailyFile {
    dir: PathBuf,
    keep: usize,
    current: Mutex<Option<(String, File)>>,
}

impl DailyFile {
    /// Creates the directory and opens today's file.
    pub fn open(dir: &Path, keep: usize) -> io::Result<DailyFile> {
        std::fs::create_dir_all(dir)?;
        let f = DailyFile {
            dir: dir.to_owned(),
            keep: keep.max(1),
            current: Mutex::new(None),
        };
        f.lock().rotate_to(&f, &today())?;
        Ok(f)
    }

    fn lock(&self) -> Current<'_> {
        Current(self.current.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The file name for a date (`YYYY-MM-DD`).
    pub fn file_name(date: &str) -> String {
        format!("{PREFIX}{date}{SUFFIX}")
    }

    /// Removes the oldest log files so that at most `keep` remain.
    fn prune(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut logs: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| is_log_name(n))
            .collect();
        logs.sort();
        let extra = logs.len().saturating_sub(self.keep);
        for name in &logs[..extra] {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
    }
}

struct Current<'a>(MutexGuard<'a, Option<(String, File)>>);

impl Current<'_> {
    /// Makes `date`'s file the current one (opening it, and pruning, on a change).
    fn rotate_to(&mut self, owner: &DailyFile, date: &str) -> io::Result<()> {
        if self.0.as_ref().is_some_and(|(d, _)| d == date) {
            return Ok(());
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(owner.dir.join(DailyFile::file_name(date)))?;
        *self.0 = Some((date.to_owned(), file));
        owner.prune();
        Ok(())
    }
}

fn is_log_name(name: &str) -> bool {
    let Some(date) = name
        .strip_prefix(PREFIX)
        .and_then(|r| r.strip_suffix(SUFFIX))
    else {
        return false;
    };
    date.len() == 10
        && date.char_indices().all(|(i, c)| {
            if i == 4 || i == 7 {
                c == '-'
            } else {
                c.is_ascii_digit()
            }
        })
}

/// One write to the log file (one formatted line).
#[derive(Debug)]
pub struct DailyWriter<'a>(&'a DailyFile);

impl Write for DailyWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut cur = self.0.lock();
        cur.rotate_to(self.0, &today())?;
        match cur.0.as_mut() {
            Some((_, f)) => f.write(buf),
            None => Ok(buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self.0.lock().0.as_mut() {
            Some((_, f)) => f.flush(),
            None => Ok(()),
        }
    }
}

impl<'a> MakeWriter<'a> for DailyFile {
    type Writer = DailyWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        DailyWriter(self)
    }
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    date_of(secs)
}

/// The UTC date of a Unix time, `YYYY-MM-DD` (the proleptic Gregorian calendar).
pub(crate) fn date_of(unix_secs: u64) -> String {
    // Howard Hinnant's civil_from_days.
    let z = (unix_secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_the_fields_of_their_spans() {
        let dir = tempfile::tempdir().unwrap();
        let file = DailyFile::open(dir.path(), 2).unwrap();
        let subscriber = tracing_subscriber::registry().with(line_format(file, false));
        tracing::subscriber::with_default(subscriber, || {
            let session = tracing::info_span!("session", session_id = "sess_1");
            let _s = session.enter();
            let request = tracing::info_span!("request", request_id = "req_9");
            let _r = request.enter();
            tracing::info!(tool = "read_file", "tool ran");
        });
        let text =
            std::fs::read_to_string(dir.path().join(DailyFile::file_name(&today()))).unwrap();
        assert!(
            text.contains("session{session_id=\"sess_1\"}:request{request_id=\"req_9\"}:"),
            "{text}"
        );
        assert!(
            text.contains("INFO") && text.contains("tool ran tool=\"read_file\""),
            "{text}"
        );
        assert!(!text.contains('\x1b'));
    }

    #[test]
    fn keel_spans_go_to_the_collector_and_not_to_the_log_file() {
        let dir = tempfile::tempdir().unwrap();
        let receiver = keel_telemetry::testing::Receiver::start().unwrap();
        let mut settings = keel_telemetry::Settings::http(&receiver.endpoint());
        settings.batch_delay = std::time::Duration::from_millis(20);
        let pipeline = keel_telemetry::Pipeline::start(&settings).unwrap();
        let rec = pipeline.recorder();
        let file: Boxed = line_format(DailyFile::open(dir.path(), 2).unwrap(), false).boxed();
        let subscriber = subscriber("info", Some(file), None, Some(&pipeline));
        tracing::subscriber::with_default(subscriber, || {
            let request = tracing::info_span!("request", request_id = "req_9");
            let _r = request.enter();
            let call = rec.execute_tool(keel_telemetry::ToolStart {
                name: "read_file",
                call_id: "call_7",
                ..Default::default()
            });
            call.span().in_scope(|| tracing::info!("tool ran"));
            call.finish(keel_telemetry::ToolOutcome::Ok, None);
        });
        let done = pipeline.shutdown(std::time::Duration::from_secs(20));
        assert!(done.flushed, "{done:?}");
        let spans = receiver.spans();
        assert_eq!(spans.len(), 1, "{spans:?}");
        assert_eq!(spans[0].name, "execute_tool read_file");
        // The log span is not exported; the log keeps its own span and not Keel's.
        assert_eq!(spans[0].parent_span_id, None);
        let text =
            std::fs::read_to_string(dir.path().join(DailyFile::file_name(&today()))).unwrap();
        assert!(text.contains("request{request_id=\"req_9\"}: "), "{text}");
        assert!(text.contains("tool ran"), "{text}");
        assert!(
            !text.contains("execute_tool") && !text.contains("call_7"),
            "{text}"
        );
    }

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(951_782_400), "2000-02-29");
        assert_eq!(date_of(1_704_067_199), "2023-12-31");
        assert_eq!(date_of(1_704_067_200), "2024-01-01");
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn log_names_are_recognised() {
        assert!(is_log_name("keel-2026-01-31.log"));
        assert!(!is_log_name("keel-2026-01-31.log.bak"));
        assert!(!is_log_name("notes.log"));
        assert!(!is_log_name("keel-today.log"));
    }

    #[test]
    fn a_new_day_opens_a_new_file_and_old_files_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        for d in 1..=9 {
            std::fs::write(dir.path().join(format!("keel-2020-01-0{d}.log")), "old\n").unwrap();
        }
        std::fs::write(dir.path().join("other.txt"), "kept").unwrap();
        let f = DailyFile::open(dir.path(), 3).unwrap();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        let today = DailyFile::file_name(&today());
        assert_eq!(
            names,
            vec![
                "keel-2020-01-08.log".to_owned(),
                "keel-2020-01-09.log".to_owned(),
                today.clone(),
                "other.txt".to_owned()
            ]
        );
        f.make_writer().write_all(b"a line\n").unwrap();
        // A later day: its own file; the oldest goes.
        f.lock().rotate_to(&f, "2999-12-31").unwrap();
        assert!(dir.path().join("keel-2999-12-31.log").exists());
        assert!(!dir.path().join("keel-2020-01-08.log").exists());
        assert_eq!(
            std::fs::read_to_string(dir.path().join(&today)).unwrap(),
            "a line\n"
        );
    }
}
