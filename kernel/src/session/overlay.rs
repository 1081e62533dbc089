//! A session's own tools, on top of the kernel's registry: the kernel's tools that
//! only some sessions have (`activate_skill`, for a session with skills), the tools
//! of the host app (`hostTools`) and of the session's MCP servers. The session's view
//! — the kernel's entries, its own kernel tools, the host's, then each server's — is
//! what the model is offered and
//! what the pipeline looks calls up in. Names are unique across the whole view: a
//! host tool whose name is taken is refused (`TOOL_NAME_CONFLICT` naming both), an
//! MCP tool whose name is taken is left out with the same error as a warning.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use keel_envelope::ErrorPayload;

use crate::base::model::ToolDef;
use crate::session::registry::{conflict, Entry, Origin, Registry};

/// One snapshot of a session's own entries.
#[derive(Debug, Default)]
struct Layer {
    /// The kernel's tools this session has and others may not.
    own: Vec<Entry>,
    host: Vec<Entry>,
    /// Per MCP server, in the order the servers were added.
    mcp: Vec<(String, Vec<Entry>)>,
}

impl Layer {
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.own
            .iter()
            .chain(self.host.iter())
            .chain(self.mcp.iter().flat_map(|(_, e)| e.iter()))
    }
}

/// Where an entry of the view is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Slot {
    Own,
    Host,
    Mcp(String),
}

/// A built view: entries by name, and the definitions in offering order.
#[derive(Debug, Default)]
struct View {
    layer: Layer,
    index: HashMap<String, (Slot, usize)>,
    defs: Vec<ToolDef>,
    /// The kernel's definitions, then these: made on the first model call that needs
    /// them, kept until the session's tools change (a new view).
    offered: std::sync::OnceLock<Arc<[ToolDef]>>,
}

impl View {
    fn build(layer: Layer) -> Self {
        let mut index = HashMap::new();
        for (i, e) in layer.own.iter().enumerate() {
            index.insert(e.spec.name.clone(), (Slot::Own, i));
        }
        for (i, e) in layer.host.iter().enumerate() {
            index.insert(e.spec.name.clone(), (Slot::Host, i));
        }
        for (server, entries) in &layer.mcp {
            for (i, e) in entries.iter().enumerate() {
                index.insert(e.spec.name.clone(), (Slot::Mcp(server.clone()), i));
            }
        }
        let defs = layer.entries().map(Entry::def).collect();
        Self {
            layer,
            index,
            defs,
            offered: std::sync::OnceLock::new(),
        }
    }

    fn get(&self, name: &str) -> Option<&Entry> {
        let (slot, i) = self.index.get(name)?;
        match slot {
            Slot::Own => self.layer.own.get(*i),
            Slot::Host => self.layer.host.get(*i),
            Slot::Mcp(s) => self
                .layer
                .mcp
                .iter()
                .find(|(n, _)| n == s)
                .and_then(|(_, e)| e.get(*i)),
        }
    }

    fn origin_of(&self, name: &str) -> Option<Origin> {
        self.get(name).map(|e| e.origin)
    }
}

/// A session's own tools.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    view: Mutex<Arc<View>>,
}

impl Overlay {
    fn snapshot(&self) -> Arc<View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn replace(&self, f: impl FnOnce(&View) -> Layer) {
        let mut guard = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let layer = f(&guard);
        *guard = Arc::new(View::build(layer));
    }

    /// The entry named `name`: the kernel's, else the session's.
    pub(crate) fn get(&self, registry: &Registry, name: &str) -> Option<Entry> {
        if let Some(e) = registry.get(name) {
            return Some(e.clone());
        }
        self.snapshot().get(name).cloned()
    }

    /// The definitions offered to the model: the kernel's, then the session's.
    pub(crate) fn defs(&self, registry: &Registry) -> Arc<[ToolDef]> {
        let view = self.snapshot();
        view.offered
            .get_or_init(|| {
                if view.defs.is_empty() {
                    return registry.defs().clone();
                }
                let mut defs = Vec::with_capacity(registry.defs().len() + view.defs.len());
                defs.extend_from_slice(registry.defs());
                defs.extend_from_slice(&view.defs);
                defs.into()
            })
            .clone()
    }

