//! Building a kernel: configuration, model, store, clock, ids, the tool registry.

use std::path::PathBuf;
use std::sync::Arc;

use keel_envelope::ids::{Clock, IdGen, SystemClock, UlidGen};
use keel_envelope::{ErrorCode, ErrorPayload};
use keel_tools::Tool;

use crate::base::config::KernelConfig;
use crate::base::emit::EmitCtx;
use crate::base::hub::Hub;
use crate::base::model::Model;
use crate::base::probe::Probe;
use crate::base::store::{FileStore, FileStoreOptions, MemoryStore, Store};
use crate::kernel::{Kernel, KernelInner, ModelFactory};
use crate::session::open::Sessions;
use crate::session::registry::{kernel_args, Decoder, KernelHandler, RegistryBuilder};
use crate::session::services::{Parts, Services};

/// Builds a [`Kernel`].
#[derive(Default)]
pub struct KernelBuilder {
    config: KernelConfig,
    model: Option<Arc<dyn Model>>,
    factory: Option<ModelFactory>,
    store: Option<Arc<dyn Store>>,
    store_dir: Option<PathBuf>,
    clock: Option<Arc<dyn Clock>>,
    ids: Option<Arc<dyn IdGen>>,
    tools: Vec<Arc<dyn Tool>>,
    builtin_tools: bool,
    probe: Option<Arc<dyn Probe>>,
    hooks: Vec<Arc<dyn crate::base::hooks::Hooks>>,
    telemetry: keel_telemetry::Recorder,
}

impl std::fmt::Debug for KernelBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl KernelBuilder {
    /// A builder with the built-in tools on.
    pub(crate) fn new() -> Self {
        Self {
            builtin_tools: true,
            ..Self::default()
        }
    }

    /// Sets the whole configuration.
    pub fn config(mut self, config: KernelConfig) -> Self {
        self.config = config;
        self
    }

    /// The default workspace root.
    pub fn workspace(mut self, root: impl Into<PathBuf>) -> Self {
        self.config.workspace = Some(root.into());
        self
    }

    /// The default permission mode.
    pub fn permission_mode(mut self, mode: keel_envelope::types::PermissionMode) -> Self {
        self.config.permission_mode = mode;
        self
    }

    /// How long an open session may be idle before it leaves memory (default 30
    /// minutes; `None`: never). See [`KernelConfig::idle_unload_after`].
    pub fn idle_unload_after(mut self, after: Option<std::time::Duration>) -> Self {
        self.config.idle_unload_after = after;
        self
    }

    /// The approval timeout (`Duration::ZERO` = wait forever).
    pub fn approval_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.config.approval_timeout = timeout;
        self
    }

    /// Maximum model calls per request.
    pub fn max_turns(mut self, n: u32) -> Self {
        self.config.max_turns = n;
        self
    }

    /// The default model.
    pub fn model(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// How to build other models (`session.start {model}`, `session.set_model`).
    pub fn model_factory(mut self, factory: ModelFactory) -> Self {
        self.factory = Some(factory);
        self
    }

    /// A store; default: files under `$KEEL_HOME` or the platform data dir.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self.store_dir = None;
        self
    }

    /// Keeps sessions in files under `dir` (a [`FileStore`] made at
    /// [`KernelBuilder::build`] with the configuration's `fsync_each_event`).
    pub fn store_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.store = None;
        self.store_dir = Some(dir.into());
        self
    }

    /// Keeps sessions in memory only.
    pub fn memory_store(self) -> Self {
        self.store(Arc::new(MemoryStore::default()))
    }

    /// The clock (inject a fixed one for deterministic transcripts).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = Some(clock);
        self
    }

    /// The id generator (inject a sequential one for deterministic transcripts).
    pub fn ids(mut self, ids: Arc<dyn IdGen>) -> Self {
        self.ids = Some(ids);
        self
    }

    /// Registers a custom tool (same metadata as the built-in ones). Its name must be
    /// unique: a name already taken (by a built-in, a kernel tool or another custom
    /// tool) makes [`KernelBuilder::build`] fail with `TOOL_NAME_CONFLICT`.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Whether to register the seven built-in tools (default true).
    pub fn builtin_tools(mut self, on: bool) -> Self {
        self.builtin_tools = on;
        self
    }

    /// Adds hooks (see [`crate::base::hooks`]): they run at their points after the command
    /// hooks of the configuration, in the order added.
    pub fn hooks(mut self, hooks: Arc<dyn crate::base::hooks::Hooks>) -> Self {
        self.hooks.push(hooks);
        self
    }

    /// Gives sessions Agent Skills and custom commands: found where `settings` says
    /// when a session opens; `reserved` are the host's own slash commands, which a
    /// custom command may not shadow. See [`KernelConfig::skills`].
    pub fn skills(mut self, settings: keel_skills::Settings, reserved: Vec<String>) -> Self {
        self.config.skills = Some(crate::base::config::SkillsConfig {
            settings,
            reserved_commands: reserved,
        });
        self
    }

    /// Reports the kernel's work as OpenTelemetry spans and metrics through
    /// `recorder` (default: [`keel_telemetry::Recorder::off`], which records nothing).
    /// The spans are `tracing` spans of target [`keel_telemetry::SPAN_TARGET`]: they
    /// reach a collector when the host installs the layer of a
    /// `keel_telemetry::Pipeline` (whose `recorder()` this should be, for its metrics).
    pub fn telemetry(mut self, recorder: keel_telemetry::Recorder) -> Self {
        self.telemetry = recorder;
        self
    }

    /// A probe called at every point of a request's life (tests pause requests there).
    #[doc(hidden)]
    pub fn probe(mut self, probe: Arc<dyn Probe>) -> Self {
        self.probe = Some(probe);
        self
    }

    /// Builds the kernel. Must be called inside a tokio runtime.
    pub fn build(mut self) -> Result<Kernel, ErrorPayload> {
        let store: Arc<dyn Store> = match (self.store, self.store_dir) {
            (Some(s), _) => s,
            (None, dir) => {
                let dir = match dir {
                    Some(d) => d,
                    None => default_store_dir()?,
                };
                // One checkpoint store per workspace beside the sessions.
                if self.config.checkpoint_dir.is_none() {
                    self.config.checkpoint_dir = Some(dir.join("checkpoints"));
                }
                // The worktrees of isolated sessions too.
                if self.config.worktrees.dir.is_none() {
                    self.config.worktrees.dir = Some(dir.join("worktrees"));
                }
                Arc::new(FileStore::with_options(
                    dir,
                    FileStoreOptions {
                        fsync_each_event: self.config.fsync_each_event,
                        ..FileStoreOptions::default()
                    },
                ))
            }
        };
        let default_model = self.model;
        let factory: ModelFactory = match (self.factory, default_model.clone()) {
            (Some(f), _) => f,
            (None, Some(m)) => {
                let m2 = m.clone();
                Arc::new(move |id: &str| {
                    if id == m2.id() {
                        Ok(m2.clone())
                    } else {
                        Err(ErrorPayload::new(
                            ErrorCode::ModelUnavailable,
                            format!("model {id:?} is not configured"),
                        ))
                    }
                })
            }
            (None, None) => {
                return Err(ErrorPayload::new(
                    ErrorCode::ModelUnavailable,
                    "no model configured",
                ));
            }
        };
        let registry = registry(self.builtin_tools, self.tools)?;
        let hooks = crate::base::hooks::build(&self.config.hooks, self.hooks)?;
        crate::base::limits::validate_limits(&self.config.budget.request, "budget.request")?;
        crate::base::limits::validate_limits(&self.config.budget.session, "budget.session")?;
        crate::base::limits::validate_max_output(self.config.max_output_tokens, "maxOutputTokens")?;
        let ctx = EmitCtx {
            clock: self.clock.unwrap_or_else(|| Arc::new(SystemClock)),
            ids: self.ids.unwrap_or_else(|| Arc::new(UlidGen::default())),
            hub: Arc::new(Hub::default()),
            store,
        };
        let node = self.config.node_id.clone().unwrap_or_else(default_node_id);
        let services = Arc::new(Services::new(Parts {
            node,
            config: self.config,
            default_model,
            factory,
            registry,
            hooks,
            probe: self.probe,
            ctx,
            telemetry: self.telemetry,
        }));
        let inner = Arc::new(KernelInner {
            open: Sessions::new(services.clone()),
            services,
            idle_timer: Default::default(),
            prune: Default::default(),
        });
        crate::kernel::leases::start(&inner);
        Ok(Kernel { inner })
    }
}

