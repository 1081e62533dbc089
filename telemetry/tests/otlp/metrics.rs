//! The metrics of a request: tokens and durations of model calls, time to the first
//! chunk, tool calls by outcome, approvals by decision, hook runs, MCP calls.

use keel_telemetry::semconv as sc;
use keel_telemetry::testing::{PointValue, ReceivedPoint, Receiver};

use super::common::{finish, run, settings, start};
use super::spans::a_request;

/// The last point of `metric` whose attributes include all of `with`.
fn point<'a>(
    points: &'a [ReceivedPoint],
    metric: &str,
    with: &[(&str, &str)],
) -> &'a ReceivedPoint {
    points
        .iter()
        .rev()
        .find(|p| {
            p.metric == metric
                && with
                    .iter()
                    .all(|(k, v)| p.attributes.get(*k).and_then(|a| a.as_str()) == Some(*v))
        })
        .unwrap_or_else(|| panic!("no {metric} point with {with:?} in {points:#?}"))
}

fn count(p: &ReceivedPoint) -> u64 {
    match p.value {
        PointValue::Histogram { count, .. } => count,
        PointValue::Number(n) => n as u64,
    }
}

#[test]
fn a_request_records_its_metrics() {
    let r = Receiver::start().unwrap();
    let (p, dispatch) = start(&settings(&r.endpoint()));
    let rec = p.recorder();
    run(&dispatch, a_request(&rec));
    let (_, points) = finish(p, &r);

    let input = point(
        &points,
        sc::METRIC_TOKEN_USAGE,
        &[
            (sc::GEN_AI_TOKEN_TYPE, "input"),
            (sc::GEN_AI_PROVIDER_NAME, "openai"),
            (sc::GEN_AI_REQUEST_MODEL, "gpt-x"),
            (sc::GEN_AI_RESPONSE_MODEL, "gpt-x-2025"),
            (sc::GEN_AI_OPERATION_NAME, "chat"),
        ],
    );
    assert_eq!(input.unit, "{token}");
    assert_eq!(
        input.value,
        PointValue::Histogram {
            count: 1,
            sum: 120.0
        }
    );
    let output = point(
        &points,
        sc::METRIC_TOKEN_USAGE,
        &[(sc::GEN_AI_TOKEN_TYPE, "output")],
    );
    assert_eq!(
        output.value,
        PointValue::Histogram {
            count: 1,
            sum: 30.0
        }
    );

    let duration = point(
        &points,
        sc::METRIC_OPERATION_DURATION,
        &[(sc::GEN_AI_REQUEST_MODEL, "gpt-x")],
    );
    assert_eq!(duration.unit, "s");
    assert_eq!(count(duration), 1);
    assert!(!duration.attributes.contains_key(sc::ERROR_TYPE));
    // Two first_chunk() calls, one measurement.
    assert_eq!(
        count(point(&points, sc::METRIC_TIME_TO_FIRST_CHUNK, &[])),
        1
    );

    for (tool, outcome) in [
        ("run_shell", "ok"),
        ("write_file", "denied"),
        ("edit_file", "error"),
        ("spawn_sub_agent", "ok"),
    ] {
        let with = [
            (sc::GEN_AI_TOOL_NAME, tool),
            (sc::KEEL_TOOL_OUTCOME, outcome),
        ];
        assert_eq!(
            count(point(&points, sc::METRIC_TOOL_CALLS, &with)),
            1,
            "{tool}"
        );
        assert_eq!(
            count(point(&points, sc::METRIC_TOOL_DURATION, &with)),
            1,
            "{tool}"
        );
    }
    let with = [
        (sc::KEEL_PERMISSION_DECISION, "allow_once"),
        (sc::GEN_AI_TOOL_NAME, "run_shell"),
    ];
    assert_eq!(count(point(&points, sc::METRIC_APPROVALS, &with)), 1);
    assert_eq!(count(point(&points, sc::METRIC_APPROVAL_WAIT, &with)), 1);
    let with = [
        (sc::KEEL_HOOK_POINT, "PreToolUse"),
        (sc::KEEL_HOOK_OUTCOME, "ok"),
    ];
    assert_eq!(count(point(&points, sc::METRIC_HOOK_RUNS, &with)), 1);
    let mcp = point(
        &points,
        sc::METRIC_MCP_DURATION,
        &[
            (sc::MCP_METHOD_NAME, "tools/call"),
            (sc::GEN_AI_TOOL_NAME, "read"),
            (sc::KEEL_MCP_SERVER, "files"),
            (sc::ERROR_TYPE, "tool_error"),
        ],
    );
    assert_eq!(count(mcp), 1);
}
