//! The tokens of remote clients: made from the OS's random source, shown once, kept
//! only as SHA-256 hashes in a file under `KEEL_HOME` (mode 0600, replaced atomically
//! under a lock), checked in constant time, and watched so that a revocation reaches
//! the open connections within a second.
//!
//! A token is `keel_` followed by 64 hexadecimal digits (256 random bits). The store
//! keeps, per token: an id (`tok_…`, what `list` shows and `revoke` takes), an optional
//! name, the role, an optional session it is bound to, when it was made, when it
//! expires and when it was revoked (a revoked token stays listed, so a client using it
//! is told it was revoked rather than unknown).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::watch;

use crate::roles::Role;

/// The store's file name under `KEEL_HOME`.
pub const TOKEN_FILE: &str = "serve-tokens.json";
/// Every token starts with this.
pub const TOKEN_PREFIX: &str = "keel_";
/// Random bytes per token.
const SECRET_BYTES: usize = 32;
/// How often a daemon looks at the store for revocations.
pub const POLL_EVERY: Duration = Duration::from_millis(100);
/// The largest store read (a store holds hashes, a few hundred bytes per token).
const MAX_STORE_BYTES: u64 = 4 * 1024 * 1024;

/// A token as shown once at creation. Its `Debug` form hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The token itself, to print once or send.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// One token of the store (never the token itself: its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TokenRecord {
    /// `tok_…`.
    pub id: String,
    /// A label given at creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// What it may do.
    pub role: Role,
    /// The one session it reaches, if bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Made, ms since the epoch.
    pub created_at: u64,
    /// Expires, ms since the epoch; never when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// Revoked, ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<u64>,
    /// `sha256:` and the hexadecimal SHA-256 of the token.
    pub hash: String,
}

/// Where a token stands at a moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenState {
    /// Usable.
    Active,
    /// Past its expiry.
    Expired,
    /// Revoked.
    Revoked,
}

impl TokenState {
    /// `active`, `expired`, `revoked`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenState::Active => "active",
            TokenState::Expired => "expired",
            TokenState::Revoked => "revoked",
        }
    }
}

impl TokenRecord {
    /// Its state at `now_ms`.
    pub fn state(&self, now_ms: u64) -> TokenState {
        if self.revoked_at.is_some() {
            TokenState::Revoked
        } else if self.expires_at.is_some_and(|e| now_ms >= e) {
            TokenState::Expired
        } else {
            TokenState::Active
        }
    }

    fn digest(&self) -> Option<[u8; 32]> {
        let hex = self.hash.strip_prefix("sha256:")?;
        let mut out = [0u8; 32];
        if hex.len() != 64 {
            return None;
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(out)
    }
}

/// The file's content.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct StoreFile {
    version: u32,
    tokens: Vec<TokenRecord>,
}

/// Why a presented token was refused. The reason strings are part of the protocol
/// (docs/protocol.md, Remote clients).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No token was presented.
    Missing,
    /// The token matches none of the store (a wrong or mistyped token).
    Unknown,
    /// The token is past its expiry.
    Expired,
    /// The token was revoked.
    Revoked,
    /// The store cannot be read or is unsafe; nothing is accepted.
    Store(String),
}

impl AuthFailure {
    /// The stable reason: `token_missing`, `token_unknown`, `token_expired`,
    /// `token_revoked`, `token_store_unusable`.
    pub fn reason(&self) -> &'static str {
        match self {
            AuthFailure::Missing => "token_missing",
            AuthFailure::Unknown => "token_unknown",
            AuthFailure::Expired => "token_expired",
            AuthFailure::Revoked => "token_revoked",
            AuthFailure::Store(_) => "token_store_unusable",
        }
    }

    /// One sentence for the client.
    pub fn message(&self) -> &'static str {
        match self {
            AuthFailure::Missing => {
                "a token is required (Authorization: Bearer, or a first auth message)"
            }
            AuthFailure::Unknown => "the token is not valid",
            AuthFailure::Expired => "the token has expired",
            AuthFailure::Revoked => "the token was revoked",
            AuthFailure::Store(_) => "the daemon cannot read its token store",
        }
    }
}

/// A failure of the store itself.
#[derive(Debug)]
pub struct StoreError(pub String);

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for StoreError {}

/// What a new token is for.
#[derive(Debug, Clone)]
pub struct NewToken {
    /// Its role.
    pub role: Role,
    /// The session it is bound to.
    pub session: Option<String>,
    /// How long it lives.
    pub expires_in: Option<Duration>,
    /// A label.
    pub name: Option<String>,
}

