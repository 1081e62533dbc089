//! The daemon's own settings: the `[serve]` table of `$KEEL_HOME/config.toml` (the
//! remote listener's address, certificate and key, allowed origins and limits), read
//! here rather than with the rest of the configuration, and only from the user's own
//! file: a project's configuration cannot open a network listener.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::tokens::TokenStore;

/// How long a browser has to send its `auth` message, by default.
pub const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a remote connection is pinged, by default.
pub const PING_INTERVAL: Duration = Duration::from_secs(30);

/// `ws://HOST:PORT` or `wss://HOST:PORT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenAddr {
    /// `wss://`.
    pub tls: bool,
    /// The host (an address or a name; an IPv6 address without its brackets).
    pub host: String,
    /// The port (0: any free one).
    pub port: u16,
}

impl ListenAddr {
    /// Parses `ws://HOST:PORT` or `wss://HOST:PORT` (a path other than `/` is refused).
    pub fn parse(text: &str) -> Result<ListenAddr, String> {
        let bad = |why: &str| {
            format!(
                "{text:?} is not a listen address ({why}): use ws://HOST:PORT or wss://HOST:PORT"
            )
        };
        let (tls, rest) = if let Some(r) = text.strip_prefix("wss://") {
            (true, r)
        } else if let Some(r) = text.strip_prefix("ws://") {
            (false, r)
        } else {
            return Err(bad("the scheme must be ws or wss"));
        };
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.contains('/') || rest.contains('?') || rest.contains('#') || rest.contains('@') {
            return Err(bad("no path, query or user part"));
        }
        let (host, port) = if let Some(r) = rest.strip_prefix('[') {
            let (h, p) = r.split_once(']').ok_or_else(|| bad("an unclosed ["))?;
            (
                h,
                p.strip_prefix(':')
                    .ok_or_else(|| bad("a port is required"))?,
            )
        } else {
            rest.rsplit_once(':')
                .ok_or_else(|| bad("a port is required"))?
        };
        if host.is_empty() {
            return Err(bad("a host is required"));
        }
        let port = port
            .parse::<u16>()
            .map_err(|_| bad("the port must be 0 to 65535"))?;
        Ok(ListenAddr {
            tls,
            host: host.to_owned(),
            port,
        })
    }

    /// The address as a URL with `port`.
    pub fn url_with_port(&self, port: u16) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{}://{host}:{port}", if self.tls { "wss" } else { "ws" })
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.url_with_port(self.port))
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RawServe {
    listen: Option<String>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    allowed_origins: Option<Vec<String>>,
    queue_capacity: Option<usize>,
    max_message_bytes: Option<usize>,
    auth_timeout_secs: Option<u64>,
    ping_interval_secs: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct RawFile {
    serve: Option<toml::Value>,
}

/// The `[serve]` settings (see docs/configuration.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServeConfig {
    /// `listen`: the remote listener (`--listen` wins).
    pub listen: Option<ListenAddr>,
    /// `tlsCert`: the certificate chain (PEM) for `wss://`.
    pub tls_cert: Option<PathBuf>,
    /// `tlsKey`: its private key (PEM).
    pub tls_key: Option<PathBuf>,
    /// `allowedOrigins`: the browser origins allowed to connect.
    pub allowed_origins: Vec<String>,
    /// `queueCapacity`: live events a connection may have waiting unread.
    pub queue_capacity: Option<usize>,
    /// `maxMessageBytes`: the longest command line or message.
    pub max_message_bytes: Option<usize>,
    /// `authTimeoutSecs`: a browser's time to send `auth`.
    pub auth_timeout: Duration,
    /// `pingIntervalSecs`: how often remote connections are pinged.
    pub ping_interval: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        Self {
            listen: None,
            tls_cert: None,
            tls_key: None,
            allowed_origins: Vec::new(),
            queue_capacity: None,
            max_message_bytes: None,
            auth_timeout: AUTH_TIMEOUT,
            ping_interval: PING_INTERVAL,
        }
    }
}