    /// The names of the host's tools.
    pub(crate) fn host_names(&self) -> Vec<String> {
        self.snapshot()
            .layer
            .host
            .iter()
            .map(|e| e.spec.name.clone())
            .collect()
    }

    /// The host's tools (a fork gets the same).
    pub(crate) fn host_entries(&self) -> Vec<Entry> {
        self.snapshot().layer.host.clone()
    }

    /// Replaces the host's tools; a name taken by the kernel, an MCP tool, or another
    /// host tool refuses the whole set and changes nothing.
    pub(crate) fn set_host(
        &self,
        registry: &Registry,
        host: Vec<Entry>,
    ) -> Result<(), ErrorPayload> {
        let mut guard = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen: HashMap<&str, Origin> = HashMap::new();
        for e in &host {
            let name = e.spec.name.as_str();
            let taken = registry
                .get(name)
                .map(|k| k.origin)
                .or_else(|| seen.get(name).copied())
                .or_else(|| guard.origin_of(name).filter(|o| *o != Origin::Host));
            if let Some(first) = taken {
                return Err(conflict(name, first, e.origin));
            }
            seen.insert(name, e.origin);
        }
        let layer = Layer {
            own: guard.layer.own.clone(),
            host,
            mcp: guard.layer.mcp.clone(),
        };
        *guard = Arc::new(View::build(layer));
        Ok(())
    }

    /// Sets the tools of MCP server `server` (replacing what it had). A tool whose name
    /// is taken (by the kernel, the host, or another server) is left out; the errors
    /// say which.
    pub(crate) fn set_mcp(
        &self,
        registry: &Registry,
        server: &str,
        entries: Vec<Entry>,
    ) -> Vec<ErrorPayload> {
        let mut refused = Vec::new();
        self.replace(|view| {
            let mut kept: Vec<Entry> = Vec::new();
            for e in entries {
                let name = e.spec.name.as_str();
                let elsewhere = view
                    .index
                    .get(name)
                    .filter(|(s, _)| *s != Slot::Mcp(server.to_owned()))
                    .and_then(|_| view.origin_of(name));
                let taken = registry
                    .get(name)
                    .map(|k| k.origin)
                    .or(elsewhere)
                    .or_else(|| {
                        kept.iter()
                            .any(|k| k.spec.name == name)
                            .then_some(Origin::Mcp)
                    });
                match taken {
                    Some(first) => refused.push(conflict(name, first, e.origin)),
                    None => kept.push(e),
                }
            }
            let mut mcp: Vec<(String, Vec<Entry>)> = view.layer.mcp.clone();
            match mcp.iter_mut().find(|(n, _)| n == server) {
                Some(slot) => slot.1 = kept,
                None => mcp.push((server.to_owned(), kept)),
            }
            Layer {
                own: view.layer.own.clone(),
                host: view.layer.host.clone(),
                mcp,
            }
        });
        refused
    }

    /// Adds one of the kernel's tools to this session alone (set once, when the
    /// session opens, before its MCP servers' tools arrive). A name the host's tools
    /// already take refuses it.
    pub(crate) fn add_own(&self, registry: &Registry, entry: Entry) -> Result<(), ErrorPayload> {
        let mut guard = self.view.lock().unwrap_or_else(|p| p.into_inner());
        let name = entry.spec.name.as_str();
        if let Some(first) = registry
            .get(name)
            .map(|k| k.origin)
            .or_else(|| guard.origin_of(name))
        {
            return Err(conflict(name, first, entry.origin));
        }
        let mut own = guard.layer.own.clone();
        own.push(entry);
        let layer = Layer {
            own,
            host: guard.layer.host.clone(),
            mcp: guard.layer.mcp.clone(),
        };
        *guard = Arc::new(View::build(layer));
        Ok(())
    }
}
