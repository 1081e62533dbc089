//! What telemetry does, from the `[telemetry]` table of the user's configuration
//! file ([`TelemetryConfig`], a serde struct a configuration loader embeds) and the
//! standard OpenTelemetry environment variables, resolved by [`resolve`] into
//! [`Settings`] or a reason it is off.
//!
//! Export is off unless an endpoint is named (`telemetry.endpoint`,
//! `OTEL_EXPORTER_OTLP_ENDPOINT` or a per-signal endpoint variable) or
//! `telemetry.enabled = true` asks for the OpenTelemetry default (a collector on
//! `localhost`). `telemetry.enabled = false` and `OTEL_SDK_DISABLED=true` turn it off
//! whatever else is set. An environment variable wins over the file's key. An empty
//! variable counts as unset, as the OpenTelemetry specification says.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The `[telemetry]` table, as written in `config.toml` (every key optional).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `false` turns export off even when an endpoint is set; `true` without an
    /// endpoint exports to the OpenTelemetry default (`http://localhost:4318`, or
    /// `http://localhost:4317` over gRPC).
    pub enabled: Option<bool>,
    /// The collector's base URL (`http://` or `https://`): `/v1/traces` and
    /// `/v1/metrics` are appended over HTTP; used as is over gRPC.
    pub endpoint: Option<String>,
    /// `"http/protobuf"` (the default) or `"grpc"` (builds with the `grpc` feature).
    pub protocol: Option<String>,
    /// Headers sent with every export (e.g. an API key).
    pub headers: Option<BTreeMap<String, String>>,
    /// `service.name` of the resource; default `keel`.
    pub service_name: Option<String>,
    /// Whether prompts, model output, tool arguments and tool results are recorded
    /// on spans. Default `false`.
    pub log_content: Option<bool>,
    /// The share of new traces sampled, in [0, 1]; default 1. A trace the host
    /// started (`traceparent`) follows the host's sampling decision.
    pub sample_ratio: Option<f64>,
    /// Time limit of one export request, in milliseconds; default 3000.
    pub export_timeout_ms: Option<u64>,
    /// Seconds between metric exports; default 60 (metrics are also exported at exit).
    pub metrics_interval_secs: Option<u64>,
}

/// The wire protocol of the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/HTTP with protobuf bodies.
    HttpProtobuf,
    /// OTLP/gRPC.
    Grpc,
}

impl Protocol {
    /// The name used in the configuration and `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::HttpProtobuf => "http/protobuf",
            Protocol::Grpc => "grpc",
        }
    }

    fn parse(s: &str) -> Result<Protocol, String> {
        match s.trim() {
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "grpc" => Ok(Protocol::Grpc),
            "http/json" => Err("`http/json` is not supported; use `http/protobuf`".to_owned()),
            other => Err(format!(
                "unknown protocol {other:?}; use `http/protobuf` or `grpc`"
            )),
        }
    }
}

/// Export settings, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// Where spans go.
    pub traces_endpoint: String,
    /// Where metrics go.
    pub metrics_endpoint: String,
    /// The protocol.
    pub protocol: Protocol,
    /// Headers of every export request (values may be secrets: never log them).
    pub headers: BTreeMap<String, String>,
    /// `service.name`.
    pub service_name: String,
    /// `service.version`; the host sets it (its own version).
    pub service_version: String,
    /// Whether content is recorded on spans.
    pub log_content: bool,
    /// The share of new traces sampled.
    pub sample_ratio: f64,
    /// Time limit of one export request.
    pub export_timeout: Duration,
    /// Time between metric exports.
    pub metrics_interval: Duration,
    /// Spans held at most while waiting for export; more are dropped.
    pub queue_size: usize,
    /// Time between span exports.
    pub batch_delay: Duration,
    /// Spans per export request at most.
    pub max_batch: usize,
    /// Whether `OTEL_SEMCONV_STABILITY_OPT_IN` asks for the latest GenAI conventions.
    pub semconv_opt_in: bool,
}

