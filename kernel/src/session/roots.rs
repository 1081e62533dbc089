//! A session's extra roots (`session.start {additionalRoots}`): the folders it may
//! reach beside its workspace, jailed like it (`keel_tools::jail::Roots`). They are
//! checked once, when given (`session.start`, `session.resume`, `session.fork`), kept
//! canonical in the stored state (`extensions.additionalRoots`, the protocol's
//! `AdditionalRoot` list; a session stored before has none), and read by every tool
//! call from the session's `Data`: the gate and the file tools (paths in them named
//! by absolute path), the sandbox (`write` roots writable), the checkpoints (`write`
//! roots recorded and rewound) and the system prompt (which lists them).

use std::path::Path;

use keel_envelope::worktree::{AdditionalRoot, RootAccess};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::jail::{self, ExtraRoot, Roots};

use crate::base::store::PersistedSession;

/// The key of a session's extra roots in its stored `extensions`.
pub(crate) const EXT_KEY: &str = crate::base::summary::ROOTS_KEY;

/// Checks the extra roots given for a session whose workspace is `workspace`, at
/// `field` (`payload.additionalRoots`). Each must be an existing directory named by
/// absolute path (a symlink is followed), none the workspace, inside it or holding
/// it, none the same as or inside another; `access` is `read` (the default) or
/// `write`. A refusal is `REQUEST_INVALID` naming the entry (`field`,
/// `payload.additionalRoots[1].path`).
pub(crate) fn check(
    workspace: &Path,
    given: &[AdditionalRoot],
    field: &str,
) -> Result<Roots, ErrorPayload> {
    let mut pairs = Vec::with_capacity(given.len());
    for (i, root) in given.iter().enumerate() {
        let writable = match root.access.as_ref() {
            None | Some(RootAccess::Read) => false,
            Some(RootAccess::Write) => true,
            Some(other) => {
                return Err(ErrorPayload::new(
                    ErrorCode::RequestInvalid,
                    format!(
                        "access {:?} is not known: use \"read\" or \"write\"",
                        other.as_str()
                    ),
                )
                .with_detail("field", format!("{field}[{i}].access"))
                .with_detail("index", i))
            }
        };
        pairs.push((root.path.as_str(), writable));
    }
    jail::extra_roots(workspace, &pairs).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("extra root {}: {}", e.index, e.message),
        )
        .with_detail("field", format!("{field}[{}].path", e.index))
        .with_detail("index", e.index)
    })
}

/// The protocol's view of `roots` (`None` when there are none).
pub(crate) fn wire(roots: &Roots) -> Option<Vec<AdditionalRoot>> {
    if roots.is_empty() {
        return None;
    }
    Some(
        roots
            .iter()
            .map(|r| {
                AdditionalRoot::new(
                    r.path.display().to_string(),
                    if r.writable {
                        RootAccess::Write
                    } else {
                        RootAccess::Read
                    },
                )
            })
            .collect(),
    )
}

/// Records `roots` as the session's extra roots in its state (none: the key goes).
pub(crate) fn keep_in(state: &mut PersistedSession, roots: &Roots) {
    match wire(roots).and_then(|w| serde_json::to_value(w).ok()) {
        Some(v) => {
            state.extensions.insert(EXT_KEY.to_owned(), v);
        }
        None => {
            state.extensions.remove(EXT_KEY);
        }
    }
}

/// The session's extra roots as stored (checked when they were given; a stored
/// session from before has none). An entry that cannot be read is left out.
pub(crate) fn of_state(state: &PersistedSession) -> Roots {
    let Some(v) = state.extensions.get(EXT_KEY) else {
        return Roots::none();
    };
    let list: Vec<AdditionalRoot> = serde_json::from_value(v.clone()).unwrap_or_default();
    Roots::new(
        list.into_iter()
            .map(|r| ExtraRoot {
                path: r.path.into(),
                writable: r.access == Some(RootAccess::Write),
            })
            .collect(),
    )
}

/// The system prompt's section naming the extra roots and what the session may do
/// there; empty without roots.
pub(crate) fn prompt_section(roots: &Roots) -> String {
    if roots.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n# Extra roots\nBeside the workspace you may reach these folders. Name their files by absolute path \
(a relative path is always relative to the workspace root). Shell commands still run in the workspace and \
ask before touching these folders.\n",
    );
    for r in roots.iter() {
        let access = if r.writable {
            "read and write"
        } else {
            "read only: edits and writes there are refused"
        };
        s.push_str(&format!("- {} ({access})\n", r.path.display()));
    }
    s
}
