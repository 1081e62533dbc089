//! An endpoint that is down, or so slow that every export runs out of time: the
//! caller never waits for it, spans beyond the queue are dropped, the log gets one
//! warning whatever the number of failures, and shutdown returns within its bound.
//! (How long the calls take is measured in the bench, not asserted here.)

use std::time::Duration;

use keel_telemetry::testing::{closed_endpoint, Receiver, ReceiverOptions};
use keel_telemetry::{Recorder, ToolOutcome, ToolStart};

use super::common::{run, settings, start, warnings_about};

fn tool_calls(rec: &Recorder, n: usize) {
    for i in 0..n {
        let id = format!("call_{i}");
        let call = rec.execute_tool(ToolStart {
            name: "read_file",
            call_id: &id,
            ..Default::default()
        });
        call.decision("allow", Some("read"));
        call.finish(ToolOutcome::Ok, None);
    }
}

#[test]
fn an_endpoint_that_is_down_costs_one_warning() {
    let endpoint = closed_endpoint().unwrap();
    let mut s = settings(&endpoint);
    s.export_timeout = Duration::from_millis(500);
    let (p, dispatch) = start(&s);
    let rec = p.recorder();
    // Several batches, each refused.
    for _ in 0..4 {
        run(&dispatch, async { tool_calls(&rec, 50) });
        let failed = p.health().exports_failed;
        let next = std::time::Instant::now() + Duration::from_secs(30);
        while p.health().exports_failed == failed && std::time::Instant::now() < next {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    let h = p.health();
    assert!(h.exports_failed >= 4, "{h:?}");
    assert_eq!(h.exports_ok, 0);
    assert_eq!(h.warnings, 1, "{h:?}");
    assert!(
        h.last_error.as_deref().unwrap_or("").contains(&endpoint),
        "{h:?}"
    );
    let done = p.shutdown(Duration::from_secs(5));
    assert_eq!(done.health.warnings, 1);
    let logged = warnings_about(&endpoint);
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert!(logged[0].contains("logged once"), "{logged:?}");
}

#[test]
fn a_slow_endpoint_drops_what_does_not_fit_and_never_blocks() {
    let r = Receiver::start_with(ReceiverOptions {
        delay: Duration::from_secs(60),
        status: None,
    })
    .unwrap();
    let mut s = settings(&r.endpoint());
    s.export_timeout = Duration::from_millis(200);
    s.queue_size = 16;
    s.max_batch = 16;
    let (p, dispatch) = start(&s);
    let rec = p.recorder();
    // Far more than the queue holds, while every export hangs: the calls return.
    run(&dispatch, async { tool_calls(&rec, 2000) });
    assert!(
        r.wait_until(Duration::from_secs(30), |_| p.health().exports_failed >= 2),
        "{:?}",
        p.health()
    );
    let h = p.health();
    assert!(h.spans_handed_over < 2000, "nothing was dropped: {h:?}");
    assert!(
        h.last_error.as_deref().unwrap_or("").contains("v1/traces"),
        "{h:?}"
    );
    assert_eq!(h.warnings, 1);
    // It got requests (and kept them) but never answered in time.
    assert!(r.requests() >= 2);
    let done = p.shutdown(Duration::from_millis(500));
    assert_eq!(done.health.warnings, 1);
    assert_eq!(warnings_about(&r.endpoint()).len(), 1);
}

#[test]
fn an_endpoint_that_answers_with_an_error_status_counts_as_failing() {
    let r = Receiver::start_with(ReceiverOptions {
        delay: Duration::ZERO,
        status: Some(503),
    })
    .unwrap();
    let mut s = settings(&r.endpoint());
    s.export_timeout = Duration::from_millis(300);
    let (p, dispatch) = start(&s);
    run(&dispatch, async { tool_calls(&p.recorder(), 10) });
    assert!(r.wait_until(Duration::from_secs(30), |_| p.health().exports_failed >= 1));
    assert_eq!(p.health().exports_ok, 0);
    let done = p.shutdown(Duration::from_secs(2));
    assert_eq!(done.health.warnings, 1);
}

#[test]
fn grpc_needs_its_feature() {
    let mut s = settings("http://127.0.0.1:1");
    s.protocol = keel_telemetry::Protocol::Grpc;
    if cfg!(feature = "grpc") {
        return;
    }
    let e = keel_telemetry::Pipeline::start(&s).unwrap_err();
    assert!(e.message.contains("grpc"), "{e}");
}