impl Settings {
    /// Settings exporting over HTTP to `base` (a receiver's URL), with the defaults;
    /// for tests and embedders that configure in code.
    pub fn http(base: &str) -> Settings {
        let base = base.trim_end_matches('/');
        Settings {
            traces_endpoint: format!("{base}/v1/traces"),
            metrics_endpoint: format!("{base}/v1/metrics"),
            protocol: Protocol::HttpProtobuf,
            headers: BTreeMap::new(),
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            service_version: String::new(),
            log_content: false,
            sample_ratio: 1.0,
            export_timeout: DEFAULT_EXPORT_TIMEOUT,
            metrics_interval: DEFAULT_METRICS_INTERVAL,
            queue_size: DEFAULT_QUEUE_SIZE,
            batch_delay: DEFAULT_BATCH_DELAY,
            max_batch: DEFAULT_MAX_BATCH,
            semconv_opt_in: false,
        }
    }
}

impl Settings {
    /// Host and port of the traces endpoint (the scheme's port when none is given),
    /// for a reachability check.
    pub fn traces_authority(&self) -> Option<(String, u16)> {
        let uri: http::Uri = self.traces_endpoint.parse().ok()?;
        let port = uri.port_u16().unwrap_or(match uri.scheme_str() {
            Some("https") => 443,
            _ => 80,
        });
        Some((uri.host()?.trim_matches(['[', ']']).to_owned(), port))
    }

    /// One line for `keel doctor` and the log: where and how it exports, and the
    /// names (never the values) of the headers.
    pub fn describe(&self) -> String {
        let headers = if self.headers.is_empty() {
            String::new()
        } else {
            format!(
                ", headers {}",
                self.headers.keys().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        format!(
            "on: {} to {} and {} (service {}, content {}{}, sampling {})",
            self.protocol.as_str(),
            self.traces_endpoint,
            self.metrics_endpoint,
            self.service_name,
            if self.log_content {
                "recorded"
            } else {
                "not recorded"
            },
            headers,
            self.sample_ratio,
        )
    }
}

/// Why export is off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Off {
    /// No endpoint is named and `telemetry.enabled` is not `true`.
    NoEndpoint,
    /// `telemetry.enabled = false`.
    DisabledInConfig,
    /// `OTEL_SDK_DISABLED=true`.
    SdkDisabled,
}

impl Off {
    /// A sentence for `keel doctor`.
    pub fn describe(self) -> &'static str {
        match self {
            Off::NoEndpoint => {
                "off (no endpoint: set telemetry.endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)"
            }
            Off::DisabledInConfig => "off (telemetry.enabled = false)",
            Off::SdkDisabled => "off (OTEL_SDK_DISABLED=true)",
        }
    }
}

/// The outcome of [`resolve`].
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// Export with these settings.
    On(Box<Settings>),
    /// No export.
    Off(Off),
}

/// A bad key or variable: which one, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// `telemetry.<key>` or the environment variable's name.
    pub key: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid `{}`: {}", self.key, self.message)
    }
}

impl std::error::Error for ConfigError {}

/// `service.name` when none is set.
pub const DEFAULT_SERVICE_NAME: &str = "keel";
/// The default time limit of one export request.
pub const DEFAULT_EXPORT_TIMEOUT: Duration = Duration::from_secs(3);
/// The default time between metric exports.
pub const DEFAULT_METRICS_INTERVAL: Duration = Duration::from_secs(60);
/// The default span queue bound.
pub const DEFAULT_QUEUE_SIZE: usize = 2048;
/// The default time between span exports.
pub const DEFAULT_BATCH_DELAY: Duration = Duration::from_secs(2);
/// The default largest export request, in spans.
pub const DEFAULT_MAX_BATCH: usize = 512;

/// The environment variables read (for `keel doctor` and the documentation).
pub const ENV_VARS: [&str; 15] = [
    "OTEL_SDK_DISABLED",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_METRIC_EXPORT_INTERVAL",
    "OTEL_BSP_MAX_QUEUE_SIZE",
    "OTEL_BSP_SCHEDULE_DELAY",
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
    "OTEL_TRACES_SAMPLER_ARG",
];

