//! A warehouse directory in Iceberg's Hadoop layout: `WAREHOUSE/<namespace…>/<table>/metadata/`.
//!
//! The current metadata file comes from `version-hint.text` (Iceberg Java's name;
//! `version-hint.txt` accepted) or, without a usable hint, from the highest-numbered metadata
//! file (`vN.metadata.json` or `NNNNN-<uuid>.metadata.json`, gzip variants included). A table
//! whose metadata `location` differs from the directory it was found in has moved: its paths
//! are read under the directory (see [`crate::io::LocationMap`]).
//!
//! Commits follow Iceberg Java's `HadoopTableOperations`: the next version's
//! `metadata/v{N+1}.metadata.json` is created exclusively (an existing file means another
//! writer won: a conflict), then `version-hint.text` is rewritten, best effort. Readers walk
//! forward from the hinted version to the highest consecutive one, so a stale hint (a crash
//! between the two writes, or two writers' hint writes reordered) is harmless.
//!
//! Listings tell a table from a namespace by its current metadata file. A table whose metadata
//! cannot be read (the storage fails under its `metadata/` directory) is still listed as a
//! table, so that one broken table neither fails the listing of all the others nor turns into a
//! namespace; loading it reports the error, naming the table.
//!
//! On an object store every request is a round trip, so a table load overlaps them: the
//! hinted metadata file is read (its GET says it exists: no HEAD first) while the next
//! version is looked for, and a catalog that loaded the table before looks for the version
//! after the one it found while it reads the hint. A cold load is then two round trips (the
//! hint; the metadata file and the next version's HEAD), a warm one a single round trip (the
//! hint and the next version's HEAD, at once) when the hint names the version this catalog last
//! found and nothing follows it. Any other answer (a newer hint, an older one, a next version
//! that exists) goes the way of a cold load from the hint, so every commit finished before the
//! load began is seen.
//!
//! Object stores have no directories: a namespace created here holds an empty marker object
//! (`.petrel-namespace`; hidden, as Java's `HadoopCatalog` ignores files in namespaces).

use std::sync::Arc;

use std::collections::HashMap;

use async_trait::async_trait;
use bytes::Bytes;
use iceberg::spec::TableMetadata;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

use super::metadata_file::{
    MetadataCache, ParsedMetadata, encode_table_metadata, metadata_file_version,
    parse_table_metadata,
};
use super::writes::{delete_tree, file_name_of, loaded_table, put_new, warehouse_location};
use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::error::{Error, Result};
use crate::io::{
    LocationMap, StoreRegistry, TableIo, child_path, normalize_location, object_location,
};

const VERSION_HINTS: [&str; 2] = ["version-hint.text", "version-hint.txt"];
/// Tables whose current metadata file a catalog remembers (the warm path of a load).
const KNOWN_TABLES: u64 = 65_536;
const MAX_NAMESPACE_DEPTH: usize = 8;
/// The empty object that makes a directory a namespace on a store without directories.
const NAMESPACE_MARKER: &str = ".petrel-namespace";
/// Hadoop-layout metadata file names: `v{N}` and one of these suffixes (Java's codecs).
const HADOOP_SUFFIXES: [&str; 3] = [".metadata.json", ".gz.metadata.json", ".metadata.json.gz"];

/// `v12.gz.metadata.json` → (12, ".gz.metadata.json"); `None` for any other name (the
/// `NNNNN-<uuid>` form, staging leftovers such as `v3.metadata.json#1`).
fn hadoop_version(file_name: &str) -> Option<(i64, &'static str)> {
    let rest = file_name.strip_prefix('v')?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let (number, suffix) = rest.split_at(digits);
    let suffix = HADOOP_SUFFIXES.into_iter().find(|s| *s == suffix)?;
    Some((number.parse().ok()?, suffix))
}

/// What a version hint says.
enum Hint {
    /// A version number (Java's form): `v{N}.metadata.json` or a gzip variant.
    Version(i64),
    /// A metadata file's name.
    File(String),
    /// Something else: the metadata directory is listed instead.
    Unusable,
}

/// The current metadata file of a table, and its bytes when the lookup read them.
struct Current {
    path: Path,
    bytes: Option<Bytes>,
}

impl Current {
    fn found(path: Path) -> Self {
        Self { path, bytes: None }
    }
}

