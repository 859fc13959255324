//! Merge-on-read state of one scan: the delete files its tasks need, each loaded at most once
//! and shared by every partition — a data file's position deletes and deletion vectors are
//! loaded when that file is about to be read (one set of positions per data file), the equality-delete
//! sets once per scan (memory reserved in DataFusion's pool) — and the equality filter applied
//! to batches. `scan::merge_stream` drives it.
//!
//! Equality deletes become positions: a data file with equality deletes and no positional ones,
//! read by a scan without filters, is read as positional runs (one per range of the file), its
//! rows probed against the sets there and the deleted positions recorded
//! ([`EqualityMode::Record`]); once runs that streamed to their end have covered every row
//! group of the file, the positions go into the delete cache, keyed by the data file and its
//! equality groups. Later scans find them ([`EqualityMode::Cached`]) and apply them like a
//! deletion vector (with the file's positional deletes): no probe, no hashing
//! (`equality_positions_cached` counts such files, `equality_positions_recorded` the files
//! recorded). A scan reading whole files whose positions were recorded for fewer groups than
//! they have now (an upsert added some) extends them while it is planned, probing only the
//! added groups over only their key columns (`equality_extension`,
//! `equality_positions_extended`). Anything else is probed per batch
//! ([`EqualityMode::Probe`]): against each of its groups' sets, or, for groups over the same key
//! columns that the scan has many of (a table upserted by many commits), against their union
//! (`equality_union`), once per row.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch, new_null_array,
};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, UInt32Type};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::execution::TaskContext;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use futures::{StreamExt, TryStreamExt};
use parquet::file::metadata::ParquetMetaData;
use roaring::RoaringTreemap;
use tokio::sync::OnceCell;

use super::cache::{
    DeleteCache, EqualityKey, EqualityPositionsKey, GroupEntry, PositionKey, PositionSource,
    UnionKey,
};
use super::equality::{EqualityDeleteSet, canonical_type, read_equality_keys};
use super::equality_extension::Extended;
use super::equality_union::{EqualityUnion, MIN_UNION_GROUPS, Members};
use super::position::{read_deletion_vector, read_position_delete_file};
use super::position_filter::DeletedPositions;
use crate::error::{Error, Result};
use crate::io::{TableIo, normalize_location};
use crate::plan::{DeleteFileRef, DeleteKind};
use crate::scan::partitioned_file;

/// How many delete files load at once.
const LOAD_CONCURRENCY: usize = 8;

/// The deletes of one data file of the scan.
#[derive(Debug, Clone)]
pub struct FileDeletes {
    /// Logical path of the data file.
    pub path: String,
    /// Its size in bytes.
    pub file_size: u64,
    /// Position delete files and deletion vectors applying to it.
    pub positional: Vec<DeleteFileRef>,
    /// Indexes of the equality groups applying to it.
    pub equality_groups: Vec<usize>,
}

/// Equality delete files that always apply together (same field ids and sequence number, same
/// scope), so one set serves them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EqualityGroup {
    /// The equality field ids.
    pub field_ids: Vec<i32>,
    /// The delete files.
    pub files: Vec<DeleteFileRef>,
}

/// Metrics of delete application, shown by `EXPLAIN ANALYZE` on the scan node.
#[derive(Debug, Clone)]
struct DeleteMetrics {
    position_files: Count,
    deletion_vectors: Count,
    equality_files: Count,
    cached_files: Count,
    delete_bytes: Count,
    rows_deleted_by_position: Count,
    rows_deleted_by_equality: Count,
    equality_keys: Count,
    equality_groups_joined: Count,
    equality_positions_cached: Count,
    equality_positions_recorded: Count,
    equality_positions_extended: Count,
    equality_key_columns_cached: Count,
    files_without_keys: Count,
    build_time: Time,
}

impl DeleteMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).global_counter(name);
        Self {
            position_files: counter("delete_files_position"),
            deletion_vectors: counter("delete_files_dv"),
            equality_files: counter("delete_files_equality"),
            cached_files: counter("delete_files_cached"),
            delete_bytes: counter("delete_bytes_read"),
            rows_deleted_by_position: counter("rows_deleted_by_position"),
            rows_deleted_by_equality: counter("rows_deleted_by_equality"),
            equality_keys: counter("equality_delete_keys"),
            equality_groups_joined: counter("equality_groups_joined"),
            equality_positions_cached: counter("equality_positions_cached"),
            equality_positions_recorded: counter("equality_positions_recorded"),
            equality_positions_extended: counter("equality_positions_extended"),
            equality_key_columns_cached: counter("equality_key_columns_cached"),
            files_without_keys: counter("files_read_without_equality_keys"),
            build_time: MetricBuilder::new(metrics).subset_time("delete_build_time", 0),
        }
    }
}

/// Identifies a positional source: the file, and the blob offset of a deletion vector.
type SourceKey = (String, Option<u64>);