/// Every tool of a kernel: the built-in ones (unless turned off), the kernel's own,
/// the host's; and the pipeline's stages.
fn registry(
    builtin: bool,
    custom: Vec<Arc<dyn Tool>>,
) -> Result<crate::session::registry::Registry, ErrorPayload> {
    use crate::base::prompt::{ASK_USER, PROPOSE_PLAN, SPAWN_SUB_AGENT, TASK_GRAPH, UPDATE_PLAN};
    use crate::pipeline::kernel_tools::{AskUser, ProposePlan, UpdatePlan};
    use keel_envelope::kernel_tools::*;
    let mut b = RegistryBuilder::default();
    if builtin {
        b = b.builtin();
    }
    let own: [(&str, Decoder, Arc<dyn KernelHandler>); 5] = [
        (
            PROPOSE_PLAN,
            Decoder::Kernel(kernel_args::<ProposePlanArgs>),
            Arc::new(ProposePlan),
        ),
        (
            UPDATE_PLAN,
            Decoder::Kernel(kernel_args::<UpdatePlanArgs>),
            Arc::new(UpdatePlan),
        ),
        (
            ASK_USER,
            Decoder::Kernel(kernel_args::<AskUserArgs>),
            Arc::new(AskUser),
        ),
        (
            SPAWN_SUB_AGENT,
            Decoder::Kernel(kernel_args::<SpawnSubAgentArgs>),
            Arc::new(crate::work::child::SpawnSubAgent),
        ),
        (
            TASK_GRAPH,
            Decoder::Kernel(kernel_args::<TaskGraphArgs>),
            Arc::new(crate::pipeline::task_graph::TaskGraphTool),
        ),
    ];
    for (name, decoder, handler) in own {
        b = b.kernel(name, decoder, handler);
    }
    for tool in custom {
        b = b.custom(tool);
    }
    b.stage(Arc::new(crate::work::process::Background))
        .stage(Arc::new(crate::pipeline::patch_preview::PatchPreview))
        .build()
}

/// This node's default name in a shared store's leases: `HOST-PID-RANDOM` (the host
/// name from `/etc/hostname` or `HOSTNAME`), new each run.
pub fn default_node_id() -> String {
    let host = std::fs::read_to_string("/etc/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "node".to_owned());
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    let random = UlidGen::default().next_id(keel_envelope::ids::IdKind::Event);
    let tail: String = random.chars().rev().take(6).collect();
    format!("{host}-{}-{tail}", std::process::id())
}

/// The store directory: `$KEEL_HOME`, else the platform data dir.
pub fn default_store_dir() -> Result<PathBuf, ErrorPayload> {
    crate::base::config::default_store_dir()
}