/// Milliseconds since the epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn sha256(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses `90s`, `30m`, `12h`, `7d`, `2w` (a whole number and a unit).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| {
        format!("{text:?} is not a duration: use a number and s, m, h, d or w (e.g. 12h, 7d)")
    })?;
    let secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => {
            return Err(format!(
                "{text:?} is not a duration: the unit must be s, m, h, d or w (e.g. 12h, 7d)"
            ))
        }
    };
    if n == 0 {
        return Err(format!("{text:?}: a token must live more than 0 {unit}"));
    }
    n.checked_mul(secs)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .map(Duration::from_secs)
        .ok_or_else(|| format!("{text:?} is too long (at most 100 years)"))
}

/// The token store at a path (usually `KEEL_HOME/serve-tokens.json`).
#[derive(Debug, Clone)]
pub struct TokenStore {
    path: PathBuf,
}

impl TokenStore {
    /// The store at `path`.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self { path: path.into() }
    }

    /// The store under `home` (`KEEL_HOME`).
    pub fn in_home(home: &Path) -> Self {
        Self::new(home.join(TOKEN_FILE))
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn dir(&self) -> PathBuf {
        match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
            _ => PathBuf::from("."),
        }
    }

    /// Every token, oldest first; none when the file does not exist. A file that
    /// others may write to (or that is not this user's) is refused: whoever can write
    /// it can let their own tokens in.
    pub fn load(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let uid = nix::unistd::getuid().as_raw();
        let shown = self.path.display();
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError(format!("cannot read {shown}: {e}"))),
        };
        if !meta.file_type().is_file() {
            return Err(StoreError(format!("{shown} is not a regular file")));
        }
        if meta.uid() != uid || meta.mode() & 0o022 != 0 {
            return Err(StoreError(format!(
                "{shown} may be written by others (owner {}, mode {:04o}); it must be this user's and mode 0600",
                meta.uid(),
                meta.mode() & 0o7777
            )));
        }
        if meta.len() > MAX_STORE_BYTES {
            return Err(StoreError(format!(
                "{shown} is larger than {MAX_STORE_BYTES} bytes"
            )));
        }
        let text = std::fs::read(&self.path)
            .map_err(|e| StoreError(format!("cannot read {shown}: {e}")))?;
        let file: StoreFile = serde_json::from_slice(&text)
            .map_err(|e| StoreError(format!("{shown} is not a token store: {e}")))?;
        if file.version != 1 {
            return Err(StoreError(format!(
                "{shown} has version {}; this keel reads version 1",
                file.version
            )));
        }
        Ok(file.tokens)
    }

    /// Runs `change` on the tokens under the store's lock and writes the result
    /// atomically (a new file of mode 0600 renamed over the old one).
    fn update<T>(
        &self,
        change: impl FnOnce(&mut Vec<TokenRecord>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let dir = self.dir();
        std::fs::create_dir_all(&dir)
            .map_err(|e| StoreError(format!("cannot create {}: {e}", dir.display())))?;
        let lock_path = crate::socket::lock_path(&self.path);
        let lock_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock_path)
            .map_err(|e| StoreError(format!("cannot open {}: {e}", lock_path.display())))?;
        let _lock = Flock::lock(lock_file, FlockArg::LockExclusive)
            .map_err(|(_, e)| StoreError(format!("cannot lock {}: {e}", lock_path.display())))?;
        let mut tokens = self.load()?;
        let out = change(&mut tokens)?;
        let body = serde_json::to_vec_pretty(&StoreFile { version: 1, tokens })
            .map_err(|e| StoreError(format!("cannot encode the token store: {e}")))?;
        let tmp = dir.join(format!(".{TOKEN_FILE}.{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = (|| {
            let mut f = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)?;
            f.write_all(&body)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)?;
            if let Ok(d) = std::fs::File::open(&dir) {
                let _ = d.sync_all();
            }
            Ok::<(), std::io::Error>(())
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(StoreError(format!(
                "cannot write {}: {e}",
                self.path.display()
            )));
        }
        Ok(out)
    }

    /// Makes a token: 256 bits from the OS's random source. Returns the token (to be
    /// shown once; only its hash is stored) and its record.
    pub fn create(&self, spec: NewToken) -> Result<(Secret, TokenRecord), StoreError> {
        let mut bytes = [0u8; SECRET_BYTES];
        getrandom::fill(&mut bytes)
            .map_err(|e| StoreError(format!("the OS random source failed: {e}")))?;
        let secret = Secret(format!("{TOKEN_PREFIX}{}", hex(&bytes)));
        let now = now_ms();
        let record = TokenRecord {
            id: format!("tok_{}", ulid::Ulid::new()),
            name: spec.name,
            role: spec.role,
            session: spec.session,
            created_at: now,
            expires_at: spec
                .expires_in
                .map(|d| now.saturating_add(d.as_millis() as u64)),
            revoked_at: None,
            hash: format!("sha256:{}", hex(&sha256(secret.expose()))),
        };
        let rec = record.clone();
        self.update(move |tokens| {
            if let Some(name) = &rec.name {
                if tokens
                    .iter()
                    .any(|t| t.name.as_ref() == Some(name) && t.revoked_at.is_none())
                {
                    return Err(StoreError(format!(
                        "a token named {name:?} exists; revoke it first or choose another --name"
                    )));
                }
            }
            tokens.push(rec);
            Ok(())
        })?;
        Ok((secret, record))
    }

    /// Revokes the token with this id, or the one unrevoked token with this name.
    pub fn revoke(&self, id_or_name: &str) -> Result<TokenRecord, StoreError> {
        self.update(|tokens| {
            let by_id = tokens.iter().position(|t| t.id == id_or_name);
            let by_name: Vec<usize> = tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| t.name.as_deref() == Some(id_or_name) && t.revoked_at.is_none())
                .map(|(i, _)| i)
                .collect();
            let i = match (by_id, by_name.as_slice()) {
                (Some(i), _) => i,
                (None, [i]) => *i,
                (None, []) => {
                    return Err(StoreError(format!(
                    "no token {id_or_name:?} (give an id or a name from `keel serve token list`)"
                )))
                }
                (None, _) => {
                    return Err(StoreError(format!(
                        "several tokens are named {id_or_name:?}; give the id"
                    )))
                }
            };
            let t = &mut tokens[i];
            if t.revoked_at.is_none() {
                t.revoked_at = Some(now_ms());
            }
            Ok(t.clone())
        })
    }

    /// Checks a presented token against the store as it is now.
    pub fn verify(&self, presented: &str) -> Result<TokenRecord, AuthFailure> {
        let tokens = self.load().map_err(|e| AuthFailure::Store(e.0))?;
        verify_in(&tokens, presented, now_ms())
    }
}