/// The key of a positional delete (`None` for equality deletes).
fn source_key(d: &DeleteFileRef) -> Option<SourceKey> {
    match &d.kind {
        DeleteKind::Position => Some((d.path.clone(), None)),
        DeleteKind::DeletionVector { offset, .. } => Some((d.path.clone(), Some(*offset))),
        DeleteKind::Equality { .. } => None,
    }
}

/// The equality-delete sets of a scan, one per [`EqualityGroup`], the unions of groups over
/// the same key columns, and their memory.
#[derive(Debug)]
pub(crate) struct EqualitySets {
    sets: Vec<Arc<EqualityDeleteSet>>,
    unions: Vec<Arc<EqualityUnion>>,
    /// Per group, its union and member number in it (`None`: probed on its own).
    places: Vec<Option<(usize, u32)>>,
    /// Per data file, how its groups are probed (decided at its first batch).
    probes: Vec<std::sync::OnceLock<FileProbe>>,
    _reservation: Option<MemoryReservation>,
}

/// How one data file's equality groups are probed.
#[derive(Debug, Default)]
struct FileProbe {
    /// Groups probed on their own.
    alone: Vec<usize>,
    /// Unions (with one of the file's groups in each, whose key columns they take) and which
    /// of their members apply to the file.
    unions: Vec<(usize, usize, Members)>,
}

impl EqualitySets {
    /// How data file `file`, whose groups are `groups`, is probed.
    fn probe_of(&self, file: usize, groups: &[usize]) -> Option<&FileProbe> {
        let cell = self.probes.get(file)?;
        Some(cell.get_or_init(|| {
            let mut probe = FileProbe::default();
            // The file's groups in each union.
            let mut joined: Vec<(usize, Vec<usize>)> = Vec::new();
            for &group in groups {
                match self.places.get(group).copied().flatten() {
                    None => probe.alone.push(group),
                    Some((union, _)) => match joined.iter_mut().find(|(u, _)| *u == union) {
                        Some((_, in_union)) => in_union.push(group),
                        None => joined.push((union, vec![group])),
                    },
                }
            }
            for (union, in_union) in joined {
                match in_union.as_slice() {
                    // One group of the union applies: its own set answers alone.
                    [only] => probe.alone.push(*only),
                    [first, ..] => {
                        let members = in_union
                            .iter()
                            .filter_map(|g| self.places.get(*g).copied().flatten())
                            .map(|(_, member)| member);
                        let applying = Members::of(self.unions[union].member_count(), members);
                        probe.unions.push((union, *first, applying));
                    }
                    [] => {}
                }
            }
            probe
        }))
    }
}

/// How the equality deletes of one data file are applied in a scan (module docs).
#[derive(Debug)]
pub(crate) enum EqualityMode {
    /// Probed batch by batch against the sets.
    Probe,
    /// Read as a positional run, probed there, the deleted positions recorded under this key.
    Record(EqualityPositionsKey),
    /// Applied as positions recorded by an earlier scan.
    Cached(Arc<RoaringTreemap>),
}

/// Merge-on-read state of one scan.
#[derive(Debug)]
pub struct MergeOnRead {
    table: String,
    io: TableIo,
    files: Vec<FileDeletes>,
    groups: Vec<EqualityGroup>,
    /// Physical object path → data file index.
    by_object_path: HashMap<String, usize>,
    /// Column of the file index in the inner batches (present with equality deletes).
    file_column: Option<usize>,
    /// Per group, the inner batch column of each equality field (None: not in the scan
    /// schema, so null), with its canonical type.
    key_columns: Vec<Vec<(Option<usize>, DataType)>>,
    /// Every positional source of the scan, each loaded at most once.
    sources: HashMap<SourceKey, OnceCell<Arc<PositionSource>>>,
    equality: OnceCell<Arc<EqualitySets>>,
    /// Parsed deletes shared with other scans.
    cache: DeleteCache,
    metrics: DeleteMetrics,
    /// A positional scan: every data file is read position by position (`scan::merge_stream`).
    positional_scan: bool,
    /// Per data file, how its equality deletes are applied (decided once per scan).
    equality_modes: Vec<std::sync::OnceLock<EqualityMode>>,
    /// Each group's cache identity and present key columns (its entry in the data files'
    /// positions keys), resolved once per scan (`None`: a delete file's location does not
    /// resolve, and no position is cached or recorded).
    group_entries: std::sync::OnceLock<Option<Vec<GroupEntry>>>,
    /// Per data file being recorded: the deleted positions found so far and which row groups
    /// the scan's runs have read.
    recording: std::sync::Mutex<HashMap<usize, (RoaringTreemap, Vec<bool>)>>,
}