/// The file `v{N+1}.metadata.json` after `file` (`v{N}…`, any of the Hadoop suffixes); `None`
/// for names without a Hadoop version.
fn plain_successor(metadata_dir: &Path, file: &Path) -> Result<Option<Path>> {
    match file.filename().and_then(hadoop_version) {
        Some((version, _)) => Ok(Some(child_path(
            metadata_dir,
            &format!("v{}{}", version + 1, HADOOP_SUFFIXES[0]),
        )?)),
        None => Ok(None),
    }
}

/// A filesystem (Hadoop layout) warehouse.
#[derive(Debug, Clone)]
pub struct FileSystemCatalog {
    /// Normalised URL of the warehouse root (`file:///abs/dir`, `s3://bucket/prefix`).
    root: String,
    /// `scheme://authority` of the root (`file://`, `s3://bucket`): an object path's URL is
    /// this, `/` and the path.
    store_prefix: String,
    store: Arc<dyn ObjectStore>,
    root_path: Path,
    stores: StoreRegistry,
    metadata_cache: MetadataCache,
    /// The current metadata file this catalog last found or wrote, by table directory: a
    /// load looks for the version after it while it reads the hint (shared by clones).
    known_current: moka::sync::Cache<Path, Path>,
}

impl FileSystemCatalog {
    /// A catalog over the warehouse at `warehouse` (a local directory, a `file:` URL, or an
    /// object store URL such as `s3://bucket/prefix` configured by the environment).
    pub fn new(warehouse: &str) -> Result<Self> {
        Self::with_stores(warehouse, StoreRegistry::default())
    }

