//! A real OTLP/HTTP receiver for tests (feature `testing`): it listens on loopback,
//! accepts `POST /v1/traces` and `POST /v1/metrics` with protobuf bodies, decodes them
//! with the OpenTelemetry protocol's own message types, and keeps what it got, so a
//! test can assert on span names, parentage, attributes and metric points. It can
//! answer slowly (to stand for a collector that hangs) or with an error status.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{any_value, AnyValue, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::metric::Data;
use opentelemetry_proto::tonic::metrics::v1::number_data_point;
use prost::Message;

/// How the receiver answers.
#[derive(Debug, Clone, Default)]
pub struct ReceiverOptions {
    /// Wait this long before answering each request (what it got is kept first).
    pub delay: Duration,
    /// Answer with this status instead of 200.
    pub status: Option<u16>,
}

/// An attribute value as received.
#[derive(Debug, Clone, PartialEq)]
pub enum AttrValue {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A boolean.
    Bool(bool),
    /// A float.
    Double(f64),
    /// Anything else, debug-printed.
    Other(String),
}

impl AttrValue {
    /// The string, if it is one.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            AttrValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The integer, if it is one.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            AttrValue::Int(n) => Some(*n),
            _ => None,
        }
    }
}

/// Attributes by key.
pub type Attrs = BTreeMap<String, AttrValue>;

/// One span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// Its name.
    pub name: String,
    /// Trace id, lowercase hex.
    pub trace_id: String,
    /// Span id, lowercase hex.
    pub span_id: String,
    /// The parent's span id, lowercase hex; `None` for a root.
    pub parent_span_id: Option<String>,
    /// `internal`, `server`, `client`, `producer`, `consumer` or `unspecified`.
    pub kind: &'static str,
    /// `unset`, `ok` or `error`.
    pub status: &'static str,
    /// Its attributes.
    pub attributes: Attrs,
    /// The instrumentation scope's name.
    pub scope: String,
    /// The scope's schema URL.
    pub schema_url: String,
    /// The resource's attributes.
    pub resource: Attrs,
}

impl ReceivedSpan {
    /// A string attribute.
    pub fn str(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).and_then(AttrValue::as_str)
    }

    /// An integer attribute.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.attributes.get(key).and_then(AttrValue::as_int)
    }
}

/// The value of a metric point.
#[derive(Debug, Clone, PartialEq)]
pub enum PointValue {
    /// A sum or gauge point.
    Number(f64),
    /// A histogram point.
    Histogram {
        /// Values recorded.
        count: u64,
        /// Their sum.
        sum: f64,
    },
}

/// One metric data point as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedPoint {
    /// The metric's name.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// The point's attributes.
    pub attributes: Attrs,
    /// The value.
    pub value: PointValue,
}

#[derive(Debug, Default)]
struct State {
    spans: Vec<ReceivedSpan>,
    points: Vec<ReceivedPoint>,
    requests: usize,
    bad_requests: usize,
}

/// The receiver; it stops when dropped.
#[derive(Debug)]
pub struct Receiver {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Receiver {
    /// Starts a receiver that answers at once.
    pub fn start() -> std::io::Result<Receiver> {
        Receiver::start_with(ReceiverOptions::default())
    }