impl MergeOnRead {
    /// Merge-on-read for `files` (indexed as the scan numbers them).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        table: String,
        io: TableIo,
        files: Vec<FileDeletes>,
        groups: Vec<EqualityGroup>,
        by_object_path: HashMap<String, usize>,
        file_column: Option<usize>,
        key_columns: Vec<Vec<(Option<usize>, DataType)>>,
        cache: DeleteCache,
        metrics: &ExecutionPlanMetricsSet,
    ) -> Self {
        let sources = files
            .iter()
            .flat_map(|f| &f.positional)
            .filter_map(source_key)
            .map(|key| (key, OnceCell::new()))
            .collect();
        let equality_modes = files.iter().map(|_| std::sync::OnceLock::new()).collect();
        Self {
            table,
            io,
            files,
            groups,
            by_object_path,
            file_column,
            key_columns,
            sources,
            equality: OnceCell::new(),
            cache,
            metrics: DeleteMetrics::new(metrics),
            positional_scan: false,
            equality_modes,
            group_entries: std::sync::OnceLock::new(),
            recording: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// This state for a positional scan: every file (each of `files`, deletes or not) is read
    /// as a positional run, so each row's position is known.
    pub(crate) fn for_positional_scan(mut self) -> Self {
        self.positional_scan = true;
        self
    }

    /// The data file `index` as the manifests name it.
    pub(crate) fn data_file_path(&self, index: usize) -> Option<&str> {
        self.files.get(index).map(|f| f.path.as_str())
    }

    /// The data file index of an object path.
    pub(crate) fn file_index(&self, object_path: &str) -> Option<usize> {
        self.by_object_path.get(object_path).copied()
    }

    /// Whether data file `index` is read as a positional run: it has position deletes or
    /// deletion vectors, or its equality deletes are applied (or recorded) as positions.
    pub(crate) fn has_positional(&self, index: usize) -> bool {
        self.files
            .get(index)
            .is_some_and(|f| self.positional_scan || !f.positional.is_empty())
            || matches!(
                self.equality_modes.get(index).and_then(|m| m.get()),
                Some(EqualityMode::Record(_) | EqualityMode::Cached(_))
            )
    }

    /// How data file `index`'s equality deletes are applied, decided at the first call of the
    /// scan: `unfiltered` says the scan reads its files with no filter (then the positions may
    /// be recorded).
    pub(crate) fn equality_mode(&self, index: usize, unfiltered: bool) -> &EqualityMode {
        static PROBE: EqualityMode = EqualityMode::Probe;
        match self.equality_modes.get(index) {
            Some(mode) => mode.get_or_init(|| self.decide_equality_mode(index, unfiltered)),
            None => &PROBE,
        }
    }

    fn decide_equality_mode(&self, index: usize, unfiltered: bool) -> EqualityMode {
        let Some(file) = self.files.get(index) else {
            return EqualityMode::Probe;
        };
        if file.equality_groups.is_empty() || self.positional_scan {
            return EqualityMode::Probe;
        }
        let Ok(key) = self.equality_positions_key(file) else {
            return EqualityMode::Probe;
        };
        if let Some(positions) = self.cache.equality_positions(&key) {
            self.metrics.equality_positions_cached.add(1);
            return EqualityMode::Cached(positions);
        }
        // Rows removed by positional deletes are never probed: record only without them.
        if unfiltered && file.positional.is_empty() {
            EqualityMode::Record(key)
        } else {
            EqualityMode::Probe
        }
    }

    /// The cache key of a data file's equality-deleted positions.
    fn equality_positions_key(&self, file: &FileDeletes) -> Result<EqualityPositionsKey> {
        equality_positions_key(&self.io, &self.table, file, self.group_entries()?)
    }

    /// Each equality group's entry: its cache identity and present key columns (resolved at
    /// the first call, unless the scan's planning handed them over:
    /// [`MergeOnRead::with_group_entries`]).
    fn group_entries(&self) -> Result<&[GroupEntry]> {
        match self.group_entries.get_or_init(|| {
            equality_keys(&self.io, &self.groups)
                .ok()
                .map(|keys| group_entries(keys, &self.key_columns))
        }) {
            Some(entries) => Ok(entries),
            // Resolved again for the error, which names the file.
            None => Err(equality_keys(&self.io, &self.groups)
                .err()
                .unwrap_or_else(|| {
                    Error::InvalidArgument(format!(
                        "table {}: an equality delete file's location does not resolve",
                        self.table
                    ))
                })),
        }
    }

    /// This state with its groups' entries already resolved (`entries`, from
    /// [`group_entries`] over the same groups and key columns), as the scan's planning
    /// resolved them to look up cached positions.
    pub(crate) fn with_group_entries(self, entries: Vec<GroupEntry>) -> Self {
        if entries.len() == self.groups.len() {
            // Unset until now: a fresh state.
            let _ = self.group_entries.set(Some(entries));
        }
        self
    }

    /// This state with the equality deletes of some data files (by path as the manifests
    /// name them) already known as positions: those files are read as positional runs with
    /// them (the scan was laid out without their equality groups and key columns).
    /// `delete_files` equality delete files are counted as applied (from the cache), and what
    /// the scan's planning extended (`equality_extension`).
    pub(crate) fn with_cached_equality(
        self,
        cached: HashMap<String, Arc<RoaringTreemap>>,
        delete_files: usize,
        extended: &Extended,
    ) -> Self {
        self.metrics.equality_files.add(delete_files);
        self.metrics.cached_files.add(delete_files);
        self.metrics.equality_positions_extended.add(extended.files);
        self.metrics
            .equality_key_columns_cached
            .add(extended.keys_cached);
        for (file, mode) in self.files.iter().zip(&self.equality_modes) {
            if let Some(positions) = cached.get(&file.path) {
                self.metrics.equality_positions_cached.add(1);
                let _ = mode.set(EqualityMode::Cached(Arc::clone(positions)));
            }
        }
        self
    }

    /// Adds the positions a [`EqualityMode::Record`] run of data file `index` found deleted in
    /// the row groups it read (`read`, one flag per row group of the file); once the runs of
    /// the scan have read every row group of the file (a file may be split into ranges), the
    /// positions go to the delete cache under `key`.
    pub(crate) fn record_equality_positions(
        &self,
        index: usize,
        key: &EqualityPositionsKey,
        positions: RoaringTreemap,
        read: &[bool],
    ) {
        let Ok(mut recording) = self.recording.lock() else {
            return;
        };
        let (found, covered) = recording
            .entry(index)
            .or_insert_with(|| (RoaringTreemap::new(), vec![false; read.len()]));
        if covered.len() != read.len() {
            return;
        }
        *found |= positions;
        for (c, r) in covered.iter_mut().zip(read) {
            *c |= *r;
        }
        if covered.iter().all(|c| *c)
            && let Some((found, _)) = recording.remove(&index)
        {
            self.metrics.equality_positions_recorded.add(1);
            self.cache
                .insert_equality_positions(key.clone(), Arc::new(found));
        }
    }

    /// Counts rows removed by equality deletes.
    pub(crate) fn record_removed_by_equality(&self, rows: usize) {
        self.metrics.rows_deleted_by_equality.add(rows);
    }

    /// The rows of `batch` (all of data file `file`) its equality groups delete, probed
    /// whatever the file's mode (a recording run).
    pub(crate) fn probe_equality(
        &self,
        sets: &EqualitySets,
        batch: &RecordBatch,
        file: u32,
    ) -> DFResult<Option<BooleanBuffer>> {
        self.probe_rows(sets, batch, file)
    }

    /// Whether data file `index` has equality deletes to apply (probed, recorded or cached).
    pub(crate) fn has_equality_groups(&self, index: usize) -> bool {
        self.files
            .get(index)
            .is_some_and(|f| !f.equality_groups.is_empty())
    }

    /// Counts data files read without the equality key columns (they have no equality
    /// deletes; other files of the scan do).
    pub(crate) fn record_read_without_keys(&self, files: usize) {
        self.metrics.files_without_keys.add(files);
    }

    /// Whether any data file has equality deletes.
    pub(crate) fn has_equality(&self) -> bool {
        !self.groups.is_empty()
    }

    /// Counts rows of data file `index` removed by its run's positions: by equality deletes
    /// when those are all it has (cached equality positions), else by position deletes (a
    /// file with both counts them there).
    pub(crate) fn record_removed_in(&self, index: usize, rows: usize) {
        let equality_only = self
            .files
            .get(index)
            .is_some_and(|f| f.positional.is_empty())
            && matches!(
                self.equality_modes.get(index).and_then(|m| m.get()),
                Some(EqualityMode::Cached(_))
            );
        if equality_only {
            self.metrics.rows_deleted_by_equality.add(rows);
            return;
        }
        self.metrics.rows_deleted_by_position.add(rows);
    }

    /// The deleted positions of data file `index`: the union of its position delete files and
    /// deletion vectors, each source loaded once per scan (concurrent callers wait for the
    /// first). `None` when nothing is deleted.
    pub(crate) async fn deleted_positions(&self, index: usize) -> Result<Option<DeletedPositions>> {
        let Some(file) = self.files.get(index) else {
            return Ok(None);
        };
        let sources: Vec<Arc<PositionSource>> = futures::stream::iter(collect_futures(
            file.positional.iter().map(|d| async move {
                let cell = source_key(d)
                    .and_then(|key| self.sources.get(&key))
                    .ok_or_else(|| {
                        Error::InvalidArgument(format!(
                            "table {}: delete file {} was not planned as positional",
                            self.table, d.path
                        ))
                    })?;
                cell.get_or_try_init(|| self.load_source(d)).await.cloned()
            }),
        ))
        .buffer_unordered(LOAD_CONCURRENCY)
        .try_collect()
        .await?;
        let key = normalize_location(&file.path);
        let mut sorted: Vec<&Arc<[u64]>> = Vec::new();
        let mut vectors: Vec<&RoaringTreemap> = Vec::new();
        if let Some(EqualityMode::Cached(positions)) =
            self.equality_modes.get(index).and_then(|m| m.get())
        {
            vectors.extend((!positions.is_empty()).then_some(positions.as_ref()));
        }
        for source in &sources {
            match source.as_ref() {
                PositionSource::File(by_path) => {
                    sorted.extend(by_path.get(&key).filter(|p| !p.is_empty()));
                }
                PositionSource::Vector(b) => vectors.extend((!b.is_empty()).then_some(b)),
            }
        }
        Ok(match (sorted.as_slice(), vectors.as_slice()) {
            ([], []) => None,
            // The usual case: one position delete file, shared as it is.
            ([only], []) => Some(DeletedPositions::Sorted(Arc::clone(only))),
            _ => {
                let mut bitmap = RoaringTreemap::new();
                for positions in sorted {
                    bitmap |= RoaringTreemap::from_sorted_iter(positions.iter().copied())
                        .unwrap_or_else(|_| positions.iter().copied().collect());
                }
                for b in vectors {
                    bitmap |= b;
                }
                Some(DeletedPositions::Bitmap(bitmap))
            }
        })
    }

    /// The physical identity of a delete file: resolved location and size.
    fn physical(&self, d: &DeleteFileRef) -> Result<(String, u64)> {
        physical_of(&self.io, d)
    }

    /// One positional source: from the process's delete cache, or read (and cached).
    async fn load_source(&self, d: &DeleteFileRef) -> Result<Arc<PositionSource>> {
        let (location, size) = self.physical(d)?;
        let offset = match &d.kind {
            DeleteKind::DeletionVector { offset, .. } => Some(*offset),
            _ => None,
        };
        let key: PositionKey = (location, size, offset);
        let source = match self.cache.position_source(&key) {
            Some(source) => {
                self.metrics.cached_files.add(1);
                source
            }
            None => {
                let source = self.read_source(d).await?;
                self.cache.insert_position_source(key, Arc::clone(&source));
                source
            }
        };
        match &d.kind {
            DeleteKind::DeletionVector { .. } => self.metrics.deletion_vectors.add(1),
            _ => self.metrics.position_files.add(1),
        }
        Ok(source)
    }

    /// Reads one positional source.
    async fn read_source(&self, d: &DeleteFileRef) -> Result<Arc<PositionSource>> {
        let started = Instant::now();
        let table = self.table.as_str();
        let source = match &d.kind {
            DeleteKind::Position => {
                if d.format != "PARQUET" {
                    return Err(Error::Unsupported {
                        table: table.to_string(),
                        message: format!(
                            "position delete file {} is {}; only Parquet position deletes are read",
                            d.path, d.format
                        ),
                    });
                }
                let (parsed, fetched) =
                    read_position_delete_file(&self.io, table, &d.path, d.file_size).await?;
                self.metrics.delete_bytes.add(fetched as usize);
                PositionSource::File(parsed)
            }
            DeleteKind::DeletionVector { offset, length } => {
                let bitmap =
                    read_deletion_vector(&self.io, table, &d.path, *offset, *length).await?;
                self.metrics.delete_bytes.add(*length as usize);
                PositionSource::Vector(bitmap)
            }
            DeleteKind::Equality { .. } => {
                return Err(Error::InvalidArgument(format!(
                    "table {table}: equality delete file {} listed as positional",
                    d.path
                )));
            }
        };
        self.metrics.build_time.add_duration(started.elapsed());
        Ok(Arc::new(source))
    }

    /// The footer of data file `index`, through DataFusion's file-metadata cache (the scan
    /// that follows finds it there instead of reading it again).
    pub(crate) async fn data_file_metadata(
        &self,
        index: usize,
        ctx: &TaskContext,
    ) -> Result<Arc<ParquetMetaData>> {
        let file = self.files.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("table {}: no data file #{index}", self.table))
        })?;
        let (store, _, object) = self.io.resolve(&file.path)?;
        let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
        let factory = CachedParquetFileReaderFactory::new(store, cache);
        let mut reader = factory.create_reader(
            0,
            partitioned_file(object, file.file_size),
            None,
            &ExecutionPlanMetricsSet::new(),
        )?;
        reader
            .get_metadata(None)
            .await
            .map_err(|e| Error::corrupt(&self.table, "data file", &file.path, e))
    }

    /// The equality-delete sets, built once per scan (later callers wait for the first): each
    /// delete file's key columns are read once, the sets' memory is reserved in the pool.
    pub(crate) async fn equality_sets(&self, ctx: &TaskContext) -> Result<Arc<EqualitySets>> {
        self.equality
            .get_or_try_init(|| async {
                let started = Instant::now();
                let sets = self.build_equality_sets(ctx).await;
                self.metrics.build_time.add_duration(started.elapsed());
                sets.map(Arc::new)
            })
            .await
            .cloned()
    }

    async fn build_equality_sets(&self, ctx: &TaskContext) -> Result<EqualitySets> {
        let table = self.table.as_str();
        let entries = self.group_entries()?;
        let loaded = load_equality_sets(
            &self.cache,
            &self.io,
            table,
            self.groups
                .iter()
                .zip(entries.iter().map(|(key, _)| key))
                .collect(),
        )
        .await?;
        self.metrics.delete_bytes.add(loaded.fetched as usize);
        for (group, cached) in self.groups.iter().zip(&loaded.cached) {
            self.metrics.equality_files.add(group.files.len());
            if *cached {
                self.metrics.cached_files.add(group.files.len());
            }
        }
        let mut reservation = (!self.groups.is_empty()).then(|| {
            MemoryConsumer::new(format!("IcebergEqualityDeletes[{table}]"))
                .register(ctx.memory_pool())
        });
        let mut sets = Vec::with_capacity(self.groups.len());
        for (group, set) in self.groups.iter().zip(loaded.sets) {
            if let Some(reservation) = reservation.as_mut() {
                reservation.try_grow(set.memory_size()).map_err(|e| {
                    Error::DataFusion(DataFusionError::ResourcesExhausted(format!(
                        "table {table}: equality-delete keys of {} delete file(s) need {} bytes, over the query's memory limit ({e})",
                        group.files.len(),
                        set.memory_size()
                    )))
                })?;
            }
            self.metrics.equality_keys.add(set.len());
            sets.push(set);
        }
        let (unions, places) = self.join_groups(&sets)?;
        self.metrics
            .equality_groups_joined
            .add(places.iter().flatten().count());
        if let Some(reservation) = reservation.as_mut() {
            let bytes = unions.iter().map(|u| u.memory_size()).sum();
            reservation.try_grow(bytes).map_err(|e| {
                Error::DataFusion(DataFusionError::ResourcesExhausted(format!(
                    "table {table}: the joined equality-delete keys of {} groups need {bytes} \
                     bytes, over the query's memory limit ({e})",
                    places.iter().flatten().count(),
                )))
            })?;
        }
        Ok(EqualitySets {
            sets,
            unions,
            places,
            probes: self
                .files
                .iter()
                .map(|_| std::sync::OnceLock::new())
                .collect(),
            _reservation: reservation,
        })
    }

    /// The unions of groups over the same key columns (as the scan reads them) that the scan
    /// has at least [`MIN_UNION_GROUPS`] of, from the delete cache or joined from `sets` (one
    /// per group); and each group's place in them.
    #[allow(clippy::type_complexity)]
    fn join_groups(
        &self,
        sets: &[Arc<EqualityDeleteSet>],
    ) -> Result<(Vec<Arc<EqualityUnion>>, Vec<Option<(usize, u32)>>)> {
        let mut places = vec![None; self.groups.len()];
        if self.groups.len() < MIN_UNION_GROUPS {
            return Ok((Vec::new(), places));
        }
        let entries = self.group_entries()?;
        let key = |g: usize| entries.get(g).map(|(key, _)| key);
        let mut classes: HashMap<(&[i32], &[(Option<usize>, DataType)]), Vec<usize>> =
            HashMap::new();
        for (group, (g, columns)) in self.groups.iter().zip(&self.key_columns).enumerate() {
            classes
                .entry((g.field_ids.as_slice(), columns.as_slice()))
                .or_default()
                .push(group);
        }
        let mut unions = Vec::new();
        for ((_, columns), groups) in classes {
            if groups.len() < MIN_UNION_GROUPS {
                continue;
            }
            let mut members: Vec<(EqualityKey, Arc<EqualityDeleteSet>)> = groups
                .iter()
                .filter_map(|g| Some((key(*g)?.clone(), Arc::clone(sets.get(*g)?))))
                .collect();
            members.sort_by(|a, b| a.0.cmp(&b.0));
            members.dedup_by(|a, b| a.0 == b.0);
            let union_key: UnionKey = members.iter().map(|(k, _)| k.clone()).collect();
            let union = match self.cache.equality_union(&union_key) {
                Some(union) => union,
                None => {
                    let types: Vec<DataType> = columns.iter().map(|(_, t)| t.clone()).collect();
                    let union = Arc::new(EqualityUnion::build(&members, &types)?);
                    self.cache
                        .insert_equality_union(union_key, Arc::clone(&union));
                    union
                }
            };
            for g in groups {
                if let Some(member) = key(g).and_then(|k| union.member_of(k)) {
                    places[g] = Some((unions.len(), member));
                }
            }
            unions.push(union);
        }
        Ok((unions, places))
    }

    /// Removes the rows of `batch` that equality deletes delete, then keeps `output` columns.
    pub(crate) fn apply(
        &self,
        sets: &EqualitySets,
        batch: RecordBatch,
        output: &[usize],
        output_schema: &arrow::datatypes::SchemaRef,
    ) -> DFResult<RecordBatch> {
        let rows = batch.num_rows();
        let deleted = match self.file_column {
            Some(column) if rows > 0 => {
                let files = batch.column(column).as_primitive::<UInt32Type>().values();
                let first = files[0];
                if files.iter().all(|f| *f == first) {
                    // The usual case: the whole batch comes from one data file.
                    self.deleted_rows(sets, &batch, first)?
                } else {
                    let mut builder = BooleanBufferBuilder::new(rows);
                    let mut start = 0;
                    while start < rows {
                        let file = files[start];
                        let end = (start..rows).find(|i| files[*i] != file).unwrap_or(rows);
                        let run = batch.slice(start, end - start);
                        match self.deleted_rows(sets, &run, file)? {
                            Some(mask) => builder.append_buffer(&mask),
                            None => builder.append_n(end - start, false),
                        }
                        start = end;
                    }
                    Some(builder.finish())
                }
            }
            _ => None,
        };
        // Only the columns output are kept: the key and file columns are not copied.
        let columns = output
            .iter()
            .map(|i| Arc::clone(batch.column(*i)))
            .collect();
        let output = RecordBatch::try_new_with_options(
            Arc::clone(output_schema),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(rows)),
        )?;
        match deleted {
            Some(deleted) if deleted.count_set_bits() > 0 => {
                self.metrics
                    .rows_deleted_by_equality
                    .add(deleted.count_set_bits());
                let keep = BooleanArray::new(!&deleted, None);
                Ok(arrow::compute::filter_record_batch(&output, &keep)?)
            }
            _ => Ok(output),
        }
    }

    /// The rows of `batch` (all from data file `file`) its equality deletes delete; `None`
    /// when none apply.
    fn deleted_rows(
        &self,
        sets: &EqualitySets,
        batch: &RecordBatch,
        file: u32,
    ) -> DFResult<Option<BooleanBuffer>> {
        // Applied (or already probed) as positions by its positional run.
        if matches!(
            self.equality_modes.get(file as usize).and_then(|m| m.get()),
            Some(EqualityMode::Record(_) | EqualityMode::Cached(_))
        ) {
            return Ok(None);
        }
        self.probe_rows(sets, batch, file)
    }

    /// The rows of `batch` (all from data file `file`) its equality groups delete.
    fn probe_rows(
        &self,
        sets: &EqualitySets,
        batch: &RecordBatch,
        file: u32,
    ) -> DFResult<Option<BooleanBuffer>> {
        let Some(f) = self.files.get(file as usize) else {
            return Ok(None);
        };
        let Some(probe) = sets.probe_of(file as usize, &f.equality_groups) else {
            return Ok(None);
        };
        // The key columns of `group`, in its canonical types.
        let keys_of = |group: usize| {
            self.key_columns[group]
                .iter()
                .map(|(col, ty)| -> DFResult<ArrayRef> {
                    Ok(match col {
                        Some(c) => {
                            let a = batch.column(*c);
                            if a.data_type() == ty {
                                Arc::clone(a)
                            } else {
                                arrow::compute::cast(a, ty)?
                            }
                        }
                        None => new_null_array(ty, batch.num_rows()),
                    })
                })
                .collect::<DFResult<Vec<_>>>()
        };
        let mut deleted: Option<BooleanBuffer> = None;
        let mut add = |mask: BooleanBuffer| {
            deleted = Some(match deleted.take() {
                Some(previous) => &previous | &mask,
                None => mask,
            });
        };
        for &group in &probe.alone {
            add(sets.sets[group].deleted(&keys_of(group)?)?);
        }
        for (union, group, members) in &probe.unions {
            add(sets.unions[*union].deleted(&keys_of(*group)?, members)?);
        }
        Ok(deleted)
    }
}