    /// A catalog reading through the given object stores.
    pub fn with_stores(warehouse: &str, stores: StoreRegistry) -> Result<Self> {
        let root = warehouse_location(warehouse)?;
        let (store, _, root_path) = stores.resolve(&root)?;
        let location = object_location(&root)?;
        let store_prefix = format!("{}://{}", location.scheme, location.authority);
        Ok(Self {
            root,
            store_prefix,
            store,
            root_path,
            stores,
            metadata_cache: MetadataCache::default(),
            known_current: moka::sync::Cache::new(KNOWN_TABLES),
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
        let listing = self
            .store
            .list_with_delimiter(Some(dir))
            .await
            .map_err(|e| self.failed(dir, e))?;
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
    async fn current_metadata_file(&self, table_dir: &Path) -> Result<Option<Path>> {
        Ok(self
            .current_metadata(table_dir, false)
            .await?
            .map(|current| current.path))
    }

    /// The current metadata file of the table in `table_dir`, if it is a table, with its bytes
    /// when `fetch` asks for them and the lookup read them on the way.
    ///
    /// With a version hint naming a file that exists (`vN.metadata.json` and its gzip variants,
    /// or the file name itself), that is the hint, then the file (a GET when `fetch`, else a
    /// HEAD; none when it is parsed in the metadata cache already) together with the HEAD of
    /// the next version; a catalog that found the table's current file before HEADs the version
    /// after it together with the hint, and is done when the hint names that same file and no
    /// next version exists. Otherwise the metadata directory is listed (its size grows with
    /// the table's history: every snapshot adds files there) and the hint is looked up among
    /// the files, or the highest version taken.
    async fn current_metadata(&self, table_dir: &Path, fetch: bool) -> Result<Option<Current>> {
        let metadata_dir = table_dir.clone().join("metadata");
        let known = self.known_current.get(table_dir);
        let probe = async {
            match &known {
                Some(known) => self.next_version(&metadata_dir, known).await.map(Some),
                None => Ok(None),
            }
        };
        let (hint, next) = tokio::join!(self.read_hint(&metadata_dir), probe);
        let (hint, next) = (hint?, next?);
        if let (Some(known), Some(next)) = (known, next) {
            let hinted = match &hint {
                Some(Hint::Version(version)) => {
                    known.filename().and_then(hadoop_version).map(|(v, _)| v) == Some(*version)
                }
                Some(Hint::File(name)) => known.filename() == Some(name.as_str()),
                _ => false,
            };
            // The hint names the file found last time: current unless a next version exists
            // (a commit whose hint was not written yet), and then the walk goes on from there.
            // An older hint (a stale one, or a table dropped and created again) is read as a
            // cold load reads it.
            if hinted {
                return Ok(Some(Current::found(match next {
                    None => known,
                    Some(next) => self.walk_forward(&metadata_dir, next).await?,
                })));
            }
        }
        if let Some(hint) = &hint
            && let Some(found) = self.current_from_hint(&metadata_dir, hint, fetch).await?
        {
            return Ok(Some(found));
        }
        Ok(self
            .listed_metadata_file(&metadata_dir)
            .await?
            .map(Current::found))
    }

    /// The first version hint of `metadata_dir`, if there is one.
    async fn read_hint(&self, metadata_dir: &Path) -> Result<Option<Hint>> {
        for hint in VERSION_HINTS {
            let path = metadata_dir.clone().join(hint);
            let text = match self.store.get(&path).await {
                Ok(found) => found.bytes().await.map_err(|e| self.failed(&path, e))?,
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(e) => return Err(self.failed(&path, e)),
            };
            let text = String::from_utf8_lossy(&text).trim().to_string();
            return Ok(Some(match text.parse::<i64>() {
                Ok(version) => Hint::Version(version),
                Err(_) if metadata_file_version(&text).is_some() => Hint::File(text),
                Err(_) => Hint::Unusable,
            }));
        }
        Ok(None)
    }

    /// The first of the next versions after `file` that exists (its own naming, then plain;
    /// `None` for a name without a Hadoop version).
    async fn next_version(&self, metadata_dir: &Path, file: &Path) -> Result<Option<Path>> {
        let Some((version, suffix)) = file.filename().and_then(hadoop_version) else {
            return Ok(None);
        };
        let mut suffixes = vec![suffix];
        if suffix != HADOOP_SUFFIXES[0] {
            suffixes.push(HADOOP_SUFFIXES[0]);
        }
        for suffix in suffixes {
            let next = child_path(metadata_dir, &format!("v{}{suffix}", version + 1))?;
            if self.exists(&next).await? {
                return Ok(Some(next));
            }
        }
        Ok(None)
    }

    /// An object-store failure on `path`, naming the object (`io::store_failure`).
    fn failed(&self, path: &Path, e: object_store::Error) -> Error {
        crate::io::store_failure(&self.url_of(path), e)
    }

    async fn exists(&self, path: &Path) -> Result<bool> {
        match self.store.head(path).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.failed(path, e)),
        }
    }

    /// The file `path` when it exists: its bytes when `fetch` (one GET answers both), else
    /// `Some(None)` after a HEAD.
    async fn read_if_exists(&self, path: &Path, fetch: bool) -> Result<Option<Option<Bytes>>> {
        if !fetch {
            return Ok(self.exists(path).await?.then_some(None));
        }
        match self.store.get(path).await {
            Ok(found) => Ok(Some(Some(
                found.bytes().await.map_err(|e| self.failed(path, e))?,
            ))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed(path, e)),
        }
    }

    /// The current metadata file from `hint`: the hinted file and the walk forward from it;
    /// `None` when the hint names no file that exists (the caller lists the directory).
    async fn current_from_hint(
        &self,
        metadata_dir: &Path,
        hint: &Hint,
        fetch: bool,
    ) -> Result<Option<Current>> {
        let candidates = match hint {
            Hint::Version(version) => vec![
                format!("v{version}.metadata.json"),
                format!("v{version}.gz.metadata.json"),
                format!("v{version}.metadata.json.gz"),
            ],
            Hint::File(name) => vec![name.clone()],
            Hint::Unusable => return Ok(None),
        };
        let bootstrap = TableIo::new(self.stores.clone(), LocationMap::identity());
        for (i, name) in candidates.iter().enumerate() {
            let path = metadata_dir.clone().join(name.as_str());
            // A file parsed here before needs no read: the walk forward that follows looks for
            // the next versions (a metadata file removed since, by metadata expiry, is an old
            // one: the current one is further on).
            let cached = self.metadata_cache.holds(&bootstrap, &self.url_of(&path));
            if cached || i > 0 {
                if cached || self.exists(&path).await? {
                    return Ok(Some(Current::found(
                        self.walk_forward(metadata_dir, path).await?,
                    )));
                }
                continue;
            }
            // The usual case (Java's and Petrel's plain names): the hinted file read together
            // with the HEAD of the next version, which a current hint finds absent.
            let next = plain_successor(metadata_dir, &path)?;
            let probe = async {
                match &next {
                    Some(next) => self.exists(next).await,
                    None => Ok(false),
                }
            };
            let (read, next_exists) = tokio::join!(self.read_if_exists(&path, fetch), probe);
            let (read, next_exists) = (read?, next_exists?);
            let Some(bytes) = read else {
                continue;
            };
            return Ok(Some(match next {
                Some(next) if next_exists => {
                    Current::found(self.walk_forward(metadata_dir, next).await?)
                }
                _ => Current { path, bytes },
            }));
        }
        // Named a file that is not there (or another naming scheme): list.
        Ok(None)
    }

    /// The current metadata file by listing `metadata_dir`: the hint looked up among its files
    /// (and walked forward), else the highest version.
    async fn listed_metadata_file(&self, metadata_dir: &Path) -> Result<Option<Path>> {
        let listing = match self.store.list_with_delimiter(Some(metadata_dir)).await {
            Ok(listing) => listing,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.failed(metadata_dir, e)),
        };
        let files: Vec<&Path> = listing.objects.iter().map(|o| &o.location).collect();
        for hint in VERSION_HINTS {
            if !files.iter().any(|f| f.filename() == Some(hint)) {
                continue;
            }
            let hint_path = metadata_dir.clone().join(hint);
            let text = self
                .store
                .get(&hint_path)
                .await
                .map_err(|e| self.failed(&hint_path, e))?
                .bytes()
                .await
                .map_err(|e| self.failed(&hint_path, e))?;
            let text = String::from_utf8_lossy(&text).trim().to_string();
            if let Ok(version) = text.parse::<i64>() {
                let by_version: HashMap<i64, &Path> = files
                    .iter()
                    .filter_map(|f| Some((f.filename().and_then(metadata_file_version)?, *f)))
                    .collect();
                if by_version.contains_key(&version) {
                    // Walk forward: a stale hint names an older version.
                    let mut current = version;
                    while by_version.contains_key(&(current + 1)) {
                        current += 1;
                    }
                    return Ok(by_version.get(&current).map(|f| (*f).clone()));
                }
            } else if let Some(found) = files.iter().find(|f| f.filename() == Some(text.as_str())) {
                return Ok(Some((*found).clone()));
            }
            tracing::warn!(
                "{hint_path}: hint {text:?} names no metadata file; using the highest-numbered one"
            );
        }
        Ok(files
            .iter()
            .filter_map(|f| Some((f.filename().and_then(metadata_file_version)?, *f)))
            .max_by_key(|(version, _)| *version)
            .map(|(_, f)| f.clone()))
    }

