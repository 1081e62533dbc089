//! OTLP over gRPC (feature `grpc`). The SDK exports from plain threads, and tonic
//! needs a Tokio runtime, so each gRPC exporter is built inside, and exports on, a
//! small runtime of its own.

use std::sync::Arc;
use std::time::Duration;

use opentelemetry_otlp::tonic_types::metadata::MetadataMap;
use opentelemetry_otlp::{WithExportConfig, WithTonicConfig};
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::Temporality;
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use opentelemetry_sdk::Resource;

use crate::config::Settings;

/// An HTTP exporter as it is, or a gRPC one with the runtime it runs on.
#[derive(Debug)]
pub(super) enum Either<E> {
    /// Exports on the caller's thread.
    Direct(E),
    /// Exports on its own runtime.
    OnRuntime(E, Arc<tokio::runtime::Runtime>),
}

impl<E> Either<E> {
    fn inner(&self) -> &E {
        match self {
            Either::Direct(e) | Either::OnRuntime(e, _) => e,
        }
    }
}

impl<E: SpanExporter> SpanExporter for Either<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        match self {
            Either::Direct(e) => e.export(batch).await,
            Either::OnRuntime(e, rt) => rt.block_on(e.export(batch)),
        }
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner().shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner().force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        match self {
            Either::Direct(e) | Either::OnRuntime(e, _) => e.set_resource(resource),
        }
    }
}

impl<E: PushMetricExporter> PushMetricExporter for Either<E> {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        match self {
            Either::Direct(e) => e.export(metrics).await,
            Either::OnRuntime(e, rt) => rt.block_on(e.export(metrics)),
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner().force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner().shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner().temporality()
    }
}

type Pair = (
    Either<opentelemetry_otlp::SpanExporter>,
    Either<opentelemetry_otlp::MetricExporter>,
);

/// Both gRPC exporters, each on a runtime of its own (the channel's worker task runs
/// on the runtime it was built in, driven while an export waits).
pub(super) fn exporters(s: &Settings) -> Result<Pair, String> {
    let runtime = || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map(Arc::new)
            .map_err(|e| format!("no runtime: {e}"))
    };
    // Header names and values were checked when the settings were resolved.
    let metadata = || {
        let mut h = http::HeaderMap::new();
        for (k, v) in &s.headers {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.as_bytes()),
                http::HeaderValue::from_str(v),
            ) {
                h.insert(k, v);
            }
        }
        MetadataMap::from_headers(h)
    };
    let span_rt = runtime()?;
    let spans = {
        let _entered = span_rt.enter();
        opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(s.traces_endpoint.clone())
            .with_timeout(s.export_timeout)
            .with_metadata(metadata())
            .build()
            .map_err(|e| e.to_string())?
    };
    let metric_rt = runtime()?;
    let metrics = {
        let _entered = metric_rt.enter();
        opentelemetry_otlp::MetricExporter::builder()
            .with_tonic()
            .with_endpoint(s.metrics_endpoint.clone())
            .with_timeout(s.export_timeout)
            .with_metadata(metadata())
            .build()
            .map_err(|e| e.to_string())?
    };
    Ok((
        Either::OnRuntime(spans, span_rt),
        Either::OnRuntime(metrics, metric_rt),
    ))
}