/// Checks `presented` against `tokens`: its hash is compared with every record's in
/// constant time, whatever matches.
pub fn verify_in(
    tokens: &[TokenRecord],
    presented: &str,
    now_ms: u64,
) -> Result<TokenRecord, AuthFailure> {
    if presented.is_empty() {
        return Err(AuthFailure::Missing);
    }
    let h = sha256(presented);
    let mut found: Option<&TokenRecord> = None;
    for t in tokens {
        let want = t.digest().unwrap_or([0u8; 32]);
        if bool::from(h.ct_eq(&want)) {
            found = Some(t);
        }
    }
    let t = found.ok_or(AuthFailure::Unknown)?;
    match t.state(now_ms) {
        TokenState::Active => Ok(t.clone()),
        TokenState::Expired => Err(AuthFailure::Expired),
        TokenState::Revoked => Err(AuthFailure::Revoked),
    }
}

/// The store as a daemon last read it.
#[derive(Debug, Clone)]
pub struct Snapshot(pub Arc<Result<Vec<TokenRecord>, String>>);

impl Snapshot {
    /// Where token `id` stands at `now_ms`: `None` when the store no longer has it
    /// or cannot be read (a connection using it ends).
    pub fn state(&self, id: &str, now_ms: u64) -> Option<TokenState> {
        match &*self.0 {
            Ok(tokens) => tokens.iter().find(|t| t.id == id).map(|t| t.state(now_ms)),
            Err(_) => None,
        }
    }
}

/// A daemon's view of the store, refreshed every [`POLL_EVERY`] while someone holds a
/// receiver.
#[derive(Debug, Clone)]
pub struct TokenWatch {
    store: TokenStore,
    tx: Arc<watch::Sender<Snapshot>>,
    rx: watch::Receiver<Snapshot>,
}

fn load_snapshot(store: &TokenStore) -> Snapshot {
    Snapshot(Arc::new(store.load().map_err(|e| e.0)))
}

fn fingerprint(path: &Path) -> Option<(u64, u64, i64, i64, u64)> {
    std::fs::metadata(path)
        .ok()
        .map(|m| (m.dev(), m.ino(), m.mtime(), m.mtime_nsec(), m.len()))
}

