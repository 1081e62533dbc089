//! The kernel's shared services, as sessions and command handlers reach them: the
//! configuration, the tool registry, the hooks, the models, the store, the clock and
//! the ids, the test probe, event delivery and the kernel's own emitter (for answers
//! that belong to no open session), the kernel's cancellation token, and the
//! telemetry recorder (spans and metrics, `keel_telemetry`).
//!
//! Built once by the builder and never changed; a session holds them
//! (`Session::services`), command handlers get them in their context. This is the one
//! way the layers above reach what the kernel shares: nothing else of the kernel is
//! handed down.

use std::sync::Arc;

use keel_envelope::ids::IdKind;
use keel_envelope::{ErrorCode, ErrorPayload};
use tokio_util::sync::CancellationToken;

use crate::base::config::KernelConfig;
use crate::base::emit::{EmitCtx, Emitter};
use crate::base::hooks::{Hooks, Starting};
use crate::base::hub::Hub;
use crate::base::model::Model;
use crate::base::ownership::{owned_elsewhere, Claim, LeaseCell};
use crate::base::probe::{Point, Probe};
use crate::base::store::Store;
use crate::session::registry::Registry;

/// Builds a model from its selection string (`provider:model`).
pub type ModelFactory = Arc<dyn Fn(&str) -> Result<Arc<dyn Model>, ErrorPayload> + Send + Sync>;

/// What the builder gives [`Services::new`].
pub(crate) struct Parts {
    pub(crate) config: KernelConfig,
    pub(crate) default_model: Option<Arc<dyn Model>>,
    pub(crate) factory: ModelFactory,
    pub(crate) registry: Registry,
    pub(crate) hooks: Vec<Arc<dyn Hooks>>,
    pub(crate) probe: Option<Arc<dyn Probe>>,
    pub(crate) ctx: EmitCtx,
    pub(crate) node: String,
    pub(crate) telemetry: keel_telemetry::Recorder,
}

/// The shared services of one kernel.
pub(crate) struct Services {
    config: KernelConfig,
    default_model: Option<Arc<dyn Model>>,
    factory: ModelFactory,
    /// Every tool the model can call, and the pipeline's stages.
    registry: Registry,
    /// Hooks, in the order they run.
    hooks: Vec<Arc<dyn Hooks>>,
    /// Sessions whose `SessionStart` hooks still run (their first request waits).
    starting: Starting,
    /// A test probe, called at every point of a request's life.
    probe: Option<Arc<dyn Probe>>,
    ctx: EmitCtx,
    /// Emits events that belong to no open session.
    emitter: Emitter,
    cancel: CancellationToken,
    /// This node's name in a shared store's leases.
    node: String,
    /// Woken when a session's lease is lost (the lease keeper acts on it).
    lease_wake: Arc<tokio::sync::Notify>,
    /// Spans and metrics of the kernel's work (off unless the host gives one).
    telemetry: keel_telemetry::Recorder,
    /// Worktrees of session starts and forks being made or taken back on the
    /// blocking pool (the kernel's shutdown waits for them).
    cleanups: crate::session::worktree::Cleanups,
}

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kernel")
            .field("config", &self.config)
            .field("tools", &self.registry.entries().len())
            .finish_non_exhaustive()
    }
}

impl Services {
    pub(crate) fn new(p: Parts) -> Self {
        let emitter = Emitter::new(p.ctx.clone(), None, false, keel_envelope::Sequencer::new());
        Self {
            config: p.config,
            default_model: p.default_model,
            factory: p.factory,
            registry: p.registry,
            hooks: p.hooks,
            starting: Default::default(),
            probe: p.probe,
            ctx: p.ctx,
            emitter,
            cancel: CancellationToken::new(),
            telemetry: p.telemetry,
            node: p.node,
            lease_wake: Arc::new(tokio::sync::Notify::new()),
            cleanups: Default::default(),
        }
    }

    /// Worktree work of session starts and forks still under way on the blocking
    /// pool.
    pub(crate) fn cleanups(&self) -> &crate::session::worktree::Cleanups {
        &self.cleanups
    }