    /// From the hinted file `found` (`v{N}…`), the highest consecutive version (Java's
    /// `refresh`), looked up with the found file's naming and then plain (Petrel's commits):
    /// one `head` when the hint is current and the table plain.
    async fn walk_forward(&self, metadata_dir: &Path, found: Path) -> Result<Path> {
        let mut current = found;
        while let Some(next) = self.next_version(metadata_dir, &current).await? {
            current = next;
        }
        Ok(current)
    }

    async fn is_table(&self, dir: &Path) -> Result<bool> {
        Ok(self.current_metadata_file(dir).await?.is_some())
    }

    /// Whether `dir` is a table, for a listing. A directory whose metadata cannot be read
    /// (storage failed under its `metadata/`: a file that loops or cannot be opened, a refused
    /// request) counts as a table: the listing goes on, and loading the table reports the error
    /// naming it, instead of one broken table failing the listing of every other one. (Only
    /// reads under `metadata/` can fail here: a directory without one is no table, without
    /// error.)
    async fn is_listed_table(&self, dir: &Path) -> bool {
        match self.current_metadata_file(dir).await {
            Ok(found) => found.is_some(),
            Err(e) => {
                tracing::warn!(
                    "{}: the table metadata cannot be read ({e}); listed as a table, whose \
                     load reports the error",
                    self.url_of(dir)
                );
                true
            }
        }
    }

    fn url_of(&self, path: &Path) -> String {
        format!("{}/{path}", self.store_prefix)
    }

    /// The directory of a table: `<warehouse>/<namespace levels…>/<name>`.
    fn table_dir(&self, ident: &TableIdent) -> Result<Path> {
        let mut levels = ident.namespace.levels().to_vec();
        levels.push(ident.name.clone());
        self.dir_of(&levels)
    }

    /// The IO of a table found in `table_dir` whose metadata says `location`.
    fn table_io(&self, location: &str, table_dir: &Path) -> TableIo {
        let locations = LocationMap::moved(location, &self.url_of(table_dir));
        TableIo::new(self.stores.clone(), locations)
    }

