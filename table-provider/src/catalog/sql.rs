//! A SQL catalog on SQLite, compatible with PyIceberg's `SqlCatalog` and Iceberg Java's
//! `JdbcCatalog`: tables `iceberg_tables` and `iceberg_namespace_properties`, namespaces
//! stored dotted (`a.b`), rows scoped by `catalog_name`.
//!
//! SQLite calls are blocking; they run on tokio's blocking pool.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::metadata_file::MetadataCache;
use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::io::{LocationMap, StoreRegistry, TableIo, normalize_location};

const CREATE_TABLES: &str = "
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name VARCHAR(255) NOT NULL,
    table_namespace VARCHAR(255) NOT NULL,
    table_name VARCHAR(255) NOT NULL,
    metadata_location VARCHAR(1000),
    previous_metadata_location VARCHAR(1000),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name VARCHAR(255) NOT NULL,
    namespace VARCHAR(255) NOT NULL,
    property_key VARCHAR(255) NOT NULL,
    property_value VARCHAR(1000),
    PRIMARY KEY (catalog_name, namespace, property_key)
);";

/// An Iceberg SQL catalog stored in a SQLite database.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    name: String,
    db_path: PathBuf,
    conn: Arc<Mutex<Connection>>,
    /// Java's JdbcCatalog (schema V1) has an `iceberg_type` column (TABLE / VIEW).
    has_type_column: bool,
    stores: StoreRegistry,
    metadata_cache: MetadataCache,
}

impl SqlCatalog {
    /// Opens (creating if missing) the SQLite catalog database at `db_path`; `catalog_name`
    /// selects this catalog's rows (PyIceberg and Java store several catalogs in one database).
    pub fn open_sqlite(db_path: impl Into<PathBuf>, catalog_name: &str) -> Result<Self> {
        Self::open_sqlite_with_stores(db_path, catalog_name, StoreRegistry::default())
    }

    /// As [`SqlCatalog::open_sqlite`], reading files through the given object stores.
    pub fn open_sqlite_with_stores(
        db_path: impl Into<PathBuf>,
        catalog_name: &str,
        stores: StoreRegistry,
    ) -> Result<Self> {
        let db_path = db_path.into();
        let db_err = |e: rusqlite::Error| Error::CatalogDatabase {
            path: db_path.display().to_string(),
            message: e.to_string(),
        };
        let conn = Connection::open(&db_path).map_err(db_err)?;
        conn.execute_batch(CREATE_TABLES).map_err(db_err)?;
        let has_type_column = conn
            .prepare(
                "SELECT 1 FROM pragma_table_info('iceberg_tables') WHERE name = 'iceberg_type'",
            )
            .and_then(|mut s| s.exists([]))
            .map_err(db_err)?;
        Ok(Self {
            name: catalog_name.to_string(),
            db_path,
            conn: Arc::new(Mutex::new(conn)),
            has_type_column,
            stores,
            metadata_cache: MetadataCache::default(),
        })
    }

    /// The catalog name whose rows this catalog reads.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs a blocking database call on the blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let name = self.name.clone();
        let path = self.db_path.display().to_string();
        let path2 = path.clone();
        tokio::task::spawn_blocking(move || {
            let guard = conn.lock().map_err(|_| Error::CatalogDatabase {
                path: path.clone(),
                message: "connection poisoned by an earlier panic".into(),
            })?;
            f(&guard, &name).map_err(|e| Error::CatalogDatabase {
                path,
                message: e.to_string(),
            })
        })
        .await
        .map_err(|e| Error::CatalogDatabase {
            path: path2,
            message: format!("catalog task failed: {e}"),
        })?
    }

    /// Records an existing table (its metadata file) in the catalog.
    pub async fn register_table(&self, ident: &TableIdent, metadata_location: &str) -> Result<()> {
        let namespace = ident.namespace.dotted();
        let table = ident.name.clone();
        let location = metadata_location.to_string();
        let inserted = self
            .with_conn(move |conn, catalog| {
                conn.execute(
                    "INSERT OR IGNORE INTO iceberg_tables \
                     (catalog_name, table_namespace, table_name, metadata_location, previous_metadata_location) \
                     VALUES (?1, ?2, ?3, ?4, NULL)",
                    params![catalog, namespace, table, location],
                )
            })
            .await?;
        if inserted == 0 {
            return Err(Error::InvalidArgument(format!(
                "table {ident} already exists in catalog {}",
                self.name
            )));
        }
        Ok(())
    }

    /// Creates a namespace (a row in `iceberg_namespace_properties`, as PyIceberg does).
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<()> {
        let dotted = namespace.dotted();
        self.with_conn(move |conn, catalog| {
            conn.execute(
                "INSERT OR IGNORE INTO iceberg_namespace_properties \
                 (catalog_name, namespace, property_key, property_value) VALUES (?1, ?2, 'exists', 'true')",
                params![catalog, dotted],
            )
        })
        .await?;
        Ok(())
    }
}

