//! Classification of provider failures into Keel's structured error payload.

use std::time::Duration;

use keel_envelope::error::{ErrorCategory, ErrorCode, ErrorHint, ErrorPayload, Severity};
use keel_kernel::model::ModelError;

/// Longest provider message kept in an error message.
const MAX_PROVIDER_MESSAGE: usize = 500;

/// A failure of one attempt, with the server's requested wait, if any.
#[derive(Debug, Clone)]
pub struct Failure {
    pub payload: ErrorPayload,
    pub retry_after: Option<Duration>,
}

impl Failure {
    pub fn new(payload: ErrorPayload) -> Self {
        Self {
            payload,
            retry_after: None,
        }
    }
}

impl From<ErrorPayload> for Failure {
    fn from(payload: ErrorPayload) -> Self {
        Self::new(payload)
    }
}

impl From<Failure> for ModelError {
    fn from(f: Failure) -> Self {
        ModelError(f.payload)
    }
}

/// A `MODEL_ERROR` payload in the runtime category.
pub(crate) fn model_error(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ModelError, message)
        .category(ErrorCategory::Runtime)
        .severity(Severity::Error)
}

/// A `MODEL_UNAVAILABLE` payload in the runtime category.
pub(crate) fn model_unavailable(message: impl Into<String>) -> ErrorPayload {
    ErrorPayload::new(ErrorCode::ModelUnavailable, message)
        .category(ErrorCategory::Runtime)
        .severity(Severity::Error)
}

/// The parts of a provider's error body Keel looks at.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct ProviderError {
    pub message: Option<String>,
    pub kind: Option<String>,
    pub code: Option<String>,
}

/// Reads an OpenAI (`{"error":{"message","type","code"}}`) or Anthropic
/// (`{"type":"error","error":{"type","message"}}`) error body.
pub(crate) fn parse_provider_error(body: &str) -> ProviderError {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
        let text = body.trim();
        return ProviderError {
            message: (!text.is_empty()).then(|| truncate(text, MAX_PROVIDER_MESSAGE)),
            ..ProviderError::default()
        };
    };
    provider_error_from_value(&value)
}

pub(crate) fn provider_error_from_value(value: &serde_json::Value) -> ProviderError {
    let err = value.get("error").unwrap_or(value);
    let as_string = |v: Option<&serde_json::Value>| -> Option<String> {
        match v? {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Null => None,
            other => Some(other.to_string()),
        }
    };
    let message = match err {
        serde_json::Value::String(s) => Some(s.clone()),
        _ => as_string(err.get("message")),
    };
    ProviderError {
        message: message.map(|m| truncate(&m, MAX_PROVIDER_MESSAGE)),
        kind: as_string(err.get("type")),
        code: as_string(err.get("code")),
    }
}

pub(crate) fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn contains_any(haystack: &str, needles: &[&str]) -> bool {
    let h = haystack.to_ascii_lowercase();
    needles.iter().any(|n| h.contains(n))
}