/// Resolves the file's table and the environment (`env` answers a variable's value)
/// into settings. `service_version` is the host's version.
pub fn resolve(
    file: &TelemetryConfig,
    env: &dyn Fn(&str) -> Option<String>,
    service_version: &str,
) -> Result<Resolved, ConfigError> {
    let env = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    if env("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
        return Ok(Resolved::Off(Off::SdkDisabled));
    }
    if file.enabled == Some(false) {
        return Ok(Resolved::Off(Off::DisabledInConfig));
    }
    let protocol = match env("OTEL_EXPORTER_OTLP_PROTOCOL") {
        Some(p) => Protocol::parse(&p).map_err(|m| err("OTEL_EXPORTER_OTLP_PROTOCOL", m))?,
        None => match &file.protocol {
            Some(p) => Protocol::parse(p).map_err(|m| err("telemetry.protocol", m))?,
            None => Protocol::HttpProtobuf,
        },
    };
    // The base: the variable, else the file's key, else (when asked to export) the
    // OpenTelemetry default.
    let base = match (env("OTEL_EXPORTER_OTLP_ENDPOINT"), &file.endpoint) {
        (Some(e), _) => Some(check_url("OTEL_EXPORTER_OTLP_ENDPOINT", &e)?),
        (None, Some(e)) if !e.trim().is_empty() => Some(check_url("telemetry.endpoint", e)?),
        _ => None,
    };
    let traces_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let metrics_env = env("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    let named = base.is_some() || traces_env.is_some() || metrics_env.is_some();
    if !named && file.enabled != Some(true) {
        return Ok(Resolved::Off(Off::NoEndpoint));
    }
    let base = match base {
        Some(b) => b,
        None => match protocol {
            Protocol::HttpProtobuf => "http://localhost:4318".to_owned(),
            Protocol::Grpc => "http://localhost:4317".to_owned(),
        },
    };
    let signal = |var: &str, value: Option<String>, path: &str| -> Result<String, ConfigError> {
        match value {
            Some(v) => check_url(var, &v),
            None if protocol == Protocol::Grpc => Ok(base.clone()),
            None => Ok(format!("{}{path}", base.trim_end_matches('/'))),
        }
    };
    let traces_endpoint = signal(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        traces_env,
        "/v1/traces",
    )?;
    let metrics_endpoint = signal(
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        metrics_env,
        "/v1/metrics",
    )?;

    let mut headers = BTreeMap::new();
    for (k, v) in file.headers.iter().flatten() {
        check_header("telemetry.headers", k, v)?;
        headers.insert(k.trim().to_ascii_lowercase(), v.clone());
    }
    if let Some(list) = env("OTEL_EXPORTER_OTLP_HEADERS") {
        for (k, v) in parse_header_list(&list).map_err(|m| err("OTEL_EXPORTER_OTLP_HEADERS", m))? {
            check_header("OTEL_EXPORTER_OTLP_HEADERS", &k, &v)?;
            headers.insert(k.to_ascii_lowercase(), v);
        }
    }

    let service_name = env("OTEL_SERVICE_NAME")
        .or_else(|| file.service_name.clone().filter(|s| !s.trim().is_empty()))
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());

    let sample_ratio = match env("OTEL_TRACES_SAMPLER_ARG") {
        Some(v) => ratio("OTEL_TRACES_SAMPLER_ARG", v.trim().parse::<f64>().ok())?,
        None => match file.sample_ratio {
            Some(r) => ratio("telemetry.sampleRatio", Some(r))?,
            None => 1.0,
        },
    };

    let export_timeout = match env("OTEL_EXPORTER_OTLP_TIMEOUT") {
        Some(v) => Duration::from_millis(positive("OTEL_EXPORTER_OTLP_TIMEOUT", &v)?),
        None => match file.export_timeout_ms {
            Some(0) => return Err(err("telemetry.exportTimeoutMs", "must be at least 1")),
            Some(ms) => Duration::from_millis(ms),
            None => DEFAULT_EXPORT_TIMEOUT,
        },
    };
    let metrics_interval = match env("OTEL_METRIC_EXPORT_INTERVAL") {
        Some(v) => Duration::from_millis(positive("OTEL_METRIC_EXPORT_INTERVAL", &v)?),
        None => match file.metrics_interval_secs {
            Some(0) => return Err(err("telemetry.metricsIntervalSecs", "must be at least 1")),
            Some(s) => Duration::from_secs(s),
            None => DEFAULT_METRICS_INTERVAL,
        },
    };
    let queue_size = match env("OTEL_BSP_MAX_QUEUE_SIZE") {
        Some(v) => usize_of("OTEL_BSP_MAX_QUEUE_SIZE", &v)?,
        None => DEFAULT_QUEUE_SIZE,
    };
    let batch_delay = match env("OTEL_BSP_SCHEDULE_DELAY") {
        Some(v) => Duration::from_millis(positive("OTEL_BSP_SCHEDULE_DELAY", &v)?),
        None => DEFAULT_BATCH_DELAY,
    };
    let max_batch = match env("OTEL_BSP_MAX_EXPORT_BATCH_SIZE") {
        Some(v) => usize_of("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", &v)?,
        None => DEFAULT_MAX_BATCH,
    }
    .min(queue_size);

    Ok(Resolved::On(Box::new(Settings {
        traces_endpoint,
        metrics_endpoint,
        protocol,
        headers,
        service_name,
        service_version: service_version.to_owned(),
        log_content: file.log_content.unwrap_or(false),
        sample_ratio,
        export_timeout,
        metrics_interval,
        queue_size,
        batch_delay,
        max_batch,
        semconv_opt_in: crate::semconv::stability_opt_in(
            env(crate::semconv::STABILITY_OPT_IN_ENV).as_deref(),
        ),
    })))
}