    /// Starts a receiver on `127.0.0.1`, on a port of its own, on its own thread.
    pub fn start_with(options: ReceiverOptions) -> std::io::Result<Receiver> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let st = state.clone();
        let thread = std::thread::Builder::new()
            .name("otlp-receiver".to_owned())
            .spawn(move || {
                rt.block_on(serve(listener, st, options, stopped));
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        Ok(Receiver {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The base URL (`http://127.0.0.1:PORT`), what `OTEL_EXPORTER_OTLP_ENDPOINT` takes.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every span received so far, in the order they came.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.state().spans.clone()
    }

    /// Every metric point received so far.
    pub fn points(&self) -> Vec<ReceivedPoint> {
        self.state().points.clone()
    }

    /// Requests received (decoded or not).
    pub fn requests(&self) -> usize {
        self.state().requests
    }

    /// Requests that were not valid OTLP (wrong path, type or body).
    pub fn bad_requests(&self) -> usize {
        self.state().bad_requests
    }

    /// Waits until `done` holds for the receiver, checking every 10 ms, for `limit`
    /// at most; whether it held.
    pub fn wait_until(&self, limit: Duration, done: impl Fn(&Receiver) -> bool) -> bool {
        let end = Instant::now() + limit;
        loop {
            if done(self) {
                return true;
            }
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A URL on loopback where nothing listens (connections are refused).
pub fn closed_endpoint() -> std::io::Result<String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    let addr = l.local_addr()?;
    drop(l);
    Ok(format!("http://{addr}"))
}

async fn serve(
    listener: std::net::TcpListener,
    state: Arc<Mutex<State>>,
    options: ReceiverOptions,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        let stream = tokio::select! {
            _ = &mut stopped => return,
            accepted = listener.accept() => match accepted {
                Ok((s, _)) => s,
                Err(_) => continue,
            },
        };
        let state = state.clone();
        let options = options.clone();
        tokio::spawn(async move {
            let svc = hyper::service::service_fn(move |req| {
                let state = state.clone();
                let options = options.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(req, &state, &options).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

async fn answer(
    req: hyper::Request<hyper::body::Incoming>,
    state: &Mutex<State>,
    options: &ReceiverOptions,
) -> hyper::Response<Full<Bytes>> {
    let path = req.uri().path().to_owned();
    let protobuf = req
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/x-protobuf");
    let post = req.method() == hyper::Method::POST;
    let body = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(_) => Bytes::new(),
    };
    let reply = {
        let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
        st.requests += 1;
        let decoded = match (post && protobuf, path.as_str()) {
            (true, "/v1/traces") => ExportTraceServiceRequest::decode(body)
                .map(|r| st.spans.extend(spans_of(r)))
                .map(|()| ExportTraceServiceResponse::default().encode_to_vec())
                .ok(),
            (true, "/v1/metrics") => ExportMetricsServiceRequest::decode(body)
                .map(|r| st.points.extend(points_of(r)))
                .map(|()| ExportMetricsServiceResponse::default().encode_to_vec())
                .ok(),
            _ => None,
        };
        if decoded.is_none() {
            st.bad_requests += 1;
        }
        decoded
    };
    if !options.delay.is_zero() {
        tokio::time::sleep(options.delay).await;
    }
    let (status, body) = match (reply, options.status) {
        (Some(body), None) => (200, body),
        (Some(_), Some(code)) => (code, Vec::new()),
        (None, _) => (400, Vec::new()),
    };
    let mut resp = hyper::Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = hyper::StatusCode::from_u16(status).unwrap_or(hyper::StatusCode::OK);
    resp.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-protobuf"),
    );
    resp
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn value_of(v: Option<&AnyValue>) -> AttrValue {
    match v.and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => AttrValue::Str(s.clone()),
        Some(any_value::Value::IntValue(n)) => AttrValue::Int(*n),
        Some(any_value::Value::BoolValue(b)) => AttrValue::Bool(*b),
        Some(any_value::Value::DoubleValue(d)) => AttrValue::Double(*d),
        other => AttrValue::Other(format!("{other:?}")),
    }
}

fn attrs_of(kvs: &[KeyValue]) -> Attrs {
    kvs.iter()
        .map(|kv| (kv.key.clone(), value_of(kv.value.as_ref())))
        .collect()
}

fn spans_of(req: ExportTraceServiceRequest) -> Vec<ReceivedSpan> {
    let mut out = Vec::new();
    for rs in req.resource_spans {
        let resource = rs
            .resource
            .as_ref()
            .map(|r| attrs_of(&r.attributes))
            .unwrap_or_default();
        for ss in rs.scope_spans {
            let scope = ss
                .scope
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            for s in ss.spans {
                out.push(ReceivedSpan {
                    name: s.name.clone(),
                    trace_id: hex(&s.trace_id),
                    span_id: hex(&s.span_id),
                    parent_span_id: (!s.parent_span_id.is_empty()).then(|| hex(&s.parent_span_id)),
                    kind: match s.kind {
                        1 => "internal",
                        2 => "server",
                        3 => "client",
                        4 => "producer",
                        5 => "consumer",
                        _ => "unspecified",
                    },
                    status: match s.status.as_ref().map(|st| st.code) {
                        Some(1) => "ok",
                        Some(2) => "error",
                        _ => "unset",
                    },
                    attributes: attrs_of(&s.attributes),
                    scope: scope.clone(),
                    schema_url: ss.schema_url.clone(),
                    resource: resource.clone(),
                });
            }
        }
    }
    out
}

fn points_of(req: ExportMetricsServiceRequest) -> Vec<ReceivedPoint> {
    let mut out = Vec::new();
    for rm in req.resource_metrics {
        for sm in rm.scope_metrics {
            for m in sm.metrics {
                let point = |attributes: &[KeyValue], value| ReceivedPoint {
                    metric: m.name.clone(),
                    unit: m.unit.clone(),
                    attributes: attrs_of(attributes),
                    value,
                };
                let number = |v: &Option<number_data_point::Value>| match v {
                    Some(number_data_point::Value::AsDouble(d)) => *d,
                    Some(number_data_point::Value::AsInt(n)) => *n as f64,
                    None => 0.0,
                };
                match &m.data {
                    Some(Data::Sum(s)) => out.extend(
                        s.data_points
                            .iter()
                            .map(|p| point(&p.attributes, PointValue::Number(number(&p.value)))),
                    ),
                    Some(Data::Gauge(g)) => out.extend(
                        g.data_points
                            .iter()
                            .map(|p| point(&p.attributes, PointValue::Number(number(&p.value)))),
                    ),
                    Some(Data::Histogram(h)) => out.extend(h.data_points.iter().map(|p| {
                        point(
                            &p.attributes,
                            PointValue::Histogram {
                                count: p.count,
                                sum: p.sum.unwrap_or(0.0),
                            },
                        )
                    })),
                    _ => {}
                }
            }
        }
    }
    out
}