/// Normalizes an allowed origin (`scheme://host[:port]`, lower-cased), or says why it
/// is not one.
fn origin(text: &str) -> Result<String, String> {
    let o = text.trim().to_ascii_lowercase();
    let rest = o
        .strip_prefix("https://")
        .or_else(|| o.strip_prefix("http://"))
        .ok_or_else(|| {
            format!("serve.allowedOrigins: {text:?} must start with https:// or http://")
        })?;
    if rest.is_empty() || rest.contains('/') || rest.contains('*') || rest.contains('@') {
        return Err(format!(
            "serve.allowedOrigins: {text:?} must be scheme://host[:port], with no path and no wildcard"
        ));
    }
    Ok(o)
}

impl ServeConfig {
    /// Reads `[serve]` from `home/config.toml`; no file or no table gives the defaults.
    /// Relative paths are relative to `home`.
    pub fn load(home: &Path) -> Result<ServeConfig, String> {
        let file = home.join("config.toml");
        let text = match std::fs::read_to_string(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(e) => return Err(format!("cannot read {}: {e}", file.display())),
        };
        Self::parse(&text, home).map_err(|e| format!("{}: {e}", file.display()))
    }

    /// Parses a whole configuration file's `[serve]` table.
    pub fn parse(text: &str, home: &Path) -> Result<ServeConfig, String> {
        let raw: RawFile = toml::from_str(text).map_err(|e| e.message().to_owned())?;
        let Some(table) = raw.serve else {
            return Ok(Self::default());
        };
        let raw: RawServe = table
            .try_into()
            .map_err(|e: toml::de::Error| format!("[serve]: {}", e.message()))?;
        let path = |p: PathBuf| if p.is_absolute() { p } else { home.join(p) };
        let positive = |key: &str, v: u64| {
            if v == 0 {
                Err(format!("serve.{key} must be at least 1"))
            } else {
                Ok(Duration::from_secs(v))
            }
        };
        if raw.queue_capacity == Some(0) {
            return Err("serve.queueCapacity must be at least 1".into());
        }
        if raw.max_message_bytes.is_some_and(|n| n < 1024) {
            return Err("serve.maxMessageBytes must be at least 1024".into());
        }
        Ok(ServeConfig {
            listen: raw.listen.as_deref().map(ListenAddr::parse).transpose()?,
            tls_cert: raw.tls_cert.map(path),
            tls_key: raw.tls_key.map(path),
            allowed_origins: raw
                .allowed_origins
                .unwrap_or_default()
                .iter()
                .map(|o| origin(o))
                .collect::<Result<_, _>>()?,
            queue_capacity: raw.queue_capacity,
            max_message_bytes: raw.max_message_bytes,
            auth_timeout: raw
                .auth_timeout_secs
                .map_or(Ok(AUTH_TIMEOUT), |v| positive("authTimeoutSecs", v))?,
            ping_interval: raw
                .ping_interval_secs
                .map_or(Ok(PING_INTERVAL), |v| positive("pingIntervalSecs", v))?,
        })
    }

    /// The remote listener's options for `listen`, with the tokens of `store`.
    pub fn remote(&self, listen: ListenAddr, store: TokenStore) -> Result<RemoteOptions, String> {
        let tls = if listen.tls {
            match (&self.tls_cert, &self.tls_key) {
                (Some(c), Some(k)) => Some((c.clone(), k.clone())),
                _ => {
                    return Err(format!(
                        "{listen} needs a certificate and a key: set serve.tlsCert and serve.tlsKey in $KEEL_HOME/config.toml"
                    ))
                }
            }
        } else {
            None
        };
        Ok(RemoteOptions {
            listen,
            tls,
            allowed_origins: self.allowed_origins.clone(),
            tokens: store,
            auth_timeout: self.auth_timeout,
            ping_interval: self.ping_interval,
        })
    }
}

