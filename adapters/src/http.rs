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
/// and the session cache (both behind `Arc`). The verifier reads the root certificates
/// at the first TLS handshake ([`LazyVerifier`]): a process whose models are reached
/// over plain HTTP (a local server) never reads them.
fn shared_tls() -> Result<rustls::ClientConfig, String> {
    static TLS: OnceLock<Result<rustls::ClientConfig, String>> = OnceLock::new();
    TLS.get_or_init(|| {
        // Another part of the process may have installed a provider already: fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let provider = rustls::crypto::CryptoProvider::get_default()
            .cloned()
            .unwrap_or_else(|| Arc::new(rustls::crypto::ring::default_provider()));
        let verifier = LazyVerifier::new(provider.clone());
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

/// The platform's verifier, made when a handshake first needs it: reading and parsing
/// the system's root certificates costs several milliseconds of CPU (a fifth of a
/// one-call `keel exec`'s), wasted when every call goes over plain HTTP. Each check is
/// the platform verifier's own; if the certificates cannot be read, every handshake
/// fails with that reason.
#[derive(Debug)]
struct LazyVerifier {
    provider: Arc<rustls::crypto::CryptoProvider>,
    inner: OnceLock<Result<rustls_platform_verifier::Verifier, String>>,
}

impl LazyVerifier {
    fn new(provider: Arc<rustls::crypto::CryptoProvider>) -> Self {
        Self {
            provider,
            inner: OnceLock::new(),
        }
    }

    #[cfg(test)]
    fn loaded(&self) -> bool {
        self.inner.get().is_some()
    }

    fn get(&self) -> Result<&rustls_platform_verifier::Verifier, rustls::Error> {
        self.inner
            .get_or_init(|| {
                rustls_platform_verifier::Verifier::new(self.provider.clone())
                    .map_err(|e| format!("the system's root certificates could not be loaded: {e}"))
            })
            .as_ref()
            .map_err(|e| rustls::Error::General(e.clone()))
    }
}

impl rustls::client::danger::ServerCertVerifier for LazyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &rustls::pki_types::CertificateDer<'_>,
        intermediates: &[rustls::pki_types::CertificateDer<'_>],
        server_name: &rustls::pki_types::ServerName<'_>,
        ocsp_response: &[u8],
        now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        self.get()?
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.get()?.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        match self.get() {
            Ok(verifier) => verifier.supported_verify_schemes(),
            // The handshake fails at the certificate with the reason.
            Err(_) => self
                .provider
                .signature_verification_algorithms
                .supported_schemes(),
        }
    }
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

    /// The root certificates are read when a handshake needs them, not before.
    #[test]
    fn the_verifier_reads_the_roots_at_its_first_use() {
        use rustls::client::danger::ServerCertVerifier;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = LazyVerifier::new(provider);
        assert!(!verifier.loaded());
        let name = rustls::pki_types::ServerName::try_from("example.com").unwrap();
        let garbage = rustls::pki_types::CertificateDer::from(vec![1u8, 2, 3]);
        let verdict = verifier.verify_server_cert(
            &garbage,
            &[],
            &name,
            &[],
            rustls::pki_types::UnixTime::now(),
        );
        assert!(verdict.is_err());
        assert!(verifier.loaded());
    }

    /// Over HTTPS, the shared client still checks the server's certificate: a
    /// self-signed one on loopback is refused, with the reason.
    #[tokio::test]
    async fn a_self_signed_server_is_refused() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.signing_key.serialize_der().into());
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)
        .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                // The handshake fails on the client's side; nothing is served.
                let _ = acceptor.accept(tcp).await;
            }
        });
        let url = format!("https://localhost:{port}/v1/chat/completions");
        let client = HttpOptions::default().client(&url).unwrap();
        let err = client.post(&url).body("{}").send().await.unwrap_err();
        let chain = std::iter::successors(Some(&err as &(dyn std::error::Error + 'static)), |e| {
            e.source()
        })
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(": ");
        assert!(chain.contains("certificate"), "{chain}");
    }
}
