//! A warehouse directory in Iceberg's Hadoop layout: `WAREHOUSE/<namespace…>/<table>/metadata/`.
//!
//! The current metadata file comes from `version-hint.text` (Iceberg Java's name;
//! `version-hint.txt` accepted) or, without a usable hint, from the highest-numbered metadata
//! file (`vN.metadata.json` or `NNNNN-<uuid>.metadata.json`, gzip variants included). A table
//! whose metadata `location` differs from the directory it was found in has moved: its paths
//! are read under the directory (see [`crate::io::LocationMap`]).

use std::sync::Arc;

use async_trait::async_trait;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt};

use super::metadata_file::{MetadataCache, metadata_file_version};
use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::io::{LocationMap, StoreRegistry, TableIo, child_path, normalize_location};

const VERSION_HINTS: [&str; 2] = ["version-hint.text", "version-hint.txt"];
const MAX_NAMESPACE_DEPTH: usize = 8;

/// A filesystem (Hadoop layout) warehouse.
#[derive(Debug, Clone)]
pub struct FileSystemCatalog {
    /// Normalised URL of the warehouse root (`file:///abs/dir`).
    root: String,
    store: Arc<dyn ObjectStore>,
    root_path: Path,
    stores: StoreRegistry,
    metadata_cache: MetadataCache,
}

impl FileSystemCatalog {
    /// A catalog over the warehouse at `warehouse` (a local directory or a `file:` URL).
    pub fn new(warehouse: &str) -> Result<Self> {
        Self::with_stores(warehouse, StoreRegistry::default())
    }

    /// A catalog reading through the given object stores.
    pub fn with_stores(warehouse: &str, stores: StoreRegistry) -> Result<Self> {
        let absolute = if warehouse.starts_with('/') || warehouse.contains(':') {
            warehouse.to_string()
        } else {
            let cwd = std::env::current_dir().map_err(|e| {
                Error::InvalidArgument(format!("warehouse {warehouse}: no working directory: {e}"))
            })?;
            cwd.join(warehouse).to_string_lossy().into_owned()
        };
        let root = normalize_location(&absolute);
        let (store, _, root_path) = stores.resolve(&root)?;
        Ok(Self {
            root,
            store,
            root_path,
            stores,
            metadata_cache: MetadataCache::default(),
        })
    }

    /// The warehouse root as a normalised URL.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The directory of a namespace or table: each level is a literal directory name.
    fn dir_of(&self, levels: &[String]) -> Result<Path> {
        levels
            .iter()
            .try_fold(self.root_path.clone(), |p, level| child_path(&p, level))
    }

    /// Names of the sub-directories of `dir` (hidden ones skipped).
    async fn subdirs(&self, dir: &Path) -> Result<Vec<String>> {
        let listing = self.store.list_with_delimiter(Some(dir)).await?;
        let mut names: Vec<String> = listing
            .common_prefixes
            .iter()
            .filter_map(|p| p.filename().map(str::to_string))
            .filter(|n| !n.starts_with('.') && !n.starts_with('_'))
            .collect();
        names.sort();
        Ok(names)
    }