/// Everything the remote listener needs.
#[derive(Debug, Clone)]
pub struct RemoteOptions {
    /// Where to listen.
    pub listen: ListenAddr,
    /// The certificate chain and key files, for `wss://`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// Browser origins allowed (normalized); an upgrade with another `Origin` is
    /// refused, one without `Origin` (not a browser) is not.
    pub allowed_origins: Vec<String>,
    /// The token store.
    pub tokens: TokenStore,
    /// A browser's time to send `auth`.
    pub auth_timeout: Duration,
    /// How often connections are pinged.
    pub ping_interval: Duration,
}

impl RemoteOptions {
    /// Whether an upgrade's `Origin` header value is allowed.
    pub fn origin_allowed(&self, value: &str) -> bool {
        let v = value.trim().to_ascii_lowercase();
        self.allowed_origins.contains(&v)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md"),
        )
        .unwrap();
        let example = doc
            .split("```toml\n")
            .nth(1)
            .unwrap()
            .split("```")
            .next()
            .unwrap();
        let home = Path::new("/home/u/.local/share/keel");
        let c = ServeConfig::parse(example, home).unwrap();
        assert_eq!(
            c.listen,
            Some(ListenAddr::parse("wss://0.0.0.0:8443").unwrap())
        );
        assert_eq!(
            c.tls_key.as_deref(),
            Some(home.join("tls/key.pem").as_path())
        );
        assert_eq!(
            c.allowed_origins,
            vec!["https://keel.example.com".to_owned()]
        );
    }

    #[test]
    fn listen_addresses_need_a_scheme_a_host_and_a_port() {
        let a = ListenAddr::parse("wss://0.0.0.0:8443").unwrap();
        assert!(a.tls);
        assert_eq!((a.host.as_str(), a.port), ("0.0.0.0", 8443));
        let b = ListenAddr::parse("ws://[::1]:0/").unwrap();
        assert_eq!((b.host.as_str(), b.port, b.tls), ("::1", 0, false));
        assert_eq!(b.url_with_port(7), "ws://[::1]:7");
        for bad in [
            "http://h:1",
            "ws://h",
            "ws://:1",
            "ws://h:99999",
            "ws://h:1/path",
            "ws://u@h:1",
            "ws://[::1:1",
        ] {
            assert!(ListenAddr::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_serve_table_is_read_strictly() {
        let home = Path::new("/home/u/.keel");
        let c = ServeConfig::parse(
            "model = \"x\"\n[serve]\nlisten = \"wss://127.0.0.1:9\"\ntlsCert = \"cert.pem\"\ntlsKey = \"/k.pem\"\nallowedOrigins = [\"https://App.Example\"]\npingIntervalSecs = 5\n",
            home,
        )
        .unwrap();
        assert_eq!(c.tls_cert.as_deref(), Some(home.join("cert.pem").as_path()));
        assert_eq!(c.allowed_origins, vec!["https://app.example".to_owned()]);
        assert_eq!(c.ping_interval, Duration::from_secs(5));
        let remote = c
            .remote(c.listen.clone().unwrap(), TokenStore::in_home(home))
            .unwrap();
        assert!(remote.origin_allowed("https://app.example"));
        assert!(!remote.origin_allowed("https://evil.example"));
        assert!(!remote.origin_allowed("null"));
        assert_eq!(
            ServeConfig::parse("", home).unwrap(),
            ServeConfig::default()
        );
        for bad in [
            "[serve]\nlisten = \"tcp://x:1\"",
            "[serve]\nport = 1",
            "[serve]\nallowedOrigins = [\"*\"]",
            "[serve]\nallowedOrigins = [\"https://a/b\"]",
            "[serve]\nqueueCapacity = 0",
            "[serve]\npingIntervalSecs = 0",
            "[serve]\nmaxMessageBytes = 10",
        ] {
            assert!(ServeConfig::parse(bad, home).is_err(), "{bad}");
        }
        let no_tls = ServeConfig::default();
        let e = no_tls
            .remote(
                ListenAddr::parse("wss://h:1").unwrap(),
                TokenStore::in_home(home),
            )
            .unwrap_err();
        assert!(e.contains("tlsCert"), "{e}");
    }
}
