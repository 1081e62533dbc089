//! Shared set-up: a pipeline to a receiver, a subscriber that sees only it, and a
//! process-wide log that keeps the export's warnings (they are logged on the SDK's
//! own threads, which see the global subscriber).

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use keel_telemetry::testing::{ReceivedPoint, ReceivedSpan, Receiver};
use keel_telemetry::{Pipeline, Settings};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

/// Settings for tests: quick batches, a short time limit.
pub fn settings(endpoint: &str) -> Settings {
    let mut s = Settings::http(endpoint);
    s.batch_delay = Duration::from_millis(20);
    s.export_timeout = Duration::from_secs(5);
    s.service_version = "0.0.0-test".to_owned();
    s
}

/// Starts a pipeline and returns it with a dispatcher whose only layer is its own.
pub fn start(settings: &Settings) -> (Pipeline, tracing::Dispatch) {
    install_log();
    let p = Pipeline::start(settings).unwrap();
    let subscriber = tracing_subscriber::registry().with(p.layer());
    (p, tracing::Dispatch::new(subscriber))
}

/// Runs `work` with `dispatch` as the thread's subscriber, on a current-thread
/// runtime (its tasks run on this thread and see the subscriber too).
pub fn run<T>(dispatch: &tracing::Dispatch, work: impl std::future::Future<Output = T>) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    tracing::dispatcher::with_default(dispatch, || rt.block_on(work))
}

/// Shuts the pipeline down (everything sent) and returns what the receiver got.
pub fn finish(p: Pipeline, r: &Receiver) -> (Vec<ReceivedSpan>, Vec<ReceivedPoint>) {
    let done = p.shutdown(Duration::from_secs(20));
    assert!(done.flushed, "{done:?}");
    assert_eq!(done.health.exports_failed, 0, "{done:?}");
    assert_eq!(r.bad_requests(), 0);
    (r.spans(), r.points())
}

/// The one span named `name`.
pub fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(
        found.len(),
        1,
        "{name}: {:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    found[0]
}

/// The log lines kept: level, target, message.
type Lines = Arc<Mutex<Vec<(tracing::Level, String, String)>>>;

static LOG: OnceLock<Lines> = OnceLock::new();

struct Keep(Lines);

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for Keep {
    fn on_event(&self, e: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        struct Msg(String);
        impl tracing::field::Visit for Msg {
            fn record_debug(&mut self, f: &tracing::field::Field, v: &dyn std::fmt::Debug) {
                if f.name() == "message" {
                    self.0 = format!("{v:?}");
                }
            }
        }
        let mut m = Msg(String::new());
        e.record(&mut m);
        let meta = e.metadata();
        self.0
            .lock()
            .unwrap()
            .push((*meta.level(), meta.target().to_owned(), m.0));
    }
}

fn install_log() {
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let only_export = tracing_subscriber::filter::Targets::new()
            .with_target(keel_telemetry::LOG_TARGET, tracing::Level::TRACE);
        let _ = tracing::subscriber::set_global_default(
            tracing_subscriber::registry().with(Keep(log.clone()).with_filter(only_export)),
        );
        log
    });
}

/// The warnings of the export's log target that name `endpoint`.
pub fn warnings_about(endpoint: &str) -> Vec<String> {
    LOG.get()
        .map(|l| {
            l.lock()
                .unwrap()
                .iter()
                .filter(|(level, target, msg)| {
                    *level == tracing::Level::WARN
                        && target == keel_telemetry::LOG_TARGET
                        && msg.contains(endpoint)
                })
                .map(|(_, _, m)| m.clone())
                .collect()
        })
        .unwrap_or_default()
}