/// Classifies an HTTP error status with its body.
pub(crate) fn classify_status(
    provider: &str,
    status: u16,
    body: &str,
    retry_after: Option<Duration>,
) -> Failure {
    let perr = parse_provider_error(body);
    let kind_code = format!(
        "{} {}",
        perr.kind.as_deref().unwrap_or(""),
        perr.code.as_deref().unwrap_or("")
    );
    let reason = reason_phrase(status);
    let mut message = format!("{provider} returned HTTP {status}{reason}");
    if let Some(m) = &perr.message {
        message.push_str(": ");
        message.push_str(m);
    }
    let quota_body = contains_any(
        &kind_code,
        &["insufficient_quota", "rate_limit", "overloaded", "quota"],
    );
    let insufficient = contains_any(&kind_code, &["insufficient_quota"])
        || perr
            .message
            .as_deref()
            .is_some_and(|m| contains_any(m, &["exceeded your current quota"]));
    let model_missing =
        status == 404 || contains_any(&kind_code, &["model_not_found", "not_found_error"]);
    // A server error that blames the request itself (llama-server answers malformed
    // tool-call arguments with 500 "Failed to parse …"): the same request fails again.
    let malformed = status >= 500
        && (contains_any(&kind_code, &["invalid_request"])
            || perr.message.as_deref().is_some_and(|m| {
                contains_any(
                    m,
                    &[
                        "failed to parse",
                        "parse error",
                        "invalid request",
                        "malformed",
                        "invalid json",
                    ],
                )
            }));

    let (code, hint, retryable) = if status == 401 || status == 403 {
        (
            ErrorCode::ModelError,
            Some(ErrorHint::CheckLlmConfig),
            false,
        )
    } else if insufficient {
        (ErrorCode::ModelError, Some(ErrorHint::QuotaExceeded), false)
    } else if status == 429 || status == 529 || quota_body {
        (ErrorCode::ModelError, Some(ErrorHint::QuotaExceeded), true)
    } else if model_missing {
        (
            ErrorCode::ModelUnavailable,
            Some(ErrorHint::CheckLlmConfig),
            false,
        )
    } else if status == 408 {
        (ErrorCode::ModelError, Some(ErrorHint::Network), true)
    } else if malformed {
        (ErrorCode::ModelError, None, false)
    } else if status >= 500 {
        (ErrorCode::ModelError, None, true)
    } else {
        (ErrorCode::ModelError, None, false)
    };

    let mut payload = ErrorPayload::new(code, message)
        .category(ErrorCategory::Runtime)
        .severity(Severity::Error)
        .retryable(retryable)
        .with_detail("provider", provider.to_owned())
        .with_detail("status", status);
    if let Some(hint) = hint {
        payload = payload.hint(hint);
    }
    if malformed {
        payload = payload.with_detail("reason", "malformed_request");
    }
    if let Some(k) = perr.kind {
        payload = payload.with_detail("providerType", k);
    }
    if let Some(c) = perr.code {
        payload = payload.with_detail("providerCode", c);
    }
    if let Some(ra) = retry_after {
        payload = payload.with_detail("retryAfterMs", ra.as_millis() as u64);
    }
    Failure {
        payload,
        retry_after,
    }
}

/// Classifies an error object sent inside a stream (an OpenAI-compatible `error`
/// chunk or an Anthropic `error` event).
pub(crate) fn classify_stream_error(provider: &str, value: &serde_json::Value) -> Failure {
    let perr = provider_error_from_value(value);
    let kind_code = format!(
        "{} {}",
        perr.kind.as_deref().unwrap_or(""),
        perr.code.as_deref().unwrap_or("")
    );
    let mut message = format!("{provider} reported an error in the stream");
    if let Some(m) = &perr.message {
        message.push_str(": ");
        message.push_str(m);
    }
    let mut payload = model_error(message).with_detail("provider", provider.to_owned());
    if contains_any(&kind_code, &["insufficient_quota"]) {
        payload = payload.hint(ErrorHint::QuotaExceeded);
    } else if contains_any(&kind_code, &["rate_limit", "overloaded", "quota"]) {
        payload = payload.hint(ErrorHint::QuotaExceeded).retryable(true);
    } else if contains_any(
        &kind_code,
        &["authentication", "permission", "invalid_api_key"],
    ) {
        payload = payload.hint(ErrorHint::CheckLlmConfig);
    } else if contains_any(&kind_code, &["api_error", "server_error", "internal"]) {
        payload = payload.retryable(true);
    }
    if let Some(k) = perr.kind {
        payload = payload.with_detail("providerType", k);
    }
    if let Some(c) = perr.code {
        payload = payload.with_detail("providerCode", c);
    }
    Failure::new(payload)
}

/// Classifies a transport failure (connect, DNS, timeout, cut body).
pub(crate) fn classify_transport(provider: &str, err: &reqwest::Error) -> Failure {
    let what = if err.is_timeout() {
        "timed out"
    } else if err.is_connect() {
        "could not be reached"
    } else if err.is_body() || err.is_decode() {
        "broke the connection"
    } else {
        "failed"
    };
    let mut detail = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    if err.is_builder() {
        return Failure::new(
            model_unavailable(format!("{provider} request could not be built: {detail}"))
                .hint(ErrorHint::CheckLlmConfig)
                .with_detail("provider", provider.to_owned()),
        );
    }
    Failure::new(
        model_error(format!("{provider} {what}: {detail}"))
            .hint(ErrorHint::Network)
            .retryable(true)
            .with_detail("provider", provider.to_owned()),
    )
}