/// The physical identity of a delete file: resolved location and size.
fn physical_of(io: &TableIo, d: &DeleteFileRef) -> Result<(String, u64)> {
    let (_, url, object) = io.resolve(&d.path)?;
    Ok((format!("{}{object}", url.as_str()), d.file_size))
}

/// The sets of some equality groups, as [`load_equality_sets`] found them.
pub(crate) struct LoadedSets {
    /// One per group, in order.
    pub(crate) sets: Vec<Arc<EqualityDeleteSet>>,
    /// Per group, whether its set came from the delete cache.
    pub(crate) cached: Vec<bool>,
    /// The bytes of delete files read.
    pub(crate) fetched: u64,
}

/// The set of each of `groups` (each with its cache identity): from the delete cache, or built
/// from its files' key columns (each file read once, several at a time) and cached.
pub(crate) async fn load_equality_sets(
    cache: &DeleteCache,
    io: &TableIo,
    table: &str,
    groups: Vec<(&EqualityGroup, &EqualityKey)>,
) -> Result<LoadedSets> {
    let mut found: Vec<Option<Arc<EqualityDeleteSet>>> = Vec::with_capacity(groups.len());
    let mut eq_files: Vec<(&DeleteFileRef, &Vec<i32>)> = Vec::new();
    let mut to_read: HashSet<(&str, &Vec<i32>)> = HashSet::new();
    for (group, key) in &groups {
        if group.field_ids.is_empty() {
            let path = group.files.first().map_or("?", |f| f.path.as_str());
            return Err(Error::corrupt(
                table,
                "equality delete file",
                path,
                "its manifest entry has no equality_ids",
            ));
        }
        let set = cache.equality_set(key);
        if set.is_none() {
            for f in &group.files {
                if to_read.insert((f.path.as_str(), &group.field_ids)) {
                    eq_files.push((f, &group.field_ids));
                }
            }
        }
        found.push(set);
    }
    let keys: HashMap<String, (Vec<ArrayRef>, u64)> =
        futures::stream::iter(collect_futures(eq_files.iter().map(|(d, ids)| {
            let (io, table, path, ids) = (
                io.clone(),
                table.to_string(),
                d.path.clone(),
                (*ids).clone(),
            );
            let size = d.file_size;
            async move {
                let (columns, fetched) = read_equality_keys(&io, &table, &path, size, &ids).await?;
                Ok::<_, Error>((path, (columns, fetched)))
            }
        })))
        .buffer_unordered(LOAD_CONCURRENCY)
        .try_collect()
        .await?;
    let mut loaded = LoadedSets {
        sets: Vec::with_capacity(groups.len()),
        cached: Vec::with_capacity(groups.len()),
        fetched: keys.values().map(|(_, fetched)| *fetched).sum(),
    };
    for ((group, key), set) in groups.into_iter().zip(found) {
        loaded.cached.push(set.is_some());
        let set = match set {
            Some(set) => set,
            None => {
                let columns: Vec<Vec<ArrayRef>> = group
                    .files
                    .iter()
                    .filter_map(|f| keys.get(&f.path).map(|(columns, _)| columns.clone()))
                    .collect();
                let set = Arc::new(EqualityDeleteSet::build(&columns)?);
                cache.insert_equality_set(key.clone(), Arc::clone(&set));
                set
            }
        };
        loaded.sets.push(set);
    }
    Ok(loaded)
}

