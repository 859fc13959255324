//! A SQL catalog on SQLite, compatible with PyIceberg's `SqlCatalog` and Iceberg Java's
//! `JdbcCatalog`: tables `iceberg_tables` and `iceberg_namespace_properties`, namespaces
//! stored dotted (`a.b`), rows scoped by `catalog_name`.
//!
//! SQLite calls are blocking; they run on tokio's blocking pool.
//!
//! Commits follow Iceberg Java's `JdbcTableOperations` (and PyIceberg): a new metadata file
//! `metadata/{N+1:05}-<uuid>.metadata.json`, then a compare-and-set of the table's row
//! (`UPDATE … SET metadata_location = new WHERE … AND metadata_location = old`): no row updated
//! is a conflict (the new file is deleted), an error of the UPDATE itself leaves the outcome
//! unknown.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use iceberg::spec::TableMetadata;
use object_store::path::Path;
use rusqlite::{Connection, OptionalExtension, Transaction, TransactionBehavior, params};

use super::metadata_file::{MetadataCache, encode_table_metadata, metadata_file_version};
use super::writes::{
    delete_quietly, delete_tree, file_name_of, loaded_table, metadata_dir_location, put_new,
    warehouse_location,
};
use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::io::{LocationMap, StoreRegistry, TableIo, child_path, normalize_location};

/// How the compare-and-set of a commit ended.
enum Swap {
    /// The row now names the new metadata file.
    Done,
    /// No row named the base metadata file any more (or the table is gone).
    Conflict,
    /// The UPDATE or its COMMIT failed: it may or may not have happened.
    Unknown(String),
}

/// The version of a metadata file named `NNNNN-<uuid>.metadata.json` (Java's and PyIceberg's
/// names); `None` for other names (`vN.metadata.json` included, as Java's `parseVersion`).
fn sequential_version(file_name: &str) -> Option<i64> {
    if file_name.starts_with('v') {
        return None;
    }
    metadata_file_version(file_name)
}