    /// Rewrites `version-hint.text` to `version` (Java writes the bare number). Best effort: a
    /// commit is done once its metadata file exists, and readers walk forward from a stale hint.
    async fn write_version_hint(&self, metadata_dir: &Path, version: i64) {
        let hint = metadata_dir.clone().join(VERSION_HINTS[0]);
        if let Err(e) = self
            .store
            .put(&hint, PutPayload::from(version.to_string().into_bytes()))
            .await
        {
            tracing::warn!(
                "{hint}: cannot write the version hint ({e}); readers walk forward from the old one"
            );
        }
    }

    /// Removes the empty directories left under `dir` (and `dir` itself when empty) on a local
    /// warehouse: object_store deletes files only, and an empty directory would otherwise be
    /// listed as a namespace. Other stores have no directories.
    async fn remove_empty_dirs(&self, dir: &Path) {
        if !self.root.starts_with("file:///") {
            return;
        }
        // The local store's object paths are the file system's absolute paths, literally.
        let local = std::path::PathBuf::from(format!("/{dir}"));
        let _ = tokio::task::spawn_blocking(move || remove_empty_tree(&local)).await;
    }

    /// [`Catalog::load_table`] without the error context.
    async fn load_table_from_store(&self, ident: &TableIdent) -> Result<LoadedTable> {
        let mut levels = ident.namespace.levels().to_vec();
        levels.push(ident.name.clone());
        let table_dir = self.dir_of(&levels)?;
        let Some(current) = self.current_metadata(&table_dir, true).await? else {
            return Err(Error::NotFound(format!(
                "table {ident} does not exist in warehouse {} (no metadata under {})",
                self.root,
                self.url_of(&table_dir.clone().join("metadata"))
            )));
        };
        let metadata_location = self.url_of(&current.path);
        let parsed = match current.bytes {
            // Read on the way (its GET told that it exists): parsed here, remembered.
            Some(bytes) => {
                let (metadata, refs) =
                    parse_table_metadata(&ident.to_string(), &metadata_location, &bytes)?;
                let parsed = ParsedMetadata {
                    metadata: Arc::new(metadata),
                    refs: Arc::new(refs),
                };
                self.metadata_cache
                    .insert(&metadata_location, parsed.clone());
                parsed
            }
            None => {
                let bootstrap = TableIo::new(self.stores.clone(), LocationMap::identity());
                self.metadata_cache
                    .read(&bootstrap, &ident.to_string(), &metadata_location)
                    .await?
            }
        };
        self.known_current.insert(table_dir.clone(), current.path);
        let (metadata, refs) = (parsed.metadata, parsed.refs);
        let io = self.table_io(metadata.location(), &table_dir);
        Ok(LoadedTable::new(
            ident.clone(),
            metadata_location,
            metadata,
            refs,
            io,
        ))
    }
}

/// `e` with `context` (the table and its store) in its message, of the same kind (a missing
/// object stays a missing object, a refused request a refused request).
fn in_context(e: object_store::Error, context: String) -> object_store::Error {
    use object_store::Error as E;
    type Source = Box<dyn std::error::Error + Send + Sync>;
    let source = |source: Source| -> Source { format!("{context}: {source}").into() };
    match e {
        E::NotFound { path, source: s } => E::NotFound {
            path,
            source: source(s),
        },
        E::PermissionDenied { path, source: s } => E::PermissionDenied {
            path,
            source: source(s),
        },
        E::Unauthenticated { path, source: s } => E::Unauthenticated {
            path,
            source: source(s),
        },
        E::Generic { store, source: s } => E::Generic {
            store,
            source: source(s),
        },
        other => E::Generic {
            store: "object store",
            source: format!("{context}: {other}").into(),
        },
    }
}

