//! With telemetry off, Keel's spans are disabled `tracing` spans: the subscriber a
//! host installs without the OpenTelemetry layer (a log layer that leaves Keel's
//! spans out) is never asked about them, so they cost a check of the callsite's
//! cached interest. This runs in a process of its own: a second subscriber alive in
//! the same process (as in the other tests) makes every callsite ask each time.

#![allow(clippy::unwrap_used)]

use keel_telemetry::{AgentStart, Recorder, RunEnd, ToolOutcome, ToolStart};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

#[test]
fn with_telemetry_off_spans_are_disabled_and_have_no_trace_id() {
    // No subscriber at all.
    let rec = Recorder::off();
    let run = rec.invoke_agent(AgentStart {
        agent_name: "keel",
        ..Default::default()
    });
    assert!(run.span().is_disabled());
    run.finish(RunEnd::default());

    // A log that takes everything but Keel's spans, as the CLI installs it.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::sink)
        .with_filter(
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing::Level::TRACE)
                .with_target(
                    keel_telemetry::SPAN_TARGET,
                    tracing::level_filters::LevelFilter::OFF,
                ),
        );
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(log)).unwrap();
    let run = rec.invoke_agent(AgentStart {
        agent_name: "keel",
        ..Default::default()
    });
    assert!(run.span().is_disabled());
    assert_eq!(run.trace_id(), None);
    let call = rec.execute_tool(ToolStart {
        name: "read_file",
        call_id: "c",
        ..Default::default()
    });
    assert!(call.span().is_disabled());
    let mut called = false;
    call.arguments(|| {
        called = true;
        String::new()
    });
    assert!(!called);
    call.finish(ToolOutcome::Ok, None);
    run.finish(RunEnd::default());
    // Other spans are still logged.
    assert!(!tracing::info_span!("request").is_disabled());
}