/// The location map of a table whose metadata file is at `metadata_location`: a table whose
/// files moved with its metadata (`<root>/metadata/<file>`) is read under `<root>`.
fn location_map(metadata_location: &str, metadata: &TableMetadata) -> LocationMap {
    let normalized = normalize_location(metadata_location);
    match normalized.rsplit_once('/') {
        Some((dir, _)) if dir.ends_with("/metadata") => {
            let root = &dir[..dir.len() - "/metadata".len()];
            LocationMap::moved(metadata.location(), root)
        }
        _ => LocationMap::identity(),
    }
}

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
    /// Where new tables go by default (normalised), if configured.
    warehouse: Option<String>,
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
            warehouse: None,
            stores,
            metadata_cache: MetadataCache::default(),
        })
    }

    /// This catalog with a warehouse (a local directory or a URL): new tables of namespaces
    /// without a `location` property go to `<warehouse>/<dotted namespace>/<table>`, as
    /// PyIceberg's `SqlCatalog` puts them.
    pub fn with_warehouse(mut self, warehouse: &str) -> Result<Self> {
        self.warehouse = Some(warehouse_location(warehouse)?);
        Ok(self)
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
        let path = self.db_path.display().to_string();
        self.with_conn_task(f)
            .await
            .map_err(|message| Error::CatalogDatabase {
                path,
                message: format!("catalog task failed: {message}"),
            })?
    }

    /// As [`SqlCatalog::with_conn`], telling apart a task that failed (the outer error: it may
    /// have run `f` in part or whole) from an error `f` returned.
    async fn with_conn_task<T, F>(&self, f: F) -> std::result::Result<Result<T>, String>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, &str) -> rusqlite::Result<T> + Send + 'static,
    {
        let conn = Arc::clone(&self.conn);
        let name = self.name.clone();
        let path = self.db_path.display().to_string();
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
        .map_err(|e| e.to_string())
    }

    /// The SQL condition selecting tables (not views) when the schema knows the difference.
    fn table_filter(&self) -> &'static str {
        if self.has_type_column {
            " AND (iceberg_type = 'TABLE' OR iceberg_type IS NULL)"
        } else {
            ""
        }
    }

    /// A namespace's property, if set.
    async fn namespace_property(&self, namespace: &Namespace, key: &str) -> Result<Option<String>> {
        let dotted = namespace.dotted();
        let key = key.to_string();
        let value: Option<Option<String>> = self
            .with_conn(move |conn, catalog| {
                conn.query_row(
                    "SELECT property_value FROM iceberg_namespace_properties \
                     WHERE catalog_name = ?1 AND namespace = ?2 AND property_key = ?3",
                    params![catalog, dotted, key],
                    |row| row.get::<_, Option<String>>(0),
                )
                .optional()
            })
            .await?;
        Ok(value.flatten())
    }

    /// Whether the table (or a view of that name) has a row.
    async fn table_row_exists(&self, ident: &TableIdent) -> Result<bool> {
        let dotted = ident.namespace.dotted();
        let name = ident.name.clone();
        self.with_conn(move |conn, catalog| {
            conn.prepare(
                "SELECT 1 FROM iceberg_tables \
                 WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3",
            )?
            .exists(params![catalog, dotted, name])
        })
        .await
    }

    /// The store and object path of a location this catalog writes, where its bytes are.
    fn resolve(
        &self,
        io: &TableIo,
        logical: &str,
    ) -> Result<(Arc<dyn object_store::ObjectStore>, Path)> {
        let (store, _, path) = io.resolve(logical)?;
        Ok((store, path))
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
            return Err(Error::AlreadyExists(format!(
                "table {ident} in catalog {}",
                self.name
            )));
        }
        Ok(())
    }

    /// Creates a namespace unless it exists: [`Catalog::create_namespace`] with
    /// `if_not_exists` (kept for callers that name this type; prefer the trait method).
    pub async fn create_namespace(&self, namespace: &Namespace) -> Result<()> {
        Catalog::create_namespace(self, namespace, true).await
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
        let locations = location_map(&metadata_location, &metadata);
        let io = TableIo::new(self.stores.clone(), locations);
        Ok(LoadedTable::new(
            ident.clone(),
            metadata_location,
            metadata,
            refs,
            io,
        ))
    }

    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()> {
        let levels = namespace.levels();
        if levels.is_empty() || levels.iter().any(|l| l.is_empty() || l.contains('.')) {
            return Err(Error::InvalidArgument(format!(
                "namespace {namespace:?}: a SQL catalog stores namespaces dotted: every level must \
                 be non-empty and hold no '.'"
            )));
        }
        if self.namespace_exists(namespace).await? {
            if if_not_exists {
                return Ok(());
            }
            return Err(Error::AlreadyExists(format!(
                "namespace {namespace} in catalog {}",
                self.name
            )));
        }
        // What PyIceberg writes for a namespace without properties.
        let dotted = namespace.dotted();
        let inserted = self
            .with_conn(move |conn, catalog| {
                conn.execute(
                    "INSERT OR IGNORE INTO iceberg_namespace_properties \
                     (catalog_name, namespace, property_key, property_value) \
                     VALUES (?1, ?2, 'exists', 'true')",
                    params![catalog, dotted],
                )
            })
            .await?;
        if inserted == 0 && !if_not_exists {
            return Err(Error::AlreadyExists(format!(
                "namespace {namespace} in catalog {} (created concurrently)",
                self.name
            )));
        }
        Ok(())
    }

    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()> {
        if !self.namespace_exists(namespace).await? {
            return Err(Error::NotFound(format!(
                "namespace {namespace} does not exist in catalog {}",
                self.name
            )));
        }
        let dotted = namespace.dotted();
        let has_type = self.has_type_column;
        let rows: Vec<(String, Option<String>)> = self
            .with_conn(move |conn, catalog| {
                let sql = if has_type {
                    "SELECT table_name, iceberg_type FROM iceberg_tables \
                     WHERE catalog_name = ?1 AND table_namespace = ?2 ORDER BY table_name"
                } else {
                    "SELECT table_name, NULL FROM iceberg_tables \
                     WHERE catalog_name = ?1 AND table_namespace = ?2 ORDER BY table_name"
                };
                let mut stmt = conn.prepare(sql)?;
                let rows = stmt.query_map(params![catalog, dotted], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, Option<String>>(1)?))
                })?;
                rows.collect()
            })
            .await?;
        let mut remaining: Vec<String> = rows
            .into_iter()
            .map(|(name, kind)| match kind.as_deref() {
                Some("VIEW") => format!("view {name}"),
                _ => format!("table {name}"),
            })
            .collect();
        let depth = namespace.levels().len();
        remaining.extend(
            self.list_namespaces()
                .await?
                .into_iter()
                .filter(|ns| {
                    ns.levels().len() > depth && ns.levels()[..depth] == *namespace.levels()
                })
                .map(|ns| format!("namespace {ns}")),
        );
        if !remaining.is_empty() {
            return Err(Error::NamespaceNotEmpty {
                namespace: namespace.to_string(),
                remaining: remaining.join(", "),
            });
        }
        let dotted = namespace.dotted();
        self.with_conn(move |conn, catalog| {
            conn.execute(
                "DELETE FROM iceberg_namespace_properties WHERE catalog_name = ?1 AND namespace = ?2",
                params![catalog, dotted],
            )
        })
        .await?;
        Ok(())
    }

    async fn default_table_location(&self, ident: &TableIdent) -> Result<String> {
        // Both names become one literal path segment each.
        let check = Path::from("warehouse");
        child_path(&check, &ident.namespace.dotted())?;
        child_path(&check, &ident.name)?;
        if let Some(location) = self
            .namespace_property(&ident.namespace, "location")
            .await?
        {
            return Ok(format!("{}/{}", location.trim_end_matches('/'), ident.name));
        }
        match &self.warehouse {
            Some(warehouse) => Ok(format!(
                "{warehouse}/{}/{}",
                ident.namespace.dotted(),
                ident.name
            )),
            None => Err(Error::InvalidArgument(format!(
                "table {ident}: catalog {} has no warehouse and namespace {} no location: \
                 name the table's location",
                self.name, ident.namespace
            ))),
        }
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        if ident.name.is_empty() {
            return Err(Error::InvalidArgument("a table needs a name".into()));
        }
        if !self.namespace_exists(&ident.namespace).await? {
            return Err(Error::NotFound(format!(
                "namespace {} does not exist in catalog {}",
                ident.namespace, self.name
            )));
        }
        let exists = || Error::AlreadyExists(format!("table {ident} in catalog {}", self.name));
        if self.table_row_exists(ident).await? {
            return Err(exists());
        }
        let table = ident.to_string();
        let bytes = encode_table_metadata(&table, &metadata)?;
        let logical = format!(
            "{}/00000-{}.metadata.json",
            metadata_dir_location(&metadata),
            uuid::Uuid::new_v4()
        );
        let io = TableIo::new(self.stores.clone(), LocationMap::identity());
        let metadata_location = io.locations().resolve(&logical);
        let (store, path) = self.resolve(&io, &logical)?;
        put_new(&store, &path, &bytes).await?;
        let namespace = ident.namespace.dotted();
        let name = ident.name.clone();
        let location = metadata_location.clone();
        let has_type = self.has_type_column;
        let inserted = self
            .with_conn(move |conn, catalog| {
                let sql = if has_type {
                    "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                     metadata_location, previous_metadata_location, iceberg_type) \
                     VALUES (?1, ?2, ?3, ?4, NULL, 'TABLE')"
                } else {
                    "INSERT OR IGNORE INTO iceberg_tables (catalog_name, table_namespace, table_name, \
                     metadata_location, previous_metadata_location) VALUES (?1, ?2, ?3, ?4, NULL)"
                };
                conn.execute(sql, params![catalog, namespace, name, location])
            })
            .await?;
        if inserted == 0 {
            delete_quietly(&store, &path).await;
            return Err(exists());
        }
        let io = TableIo::new(
            self.stores.clone(),
            location_map(&metadata_location, &metadata),
        );
        loaded_table(ident, metadata_location, &bytes, io, &self.metadata_cache)
    }

    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        // Purging deletes the directory of the table's location: first make sure no other
        // table of the database keeps its metadata there.
        let purge_dir = if purge {
            let table = self.load_table(ident).await?;
            let location = table.io().locations().resolve(table.metadata().location());
            let others: Vec<(String, String, String, Option<String>)> = self
                .with_conn(|conn, _| {
                    let mut stmt = conn.prepare(
                        "SELECT catalog_name, table_namespace, table_name, metadata_location \
                         FROM iceberg_tables",
                    )?;
                    let rows = stmt.query_map([], |row| {
                        Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
                    })?;
                    rows.collect()
                })
                .await?;
            let inside = format!("{location}/");
            for (catalog, namespace, name, metadata_location) in others {
                let this = catalog == self.name
                    && namespace == ident.namespace.dotted()
                    && name == ident.name;
                if !this
                    && metadata_location
                        .is_some_and(|m| normalize_location(&m).starts_with(&inside))
                {
                    return Err(Error::InvalidArgument(format!(
                        "cannot purge table {ident}: its location {location} holds table \
                         {catalog}.{namespace}.{name} too"
                    )));
                }
            }
            let (store, _, prefix) = self.stores.resolve(&location)?;
            Some((store, prefix))
        } else {
            None
        };
        let namespace = ident.namespace.dotted();
        let name = ident.name.clone();
        let filter = self.table_filter();
        let deleted = self
            .with_conn(move |conn, catalog| {
                conn.execute(
                    &format!(
                        "DELETE FROM iceberg_tables \
                         WHERE catalog_name = ?1 AND table_namespace = ?2 AND table_name = ?3{filter}"
                    ),
                    params![catalog, namespace, name],
                )
            })
            .await?;
        if deleted == 0 {
            return Err(Error::NotFound(format!(
                "table {ident} does not exist in catalog {}",
                self.name
            )));
        }
        if let Some((store, prefix)) = purge_dir {
            delete_tree(&store, &prefix).await?;
        }
        Ok(())
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        let ident = base.ident();
        let table = ident.to_string();
        let base_location = base.metadata_location().to_string();
        let base_version =
            sequential_version(&file_name_of(&base_location)?).unwrap_or_else(|| {
                i64::try_from(base.metadata().metadata_log().len()).unwrap_or(i64::MAX - 1)
            });
        let version = base_version + 1;
        let bytes = encode_table_metadata(&table, &metadata)?;
        let logical = format!(
            "{}/{version:05}-{}.metadata.json",
            metadata_dir_location(&metadata),
            uuid::Uuid::new_v4()
        );
        // Written where the bytes go (a moved table's new location), and recorded as such:
        // the catalog row is read unmapped.
        let metadata_location = base.io().locations().resolve(&logical);
        let (store, path) = self.resolve(base.io(), &logical)?;
        put_new(&store, &path, &bytes).await?;

        let namespace = ident.namespace.dotted();
        let name = ident.name.clone();
        let new_location = metadata_location.clone();
        let old_location = base_location.clone();
        let filter = self.table_filter();
        let swap = self
            .with_conn_task(move |conn, catalog| {
                // Errors before the UPDATE (BEGIN) mean nothing happened: they come back as
                // errors. Errors of the UPDATE or the COMMIT may hide a change: Unknown.
                let tx = Transaction::new_unchecked(conn, TransactionBehavior::Immediate)?;
                let sql = format!(
                    "UPDATE iceberg_tables SET metadata_location = ?1, previous_metadata_location = ?2 \
                     WHERE catalog_name = ?3 AND table_namespace = ?4 AND table_name = ?5 \
                     AND metadata_location = ?2{filter}"
                );
                match tx.execute(
                    &sql,
                    params![new_location, old_location, catalog, namespace, name],
                ) {
                    Ok(0) => Ok(Swap::Conflict),
                    Ok(1) => Ok(match tx.commit() {
                        Ok(()) => Swap::Done,
                        Err(e) => Swap::Unknown(format!("COMMIT failed: {e}")),
                    }),
                    // The primary key makes this impossible; rolled back.
                    Ok(_) => Err(rusqlite::Error::QueryReturnedMoreThanOneRow),
                    Err(e) => Ok(Swap::Unknown(format!("UPDATE failed: {e}"))),
                }
            })
            .await;
        match swap {
            Ok(Ok(Swap::Done)) => {
                let io = TableIo::new(
                    self.stores.clone(),
                    location_map(&metadata_location, &metadata),
                );
                loaded_table(ident, metadata_location, &bytes, io, &self.metadata_cache)
            }
            Ok(Ok(Swap::Conflict)) => {
                delete_quietly(&store, &path).await;
                Err(Error::CommitConflict {
                    table,
                    message: format!(
                        "its current metadata is no longer {base_location} (catalog {})",
                        self.name
                    ),
                })
            }
            Ok(Ok(Swap::Unknown(message))) => Err(Error::CommitStateUnknown {
                table,
                message: format!("swapping in {metadata_location}: {message}"),
            }),
            Ok(Err(e)) => {
                delete_quietly(&store, &path).await;
                Err(e)
            }
            Err(task) => Err(Error::CommitStateUnknown {
                table,
                message: format!("swapping in {metadata_location}: catalog task failed: {task}"),
            }),
        }
    }
}
