//! OTLP export: the [`Pipeline`] owns a tracer provider and a meter provider whose
//! exporters speak OTLP over HTTP/protobuf (or gRPC with the `grpc` feature), gives
//! the `tracing` layer that turns Keel's spans into OpenTelemetry spans and the
//! [`Recorder`] whose metrics it exports, and shuts down within a bound.
//!
//! Export never slows or fails the work it reports. Spans wait in a bounded queue
//! ([`Settings::queue_size`]) and go out from the SDK's own thread, in batches, each
//! request limited by [`Settings::export_timeout`]; when the queue is full a span is
//! dropped rather than waited for. Metrics go out from their own thread too. A failed
//! export is logged once as a warning (target `keel_telemetry::export`), whatever
//! the number of failures after it; [`Pipeline::health`] counts them.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry::InstrumentationScope;
use opentelemetry::KeyValue;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider, SpanData,
    SpanExporter,
};
use opentelemetry_sdk::Resource;
use tracing_subscriber::Layer;

use crate::config::{Protocol, Settings};
use crate::recorder::{span_filter, Recorder};
use crate::semconv as sc;

/// The `tracing` target of the export's own log lines.
pub const LOG_TARGET: &str = "keel_telemetry::export";

/// Why the pipeline could not start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartError {
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for StartError {}

/// What the exports did so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Health {
    /// Export requests that succeeded (spans and metrics).
    pub exports_ok: u64,
    /// Export requests that failed or timed out.
    pub exports_failed: u64,
    /// Spans handed to the exporter (sent or not); spans dropped from a full queue
    /// never get there.
    pub spans_handed_over: u64,
    /// Warnings logged about failed exports: 0 or 1.
    pub warnings: u64,
    /// The last failure, when there was one.
    pub last_error: Option<String>,
}

#[derive(Debug, Default)]
struct Watch {
    ok: AtomicU64,
    failed: AtomicU64,
    spans: AtomicU64,
    warned: AtomicBool,
    last_error: Mutex<Option<String>>,
}

impl Watch {
    fn note(&self, what: &str, endpoint: &str, result: &OTelSdkResult) {
        match result {
            Ok(()) => {
                self.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                let text = format!("{what} export to {endpoint} failed: {e}");
                if !self.warned.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        target: LOG_TARGET,
                        "{text}; telemetry is dropped while the endpoint fails (this is logged once)"
                    );
                } else {
                    tracing::debug!(target: LOG_TARGET, "{text}");
                }
                *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text);
            }
        }
    }

    fn health(&self) -> Health {
        Health {
            exports_ok: self.ok.load(Ordering::Relaxed),
            exports_failed: self.failed.load(Ordering::Relaxed),
            spans_handed_over: self.spans.load(Ordering::Relaxed),
            warnings: u64::from(self.warned.load(Ordering::Relaxed)),
            last_error: self
                .last_error
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
        }
    }
}

/// A span exporter that reports to the [`Watch`].
#[derive(Debug)]
struct Watched<E> {
    inner: E,
    watch: Arc<Watch>,
    endpoint: String,
}

impl<E: SpanExporter> SpanExporter for Watched<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.watch
            .spans
            .fetch_add(batch.len() as u64, Ordering::Relaxed);
        let r = self.inner.export(batch).await;
        self.watch.note("span", &self.endpoint, &r);
        r
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// A metric exporter that reports to the [`Watch`].
#[derive(Debug)]
struct WatchedMetrics<E> {
    inner: E,
    watch: Arc<Watch>,
    endpoint: String,
}

impl<E: PushMetricExporter> PushMetricExporter for WatchedMetrics<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let r = self.inner.export(metrics).await;
        self.watch.note("metric", &self.endpoint, &r);
        r
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

/// The running export.
#[derive(Debug)]
pub struct Pipeline {
    tracer_provider: SdkTracerProvider,
    meter_provider: SdkMeterProvider,
    tracer: SdkTracer,
    recorder: Recorder,
    watch: Arc<Watch>,
}