    /// The current metadata file of the table in `table_dir`, if it is a table.
    ///
    /// With a version hint naming a file that exists (`vN.metadata.json` and its gzip variants,
    /// or the file name itself), that is a read and a `head` or two; otherwise the metadata
    /// directory is listed (its size grows with the table's history: every snapshot adds
    /// files there) and the hint is looked up among the files, or the highest version taken.
    async fn current_metadata_file(&self, table_dir: &Path) -> Result<Option<Path>> {
        let metadata_dir = table_dir.clone().join("metadata");
        if let Some(found) = self.hinted_metadata_file(&metadata_dir).await? {
            return Ok(Some(found));
        }
        let listing = match self.store.list_with_delimiter(Some(&metadata_dir)).await {
            Ok(listing) => listing,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let files: Vec<&Path> = listing.objects.iter().map(|o| &o.location).collect();
        for hint in VERSION_HINTS {
            if !files.iter().any(|f| f.filename() == Some(hint)) {
                continue;
            }
            let hint_path = metadata_dir.clone().join(hint);
            let text = self.store.get(&hint_path).await?.bytes().await?;
            let text = String::from_utf8_lossy(&text).trim().to_string();
            if let Ok(version) = text.parse::<i64>() {
                if let Some(found) = files
                    .iter()
                    .find(|f| f.filename().and_then(metadata_file_version) == Some(version))
                {
                    return Ok(Some((*found).clone()));
                }
            } else if let Some(found) = files.iter().find(|f| f.filename() == Some(text.as_str())) {
                return Ok(Some((*found).clone()));
            }
            log::warn!(
                "{hint_path}: hint {text:?} names no metadata file; using the highest-numbered one"
            );
        }
        Ok(files
            .iter()
            .filter_map(|f| Some((f.filename().and_then(metadata_file_version)?, *f)))
            .max_by_key(|(version, _)| *version)
            .map(|(_, f)| f.clone()))
    }

    /// The metadata file the first version hint of `metadata_dir` names, when it exists.
    async fn hinted_metadata_file(&self, metadata_dir: &Path) -> Result<Option<Path>> {
        for hint in VERSION_HINTS {
            let text = match self.store.get(&metadata_dir.clone().join(hint)).await {
                Ok(found) => found.bytes().await?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(e.into()),
            };
            let text = String::from_utf8_lossy(&text).trim().to_string();
            let candidates = match text.parse::<i64>() {
                Ok(version) => vec![
                    format!("v{version}.metadata.json"),
                    format!("v{version}.gz.metadata.json"),
                    format!("v{version}.metadata.json.gz"),
                ],
                Err(_) if metadata_file_version(&text).is_some() => vec![text],
                Err(_) => return Ok(None),
            };
            for name in candidates {
                let path = metadata_dir.clone().join(name.as_str());
                match self.store.head(&path).await {
                    Ok(_) => return Ok(Some(path)),
                    Err(object_store::Error::NotFound { .. }) => {}
                    Err(e) => return Err(e.into()),
                }
            }
            // Named a file that is not there (or another naming scheme): list.
            return Ok(None);
        }
        Ok(None)
    }

    async fn is_table(&self, dir: &Path) -> Result<bool> {
        Ok(self.current_metadata_file(dir).await?.is_some())
    }

    fn url_of(&self, path: &Path) -> String {
        format!("file:///{path}")
    }
}

#[async_trait]
impl Catalog for FileSystemCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        let mut namespaces = Vec::new();
        let mut pending: Vec<Vec<String>> = vec![vec![]];
        while let Some(levels) = pending.pop() {
            if levels.len() >= MAX_NAMESPACE_DEPTH {
                continue;
            }
            let dir = self.dir_of(&levels)?;
            for child in self.subdirs(&dir).await? {
                if self.is_table(&child_path(&dir, &child)?).await? {
                    continue;
                }
                let mut child_levels = levels.clone();
                child_levels.push(child);
                namespaces.push(Namespace::new(child_levels.clone()));
                pending.push(child_levels);
            }
        }
        namespaces.sort();
        Ok(namespaces)
    }

    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool> {
        if namespace.levels().is_empty() || namespace.levels().len() > MAX_NAMESPACE_DEPTH {
            return Ok(false);
        }
        // A name no directory can have (`..`, `a/b`) names no namespace.
        let Ok(dir) = self.dir_of(namespace.levels()) else {
            return Ok(false);
        };
        let listing = self.store.list_with_delimiter(Some(&dir)).await?;
        if listing.objects.is_empty() && listing.common_prefixes.is_empty() {
            return Ok(false);
        }
        // Every level must be a namespace, not a table.
        for depth in 1..=namespace.levels().len() {
            if self
                .is_table(&self.dir_of(&namespace.levels()[..depth])?)
                .await?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>> {
        let dir = self.dir_of(namespace.levels())?;
        let mut tables = Vec::new();
        for child in self.subdirs(&dir).await? {
            if self.is_table(&child_path(&dir, &child)?).await? {
                tables.push(TableIdent::new(namespace.clone(), child));
            }
        }
        Ok(tables)
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        let mut levels = ident.namespace.levels().to_vec();
        levels.push(ident.name.clone());
        let table_dir = self.dir_of(&levels)?;
        let Some(metadata_file) = self.current_metadata_file(&table_dir).await? else {
            return Err(Error::NotFound(format!(
                "table {ident} does not exist in warehouse {} (no metadata under {})",
                self.root,
                self.url_of(&table_dir.clone().join("metadata"))
            )));
        };
        let metadata_location = self.url_of(&metadata_file);
        let bootstrap = TableIo::new(self.stores.clone(), LocationMap::identity());
        let parsed = self
            .metadata_cache
            .read(&bootstrap, &ident.to_string(), &metadata_location)
            .await?;
        let (metadata, refs) = (parsed.metadata, parsed.refs);
        let locations = LocationMap::moved(metadata.location(), &self.url_of(&table_dir));
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
