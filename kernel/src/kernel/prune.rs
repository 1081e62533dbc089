//! Pruning the checkpoint stores: the kernel keeps the stores under
//! [`crate::KernelConfig::checkpoint_dir`] within
//! [`crate::KernelConfig::checkpoint_max_bytes`] and
//! [`crate::KernelConfig::checkpoint_max_age`]. At the first command and then at most
//! once every [`PERIOD`], a cheap look (the stores' size, their oldest record's time)
//! decides whether to prune; if so, `keel_tools::checkpoint::CheckpointHome::prune`
//! runs on the blocking pool: checkpoints past the age limit go, then the oldest until
//! the size fits, closed sessions' before open ones'. Never dropped: the checkpoints
//! of a session whose request runs (read when the pruning starts), any taken after
//! that, and those of a session another process holds open (it may be running a
//! request; that process prunes its own sessions).

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::checkpoint::{CheckpointHome, PruneReport, PruneRules};

use crate::base::time::now_ms;
use crate::kernel::KernelInner;

/// At most one automatic pruning per this much time.
pub(crate) const PERIOD: Duration = Duration::from_secs(10 * 60);

/// Whether a pruning runs, and when the last one started.
#[derive(Debug, Default)]
pub(crate) struct State {
    running: AtomicBool,
    /// `now_ms()` + 1 at the last start (0: never).
    last: AtomicU64,
}

fn epoch_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The configured rules, with the sessions of this kernel that are busy now pinned
/// (and any checkpoint taken from now on kept); `older_than` replaces the age limit.
fn rules(inner: &KernelInner, older_than: Option<Duration>) -> PruneRules {
    let config = inner.services.config();
    let mut pinned = HashSet::new();
    let mut open = HashSet::new();
    for s in inner.open.loaded() {
        if s.is_busy() {
            pinned.insert(s.id.clone());
        } else {
            open.insert(s.id.clone());
        }
    }
    // Unloaded while idle: open, and not busy.
    open.extend(inner.open.unloaded_ids());
    PruneRules {
        max_bytes: config.checkpoint_max_bytes,
        max_age: older_than.or(config.checkpoint_max_age),
        pinned,
        open,
        pin_held_open: true,
        keep_from_ms: Some(epoch_ms()),
        ..PruneRules::default()
    }
}

/// Whether the stores are past a limit (a cheap look: no object is read).
fn needed(home: &CheckpointHome, rules: &PruneRules) -> bool {
    let over_age = rules.max_age.is_some_and(|age| {
        let limit = epoch_ms().saturating_sub(u64::try_from(age.as_millis()).unwrap_or(u64::MAX));
        home.oldest_ms().is_some_and(|t| t < limit)
    });
    over_age || rules.max_bytes.is_some_and(|max| home.total_bytes() > max)
}

/// Starts a pruning in the background when one is due and the stores are past a
/// limit (see the module's documentation). Cheap when nothing is due.
pub(crate) fn maybe(inner: &Arc<KernelInner>) {
    let config = inner.services.config();
    if !config.checkpoints
        || (config.checkpoint_max_bytes.is_none() && config.checkpoint_max_age.is_none())
    {
        return;
    }
    let Some(dir) = config.checkpoint_dir.clone() else {
        return;
    };
    let now = now_ms().saturating_add(1);
    let last = inner.prune.last.load(Ordering::Acquire);
    let period = u64::try_from(PERIOD.as_millis()).unwrap_or(u64::MAX);
    if last != 0 && now.saturating_sub(last) < period {
        return;
    }
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if inner.prune.running.swap(true, Ordering::AcqRel) {
        return;
    }
    inner.prune.last.store(now, Ordering::Release);
    let rules = rules(inner, None);
    let weak: Weak<KernelInner> = Arc::downgrade(inner);
    rt.spawn_blocking(move || {
        let home = CheckpointHome::new(dir);
        if needed(&home, &rules) {
            match home.prune(&rules, false) {
                Ok(r) => tracing::info!(
                    dropped = r.dropped.len(),
                    freed = r.bytes_freed(),
                    "checkpoints pruned"
                ),
                Err(e) => tracing::warn!(error = %e, "pruning checkpoints failed"),
            }
        }
        if let Some(inner) = weak.upgrade() {
            inner.prune.running.store(false, Ordering::Release);
        }
    });
}

/// Prunes now by the configured limits (`older_than` replaces the age limit), or says
/// what would go (`dry_run`). `Ok(None)`: this kernel keeps no checkpoint stores.
pub(crate) async fn run_now(
    inner: &Arc<KernelInner>,
    older_than: Option<Duration>,
    dry_run: bool,
) -> Result<Option<PruneReport>, ErrorPayload> {
    let Some(dir) = inner.services.config().checkpoint_dir.clone() else {
        return Ok(None);
    };
    let rules = rules(inner, older_than);
    let done = tokio::task::spawn_blocking(move || CheckpointHome::new(dir).prune(&rules, dry_run))
        .await
        .map_err(|e| ErrorPayload::new(ErrorCode::RuntimeInternalError, e.to_string()))?;
    done.map(Some).map_err(|e| {
        ErrorPayload::new(
            ErrorCode::SessionPersistenceFailed,
            format!("pruning checkpoints failed: {e}"),
        )
    })
}