/// Removes `dir` and its sub-directories bottom-up when they hold no file; whether `dir` went.
fn remove_empty_tree(dir: &std::path::Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut empty = true;
    for entry in entries {
        let Ok(entry) = entry else {
            empty = false;
            continue;
        };
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if !(is_dir && remove_empty_tree(&entry.path())) {
            empty = false;
        }
    }
    empty && std::fs::remove_dir(dir).is_ok()
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
                if self.is_listed_table(&child_path(&dir, &child)?).await {
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
        let listing = self
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| self.failed(&dir, e))?;
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
            if self.is_listed_table(&child_path(&dir, &child)?).await {
                tables.push(TableIdent::new(namespace.clone(), child));
            }
        }
        Ok(tables)
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        self.load_table_from_store(ident)
            .await
            .map_err(|e| match e {
                Error::ObjectStore(e) => Error::ObjectStore(in_context(
                    e,
                    format!("table {ident} in {}", self.stores.describe(&self.root)),
                )),
                other => other,
            })
    }

    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()> {
        let levels = namespace.levels();
        if levels.is_empty() || levels.len() > MAX_NAMESPACE_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "namespace {namespace:?}: 1 to {MAX_NAMESPACE_DEPTH} levels"
            )));
        }
        let dir = self.dir_of(levels)?;
        for depth in 1..=levels.len() {
            if self.is_table(&self.dir_of(&levels[..depth])?).await? {
                let table = Namespace::new(levels[..depth].to_vec());
                return Err(if depth == levels.len() {
                    Error::AlreadyExists(format!(
                        "{table} is a table in warehouse {}, not a namespace",
                        self.root
                    ))
                } else {
                    Error::InvalidArgument(format!(
                        "cannot create namespace {namespace}: {table} is a table"
                    ))
                });
            }
        }
        if self.namespace_exists(namespace).await? {
            if if_not_exists {
                return Ok(());
            }
            return Err(Error::AlreadyExists(format!(
                "namespace {namespace} in warehouse {}",
                self.root
            )));
        }
        let marker = child_path(&dir, NAMESPACE_MARKER)?;
        self.store
            .put(&marker, PutPayload::default())
            .await
            .map_err(|e| self.failed(&marker, e))?;
        Ok(())
    }

    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()> {
        if !self.namespace_exists(namespace).await? {
            return Err(Error::NotFound(format!(
                "namespace {namespace} does not exist in warehouse {}",
                self.root
            )));
        }
        let dir = self.dir_of(namespace.levels())?;
        let listing = self
            .store
            .list_with_delimiter(Some(&dir))
            .await
            .map_err(|e| self.failed(&dir, e))?;
        let mut remaining = Vec::new();
        for child in &listing.common_prefixes {
            let name = child.filename().unwrap_or_default();
            let kind = if self.is_listed_table(child).await {
                "table"
            } else if name.starts_with('.') || name.starts_with('_') {
                "directory"
            } else {
                "namespace"
            };
            remaining.push(format!("{kind} {name}"));
        }
        for object in &listing.objects {
            match object.location.filename() {
                Some(NAMESPACE_MARKER) => {}
                name => remaining.push(format!("file {}", name.unwrap_or_default())),
            }
        }
        if !remaining.is_empty() {
            return Err(Error::NamespaceNotEmpty {
                namespace: namespace.to_string(),
                remaining: remaining.join(", "),
            });
        }
        let marker = child_path(&dir, NAMESPACE_MARKER)?;
        match self.store.delete(&marker).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
            Err(e) => return Err(self.failed(&marker, e)),
        }
        self.remove_empty_dirs(&dir).await;
        Ok(())
    }

    async fn default_table_location(&self, ident: &TableIdent) -> Result<String> {
        Ok(self.url_of(&self.table_dir(ident)?))
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        if !self.namespace_exists(&ident.namespace).await? {
            return Err(Error::NotFound(format!(
                "namespace {} does not exist in warehouse {}",
                ident.namespace, self.root
            )));
        }
        let table_dir = self.table_dir(ident)?;
        let expected = self.url_of(&table_dir);
        if normalize_location(metadata.location()) != expected {
            return Err(Error::InvalidArgument(format!(
                "table {ident}: a filesystem catalog keeps a table in its directory {expected},                  not at location {}",
                metadata.location()
            )));
        }
        if self.current_metadata_file(&table_dir).await?.is_some() {
            return Err(Error::AlreadyExists(format!(
                "table {ident} in warehouse {}",
                self.root
            )));
        }
        let bytes = encode_table_metadata(&ident.to_string(), &metadata)?;
        let metadata_dir = child_path(&table_dir, "metadata")?;
        let path = child_path(&metadata_dir, "v1.metadata.json")?;
        match put_new(&self.store, &path, Bytes::copy_from_slice(&bytes)).await {
            Ok(()) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(Error::AlreadyExists(format!(
                    "table {ident} in warehouse {} (created concurrently)",
                    self.root
                )));
            }
            Err(e) => return Err(self.failed(&path, e)),
        }
        self.write_version_hint(&metadata_dir, 1).await;
        self.known_current.insert(table_dir.clone(), path.clone());
        let io = self.table_io(metadata.location(), &table_dir);
        loaded_table(ident, self.url_of(&path), &bytes, io, &self.metadata_cache)
    }

    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        let table_dir = self.table_dir(ident)?;
        if self.current_metadata_file(&table_dir).await?.is_none() {
            return Err(Error::NotFound(format!(
                "table {ident} does not exist in warehouse {}",
                self.root
            )));
        }
        // Purging needs the table's location (which may be elsewhere); a plain drop does not
        // read the metadata (a corrupt table can still be dropped).
        let table = if purge {
            Some(self.load_table(ident).await?)
        } else {
            None
        };
        let metadata_dir = child_path(&table_dir, "metadata")?;
        // The metadata files first, oldest first, so that until the table is gone it loads at
        // its current version (never at an older one); then everything else.
        let listing = self
            .store
            .list_with_delimiter(Some(&metadata_dir))
            .await
            .map_err(|e| self.failed(&metadata_dir, e))?;
        let mut versions: Vec<(i64, &Path)> = listing
            .objects
            .iter()
            .filter_map(|o| {
                Some((
                    o.location.filename().and_then(metadata_file_version)?,
                    &o.location,
                ))
            })
            .collect();
        versions.sort();
        for (_, path) in versions {
            match self.store.delete(path).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.failed(path, e)),
            }
        }
        self.known_current.invalidate(&table_dir);
        delete_tree(&self.store, &table_dir).await?;
        if let Some(table) = table {
            // Files under the table's own location, when it is elsewhere (LocationMap maps a
            // moved table's location onto its directory, so usually this is the directory).
            let location = table.io().locations().resolve(table.metadata().location());
            let (store, _, prefix) = self.stores.resolve(&location)?;
            if prefix != table_dir {
                delete_tree(&store, &prefix).await?;
            }
        }
        self.remove_empty_dirs(&table_dir).await;
        Ok(())
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        let ident = base.ident();
        let table = ident.to_string();
        let table_dir = self.table_dir(ident)?;
        let metadata_dir = child_path(&table_dir, "metadata")?;
        let base_name = file_name_of(base.metadata_location())?;
        let Some(base_version) = metadata_file_version(&base_name) else {
            return Err(Error::Unsupported {
                table,
                message: format!(
                    "cannot commit over metadata file {}: its name carries no version",
                    base.metadata_location()
                ),
            });
        };
        let version = base_version + 1;
        let path = child_path(&metadata_dir, &format!("v{version}.metadata.json"))?;
        let location = self.url_of(&path);
        let bytes = encode_table_metadata(&table, &metadata)?;
        match put_new(&self.store, &path, Bytes::copy_from_slice(&bytes)).await {
            Ok(()) => {}
            Err(object_store::Error::AlreadyExists { .. }) => {
                return Err(Error::CommitConflict {
                    table,
                    message: format!(
                        "version {version} exists already ({location}): the table changed after                          version {base_version} was loaded"
                    ),
                });
            }
            Err(e) => {
                // Did the exclusive create happen before the failure? Look.
                match self.store.get(&path).await {
                    Err(object_store::Error::NotFound { .. }) => return Err(self.failed(&path, e)),
                    Ok(found) => match found.bytes().await {
                        Ok(found) if found.as_ref() == bytes.as_slice() => {
                            tracing::warn!("{location}: written despite {e}; committed");
                        }
                        Ok(_) => {
                            return Err(Error::CommitConflict {
                                table,
                                message: format!(
                                    "version {version} was written by another writer ({location})"
                                ),
                            });
                        }
                        Err(check) => {
                            return Err(Error::CommitStateUnknown {
                                table,
                                message: format!(
                                    "writing {location}: {e}; then reading it: {check}"
                                ),
                            });
                        }
                    },
                    Err(check) => {
                        return Err(Error::CommitStateUnknown {
                            table,
                            message: format!("writing {location}: {e}; then reading it: {check}"),
                        });
                    }
                }
            }
        }
        self.write_version_hint(&metadata_dir, version).await;
        self.known_current.insert(table_dir.clone(), path.clone());
        let io = self.table_io(metadata.location(), &table_dir);
        loaded_table(ident, location, &bytes, io, &self.metadata_cache)
    }
}