impl Pipeline {
    /// Builds the exporters and providers. Nothing is sent until there is something
    /// to send; an endpoint that is down shows in [`Pipeline::health`] and the log,
    /// not here.
    pub fn start(settings: &Settings) -> Result<Pipeline, StartError> {
        let watch = Arc::new(Watch::default());
        // The HTTP client's TLS has no crypto provider of its own (the process keeps
        // one it already has).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let (spans, metrics) = exporters(settings)?;
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attribute(KeyValue::new(
                "service.version",
                settings.service_version.clone(),
            ))
            .build();
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(settings.queue_size.max(1))
            .with_max_export_batch_size(settings.max_batch.clamp(1, settings.queue_size.max(1)))
            .with_scheduled_delay(settings.batch_delay)
            .build();
        let processor = BatchSpanProcessor::builder(Watched {
            inner: spans,
            watch: watch.clone(),
            endpoint: settings.traces_endpoint.clone(),
        })
        .with_batch_config(batch)
        .build();
        let sampler = if settings.sample_ratio >= 1.0 {
            Sampler::ParentBased(Box::new(Sampler::AlwaysOn))
        } else {
            Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio)))
        };
        let tracer_provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(sampler)
            .with_resource(resource.clone())
            .build();
        let reader = PeriodicReader::builder(WatchedMetrics {
            inner: metrics,
            watch: watch.clone(),
            endpoint: settings.metrics_endpoint.clone(),
        })
        .with_interval(settings.metrics_interval)
        .build();
        let meter_provider = SdkMeterProvider::builder()
            .with_reader(reader)
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder(sc::SCOPE)
            .with_version(env!("CARGO_PKG_VERSION"))
            .with_schema_url(sc::SCHEMA_URL)
            .build();
        let tracer = tracer_provider.tracer_with_scope(scope.clone());
        let meter = opentelemetry::metrics::MeterProvider::meter_with_scope(&meter_provider, scope);
        let recorder = Recorder::new(&meter, settings.log_content);
        Ok(Pipeline {
            tracer_provider,
            meter_provider,
            tracer,
            recorder,
            watch,
        })
    }

    /// The `tracing` layer that exports Keel's spans (and only them).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber
            + for<'a> tracing_subscriber::registry::LookupSpan<'a>
            + Send
            + Sync
            + 'static,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(span_filter())
    }

    /// The recorder whose metrics this pipeline exports.
    pub fn recorder(&self) -> Recorder {
        self.recorder.clone()
    }

    /// What the exports did so far.
    pub fn health(&self) -> Health {
        self.watch.health()
    }

    /// Exports what is left and stops, waiting `timeout` at most: whatever the
    /// endpoint does, this returns by then (what was not sent is dropped).
    pub fn shutdown(self, timeout: Duration) -> Shutdown {
        let (tx, rx) = std::sync::mpsc::channel();
        let traces = self.tracer_provider.clone();
        let meters = self.meter_provider.clone();
        let spawned = std::thread::Builder::new()
            .name("keel-telemetry-shutdown".to_owned())
            .spawn(move || {
                let t = traces.shutdown_with_timeout(timeout).is_ok();
                let m = meters.shutdown_with_timeout(timeout).is_ok();
                let _ = tx.send(t && m);
            });
        let flushed = spawned.is_ok() && rx.recv_timeout(timeout).unwrap_or(false);
        Shutdown {
            flushed,
            health: self.watch.health(),
        }
    }
}

/// What [`Pipeline::shutdown`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shutdown {
    /// Whether everything left was exported in time.
    pub flushed: bool,
    /// The exports' record.
    pub health: Health,
}

#[cfg(not(feature = "grpc"))]
type SpanOut = opentelemetry_otlp::SpanExporter;
#[cfg(not(feature = "grpc"))]
type MetricOut = opentelemetry_otlp::MetricExporter;
#[cfg(feature = "grpc")]
type SpanOut = grpc::Either<opentelemetry_otlp::SpanExporter>;
#[cfg(feature = "grpc")]
type MetricOut = grpc::Either<opentelemetry_otlp::MetricExporter>;

fn exporters(s: &Settings) -> Result<(SpanOut, MetricOut), StartError> {
    let failed = |what: &str, e: &dyn std::fmt::Display| StartError {
        message: format!("cannot set up the OTLP {what} exporter: {e}"),
    };
    match s.protocol {
        Protocol::HttpProtobuf => {
            use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
            let headers: HashMap<String, String> = s.headers.clone().into_iter().collect();
            let spans = opentelemetry_otlp::SpanExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(s.traces_endpoint.clone())
                .with_timeout(s.export_timeout)
                .with_headers(headers.clone())
                .build()
                .map_err(|e| failed("span", &e))?;
            let metrics = opentelemetry_otlp::MetricExporter::builder()
                .with_http()
                .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
                .with_endpoint(s.metrics_endpoint.clone())
                .with_timeout(s.export_timeout)
                .with_headers(headers)
                .build()
                .map_err(|e| failed("metric", &e))?;
            #[cfg(feature = "grpc")]
            return Ok((grpc::Either::Direct(spans), grpc::Either::Direct(metrics)));
            #[cfg(not(feature = "grpc"))]
            Ok((spans, metrics))
        }
        #[cfg(feature = "grpc")]
        Protocol::Grpc => grpc::exporters(s).map_err(|e| failed("gRPC", &e)),
        #[cfg(not(feature = "grpc"))]
        Protocol::Grpc => Err(StartError {
            message: "this build of Keel has no gRPC export (the `grpc` feature of keel-telemetry); use `http/protobuf`".to_owned(),
        }),
    }
}

#[cfg(feature = "grpc")]
mod grpc;