/// Each of `groups`' cache identity: its field ids and its files' physical identities, sorted.
/// Resolved once per scan: a table upserted by many commits has a group per commit, each
/// applying to every older data file.
pub(crate) fn equality_keys(io: &TableIo, groups: &[EqualityGroup]) -> Result<Vec<EqualityKey>> {
    groups
        .iter()
        .map(|group| {
            let mut files = group
                .files
                .iter()
                .map(|f| physical_of(io, f))
                .collect::<Result<Vec<_>>>()?;
            files.sort();
            Ok(EqualityKey::new(group.field_ids.clone(), files))
        })
        .collect()
}

/// Each group's entry in the positions keys of the data files it applies to: its identity
/// (`group_keys`, from [`equality_keys`]) and which of its key columns the scan schema has
/// (`key_columns`). Built once per scan, so that a data file's key shares them.
pub(crate) fn group_entries(
    group_keys: Vec<EqualityKey>,
    key_columns: &[Vec<(Option<usize>, DataType)>],
) -> Vec<GroupEntry> {
    group_keys
        .into_iter()
        .enumerate()
        .map(|(g, key)| {
            let present: Arc<[bool]> = key_columns
                .get(g)
                .map(|keys| keys.iter().map(|(c, _)| c.is_some()).collect())
                .unwrap_or_default();
            (key, present)
        })
        .collect()
}

