//! Versioned migrations, run when a store starts.
//!
//! Keel keeps its own small version table, `keel_schema_version` (one row per
//! migration applied: version, name, the Keel version that applied it, when), in the
//! connection's current schema (`public` unless the URL sets a `search_path`). At
//! start, in one transaction holding a transaction-level advisory lock (so nodes
//! starting together apply each migration once, one after the other, and a failed
//! migration leaves nothing behind):
//!
//! - no version table and no other table: a new database; every migration runs;
//! - no version table but other tables: the database belongs to something else and
//!   is refused (`foreign_database`), naming a few of its tables;
//! - a version table that is not Keel's shape: refused the same way;
//! - a version newer than this binary knows: refused (`database_newer`), saying to
//!   upgrade this node;
//! - else the migrations above the stored version run, in order.

use keel_envelope::ErrorPayload;
use tokio_postgres::Client;

use crate::connect::{db_error, Phase};
use crate::error::{store_error, StoreErrorKind};
use crate::options::PgOptions;

/// The version table.
pub const VERSION_TABLE: &str = "keel_schema_version";

/// The key of the advisory lock held while migrating ("keel_mig" in ASCII).
const MIGRATION_LOCK: i64 = 0x6b65_656c_5f6d_6967;

/// One migration.
#[derive(Debug)]
struct Migration {
    version: i32,
    name: &'static str,
    sql: &'static str,
}

/// Every migration, in order; versions 1, 2, 3, … with no gap.
const MIGRATIONS: &[Migration] = &[Migration {
    version: 1,
    name: "sessions, events, history, checkpoints, leases",
    sql: include_str!("migrations/0001_initial.sql"),
}];

/// The schema version this binary writes.
pub const SCHEMA_VERSION: i32 = MIGRATIONS[MIGRATIONS.len() - 1].version;

/// What migrating did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    /// The version found (0: a new database).
    pub from: i32,
    /// The version now.
    pub to: i32,
}

/// Brings the database to [`SCHEMA_VERSION`], or explains why it will not.
pub(crate) async fn migrate(
    client: &mut Client,
    options: &PgOptions,
) -> Result<Migrated, ErrorPayload> {
    let err = |e: tokio_postgres::Error| db_error(&e, options, Phase::Operate);
    let place = options.describe();
    let tx = client.transaction().await.map_err(err)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(err)?;
    let schema: Option<String> = tx
        .query_one("SELECT current_schema()::text", &[])
        .await
        .map_err(err)?
        .get(0);
    let Some(schema) = schema else {
        return Err(store_error(
            StoreErrorKind::Database,
            format!(
                "database {:?} on {place} has no schema to create Keel's tables in (none of its \
                 search_path exists): create one, or set search_path in the store URL \
                 (?options=-c%20search_path%3Dkeel)",
                options.dbname()
            ),
        ));
    };
    let tables: Vec<String> = tx
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f') ORDER BY 1",
            &[&schema],
        )
        .await
        .map_err(err)?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let foreign =
        |what: String| {
            let shown: Vec<&str> = tables.iter().take(5).map(String::as_str).collect();
            store_error(
                StoreErrorKind::ForeignDatabase,
                format!(
                "database {:?} on {place} (schema {schema:?}) {what}, so it belongs to something \
                 else (tables: {}{}): give Keel a database of its own (CREATE DATABASE keel) or a \
                 schema of its own (?options=-c%20search_path%3Dkeel in the store URL)",
                options.dbname(),
                shown.join(", "),
                if tables.len() > shown.len() { ", …" } else { "" },
            ),
            )
            .with_detail("tables", shown)
        };
    let from = if tables.iter().any(|t| t == VERSION_TABLE) {
        let row = tx
            .query_one(
                "SELECT coalesce(max(version), 0)::int4, count(*) FILTER (WHERE name IS NULL) \
                 FROM keel_schema_version",
                &[],
            )
            .await
            .map_err(|_| foreign(format!("has a table {VERSION_TABLE} that is not Keel's")))?;
        row.get::<_, i32>(0)
    } else if tables.is_empty() {
        0
    } else {
        return Err(foreign(format!("holds tables but no {VERSION_TABLE}")));
    };
    if from > SCHEMA_VERSION {
        return Err(store_error(
            StoreErrorKind::DatabaseNewer,
            format!(
                "database {:?} on {place} has Keel schema version {from}, newer than the {SCHEMA_VERSION} \
                 this keel {} knows: upgrade keel on this node (every node sharing a database must \
                 run a version that knows its schema)",
                options.dbname(),
                env!("CARGO_PKG_VERSION"),
            ),
        )
        .with_detail("databaseVersion", from)
        .with_detail("supportedVersion", SCHEMA_VERSION));
    }
    if from == 0 {
        tx.batch_execute(
            "CREATE TABLE keel_schema_version (\
                 version integer PRIMARY KEY, \
                 name text NOT NULL, \
                 keel_version text NOT NULL, \
                 applied_at timestamptz NOT NULL DEFAULT now())",
        )
        .await
        .map_err(err)?;
    }
    for m in MIGRATIONS.iter().filter(|m| m.version > from) {
        tx.batch_execute(m.sql).await.map_err(|e| {
            let mut out = db_error(&e, options, Phase::Operate);
            out.message = format!(
                "migration {} ({}) failed: {}",
                m.version, m.name, out.message
            );
            out
        })?;
        tx.execute(
            "INSERT INTO keel_schema_version (version, name, keel_version) VALUES ($1, $2, $3)",
            &[&m.version, &m.name, &env!("CARGO_PKG_VERSION")],
        )
        .await
        .map_err(err)?;
        tracing::info!(target: "keel_store_pg", version = m.version, name = m.name, "migrated");
    }
    tx.commit().await.map_err(err)?;
    Ok(Migrated {
        from,
        to: SCHEMA_VERSION.max(from),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_run_one_two_three() {
        for (i, m) in MIGRATIONS.iter().enumerate() {
            assert_eq!(m.version, i as i32 + 1, "{}", m.name);
        }
    }
}