/// A network failure described in words (idle timeout, cut stream).
pub(crate) fn network_failure(provider: &str, message: impl std::fmt::Display) -> Failure {
    Failure::new(
        model_error(format!("{provider} {message}"))
            .hint(ErrorHint::Network)
            .retryable(true)
            .with_detail("provider", provider.to_owned()),
    )
}

/// A malformed stream (bad JSON, protocol violation): not retryable.
pub(crate) fn malformed(provider: &str, message: impl std::fmt::Display) -> Failure {
    Failure::new(
        model_error(format!("{provider} sent a malformed stream: {message}"))
            .with_detail("provider", provider.to_owned()),
    )
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        400 => " Bad Request",
        401 => " Unauthorized",
        403 => " Forbidden",
        404 => " Not Found",
        408 => " Request Timeout",
        413 => " Payload Too Large",
        422 => " Unprocessable Entity",
        429 => " Too Many Requests",
        500 => " Internal Server Error",
        502 => " Bad Gateway",
        503 => " Service Unavailable",
        504 => " Gateway Timeout",
        529 => " Overloaded",
        _ => "",
    }
}

/// Reads `retry-after-ms` (milliseconds) or `retry-after` (seconds).
pub(crate) fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_millis(ms as u64));
        }
    }
    let secs = get("retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_millis((secs * 1000.0) as u64))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn auth_errors_point_to_config_and_are_final() {
        let body = r#"{"error":{"message":"Incorrect API key provided: sk-xx.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
        let f = classify_status("OpenAI", 401, body, None);
        assert_eq!(f.payload.hint, Some(ErrorHint::CheckLlmConfig));
        assert!(!f.payload.retryable);
        assert!(f.payload.message.contains("Incorrect API key provided"));
        assert_eq!(f.payload.code, ErrorCode::ModelError);
        let f = classify_status(
            "Anthropic",
            403,
            r#"{"type":"error","error":{"type":"permission_error","message":"no access"}}"#,
            None,
        );
        assert_eq!(f.payload.hint, Some(ErrorHint::CheckLlmConfig));
        assert!(f.payload.message.contains("no access"));
    }

    #[test]
    fn quota_and_rate_limits() {
        let f = classify_status(
            "OpenAI",
            429,
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            None,
        );
        assert_eq!(f.payload.hint, Some(ErrorHint::QuotaExceeded));
        assert!(!f.payload.retryable);
        let f = classify_status(
            "OpenAI",
            429,
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
            Some(Duration::from_secs(2)),
        );
        assert_eq!(f.payload.hint, Some(ErrorHint::QuotaExceeded));
        assert!(f.payload.retryable);
        assert_eq!(f.retry_after, Some(Duration::from_secs(2)));
        let f = classify_status(
            "Anthropic",
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            None,
        );
        assert_eq!(f.payload.hint, Some(ErrorHint::QuotaExceeded));
        assert!(f.payload.retryable);
    }

    #[test]
    fn server_errors_retry_and_client_errors_do_not() {
        let f = classify_status("OpenAI", 503, "upstream unavailable", None);
        assert!(f.payload.retryable);
        assert_eq!(f.payload.hint, None);
        assert!(f.payload.message.contains("upstream unavailable"));
        let f = classify_status(
            "OpenAI",
            400,
            r#"{"error":{"message":"bad field","type":"invalid_request_error"}}"#,
            None,
        );
        assert!(!f.payload.retryable);
        assert_eq!(f.payload.hint, None);
        let f = classify_status(
            "OpenAI",
            404,
            r#"{"error":{"message":"The model `x` does not exist","code":"model_not_found"}}"#,
            None,
        );
        assert_eq!(f.payload.code, ErrorCode::ModelUnavailable);
    }

    #[test]
    fn long_messages_are_truncated_on_a_char_boundary() {
        let long = "é".repeat(600);
        let t = truncate(&long, 501);
        assert!(t.len() <= 504);
        assert!(t.ends_with('…'));
    }
}