/// The cache key of data file `file`'s equality-deleted positions: its physical identity and,
/// sorted, its equality groups' entries (`entries`, from [`group_entries`]).
fn equality_positions_key(
    io: &TableIo,
    table: &str,
    file: &FileDeletes,
    entries: &[GroupEntry],
) -> Result<EqualityPositionsKey> {
    let (data, keyed) = keyed_groups(io, table, file, entries)?;
    Ok((data, keyed.into_iter().map(|(key, _)| key).collect()))
}

/// [`equality_positions_key`]'s parts: the data file's physical identity and its groups'
/// entries, sorted, each with the group's index in the scan.
#[allow(clippy::type_complexity)]
pub(crate) fn keyed_groups(
    io: &TableIo,
    table: &str,
    file: &FileDeletes,
    entries: &[GroupEntry],
) -> Result<((String, u64), Vec<(GroupEntry, usize)>)> {
    let (_, url, object) = io.resolve(&file.path)?;
    let data = (format!("{}{object}", url.as_str()), file.file_size);
    let mut keyed = Vec::with_capacity(file.equality_groups.len());
    for &g in &file.equality_groups {
        let Some(entry) = entries.get(g) else {
            return Err(Error::InvalidArgument(format!(
                "table {table}: no equality group #{g}"
            )));
        };
        keyed.push((entry.clone(), g));
    }
    // The groups' order follows manifest loading; their union does not.
    keyed.sort();
    Ok((data, keyed))
}

/// The equality-deleted positions of every data file of a scan layout that has equality
/// deletes, by path, when the delete cache holds all of them (`None` otherwise): the scan can
/// then be laid out without equality groups and key columns.
pub(crate) fn cached_equality_positions(
    cache: &DeleteCache,
    io: &TableIo,
    table: &str,
    files: &[FileDeletes],
    entries: &[GroupEntry],
) -> Option<HashMap<String, Arc<RoaringTreemap>>> {
    let mut out = HashMap::new();
    for file in files.iter().filter(|f| !f.equality_groups.is_empty()) {
        let key = equality_positions_key(io, table, file, entries).ok()?;
        out.insert(file.path.clone(), cache.equality_positions(&key)?);
    }
    (!out.is_empty()).then_some(out)
}

/// Builds every future now, so the stream over them holds no closure (and no borrow).
fn collect_futures<F>(futures: impl Iterator<Item = F>) -> Vec<F> {
    futures.collect()
}

/// The canonical key type of a field of the scan schema.
pub(crate) fn key_type(dt: &DataType) -> DataType {
    canonical_type(dt)
}
