//! The shared HTTP streaming call: sending, retries with backoff, reading the
//! server-sent events, cancellation. Providers plug in a decoder that turns
//! events into [`ModelEvent`]s.

use std::collections::VecDeque;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use keel_config::RetryPolicy;
use keel_kernel::model::{ModelError, ModelEvent, ModelStream};
use reqwest::header::HeaderMap;
use tokio_util::sync::CancellationToken;

use crate::error::{classify_status, classify_transport, network_failure, Failure};
use crate::sse::{SseEvent, SseParser};

/// Longest error body read from a failed response.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Transport settings shared by the HTTP providers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOptions {
    /// Retry policy for retryable failures before any content was streamed.
    pub retry: RetryPolicy,
    /// Time allowed to establish a connection.
    pub connect_timeout: Duration,
    /// Longest silence allowed while waiting for response bytes.
    pub idle_timeout: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(300),
        }
    }
}

impl HttpOptions {
    /// An HTTP client for `base_url`. System proxies (`HTTPS_PROXY`, …) are used,
    /// except for loopback addresses, which are always reached directly.
    ///
    /// Clients are shared: every model of the process with the same connect timeout
    /// and the same kind of address (loopback or not) uses one client, so one pool of
    /// connections, kept alive between calls, rather than a client (with its pool,
    /// its connections' buffers and its TLS state) per session. The proxy settings are
    /// read when the first such client is made.
    pub(crate) fn client(&self, base_url: &str) -> Result<reqwest::Client, String> {
        type Clients = std::collections::HashMap<(Duration, bool), reqwest::Client>;
        static CLIENTS: OnceLock<std::sync::Mutex<Clients>> = OnceLock::new();
        let loopback = is_loopback(base_url);
        let key = (self.connect_timeout, loopback);
        let mut clients = CLIENTS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(&key) {
            return Ok(c.clone());
        }
        let mut builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .tls_backend_preconfigured(shared_tls()?);
        if loopback {
            builder = builder.no_proxy();
        }
        let client = builder.build().map_err(|e| e.to_string())?;
        clients.insert(key, client.clone());
        Ok(client)
    }
}

/// The TLS settings every HTTP client of the process starts from: what reqwest builds
/// by default (the platform's verifier over the system's root certificates, TLS 1.2
/// and 1.3, HTTP/1.1), made once. A client building its own reads and parses every
/// root certificate again and keeps its own copy and session cache: about 170 KB per
/// model, so per session in a bridge running many. A copy of this shares the verifier
/// and the session cache (both behind `Arc`).
fn shared_tls() -> Result<rustls::ClientConfig, String> {
    static TLS: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    TLS.get_or_init(|| {
        // Another part of the process may have installed a provider already: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|e| format!("the system's root certificates could not be loaded: {e}"))?;
        let mut tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(rustls::ALL_VERSIONS)
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        tls.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(tls)
    })
    .clone()
}