fn err(key: &str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        message: message.into(),
    }
}

/// An endpoint must be an absolute `http://` or `https://` URL with a host.
fn check_url(key: &str, value: &str) -> Result<String, ConfigError> {
    let value = value.trim();
    let uri: http::Uri = value
        .parse()
        .map_err(|e| err(key, format!("{value:?} is not a URL ({e})")))?;
    match uri.scheme_str() {
        Some("http") | Some("https") => {}
        _ => {
            return Err(err(
                key,
                format!("{value:?} must start with http:// or https://"),
            ))
        }
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(err(key, format!("{value:?} has no host")));
    }
    Ok(value.to_owned())
}

fn check_header(key: &str, name: &str, value: &str) -> Result<(), ConfigError> {
    http::HeaderName::from_bytes(name.trim().as_bytes())
        .map_err(|_| err(key, format!("{name:?} is not a valid header name")))?;
    http::HeaderValue::from_str(value)
        .map_err(|_| err(key, format!("the value of header {name:?} is not valid")))?;
    Ok(())
}

/// `k1=v1,k2=v2`, values percent-encoded (the W3C baggage format the variable uses).
fn parse_header_list(list: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("{item:?} is not `name=value`"));
        };
        let k = k.trim();
        if k.is_empty() {
            return Err(format!("{item:?} has no name"));
        }
        out.push((k.to_owned(), percent_decode(v.trim())?));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent-escape in {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

fn ratio(key: &str, value: Option<f64>) -> Result<f64, ConfigError> {
    match value {
        Some(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(err(key, "must be a number from 0 to 1")),
    }
}

fn positive(key: &str, value: &str) -> Result<u64, ConfigError> {
    match value.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(err(
            key,
            format!("{value:?} is not a positive whole number"),
        )),
    }
}

fn usize_of(key: &str, value: &str) -> Result<usize, ConfigError> {
    usize::try_from(positive(key, value)?).map_err(|_| err(key, "too large"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