    /// This node's name in a shared store's leases.
    pub(crate) fn node(&self) -> &str {
        &self.node
    }

    /// Woken when a session's lease is lost.
    pub(crate) fn lease_wake(&self) -> &Arc<tokio::sync::Notify> {
        &self.lease_wake
    }

    /// Claims session `id` for this node: a lease cell for the session when the store
    /// gave it (or keeps no leases), `SESSION_OWNED_ELSEWHERE` when another node
    /// holds it, and the previous owner when this claim took the session over.
    pub(crate) fn claim(&self, id: &str) -> Result<(Arc<LeaseCell>, Option<String>), ErrorPayload> {
        let ttl = self.config.lease_ttl;
        let sent = crate::base::time::now_ms();
        match self.store().claim(id, &self.node, ttl)? {
            Claim::Local => Ok((Arc::new(LeaseCell::local()), None)),
            Claim::Owned(o) => Ok((
                Arc::new(LeaseCell::owned(
                    o.epoch,
                    ttl,
                    sent,
                    self.lease_wake.clone(),
                )),
                o.previous_owner.filter(|p| p != &self.node),
            )),
            Claim::Elsewhere(owner) => Err(owned_elsewhere(id, &owner)),
        }
    }

    /// The telemetry recorder: the spans of requests, model calls, tool calls,
    /// approvals, hooks and MCP calls, and their metrics.
    pub(crate) fn telemetry(&self) -> &keel_telemetry::Recorder {
        &self.telemetry
    }

    /// The configuration.
    pub(crate) fn config(&self) -> &KernelConfig {
        &self.config
    }

    /// The kernel's tools and the pipeline's stages.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The hooks, in the order they run.
    pub(crate) fn hooks(&self) -> &[Arc<dyn Hooks>] {
        &self.hooks
    }

    /// Sessions whose `SessionStart` hooks still run.
    pub(crate) fn starting(&self) -> &Starting {
        &self.starting
    }

    /// The model named `id` (`provider:model`), or the default model when `id` is
    /// `None`.
    pub(crate) fn model(&self, id: Option<&str>) -> Result<Arc<dyn Model>, ErrorPayload> {
        match (id, &self.default_model) {
            (Some(id), _) => (self.factory)(id),
            (None, Some(m)) => Ok(m.clone()),
            (None, None) => Err(ErrorPayload::new(
                ErrorCode::ModelUnavailable,
                "no model: the command names none and the runtime has no default model",
            )
            .with_detail("field", "payload.model")),
        }
    }

    /// A stored session's model, else the default one (a session reopened where its
    /// model is not configured goes on with the default).
    pub(crate) fn model_or_default(&self, id: &str) -> Result<Arc<dyn Model>, ErrorPayload> {
        match self.model(Some(id)) {
            Ok(m) => Ok(m),
            Err(_) => self.model(None),
        }
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.ctx.store
    }

    /// Now, in ms of the kernel's clock.
    pub(crate) fn now(&self) -> u64 {
        self.ctx.clock.now_ms()
    }

    /// A new id of `kind`.
    pub(crate) fn next_id(&self, kind: IdKind) -> String {
        self.ctx.ids.next_id(kind)
    }

    /// What every emitter shares: clock, ids, the hub, the store.
    pub(crate) fn ctx(&self) -> &EmitCtx {
        &self.ctx
    }

    /// Delivery to subscribers and watchers.
    pub(crate) fn hub(&self) -> &Hub {
        &self.ctx.hub
    }

    /// The emitter of events that belong to no open session.
    pub(crate) fn emitter(&self) -> &Emitter {
        &self.emitter
    }

    /// The kernel's cancellation token: a session's is its child.
    pub(crate) fn cancel(&self) -> &CancellationToken {
        &self.cancel
    }

    /// A request of session `session_id` reached `point`: a test probe may pause it.
    pub(crate) async fn probe(&self, point: Point, session_id: &str, request_id: &str) {
        if let Some(p) = &self.probe {
            p.reached(point, session_id, request_id).await;
        }
    }
}
