//! The environment, looked up through a map, and the default `KEEL_HOME` it gives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Environment variables, looked up through a map so callers (and tests) choose
/// where they come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvMap(HashMap<String, String>);

impl EnvMap {
    /// The process environment (variables that are not valid Unicode are skipped).
    pub fn from_process() -> Self {
        Self(
            std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        )
    }

    /// A map of the given pairs.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        )
    }

    /// A variable's value; empty values count as unset.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }
}

/// The default `KEEL_HOME`: `$KEEL_HOME`, else `$XDG_DATA_HOME/keel`, else the
/// platform data directory + `keel` (e.g. `~/.local/share/keel`).
pub fn default_keel_home(env: &EnvMap) -> Option<PathBuf> {
    if let Some(home) = env.get("KEEL_HOME") {
        return Some(PathBuf::from(home));
    }
    if let Some(xdg) = env.get("XDG_DATA_HOME") {
        return Some(Path::new(xdg).join("keel"));
    }
    dirs::data_dir().map(|d| d.join("keel"))
}
