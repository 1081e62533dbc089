//! A host's `traceparent`: the request's span joins the host's trace under the host's
//! span, its trace id is the host's, and a trace the host did not sample is not
//! exported (but keeps its id).

use keel_telemetry::testing::Receiver;
use keel_telemetry::{AgentStart, Parent, RunEnd, ToolOutcome, ToolStart, TraceParent};
use tracing::Instrument;

use super::common::{finish, one, run, settings, start};

#[test]
fn a_request_joins_the_hosts_trace() {
    let r = Receiver::start().unwrap();
    let (p, dispatch) = start(&settings(&r.endpoint()));
    let rec = p.recorder();
    let host = TraceParent::parse(
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        None,
    )
    .unwrap();
    let (trace_id, own) = run(&dispatch, async {
        // Created inside another span: the host's parent still wins.
        let outer = rec.invoke_agent(AgentStart {
            agent_name: "outer",
            ..Default::default()
        });
        let req = outer.span().in_scope(|| {
            rec.invoke_agent(AgentStart {
                agent_name: "keel",
                session_id: "sess_1",
                request_id: "req_2",
                parent: Parent::Remote(&host),
                ..Default::default()
            })
        });
        let trace_id = req.trace_id();
        let own = TraceParent::of_span(req.span()).unwrap();
        async {
            rec.execute_tool(ToolStart {
                name: "read_file",
                call_id: "c1",
                ..Default::default()
            })
            .finish(ToolOutcome::Ok, None);
        }
        .instrument(req.span().clone())
        .await;
        req.finish(RunEnd::default());
        outer.finish(RunEnd::default());
        (trace_id, own)
    });
    assert_eq!(
        trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    let (spans, _) = finish(p, &r);
    let req = one(&spans, "invoke_agent keel");
    assert_eq!(req.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_eq!(req.parent_span_id.as_deref(), Some("00f067aa0ba902b7"));
    let tool = one(&spans, "execute_tool read_file");
    assert_eq!(tool.trace_id, req.trace_id);
    assert_eq!(tool.parent_span_id.as_deref(), Some(req.span_id.as_str()));
    // What Keel would pass on (to a host or a child process) names its own span.
    assert_eq!(
        own.header(),
        format!("00-4bf92f3577b34da6a3ce929d0e0e4736-{}-01", req.span_id)
    );
    let outer = one(&spans, "invoke_agent outer");
    assert_ne!(outer.trace_id, req.trace_id);
}

#[test]
fn a_trace_the_host_did_not_sample_is_not_exported() {
    let r = Receiver::start().unwrap();
    let (p, dispatch) = start(&settings(&r.endpoint()));
    let rec = p.recorder();
    let host = TraceParent::parse(
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00",
        None,
    )
    .unwrap();
    let trace_id = run(&dispatch, async {
        let req = rec.invoke_agent(AgentStart {
            agent_name: "keel",
            parent: Parent::Remote(&host),
            ..Default::default()
        });
        let id = req.trace_id();
        req.finish(RunEnd::default());
        // A sampled root beside it is exported.
        rec.invoke_agent(AgentStart {
            agent_name: "sampled",
            parent: Parent::Root,
            ..Default::default()
        })
        .finish(RunEnd::default());
        id
    });
    assert_eq!(
        trace_id.as_deref(),
        Some("0af7651916cd43dd8448eb211c80319c")
    );
    let (spans, _) = finish(p, &r);
    assert_eq!(spans.len(), 1, "{spans:#?}");
    assert_eq!(spans[0].name, "invoke_agent sampled");
}
