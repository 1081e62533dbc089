//! Where sessions are kept: the `store` key of `$KEEL_HOME/config.toml`, `KEEL_STORE`
//! in the environment and `--store` on the command line, all read by [`parse_store`].
//! A directory (absolute) is a file store; `postgres://…` or `postgresql://…` is a
//! PostgreSQL database several nodes may share. The URL itself is checked when the
//! store is opened (a clear error at start-up and in `keel doctor`). `leaseTtlSecs`
//! is how long a node's lease on a session lasts in a shared store.

use std::path::PathBuf;

/// Default of `leaseTtlSecs`.
pub const DEFAULT_LEASE_TTL_SECS: u64 = 10;

/// A selected store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSetting {
    /// Files under this directory.
    Dir(PathBuf),
    /// A PostgreSQL URL (with its password, if it has one: never print it whole).
    Postgres(String),
}

impl StoreSetting {
    /// The setting as it may be shown: a PostgreSQL URL without its password.
    pub fn describe(&self) -> String {
        match self {
            StoreSetting::Dir(d) => d.display().to_string(),
            StoreSetting::Postgres(url) => redact(url),
        }
    }
}

/// `url` with the password of its user part, if any, replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (auth, tail) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    match auth.rsplit_once('@') {
        Some((user, host)) => match user.split_once(':') {
            Some((name, _)) => format!("{scheme}://{name}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// Reads a store setting: an absolute directory, or a `postgres://` /
/// `postgresql://` URL; anything else is an error saying what is accepted.
pub fn parse_store(value: &str) -> Result<StoreSetting, String> {
    let v = value.trim();
    if v.is_empty() {
        return Err("is empty: give a directory (/home/me/.local/share/keel) or a PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/DATABASE)".into());
    }
    if v.starts_with("postgres://") || v.starts_with("postgresql://") {
        return Ok(StoreSetting::Postgres(v.to_owned()));
    }
    if let Some((scheme, _)) = v.split_once("://") {
        return Err(format!(
            "{scheme}:// is not a store Keel can use: give a directory or a PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/DATABASE)"
        ));
    }
    let path = PathBuf::from(v);
    if !path.is_absolute() {
        return Err(format!(
            "{v} is not an absolute directory: give one (/home/me/.local/share/keel) or a PostgreSQL URL (postgres://USER:PASSWORD@HOST:5432/DATABASE)"
        ));
    }
    Ok(StoreSetting::Dir(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_and_urls_are_read_and_the_rest_refused() {
        assert_eq!(
            parse_store("/var/lib/keel"),
            Ok(StoreSetting::Dir("/var/lib/keel".into()))
        );
        assert_eq!(
            parse_store(" postgres://k@db/keel "),
            Ok(StoreSetting::Postgres("postgres://k@db/keel".into()))
        );
        assert!(matches!(
            parse_store("postgresql:///keel?host=/run/pg"),
            Ok(StoreSetting::Postgres(_))
        ));
        for bad in [
            "",
            "  ",
            "sessions",
            "./keel",
            "mysql://u@h/db",
            "redis://h",
        ] {
            let e = parse_store(bad).expect_err(bad);
            assert!(e.contains("postgres://"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn passwords_are_not_shown() {
        let s = parse_store("postgres://keel:s3cret@db:5432/sessions").expect("url");
        assert_eq!(s.describe(), "postgres://keel:***@db:5432/sessions");
        assert_eq!(redact("postgres://keel@db/x"), "postgres://keel@db/x");
        assert_eq!(redact("postgres:///x?host=/run"), "postgres:///x?host=/run");
    }
}
