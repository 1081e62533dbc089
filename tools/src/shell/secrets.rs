//! Well-known secret locations: reading them is rated high whatever the program.

/// Files under `/etc` that hold password hashes or privilege rules.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "master.passwd",
    "security/opasswd",
];

/// Directories (as path components) that hold credentials wherever they are.
const SECRET_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".kube",
    ".gnupg",
    ".azure",
    ".password-store",
];

/// Files (basenames) that hold credentials.
const SECRET_FILES: &[&str] = &[
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".npmrc",
    ".pgpass",
    ".my.cnf",
    ".vault-token",
    ".terraformrc",
];

/// Pairs of consecutive components that name a credential store (`.config/gcloud`).
const SECRET_PAIRS: &[(&str, &str)] = &[
    (".config", "gcloud"),
    (".config", "gh"),
    (".docker", "config.json"),
    (".cargo", "credentials"),
    (".cargo", "credentials.toml"),
    ("keyrings", ""),
    ("Keychains", ""),
];

/// Whether `path` (as written in a command: `~/.ssh/id_rsa`, `/etc/shadow`,
/// `$HOME/.aws/credentials`) names a well-known secret location. Purely textual; the
/// caller checks that it is outside the workspace.
pub(super) fn is_secret_path(path: &str) -> bool {
    let path = normalize_home(path);
    let comps: Vec<&str> = path
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    if path.starts_with('/') {
        if let Some(rest) = path.strip_prefix("/etc/") {
            let rest = rest.trim_start_matches('/');
            if ETC_SECRETS.contains(&rest)
                || rest.starts_with("sudoers.d")
                || rest.starts_with("ssl/private")
                || (rest.starts_with("ssh/") && rest.contains("key") && !rest.ends_with(".pub"))
            {
                return true;
            }
        }
        if comps.first() == Some(&"root") {
            return true;
        }
        if comps.first() == Some(&"proc") && comps.last().is_some_and(|c| *c == "environ") {
            return true;
        }
    }
    if comps.iter().any(|c| SECRET_DIRS.contains(c)) {
        return true;
    }
    for pair in comps.windows(2) {
        if SECRET_PAIRS
            .iter()
            .any(|(a, b)| pair[0] == *a && (b.is_empty() || pair[1] == *b))
        {
            return true;
        }
    }
    if comps
        .last()
        .is_some_and(|c| SECRET_PAIRS.iter().any(|(a, b)| b.is_empty() && c == a))
    {
        return true;
    }
    let Some(base) = comps.last() else {
        return false;
    };
    SECRET_FILES.contains(base)
        || ["id_rsa", "id_ed25519", "id_ecdsa", "id_dsa"]
            .iter()
            .any(|k| base.starts_with(k) && !base.ends_with(".pub"))
        || *base == ".env"
        || base.starts_with(".env.")
}

/// `$HOME/x` and `${HOME}/x` are `~/x`.
fn normalize_home(path: &str) -> String {
    for prefix in ["${HOME}", "$HOME"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            return format!("~{rest}");
        }
    }
    path.to_owned()
}

/// The path-like parts of one argument: the word itself, the value of `--opt=VALUE`
/// and `key=VALUE` (`dd if=…`), and the file of `@FILE` (`curl -d @…`).
pub(super) fn path_candidates(word: &str) -> Vec<&str> {
    let mut out = vec![word];
    if let Some((_, v)) = word.split_once('=') {
        out.push(v);
    }
    if let Some(v) = word.strip_prefix('@') {
        out.push(v);
    }
    // `-f/etc/shadow`: a short option with its value attached.
    if word.starts_with('-') && !word.starts_with("--") {
        // Not `&word[2..]`: the option letter may be any character.
        let mut chars = word.chars();
        chars.next();
        chars.next();
        let v = chars.as_str();
        if v.starts_with('/') || v.starts_with('~') {
            out.push(v);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_locations() {
        for p in [
            "/etc/shadow",
            "/etc//shadow",
            "/etc/sudoers",
            "/etc/sudoers.d/90-x",
            "/etc/ssh/ssh_host_ed25519_key",
            "~/.ssh/id_rsa",
            "~/.ssh",
            "$HOME/.aws/credentials",
            "${HOME}/.kube/config",
            "/home/u/.config/gcloud/credentials.db",
            "~/.netrc",
            "~/.docker/config.json",
            "../other/.env",
            "/srv/app/.env.production",
            "/root/notes",
            "/proc/1/environ",
            "~/.cargo/credentials.toml",
            "id_ed25519",
        ] {
            assert!(is_secret_path(p), "{p}");
        }
        // Found by fuzzing: a multibyte option letter.
        assert_eq!(
            path_candidates("-é/etc/shadow"),
            vec!["-é/etc/shadow", "/etc/shadow"]
        );
        assert_eq!(path_candidates("-\u{1F600}"), vec!["-\u{1F600}"]);
        for p in [
            "/etc/passwd",
            "/etc/hosts",
            "~/.bashrc",
            "src/main.rs",
            "/etc/ssh/ssh_host_ed25519_key.pub",
            "~/.ssh-notes",
            "environment",
            ".envrc",
        ] {
            assert!(!is_secret_path(p), "{p}");
        }
    }
}