impl TokenWatch {
    /// Starts watching `store` (on the current tokio runtime).
    pub fn start(store: TokenStore) -> TokenWatch {
        let load = load_snapshot;
        let (tx, rx) = watch::channel(load(&store));
        let tx = Arc::new(tx);
        let polled = store.clone();
        let watch = TokenWatch {
            store,
            tx: tx.clone(),
            rx,
        };
        tokio::spawn(async move {
            let mut seen = fingerprint(polled.path());
            let mut tick = tokio::time::interval(POLL_EVERY);
            loop {
                tokio::select! {
                    _ = tx.closed() => return,
                    _ = tick.tick() => {}
                }
                let now = fingerprint(polled.path());
                if now != seen {
                    seen = now;
                    let snap = load(&polled);
                    if let Err(e) = &*snap.0 {
                        tracing::warn!(error = %e, "the token store cannot be used; remote connections end");
                    }
                    let _ = tx.send(snap);
                }
            }
        });
        watch
    }

    /// The store.
    pub fn store(&self) -> &TokenStore {
        &self.store
    }

    /// A receiver of every new snapshot, for a connection of token `id` (accepted
    /// from the file as it is now): a snapshot older than the token is refreshed first.
    pub fn subscribe(&self, id: &str) -> watch::Receiver<Snapshot> {
        if self.rx.borrow().state(id, now_ms()).is_none() {
            self.tx.send_replace(load_snapshot(&self.store));
        }
        self.rx.clone()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn spec(role: Role) -> NewToken {
        NewToken {
            role,
            session: None,
            expires_in: None,
            name: None,
        }
    }

    #[test]
    fn a_token_is_256_random_bits_stored_only_as_its_hash_in_a_0600_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        let (a, ra) = store.create(spec(Role::Observer)).unwrap();
        let (b, _) = store.create(spec(Role::Controller)).unwrap();
        assert_ne!(a, b);
        assert_eq!(a.expose().len(), TOKEN_PREFIX.len() + 64);
        assert!(a.expose()[5..].chars().all(|c| c.is_ascii_hexdigit()));
        let text = std::fs::read_to_string(store.path()).unwrap();
        assert!(!text.contains(&a.expose()[5..]) && !text.contains(&b.expose()[5..]));
        let mode = std::fs::metadata(store.path())
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(store.verify(a.expose()).unwrap().id, ra.id);
        assert_eq!(store.verify(b.expose()).unwrap().role, Role::Controller);
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    #[test]
    fn wrong_expired_and_revoked_tokens_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        let (t, rec) = store.create(spec(Role::Approver)).unwrap();
        assert_eq!(store.verify(""), Err(AuthFailure::Missing));
        assert_eq!(store.verify("keel_00"), Err(AuthFailure::Unknown));
        let mut wrong = t.expose().to_owned();
        wrong.pop();
        wrong.push(if t.expose().ends_with('0') { '1' } else { '0' });
        assert_eq!(store.verify(&wrong), Err(AuthFailure::Unknown));
        let later = rec.created_at + 1000;
        let mut expiring = rec.clone();
        expiring.expires_at = Some(later);
        assert!(verify_in(&[expiring.clone()], t.expose(), later - 1).is_ok());
        assert_eq!(
            verify_in(&[expiring], t.expose(), later),
            Err(AuthFailure::Expired)
        );
        store.revoke(&rec.id).unwrap();
        assert_eq!(store.verify(t.expose()), Err(AuthFailure::Revoked));
        assert!(store.revoke("tok_nothing").is_err());
    }

    #[test]
    fn names_are_unique_among_live_tokens_and_revoke_takes_a_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        let named = |n: &str| NewToken {
            name: Some(n.into()),
            ..spec(Role::Observer)
        };
        store.create(named("phone")).unwrap();
        assert!(store.create(named("phone")).is_err());
        assert_eq!(
            store.revoke("phone").unwrap().name.as_deref(),
            Some("phone")
        );
        store.create(named("phone")).unwrap();
        assert_eq!(store.load().unwrap().len(), 2);
    }

    #[test]
    fn a_store_others_may_write_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::in_home(dir.path());
        let (t, _) = store.create(spec(Role::Observer)).unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o666)).unwrap();
        assert!(matches!(
            store.verify(t.expose()),
            Err(AuthFailure::Store(_))
        ));
        std::fs::write(store.path(), "not json").unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(store.load().is_err());
    }

    #[test]
    fn durations_take_a_number_and_a_unit() {
        assert_eq!(parse_duration("90s").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("12h").unwrap(), Duration::from_secs(43_200));
        assert_eq!(
            parse_duration("2w").unwrap(),
            Duration::from_secs(1_209_600)
        );
        for bad in ["", "12", "h", "1.5h", "0d", "-1d", "5y", "999999999999w"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }
}
