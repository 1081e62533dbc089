//! What a session knows of its Agent Skills and custom commands: the catalog found
//! in its workspace when it opened (`keel_skills`), and the section of the system
//! prompt that lists the skills (names and descriptions only). Finding them and the
//! `activate_skill` tool are the pipeline's ([`crate::pipeline::skills`]).

use std::sync::{Arc, OnceLock};

use keel_skills::Catalog;

/// A session's skills and commands, set once when it opens.
#[derive(Debug, Default)]
pub(crate) struct SessionSkills {
    found: OnceLock<Found>,
}

#[derive(Debug)]
struct Found {
    catalog: Arc<Catalog>,
    block: Option<String>,
}

impl SessionSkills {
    /// Keeps what discovery found (the first call wins).
    pub(crate) fn set(&self, catalog: Catalog) {
        let block = keel_skills::catalog_block(&catalog.skills.items);
        let _ = self.found.set(Found {
            catalog: Arc::new(catalog),
            block,
        });
    }

    /// The catalog; `None` when the kernel has no skill settings (or discovery has
    /// not run).
    pub(crate) fn catalog(&self) -> Option<Arc<Catalog>> {
        self.found.get().map(|f| f.catalog.clone())
    }

    /// The system prompt's list of skills, when the session has any.
    pub(crate) fn prompt_block(&self) -> Option<&str> {
        self.found.get().and_then(|f| f.block.as_deref())
    }
}