fn is_loopback(base_url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(base_url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Turns a provider's server-sent events into model events.
pub trait Decoder: Send {
    /// Handles one event, appending what it produced to `out`.
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<(), Failure>;
    /// Whether the terminal event was seen (`Finished` emitted).
    fn is_done(&self) -> bool;
}

/// One streaming POST, retried as needed.
pub(crate) struct HttpCall {
    pub provider: &'static str,
    pub client: reqwest::Client,
    pub url: String,
    pub headers: HeaderMap,
    /// Shared by the attempts (a retry copies no byte of it).
    pub body: bytes::Bytes,
    pub options: HttpOptions,
    pub new_decoder: Box<dyn Fn() -> Box<dyn Decoder> + Send>,
}

enum Phase {
    Connect,
    Wait(Duration),
    Stream(reqwest::Response),
    Done,
}

struct Driver {
    call: HttpCall,
    cancel: CancellationToken,
    phase: Phase,
    failed_attempts: u32,
    pending: VecDeque<Result<ModelEvent, ModelError>>,
    parser: SseParser,
    decoder: Box<dyn Decoder>,
    content_emitted: bool,
    /// When the current attempt was sent.
    started: Instant,
    /// Its response's status, and when its headers came (ms after `started`).
    status: u16,
    headers_ms: u64,
}

/// Runs the call as a model stream.
pub(crate) fn run(call: HttpCall, cancel: CancellationToken) -> ModelStream {
    let decoder = (call.new_decoder)();
    let driver = Driver {
        call,
        cancel,
        phase: Phase::Connect,
        failed_attempts: 0,
        pending: VecDeque::new(),
        parser: SseParser::new(),
        decoder,
        content_emitted: false,
        started: Instant::now(),
        status: 0,
        headers_ms: 0,
    };
    Box::pin(futures::stream::unfold(driver, |mut d| async move {
        let item = d.next().await?;
        Some((item, d))
    }))
}

impl Driver {
    async fn next(&mut self) -> Option<Result<ModelEvent, ModelError>> {
        loop {
            if self.cancel.is_cancelled() {
                if !matches!(self.phase, Phase::Done) {
                    self.log_cancelled();
                }
                self.phase = Phase::Done;
                self.pending.clear();
                return None;
            }
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Connect => self.connect().await?,
                Phase::Wait(delay) => {
                    tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => {
                            self.log_cancelled();
                            return None;
                        }
                        _ = tokio::time::sleep(delay) => self.phase = Phase::Connect,
                    }
                }
                Phase::Stream(mut response) => {
                    let idle = self.call.options.idle_timeout;
                    let chunk = tokio::select! {
                        biased;
                        _ = self.cancel.cancelled() => {
                            self.log_cancelled();
                            return None;
                        }
                        c = tokio::time::timeout(idle, response.chunk()) => c,
                    };
                    match chunk {
                        Err(_) => self.fail(network_failure(
                            self.call.provider,
                            format!(
                                "sent nothing for {} s; the stream was abandoned",
                                idle.as_secs()
                            ),
                        )),
                        Ok(Err(e)) => self.fail(classify_transport(self.call.provider, &e)),
                        Ok(Ok(Some(bytes))) => {
                            let events = self.parser.push(&bytes);
                            if self.feed(events) {
                                self.phase = Phase::Stream(response);
                            }
                        }
                        Ok(Ok(None)) => self.end_of_body(),
                    }
                }
            }
        }
    }

    /// Sends the request. Returns `None` when cancelled.
    async fn connect(&mut self) -> Option<()> {
        self.started = Instant::now();
        tracing::info!(
            provider = self.call.provider,
            url = %loggable_url(&self.call.url),
            attempt = self.failed_attempts + 1,
            bytes = self.call.body.len(),
            "model request sent"
        );
        let request = self
            .call
            .client
            .post(&self.call.url)
            .headers(self.call.headers.clone())
            .body(self.call.body.clone());
        let idle = self.call.options.idle_timeout;
        let sent = tokio::select! {
            biased;
            _ = self.cancel.cancelled() => {
                self.log_cancelled();
                return None;
            }
            r = tokio::time::timeout(idle, request.send()) => r,
        };
        let response = match sent {
            Err(_) => {
                self.fail(network_failure(
                    self.call.provider,
                    format!("sent no response for {} s", idle.as_secs()),
                ));
                return Some(());
            }
            Ok(Err(e)) => {
                self.fail(classify_transport(self.call.provider, &e));
                return Some(());
            }
            Ok(Ok(r)) => r,
        };
        let status = response.status().as_u16();
        self.status = status;
        self.headers_ms = self.elapsed_ms();
        // A success is logged once, when its stream ends (with the time to these
        // headers); a failure here, with its status.
        if (200..300).contains(&status) {
            tracing::debug!(
                provider = self.call.provider,
                status,
                elapsed_ms = self.headers_ms,
                "model response headers received"
            );
        } else {
            tracing::info!(
                provider = self.call.provider,
                status,
                elapsed_ms = self.headers_ms,
                "model response headers received"
            );
        }
        if (200..300).contains(&status) {
            self.parser = SseParser::new();
            self.decoder = (self.call.new_decoder)();
            self.phase = Phase::Stream(response);
            return Some(());
        }
        let retry_after = crate::error::retry_after(response.headers());
        let body = self.read_error_body(response).await?;
        self.fail(classify_status(
            self.call.provider,
            status,
            &body,
            retry_after,
        ));
        Some(())
    }

    /// Reads at most [`MAX_ERROR_BODY`] bytes of an error body. `None` when cancelled.
    async fn read_error_body(&mut self, mut response: reqwest::Response) -> Option<String> {
        let mut body = Vec::new();
        loop {
            let chunk = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return None,
                c = tokio::time::timeout(self.call.options.idle_timeout, response.chunk()) => c,
            };
            match chunk {
                Ok(Ok(Some(bytes))) => {
                    body.extend_from_slice(&bytes);
                    if body.len() >= MAX_ERROR_BODY {
                        body.truncate(MAX_ERROR_BODY);
                        break;
                    }
                }
                _ => break,
            }
        }
        Some(String::from_utf8_lossy(&body).into_owned())
    }

    /// The body ended: the stream must be complete, possibly thanks to a last event
    /// without its blank line. Anything else (including a last event cut in the
    /// middle of its JSON) is a cut connection.
    fn end_of_body(&mut self) {
        let mut out = Vec::new();
        let mut clean = true;
        for event in self.parser.finish() {
            if self.decoder.on_event(event, &mut out).is_err() {
                clean = false;
                break;
            }
        }
        self.push_events(out);
        if clean && self.decoder.is_done() {
            self.log_finished();
            self.phase = Phase::Done;
        } else {
            self.fail(network_failure(
                self.call.provider,
                "closed the stream before it was complete",
            ));
        }
    }

    /// Feeds events to the decoder. Returns whether the stream goes on.
    fn feed(&mut self, events: Vec<SseEvent>) -> bool {
        let mut out = Vec::new();
        for event in events {
            let result = self.decoder.on_event(event, &mut out);
            self.push_events(std::mem::take(&mut out));
            if let Err(f) = result {
                self.fail(f);
                return false;
            }
            if self.decoder.is_done() {
                self.log_finished();
                self.phase = Phase::Done;
                return false;
            }
        }
        true
    }

    fn push_events(&mut self, events: Vec<ModelEvent>) {
        for e in events {
            if matches!(
                e,
                ModelEvent::TextDelta(_) | ModelEvent::ThoughtDelta(_) | ModelEvent::ToolCall(_)
            ) {
                self.content_emitted = true;
            }
            self.pending.push_back(Ok(e));
        }
    }

    /// Records a failed attempt: schedules a retry or ends the stream with the error.
    fn fail(&mut self, failure: Failure) {
        let retry = &self.call.options.retry;
        if failure.payload.retryable
            && !self.content_emitted
            && self.failed_attempts < retry.max_retries
        {
            self.failed_attempts += 1;
            let delay = retry.delay(self.failed_attempts, failure.retry_after);
            tracing::warn!(
                provider = self.call.provider,
                attempt = self.failed_attempts,
                delay_ms = delay.as_millis() as u64,
                elapsed_ms = self.elapsed_ms(),
                error = %failure.payload.message,
                "model call failed; retrying"
            );
            self.pending.push_back(Ok(ModelEvent::Retrying {
                attempt: self.failed_attempts,
                delay_ms: delay.as_millis() as u64,
                error: failure.payload,
            }));
            self.phase = Phase::Wait(delay);
        } else {
            tracing::warn!(
                provider = self.call.provider,
                attempts = self.failed_attempts + 1,
                elapsed_ms = self.elapsed_ms(),
                retryable = failure.payload.retryable,
                content_emitted = self.content_emitted,
                error = %failure.payload.message,
                "model call failed"
            );
            self.pending.push_back(Err(failure.into()));
            self.phase = Phase::Done;
        }
    }

    fn elapsed_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn log_finished(&self) {
        tracing::info!(
            provider = self.call.provider,
            status = self.status,
            headers_ms = self.headers_ms,
            elapsed_ms = self.elapsed_ms(),
            "model stream finished"
        );
    }

    fn log_cancelled(&self) {
        tracing::info!(
            provider = self.call.provider,
            elapsed_ms = self.elapsed_ms(),
            "model call cancelled"
        );
    }
}

/// The URL without its query, fragment or user information (which could hold a key),
/// for logs.
fn loggable_url(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(u) => {
            format!(
                "{}://{}{}",
                u.scheme(),
                u.host_str().unwrap_or(""),
                u.port().map(|p| format!(":{p}")).unwrap_or_default()
            ) + u.path()
        }
        Err(_) => "(unparsable URL)".to_owned(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn logged_urls_carry_no_secrets() {
        assert_eq!(
            loggable_url("https://user:pw@example.com:8443/v1/chat?api-key=sk#x"),
            "https://example.com:8443/v1/chat"
        );
        assert_eq!(loggable_url("not a url"), "(unparsable URL)");
    }
}
