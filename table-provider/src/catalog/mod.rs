//! Iceberg catalogs behind one trait.
//!
//! A [`Catalog`] lists namespaces and tables and loads a table's current metadata. Writes
//! (commit with an atomic metadata swap) join this trait with the write path. Implementations:
//!
//! - [`FileSystemCatalog`]: a warehouse directory in Iceberg's Hadoop layout.
//! - [`SqlCatalog`]: PyIceberg's `SqlCatalog` / Iceberg Java's `JdbcCatalog` tables on SQLite.
//!
//! [`IcebergCatalogProvider`] exposes any catalog to DataFusion as `<catalog>.<namespace>.<table>`.

mod datafusion;
mod filesystem;
mod metadata_file;
mod sql;
mod table;

use std::fmt;

use async_trait::async_trait;

pub use self::datafusion::{IcebergCatalogProvider, IcebergSchemaProvider};
pub use filesystem::FileSystemCatalog;
pub use metadata_file::{
    MetadataCache, ParsedMetadata, metadata_file_version, read_table_metadata,
};
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
}
