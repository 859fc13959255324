//! Iceberg catalogs behind one trait.
//!
//! A [`Catalog`] lists namespaces and tables, loads a table's current metadata, creates and
//! drops namespaces and tables, and commits a new metadata version with an atomic swap
//! (optimistic concurrency: [`Catalog::commit_table`] fails with
//! [`crate::Error::CommitConflict`] when the base it was given is no longer current).
//! Implementations:
//!
//! - [`FileSystemCatalog`]: a warehouse directory in Iceberg's Hadoop layout.
//! - [`SqlCatalog`]: PyIceberg's `SqlCatalog` / Iceberg Java's `JdbcCatalog` tables on SQLite or
//!   PostgreSQL.
//! - [`RestCatalog`]: an Iceberg REST catalog (the catalog arbitrates commits).
//!
//! [`CachingCatalog`] wraps any of them to serve recently loaded tables from memory.
//!
//! [`IcebergCatalogProvider`] exposes any catalog to DataFusion as `<catalog>.<namespace>.<table>`.

mod caching;
mod datafusion;
mod filesystem;
mod metadata_file;
mod rest;
mod sql;
mod table;
mod writes;

use std::fmt;

use async_trait::async_trait;
use iceberg::spec::TableMetadata;

pub use self::caching::CachingCatalog;
pub(crate) use self::datafusion::wait;
pub use self::datafusion::{IcebergCatalogProvider, IcebergSchemaProvider};
pub use filesystem::FileSystemCatalog;
pub use metadata_file::{
    MetadataCache, ParsedMetadata, metadata_file_version, read_table_metadata,
};
pub use rest::{RestCatalog, RestCatalogConfig};
pub use sql::SqlCatalog;
pub use table::{LoadedTable, RefKind, TableRef};

use crate::error::Result;

/// A namespace: one or more levels (`db`, or `a.b`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Namespace(Vec<String>);

impl Namespace {
    /// A namespace from its levels.
    pub fn new(levels: Vec<String>) -> Self {
        Self(levels)
    }

    /// A namespace from its dotted name (`a.b` → two levels).
    pub fn from_dotted(name: &str) -> Self {
        Self(name.split('.').map(str::to_string).collect())
    }

    /// The levels of this namespace.
    pub fn levels(&self) -> &[String] {
        &self.0
    }

    /// The dotted name (`a.b`), as SQL catalogs store it and DataFusion shows it.
    pub fn dotted(&self) -> String {
        self.0.join(".")
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.dotted())
    }
}

/// A table's name within its catalog.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TableIdent {
    /// The namespace holding the table.
    pub namespace: Namespace,
    /// The table's name.
    pub name: String,
}

impl TableIdent {
    /// `namespace.name`.
    pub fn new(namespace: Namespace, name: impl Into<String>) -> Self {
        Self {
            namespace,
            name: name.into(),
        }
    }
}

impl fmt::Display for TableIdent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.namespace, self.name)
    }
}

/// An Iceberg catalog: where tables are and which metadata file is current.
#[async_trait]
pub trait Catalog: fmt::Debug + Send + Sync {
    /// Every namespace (all levels, parents before children).
    async fn list_namespaces(&self) -> Result<Vec<Namespace>>;

    /// Whether `namespace` exists (DataFusion asks on every query: keep it cheap).
    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool> {
        Ok(self.list_namespaces().await?.contains(namespace))
    }

    /// The tables directly in `namespace`.
    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>>;

    /// Loads the table's current metadata. A missing table is [`crate::Error::NotFound`].
    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable>;

    /// Creates a namespace ([`crate::Error::AlreadyExists`] if it exists, unless
    /// `if_not_exists`).
    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()>;

    /// Drops an empty namespace ([`crate::Error::NamespaceNotEmpty`], naming what is left,
    /// otherwise; [`crate::Error::NotFound`] if it does not exist).
    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()>;

    /// Where a new table's files go when the statement names no location: the filesystem
    /// catalog's `<warehouse>/<namespace levels…>/<table>`; the SQL catalog's namespace
    /// `location` property + `/<table>`, else `<warehouse>/<dotted namespace>/<table>`
    /// (PyIceberg's `_get_default_warehouse_location`).
    async fn default_table_location(&self, ident: &TableIdent) -> Result<String>;

    /// Registers a new table whose first metadata is `metadata` (built by the caller with
    /// `TableMetadataBuilder::new(..)`): writes its first metadata file (filesystem:
    /// `<location>/metadata/v1.metadata.json` and `version-hint.text`; SQL:
    /// `<location>/metadata/00000-<uuid>.metadata.json` and an `iceberg_tables` row) and returns
    /// the table as loaded. [`crate::Error::AlreadyExists`] if the table exists,
    /// [`crate::Error::NotFound`] if its namespace does not.
    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable>;

    /// Drops a table from the catalog; with `purge`, also deletes every file under its
    /// location. (A filesystem-catalog table *is* its directory: dropping it deletes the
    /// directory either way, as Iceberg Java's `HadoopCatalog` does.)
    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()>;

    /// Atomically replaces `base` (as loaded) with `metadata`: writes the new metadata file and
    /// swaps it in only if `base`'s metadata file is still the table's current one. Returns the
    /// table as committed (exactly `metadata`, not a reload).
    ///
    /// Errors: [`crate::Error::CommitConflict`] (the base is no longer current; nothing is left
    /// behind) and [`crate::Error::CommitStateUnknown`] (the swap's IO failed after it may have
    /// happened: never clean up, never retry). Any other error means nothing was committed.
    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable>;

    /// The catalog's own caches, for monitoring (none unless it keeps any).
    fn cache_stats(&self) -> Vec<crate::cache_stats::CacheStats> {
        Vec::new()
    }
}
