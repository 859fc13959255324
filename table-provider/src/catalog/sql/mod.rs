//! The SQL catalog, compatible with PyIceberg's `SqlCatalog` and Iceberg Java's `JdbcCatalog`:
//! tables `iceberg_tables` and `iceberg_namespace_properties`, namespaces stored dotted
//! (`a.b`), rows scoped by `catalog_name`; on SQLite ([`sqlite`]) or PostgreSQL
//! ([`postgres`]). This file holds the catalog's logic and all its SQL; a backend
//! ([`backend::SqlBackend`]) only runs statements.
//!
//! Commits follow Iceberg Java's `JdbcTableOperations` (and PyIceberg): a new metadata file
//! `metadata/{N+1:05}-<uuid>.metadata.json`, then a compare-and-set of the table's row in a
//! transaction (`UPDATE … SET metadata_location = new WHERE … AND metadata_location = old`):
//! no row updated is a conflict (the new file is deleted), an error of the UPDATE or its
//! COMMIT leaves the outcome unknown.

mod backend;
mod postgres;
mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::spec::TableMetadata;
use object_store::path::Path;

use self::backend::{CREATE_TABLES, PROBE_TYPE_COLUMN, Param, Row, SqlBackend, Updated};
use self::postgres::PostgresBackend;
use self::sqlite::SqliteBackend;
use super::metadata_file::{MetadataCache, encode_table_metadata, metadata_file_version};
use super::writes::{
    delete_quietly, delete_tree, file_name_of, loaded_table, metadata_dir_location,
    moved_table_locations, put_new, warehouse_location,
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

/// A text parameter.
fn text(value: &str) -> Param {
    Some(value.to_string())
}

/// Column `i` of a row (NULL and a missing column alike: `None`).
fn column(row: &Row, i: usize) -> Option<String> {
    row.get(i).cloned().flatten()
}

/// An Iceberg SQL catalog stored in a SQLite or PostgreSQL database.
#[derive(Debug, Clone)]
pub struct SqlCatalog {
    name: String,
    backend: Arc<dyn SqlBackend>,
    /// Java's JdbcCatalog V1 and PyIceberg's "v1" schema have an `iceberg_type` column
    /// (TABLE / VIEW).
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
        let (backend, has_type_column) =
            SqliteBackend::open(&db_path).map_err(|message| Error::CatalogDatabase {
                path: format!("{} of catalog {catalog_name}", db_path.display()),
                message,
            })?;
        Ok(Self::with_backend(
            Arc::new(backend),
            has_type_column,
            catalog_name,
            stores,
        ))
    }

    /// Connects to the PostgreSQL catalog database at `uri`
    /// (`postgresql://user:password@host:port/db`), creating the catalog's tables if missing
    /// (as PyIceberg does); `catalog_name` selects this catalog's rows. Errors name the
    /// catalog and the server, never the password; an unreachable server fails within the
    /// connect timeout (URI parameter `connect_timeout`, default 10 s).
    pub async fn connect_postgres(
        uri: &str,
        catalog_name: &str,
        stores: StoreRegistry,
    ) -> Result<Self> {
        let backend = PostgresBackend::new(uri).map_err(|message| Error::CatalogDatabase {
            path: format!("PostgreSQL of catalog {catalog_name}"),
            message,
        })?;
        let db_error = |message: String| Error::CatalogDatabase {
            path: format!("{} of catalog {catalog_name}", backend.describe()),
            message,
        };
        // Two servers creating the tables at once can collide in PostgreSQL's catalog
        // (`CREATE TABLE IF NOT EXISTS` is not atomic there): the second try sees them.
        if let Err(first) = backend.execute_batch(CREATE_TABLES).await {
            if first.starts_with("cannot connect") {
                return Err(db_error(first));
            }
            backend
                .execute_batch(CREATE_TABLES)
                .await
                .map_err(|e| db_error(format!("creating the catalog tables: {e}")))?;
        }
        let has_type_column = backend.query(PROBE_TYPE_COLUMN, &[]).await.is_ok();
        Ok(Self::with_backend(
            Arc::new(backend),
            has_type_column,
            catalog_name,
            stores,
        ))
    }

    fn with_backend(
        backend: Arc<dyn SqlBackend>,
        has_type_column: bool,
        catalog_name: &str,
        stores: StoreRegistry,
    ) -> Self {
        Self {
            name: catalog_name.to_string(),
            backend,
            has_type_column,
            warehouse: None,
            stores,
            metadata_cache: MetadataCache::default(),
        }
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

    /// A database error, naming the database and this catalog.
    fn db_error(&self, message: String) -> Error {
        Error::CatalogDatabase {
            path: format!("{} of catalog {}", self.backend.describe(), self.name),
            message,
        }
    }

    /// Runs a query; `$1` is this catalog's name, `params` are `$2`, `$3`, ….
    async fn query(&self, sql: &str, params: &[Param]) -> Result<Vec<Row>> {
        let all = self.with_catalog(params);
        self.backend
            .query(sql, &all)
            .await
            .map_err(|e| self.db_error(e))
    }

    /// Runs a statement (parameters as [`SqlCatalog::query`]); the rows it changed.
    async fn execute(&self, sql: &str, params: &[Param]) -> Result<u64> {
        let all = self.with_catalog(params);
        self.backend
            .execute(sql, &all)
            .await
            .map_err(|e| self.db_error(e))
    }

    /// This catalog's name followed by `params`.
    fn with_catalog(&self, params: &[Param]) -> Vec<Param> {
        let mut all = Vec::with_capacity(params.len() + 1);
        all.push(text(&self.name));
        all.extend_from_slice(params);
        all
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
        let rows = self
            .query(
                "SELECT property_value FROM iceberg_namespace_properties \
                 WHERE catalog_name = $1 AND namespace = $2 AND property_key = $3",
                &[text(&namespace.dotted()), text(key)],
            )
            .await?;
        Ok(rows.first().and_then(|row| column(row, 0)))
    }

    /// Whether the table (or a view of that name) has a row.
    async fn table_row_exists(&self, ident: &TableIdent) -> Result<bool> {
        let rows = self
            .query(
                "SELECT table_name FROM iceberg_tables \
                 WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
                &[text(&ident.namespace.dotted()), text(&ident.name)],
            )
            .await?;
        Ok(!rows.is_empty())
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
        let sql = if self.has_type_column {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, \
             metadata_location, previous_metadata_location, iceberg_type) \
             VALUES ($1, $2, $3, $4, NULL, 'TABLE') ON CONFLICT DO NOTHING"
        } else {
            "INSERT INTO iceberg_tables (catalog_name, table_namespace, table_name, \
             metadata_location, previous_metadata_location) \
             VALUES ($1, $2, $3, $4, NULL) ON CONFLICT DO NOTHING"
        };
        let inserted = self
            .execute(
                sql,
                &[
                    text(&ident.namespace.dotted()),
                    text(&ident.name),
                    text(metadata_location),
                ],
            )
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
        let rows = self
            .query(
                "SELECT table_namespace FROM iceberg_tables WHERE catalog_name = $1 \
                 UNION SELECT namespace FROM iceberg_namespace_properties WHERE catalog_name = $1",
                &[],
            )
            .await?;
        let mut namespaces: Vec<Namespace> = rows
            .iter()
            .filter_map(|row| column(row, 0))
            .map(|n| Namespace::from_dotted(&n))
            .collect();
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
        let sql = format!(
            "SELECT table_name FROM iceberg_tables WHERE catalog_name = $1 AND table_namespace = $2{} \
             ORDER BY table_name",
            self.table_filter()
        );
        let rows = self.query(&sql, &[text(&namespace.dotted())]).await?;
        Ok(rows
            .iter()
            .filter_map(|row| column(row, 0))
            .map(|n| TableIdent::new(namespace.clone(), n))
            .collect())
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        let rows = self
            .query(
                "SELECT metadata_location FROM iceberg_tables \
                 WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3",
                &[text(&ident.namespace.dotted()), text(&ident.name)],
            )
            .await?;
        let Some(metadata_location) = rows.first().and_then(|row| column(row, 0)) else {
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
        let locations = moved_table_locations(&metadata_location, &metadata);
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
        let inserted = self
            .execute(
                "INSERT INTO iceberg_namespace_properties \
                 (catalog_name, namespace, property_key, property_value) \
                 VALUES ($1, $2, 'exists', 'true') ON CONFLICT DO NOTHING",
                &[text(&namespace.dotted())],
            )
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
        let sql = if self.has_type_column {
            "SELECT table_name, iceberg_type FROM iceberg_tables \
             WHERE catalog_name = $1 AND table_namespace = $2 ORDER BY table_name"
        } else {
            "SELECT table_name FROM iceberg_tables \
             WHERE catalog_name = $1 AND table_namespace = $2 ORDER BY table_name"
        };
        let rows = self.query(sql, &[text(&namespace.dotted())]).await?;
        let mut remaining: Vec<String> = rows
            .iter()
            .map(|row| {
                let name = column(row, 0).unwrap_or_default();
                match column(row, 1).as_deref() {
                    Some("VIEW") => format!("view {name}"),
                    _ => format!("table {name}"),
                }
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
        self.execute(
            "DELETE FROM iceberg_namespace_properties WHERE catalog_name = $1 AND namespace = $2",
            &[text(&namespace.dotted())],
        )
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
        put_new(&store, &path, Bytes::copy_from_slice(&bytes)).await?;
        // An error of the INSERT itself may hide a row naming the file: the file stays.
        match self.register_table(ident, &metadata_location).await {
            Ok(()) => {}
            Err(Error::AlreadyExists(_)) => {
                delete_quietly(&store, &path).await;
                return Err(exists());
            }
            Err(e) => return Err(e),
        }
        let io = TableIo::new(
            self.stores.clone(),
            moved_table_locations(&metadata_location, &metadata),
        );
        loaded_table(ident, metadata_location, &bytes, io, &self.metadata_cache)
    }

    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        // Purging deletes the directory of the table's location: first make sure no other
        // table of the database keeps its metadata there.
        let purge_dir = if purge {
            let table = self.load_table(ident).await?;
            let location = table.io().locations().resolve(table.metadata().location());
            let others = self
                .backend
                .query(
                    "SELECT catalog_name, table_namespace, table_name, metadata_location \
                     FROM iceberg_tables",
                    &[],
                )
                .await
                .map_err(|e| self.db_error(e))?;
            let inside = format!("{location}/");
            for row in others {
                let [catalog, namespace, name] =
                    [0, 1, 2].map(|i| column(&row, i).unwrap_or_default());
                let metadata_location = column(&row, 3);
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
        let sql = format!(
            "DELETE FROM iceberg_tables \
             WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3{}",
            self.table_filter()
        );
        let deleted = self
            .execute(&sql, &[text(&ident.namespace.dotted()), text(&ident.name)])
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
        put_new(&store, &path, Bytes::copy_from_slice(&bytes)).await?;

        let sql = format!(
            "UPDATE iceberg_tables SET metadata_location = $4, previous_metadata_location = $5 \
             WHERE catalog_name = $1 AND table_namespace = $2 AND table_name = $3 \
             AND metadata_location = $5{}",
            self.table_filter()
        );
        let params = self.with_catalog(&[
            text(&ident.namespace.dotted()),
            text(&ident.name),
            text(&metadata_location),
            text(&base_location),
        ]);
        let swap = match self.backend.update_in_transaction(&sql, &params).await {
            Ok(Updated::Rows(0)) => Ok(Swap::Conflict),
            Ok(Updated::Rows(_)) => Ok(Swap::Done),
            Ok(Updated::Unknown(message)) => Ok(Swap::Unknown(message)),
            Err(message) => Err(self.db_error(message)),
        };
        match swap {
            Ok(Swap::Done) => {
                let io = TableIo::new(
                    self.stores.clone(),
                    moved_table_locations(&metadata_location, &metadata),
                );
                loaded_table(ident, metadata_location, &bytes, io, &self.metadata_cache)
            }
            Ok(Swap::Conflict) => {
                delete_quietly(&store, &path).await;
                Err(Error::CommitConflict {
                    table,
                    message: format!(
                        "its current metadata is no longer {base_location} (catalog {})",
                        self.name
                    ),
                })
            }
            Ok(Swap::Unknown(message)) => Err(Error::CommitStateUnknown {
                table,
                message: format!("swapping in {metadata_location}: {message}"),
            }),
            Err(e) => {
                delete_quietly(&store, &path).await;
                Err(e)
            }
        }
    }
}