#[async_trait]
impl Catalog for SqlCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let names = self
            .with_conn(|conn, catalog| {
                let mut stmt = conn.prepare(
                    "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = ?1 \
                     UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = ?1",
                )?;
                let rows = stmt.query_map([catalog], |row| row.get::<_, String>(0))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        let mut namespaces: Vec<Namespace> =
            names.iter().map(|n| Namespace::from_dotted(n)).collect();
        // Parents of nested namespaces are namespaces too.
        let mut parents = Vec::new();
        for ns in &namespaces {
            for depth in 1..ns.levels().len() {
                parents.push(Namespace::new(ns.levels()[..depth].to_vec()));
            }
        }
        namespaces.extend(parents);
        namespaces.sort();
        namespaces.dedup();
        Ok(namespaces)
    }

    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>> {
        let dotted = namespace.dotted();
        let only_tables = self.has_type_column;
        let names = self
            .with_conn(move |conn, catalog| {
                let sql = if only_tables {
                    "SELECT table_name FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 \
                     AND (iceberg_type IS NULL OR iceberg_type = 'TABLE') ORDER BY table_name"
                } else {
                    "SELECT table_name FROM iceberg_tables WHERE catalog_name = ?1 AND table_namespace = ?2 \
                     ORDER BY table_name"
                };
                let mut stmt = conn.prepare(sql)?;
                let rows = stmt.query_map(params![catalog, dotted], |row| row.get::<_, String>(0))?;
                rows.collect::<rusqlite::Result<Vec<_>>>()
            })
            .await?;
        Ok(names
            .into_iter()
            .map(|n| TableIdent::new(namespace.clone(), n))
            .collect())
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        let dotted = ident.namespace.dotted();
        let name = ident.name.clone();
        let location: Option<Option<String>> = self
            .with_conn(move |conn, catalog| {
                conn.query_row(
                    "SELECT metadata_location FROM iceberg_tables \
                     WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
                    params![catalog, dotted, name],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
            })
            .await?;
        let Some(Some(metadata_location)) = location else {
            return Err(Error::NotFound(format!(
                "table {ident} does not exist in catalog {}",
                self.name
            )));
        };
        let bootstrap = TableIo::new(self.stores.clone(), LocationMap::identity());
        let parsed = self
            .metadata_cache
            .read(&bootstrap, &ident.to_string(), &metadata_location)
            .await?;
        let (metadata, refs) = (parsed.metadata, parsed.refs);
        // A table whose files moved with its metadata: <root>/metadata/<file>.
        let normalized = normalize_location(&metadata_location);
        let locations = match normalized.rsplit_once('/') {
            Some((dir, _)) if dir.ends_with("/metadata") => {
                let root = &dir[..dir.len() - "/metadata".len()];
                LocationMap::moved(metadata.location(), root)
            }
            _ => LocationMap::identity(),
        };
        let io = TableIo::new(self.stores.clone(), locations);
        Ok(LoadedTable::new(
            ident.clone(),
            metadata_location,
            metadata,
            refs,
            io,
        ))
    }
}
