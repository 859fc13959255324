//! Decoded columns of data files, kept across queries.
//!
//! A plain scan of a warm table spends most of its time decompressing and decoding Parquet
//! pages (zstd alone is about 60% of a `sum` over a lineitem-like table), and dashboards run
//! the same scans again and again over files that never change. So the columns a scan decodes
//! are kept, as the Arrow arrays it produced, in a cache bounded by their memory: the next scan
//! of the same file and column takes them instead of reading the file (ClickHouse's
//! uncompressed cache keeps decompressed blocks for the same reason).
//!
//! An entry is one column of one data file as one scan partition reads it: the arrays of its
//! batches, in order. Its key names everything that decides those arrays:
//!
//! - the file (store URL, object path and size) and the byte range a partition reads of it;
//! - the batch size (batch boundaries are where a scan's batches end: at row-group ends and
//!   every `batch_size` rows, whatever else the scan reads);
//! - the column by its Iceberg field id and the Arrow type it is read as (a promoted type is
//!   another entry), and the table (its UUID and name mapping: a column absent from a file
//!   reads as the table's default, and a file without field ids is mapped by name).
//!
//! Scans that read every row of their files use the cache: no limit, no struct narrowing,
//! no filter other than ones the planner decided exactly by partition values (those hold for
//! every row of every planned file), not a positional scan (DELETE, UPDATE, MERGE), and the
//! Parquet scan right below the Iceberg scan (a sort pushed between them, as DataFusion does
//! for an `ORDER BY` right above a scan, keeps the usual read). Deletes do not stop it: a
//! file with position deletes, a deletion vector or equality-deleted positions already known is
//! kept whole and its deleted rows are masked out of the cached batches (`merge_stream`); only
//! files whose equality deletes are still probed (or recorded) are read as before. Masking
//! copies every kept row, so a file masked from cached columns is also kept masked, under its
//! deleted positions ([`Mask`], compared by content): the next scan with the same deletes takes
//! those batches as they are, and a commit that changes the file's deletes makes a new entry
//! (from the whole columns, which stay cached) while the old one is no longer looked up.
//!
//! Scans with filters on data ([`FilteredScan`]: dashboards' filtered queries, point lookups)
//! use it too when they have no deletes and no limit. A file whose columns are all cached is
//! served from them, without the batches the filters rule out by the batches' zone maps (min,
//! max and null count of each cached batch, `column_zones`); the filter above the scan applies
//! to the rows that remain, as it does to what the Parquet reader returns. Such a scan keeps a
//! file's columns only into free space: from the file's second read on (by any scan) it reads
//! the file whole, without its filters, when the columns' estimated size (the file's rows, from
//! its cached footer, times the columns' widths) fits in what the cache has free and in one
//! file's share. So it does not push entries out: once the cache is full only whole reads
//! replace entries, and lookups over a table larger than the cache never make each lookup
//! decode whole files. A file whose columns turn out larger than the room they were given is
//! not tried again that way.
//!
//! Readers other than scans keep whole-file columns here too ([`FileColumn`]: no byte range,
//! their own batch size, the file's own type): the key columns a scan's planning reads to extend
//! a file's equality-deleted positions after an upsert (`deletes::equality_extension`), which
//! the next commit's extension reads again.
//!
//! A file's columns are served from the cache when every projected column is there. Otherwise
//! the file is read, and its columns are kept once it has been read to its end — but only from
//! its second whole read on: the first is only remembered. Keeping a file's batches costs fresh
//! memory for each of them (on a cold `sum` over the bench table, +50% of the query's time), so
//! a file read once (an export, a one-off scan, the first query after a start) costs nothing
//! more, and a scan none of whose files is cached or read before runs exactly as without the
//! cache (DataFusion's scan opens the next file while one streams). Entries are then admitted
//! and evicted by `moka` (TinyLFU: a large scan does not push out columns that are read
//! often). One scan at a time keeps a given file: concurrent scans of it read it as usual
//! meanwhile instead of decoding the same columns to keep them twice. Lookups are counted per
//! file ([`ColumnCache::stats`]) and each scan reports `column_cache_files_hit` /
//! `column_cache_files_read` (and, with filters, `column_cache_batches_pruned`) in `EXPLAIN
//! ANALYZE`.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::physical_plan::parquet::metadata::CachedParquetMetaData;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::Count;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use moka::sync::Cache;

use super::column_zones::{BatchZones, ColumnZones};
use super::reader::files_only;
use crate::cache_stats::{CacheCounters, CacheStats, moka_stats};
use crate::deletes::DeletedPositions;
use crate::spec::field_id_of;

/// How many files read before the cache remembers (to keep a file's columns from its second
/// read on), and how many files it remembers as declined by filtered scans.
const SEEN_FILES: u64 = 64 * 1024;

/// One file's columns are kept only while they take at most this share of the capacity (one
/// in this many): a file that would push out most of the cache is read as usual.
const MAX_FILE_SHARE: u64 = 4;

/// The bytes a value of a variable-width type (strings, binaries, nested) is estimated to
/// take decoded, offsets included, when a filtered scan decides whether a file fits.
const VARIABLE_WIDTH: u64 = 32;

/// Which table a scan reads, as far as its decoded columns depend on it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct ColumnSource {
    /// The table's UUID.
    table: String,
    /// A hash of the table's name mapping (0: none).
    name_mapping: u64,
}

impl ColumnSource {
    /// The table with UUID `table` and name mapping `name_mapping` (its JSON, as the table
    /// property holds it).
    pub(crate) fn new(table: String, name_mapping: Option<&str>) -> Self {
        let name_mapping = name_mapping.map_or(0, |json| {
            let mut hasher = DefaultHasher::new();
            json.hash(&mut hasher);
            hasher.finish()
        });
        Self {
            table,
            name_mapping,
        }
    }
}

/// One column of one data file, as a scan partition reads it (module docs).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ColumnKey {
    source: Arc<ColumnSource>,
    /// Store URL and object path.
    file: Arc<str>,
    size: u64,
    range: Option<(i64, i64)>,
    batch_rows: usize,
    field_id: i32,
    data_type: DataType,
    /// The deleted rows masked out of the batches (`None`: every row of the file).
    mask: Option<Arc<Mask>>,
}

/// The deleted positions masked out of a file's cached batches, looked up by content: the
/// same file with the same deleted positions gives the same batches, whichever delete files
/// (or equality deletes recorded as positions) the positions came from.
#[derive(Debug)]
pub(crate) struct Mask {
    positions: DeletedPositions,
    fingerprint: u64,
}

impl Mask {
    /// The mask of `positions`.
    pub(crate) fn new(positions: DeletedPositions) -> Arc<Self> {
        let fingerprint = positions.fingerprint();
        Arc::new(Self {
            positions,
            fingerprint,
        })
    }

    /// The deleted positions.
    pub(crate) fn positions(&self) -> &DeletedPositions {
        &self.positions
    }
}

impl PartialEq for Mask {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint && self.positions.same_as(&other.positions)
    }
}

impl Eq for Mask {}

impl Hash for Mask {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.fingerprint.hash(state);
    }
}

/// The arrays of one column's batches, in order, their zones, and (masked columns) how many
/// rows the mask removed.
#[derive(Debug)]
struct CachedColumn {
    chunks: Vec<ArrayRef>,
    zones: Option<ColumnZones>,
    bytes: usize,
    removed: usize,
}

/// Decoded columns shared by every scan of a process (module docs).
#[derive(Debug, Clone)]
pub struct ColumnCache {
    columns: Option<Cache<ColumnKey, Arc<CachedColumn>>>,
    /// Files read before (hashes of their source, location, size, range and batch size): a
    /// file's columns are kept from its second read on.
    seen: Option<Cache<u64, ()>>,
    /// Files whose columns a filtered scan found larger than the room it had for them: not
    /// read whole for filtered scans again.
    declined: Option<Cache<u64, ()>>,
    /// Files being read to be kept: another scan reads them as usual meanwhile, rather than
    /// decoding and keeping the same columns twice.
    filling: Arc<Mutex<HashSet<u64>>>,
    capacity_bytes: u64,
    lookups: CacheCounters,
}

impl Default for ColumnCache {
    /// No cache: scans read their files every time.
    fn default() -> Self {
        Self::new(0)
    }
}

impl ColumnCache {
    /// A cache holding about `capacity_bytes` of decoded columns (0: none).
    pub fn new(capacity_bytes: u64) -> Self {
        let columns = (capacity_bytes > 0).then(|| {
            Cache::builder()
                .max_capacity(capacity_bytes)
                .weigher(|_, c: &Arc<CachedColumn>| {
                    u32::try_from(c.bytes).unwrap_or(u32::MAX).max(1)
                })
                .build()
        });
        let seen = (capacity_bytes > 0).then(|| Cache::new(SEEN_FILES));
        let declined = (capacity_bytes > 0).then(|| Cache::new(SEEN_FILES));
        Self {
            columns,
            seen,
            declined,
            filling: Arc::default(),
            capacity_bytes,
            lookups: CacheCounters::default(),
        }
    }

    /// Whether scans use it (a capacity above 0).
    pub fn enabled(&self) -> bool {
        self.columns.is_some()
    }

    /// Its state (lookups are per file: a hit is a file served from the cache).
    pub fn stats(&self) -> CacheStats {
        match &self.columns {
            Some(columns) => moka_stats("column", columns, self.capacity_bytes, &self.lookups),
            None => CacheStats {
                name: "column",
                entries: 0,
                bytes: 0,
                capacity_bytes: 0,
                hits: self.lookups.hits(),
                misses: self.lookups.misses(),
            },
        }
    }
}

/// One column of a whole data file, in batches of at most `batch_rows` rows (ending at row-group
/// ends), as a reader other than a scan reads it: the key columns that extend equality-deleted
/// positions after an upsert (`deletes::equality_extension`), looked up at every commit.
#[derive(Debug, Clone)]
pub(crate) struct FileColumn {
    pub(crate) source: Arc<ColumnSource>,
    /// Store URL and object path.
    pub(crate) file: Arc<str>,
    pub(crate) size: u64,
    pub(crate) batch_rows: usize,
    pub(crate) field_id: i32,
    /// As the file stores it (before any promotion).
    pub(crate) data_type: DataType,
}

impl FileColumn {
    fn key(&self) -> ColumnKey {
        ColumnKey {
            source: Arc::clone(&self.source),
            file: Arc::clone(&self.file),
            size: self.size,
            range: None,
            batch_rows: self.batch_rows,
            field_id: self.field_id,
            data_type: self.data_type.clone(),
            mask: None,
        }
    }
}

impl ColumnCache {
    /// The arrays of each of `columns` (columns of one file), when all are kept, cut into the
    /// same batches ([`ColumnCache::keep_file_column`]).
    pub(crate) fn file_columns(&self, columns: &[FileColumn]) -> Option<Vec<Vec<ArrayRef>>> {
        let keys: Vec<ColumnKey> = columns.iter().map(FileColumn::key).collect();
        let found = cached_columns(self.columns.as_ref()?, &keys);
        self.lookups.record(found.is_some());
        Some(found?.iter().map(|c| c.chunks.clone()).collect())
    }

    /// Keeps the arrays of `column` (not past a quarter of the capacity).
    pub(crate) fn keep_file_column(&self, column: &FileColumn, chunks: Vec<ArrayRef>) {
        let Some(columns) = &self.columns else {
            return;
        };
        let bytes: usize = chunks.iter().map(|c| c.get_array_memory_size()).sum();
        if bytes as u64 > self.capacity_bytes / MAX_FILE_SHARE {
            return;
        }
        let cached = CachedColumn {
            chunks,
            zones: None,
            bytes,
            removed: 0,
        };
        columns.insert(column.key(), Arc::new(cached));
    }
}

/// How one scan uses the column cache, and its counts (files served from the cache, files
/// read through it; shared by the scan's partitions).
#[derive(Debug, Clone)]
pub(crate) struct CachedScan {
    pub(crate) cache: ColumnCache,
    pub(crate) source: Arc<ColumnSource>,
    pub(crate) hit: Count,
    /// Of the files served from the cache, those taken with their deleted rows already masked
    /// out.
    pub(crate) masked: Count,
    pub(crate) read: Count,
    /// For a scan with filters on data (module docs); `None`: the scan reads every row of
    /// its files.
    pub(crate) filtered: Option<FilteredScan>,
}

/// What a scan with filters on data needs to use the cache (module docs).
#[derive(Debug, Clone)]
pub(crate) struct FilteredScan {
    /// The scan's filters over the table's columns, to skip cached batches by their zones
    /// (`None`: they cannot skip any).
    pub(crate) pruning: Option<Arc<PruningPredicate>>,
    /// The same scan without its filters (its files aside): how a file is read whole to be
    /// kept.
    pub(crate) unfiltered: Arc<FileScanConfig>,
    /// The footers the scan's readers cache: a file's rows, for its columns' estimated size.
    pub(crate) footers: Arc<dyn FileMetadataCache>,
    /// Cached batches skipped by their zones.
    pub(crate) pruned: Count,
}

impl CachedScan {
    /// The batches of partition `partition` of the Parquet scan `config`: each file's columns
    /// from the cache when they are all there, a file read before read and kept (when it
    /// fits: module docs), any other read as usual. `None` when the scan should run as usual:
    /// it reads no column or a column without a field id, or none of its files is in the
    /// cache or to be kept (they are now marked as read: the usual scan keeps opening the
    /// next file while one streams, and keeps no batch).
    pub(crate) fn partition_stream(
        &self,
        config: &FileScanConfig,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Option<BoxStream<'static, DFResult<RecordBatch>>> {
        let files = config
            .file_groups
            .get(partition)
            .map(|g| g.files().to_vec())
            .unwrap_or_default();
        let reader = self.file_reader(config)?;
        let batch_rows = context.session_config().batch_size();
        let plans: Vec<(PartitionedFile, FilePlan)> = files
            .into_iter()
            .map(|file| {
                let plan = reader.plan(&file, batch_rows);
                (file, plan)
            })
            .collect();
        if plans.iter().all(|(_, plan)| matches!(plan, FilePlan::Read)) {
            return None;
        }
        // The scan is cloned only when some file is read: a partition served from the cache
        // (a point query on a warm table) takes none.
        let config = plans
            .iter()
            .any(|(_, plan)| !matches!(plan, FilePlan::Cached(_)))
            .then(|| Arc::new(config.clone()));
        let batches = futures::stream::iter(plans).flat_map(move |(file, plan)| {
            reader.stream(config.as_ref(), file, plan, Arc::clone(&context))
        });
        Some(batches.boxed())
    }

    /// The batches of one whole `file` (every row of its byte range, in order) read with the
    /// Parquet scan `config` (its file groups ignored), from the cache when all its columns
    /// are there, else read and kept when it was read whole before; `None` when the caller
    /// should read it as usual (as for [`CachedScan::partition_stream`]).
    pub(crate) fn file_stream(
        &self,
        config: &FileScanConfig,
        file: PartitionedFile,
        context: Arc<TaskContext>,
    ) -> Option<WholeFile> {
        let reader = self.file_reader(config)?;
        match reader.plan(&file, context.session_config().batch_size()) {
            FilePlan::Read => None,
            FilePlan::Cached(batches) => Some(WholeFile {
                cached_rows: Some(batches.iter().map(RecordBatch::num_rows).sum()),
                batches: futures::stream::iter(batches.into_iter().map(Ok)).boxed(),
            }),
            plan => {
                let config = Arc::new(config.clone());
                Some(WholeFile {
                    batches: reader.stream(Some(&config), file, plan, context),
                    cached_rows: None,
                })
            }
        }
    }

    /// The cached batches of whole `file` as the Parquet scan `config` reads it, with the
    /// positions of `mask` deleted, and how many rows those were; `None` when they are not
    /// all cached (nothing is counted then: the file is looked up whole next).
    pub(crate) fn masked_batches(
        &self,
        config: &FileScanConfig,
        file: &PartitionedFile,
        mask: &Arc<Mask>,
        batch_rows: usize,
    ) -> Option<(Vec<RecordBatch>, usize)> {
        let reader = self.file_reader(config)?;
        let keys = reader.keys(&reader.location(file), file, batch_rows, Some(mask));
        let found = cached_columns(&reader.columns, &keys)?;
        let batches = reader.batches(&found)?;
        self.cache.lookups.record(true);
        self.hit.add(1);
        self.masked.add(1);
        Some((batches, found.first().map_or(0, |c| c.removed)))
    }

    /// `masked` (the batches of whole `file`, served from the cache with `cached_rows` rows,
    /// with the positions of `mask` deleted), passed on and kept under `mask` once they end:
    /// the next scan with the same deletes takes them as they are
    /// ([`CachedScan::masked_batches`]).
    pub(crate) fn keep_masked(
        &self,
        config: &FileScanConfig,
        file: &PartitionedFile,
        mask: &Arc<Mask>,
        cached_rows: usize,
        masked: BoxStream<'static, DFResult<RecordBatch>>,
        batch_rows: usize,
    ) -> BoxStream<'static, DFResult<RecordBatch>> {
        let Some(reader) = self.file_reader(config) else {
            return masked;
        };
        let recording = Recording {
            columns: reader.columns.clone(),
            keys: reader.keys(&reader.location(file), file, batch_rows, Some(mask)),
            chunks: Vec::new(),
            bytes: 0,
            max_bytes: reader.max_file_bytes,
            decline: None,
            unmasked_rows: Some(cached_rows),
            _guard: None,
        };
        RecordingStream {
            inner: masked,
            recording: Some(recording),
        }
        .boxed()
    }

    fn file_reader(&self, config: &FileScanConfig) -> Option<FileReader> {
        let columns = self.cache.columns.clone()?;
        let seen = self.cache.seen.clone()?;
        let declined = self.cache.declined.clone()?;
        let schema = config.projected_schema().ok()?;
        let field_ids = schema
            .fields()
            .iter()
            .map(|f| field_id_of(f))
            .collect::<Option<Vec<i32>>>()?;
        // No columns (`count(*)`): nothing to keep, and nothing to decode either.
        if field_ids.is_empty() {
            return None;
        }
        Some(FileReader {
            columns,
            seen,
            declined,
            scan: self.clone(),
            store: config.object_store_url.as_str().to_string(),
            schema,
            field_ids: field_ids.into(),
            max_file_bytes: usize::try_from(self.cache.capacity_bytes / MAX_FILE_SHARE)
                .unwrap_or(usize::MAX),
        })
    }
}

/// What to do with one file of a scan.
enum FilePlan {
    /// Its columns are in the cache: these batches (without those a filter rules out).
    Cached(Vec<RecordBatch>),
    /// Read before: read it whole and keep its columns under `keys`, unless they take more
    /// than `max_bytes` (then a filtered scan declines the file: `decline`, its hash); no
    /// other scan keeps it meanwhile (`guard`).
    Keep {
        keys: Vec<ColumnKey>,
        max_bytes: usize,
        decline: Option<u64>,
        guard: FillGuard,
    },
    /// Read it as the scan does, keep nothing (a first read: now marked as read).
    Read,
}

/// A whole file's batches through the cache.
pub(crate) struct WholeFile {
    pub(crate) batches: BoxStream<'static, DFResult<RecordBatch>>,
    /// Its rows, when its columns were served from the cache: its batches with deleted rows
    /// masked out may then be kept ([`CachedScan::keep_masked`]).
    pub(crate) cached_rows: Option<usize>,
}

/// Reads files of one Parquet scan through the cache.
#[derive(Clone)]
struct FileReader {
    columns: Cache<ColumnKey, Arc<CachedColumn>>,
    seen: Cache<u64, ()>,
    declined: Cache<u64, ()>,
    scan: CachedScan,
    store: String,
    schema: SchemaRef,
    field_ids: Arc<[i32]>,
    max_file_bytes: usize,
}

impl FileReader {
    /// The keys of `file`'s columns (at `location`: [`FileReader::location`]), read in
    /// batches of `batch_rows` rows, with `mask`'s positions deleted.
    fn keys(
        &self,
        location: &Arc<str>,
        file: &PartitionedFile,
        batch_rows: usize,
        mask: Option<&Arc<Mask>>,
    ) -> Vec<ColumnKey> {
        self.field_ids
            .iter()
            .zip(self.schema.fields())
            .map(|(id, field)| ColumnKey {
                source: Arc::clone(&self.scan.source),
                file: Arc::clone(location),
                size: file.object_meta.size,
                range: file.range.as_ref().map(|r| (r.start, r.end)),
                batch_rows,
                field_id: *id,
                data_type: field.data_type().clone(),
                mask: mask.cloned(),
            })
            .collect()
    }

    /// Where `file` is: store URL and object path.
    fn location(&self, file: &PartitionedFile) -> Arc<str> {
        format!("{}{}", self.store, file.object_meta.location).into()
    }

    /// Looks `file` up (and counts it as served from the cache or read).
    fn plan(&self, file: &PartitionedFile, batch_rows: usize) -> FilePlan {
        let location = self.location(file);
        let keys = self.keys(&location, file, batch_rows, None);
        let lookups = &self.scan.cache.lookups;
        let cached = cached_columns(&self.columns, &keys).and_then(|found| self.batches(&found));
        if let Some(batches) = lookups.observe(cached) {
            self.scan.hit.add(1);
            return FilePlan::Cached(batches);
        }
        self.scan.read.add(1);
        // The file as read by a scan (whatever its columns and filters).
        let mut hasher = DefaultHasher::new();
        (&self.scan.source, &location, file.object_meta.size).hash(&mut hasher);
        (file.range.as_ref().map(|r| (r.start, r.end)), batch_rows).hash(&mut hasher);
        let read_before = hasher.finish();
        if !self.seen.contains_key(&read_before) {
            self.seen.insert(read_before, ());
            return FilePlan::Read;
        }
        let Some(filtered) = &self.scan.filtered else {
            return match FillGuard::take(&self.scan.cache.filling, read_before) {
                Some(guard) => FilePlan::Keep {
                    keys,
                    max_bytes: self.max_file_bytes,
                    decline: None,
                    guard,
                },
                None => FilePlan::Read,
            };
        };
        if self.declined.contains_key(&read_before) {
            return FilePlan::Read;
        }
        // Into free space only (module docs), as the cache holds it once its pending inserts
        // and evictions are applied.
        self.columns.run_pending_tasks();
        let free = self
            .scan
            .cache
            .capacity_bytes
            .saturating_sub(self.columns.weighted_size());
        let room = self
            .max_file_bytes
            .min(usize::try_from(free).unwrap_or(usize::MAX));
        let fits = self
            .estimated_bytes(file, filtered)
            .is_some_and(|estimate| estimate <= room as u64);
        match fits
            .then(|| FillGuard::take(&self.scan.cache.filling, read_before))
            .flatten()
        {
            Some(guard) => FilePlan::Keep {
                keys,
                max_bytes: room,
                decline: Some(read_before),
                guard,
            },
            None => FilePlan::Read,
        }
    }

    /// The batches of a file whose columns are `found`, without those a filtered scan's
    /// filters rule out by their zones; `None` if they do not make batches of the scan's
    /// schema (the file is then read).
    fn batches(&self, found: &[Arc<CachedColumn>]) -> Option<Vec<RecordBatch>> {
        let lengths: Vec<usize> = found
            .first()
            .map(|c| c.chunks.iter().map(|a| a.len()).collect())
            .unwrap_or_default();
        let filtered = self.scan.filtered.as_ref();
        let keep = filtered
            .and_then(|f| {
                let zones = found.iter().map(|c| c.zones.as_ref()).collect();
                let batches = BatchZones::new(&self.schema, zones, &lengths);
                f.pruning.as_ref()?.prune(&batches).ok()
            })
            .filter(|keep| keep.len() == lengths.len());
        if let (Some(f), Some(keep)) = (filtered, &keep) {
            f.pruned.add(keep.iter().filter(|k| !**k).count());
        }
        lengths
            .iter()
            .enumerate()
            .filter(|(i, _)| keep.as_ref().is_none_or(|keep| keep[*i]))
            .map(|(i, rows)| {
                let arrays = found.iter().map(|c| Arc::clone(&c.chunks[i])).collect();
                RecordBatch::try_new_with_options(
                    Arc::clone(&self.schema),
                    arrays,
                    &RecordBatchOptions::new().with_row_count(Some(*rows)),
                )
                .ok()
            })
            .collect()
    }

    /// About how many bytes this scan's columns of `file` take decoded: the rows of the row
    /// groups the file's byte range reads (from the footer its readers cached) times the
    /// columns' widths. `None` when the footer is not cached.
    fn estimated_bytes(&self, file: &PartitionedFile, filtered: &FilteredScan) -> Option<u64> {
        let entry = filtered.footers.get(&file.object_meta.location)?;
        if !entry.is_valid_for(&file.object_meta) {
            return None;
        }
        let footer = entry
            .file_metadata
            .as_any()
            .downcast_ref::<CachedParquetMetaData>()?
            .parquet_metadata();
        // A row group belongs to the range holding its midpoint, as DataFusion assigns them.
        let rows: i64 = footer
            .row_groups()
            .iter()
            .filter(|group| match &file.range {
                None => true,
                Some(range) => {
                    let start = group.columns().first().map_or(0, |c| c.byte_range().0) as i64;
                    let middle = start + group.compressed_size() / 2;
                    range.start <= middle && middle < range.end
                }
            })
            .map(|group| group.num_rows())
            .sum();
        let width: u64 = self
            .schema
            .fields()
            .iter()
            .map(|f| match f.data_type() {
                DataType::Boolean => 1,
                other => other.primitive_width().map_or(VARIABLE_WIDTH, |w| w as u64),
            })
            .sum();
        Some(u64::try_from(rows).unwrap_or(0) * width)
    }

    /// The batches of `file` as `plan` says, read (unless cached) with the scan `config`, or
    /// without its filters when a filtered scan keeps the file.
    fn stream(
        &self,
        config: Option<&Arc<FileScanConfig>>,
        file: PartitionedFile,
        plan: FilePlan,
        context: Arc<TaskContext>,
    ) -> BoxStream<'static, DFResult<RecordBatch>> {
        let (read, recording) = match plan {
            FilePlan::Cached(batches) => {
                return futures::stream::iter(batches.into_iter().map(Ok)).boxed();
            }
            FilePlan::Keep {
                keys,
                max_bytes,
                decline,
                guard,
            } => {
                let read = match &self.scan.filtered {
                    Some(filtered) => Some(&filtered.unfiltered),
                    None => config,
                };
                let recording = Recording {
                    columns: self.columns.clone(),
                    keys,
                    chunks: Vec::new(),
                    bytes: 0,
                    max_bytes,
                    decline: decline.map(|hash| (self.declined.clone(), hash)),
                    unmasked_rows: None,
                    _guard: Some(guard),
                };
                (read, Some(recording))
            }
            FilePlan::Read => (config, None),
        };
        let stream = match read {
            Some(read) => read_file(read, file, context),
            None => Err(DataFusionError::Internal(format!(
                "column cache: no scan to read {}",
                file.object_meta.location
            ))),
        };
        let stream = match stream {
            Ok(stream) => stream,
            Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
        };
        match recording {
            Some(recording) => RecordingStream {
                inner: stream,
                recording: Some(recording),
            }
            .boxed(),
            None => stream,
        }
    }
}

/// The cached columns of one file: `None` unless every column is there, with the same batch
/// lengths.
fn cached_columns(
    columns: &Cache<ColumnKey, Arc<CachedColumn>>,
    keys: &[ColumnKey],
) -> Option<Vec<Arc<CachedColumn>>> {
    // Every key is looked up (none skipped after a miss): lookups are what admission counts.
    let found: Vec<Option<Arc<CachedColumn>>> = keys.iter().map(|k| columns.get(k)).collect();
    let found: Vec<Arc<CachedColumn>> = found.into_iter().collect::<Option<_>>()?;
    let first = found.first()?;
    let aligned = found.iter().all(|c| {
        c.chunks.len() == first.chunks.len()
            && c.chunks
                .iter()
                .zip(&first.chunks)
                .all(|(a, b)| a.len() == b.len())
    });
    aligned.then_some(found)
}

/// Reads `file` alone with the scan `config`.
fn read_file(
    config: &FileScanConfig,
    file: PartitionedFile,
    context: Arc<TaskContext>,
) -> DFResult<BoxStream<'static, DFResult<RecordBatch>>> {
    Ok(
        DataSourceExec::from_data_source(files_only(config, vec![file]))
            .execute(0, context)?
            .boxed(),
    )
}

/// A file's columns being collected while it is read.
struct Recording {
    columns: Cache<ColumnKey, Arc<CachedColumn>>,
    keys: Vec<ColumnKey>,
    /// Per column, its arrays so far.
    chunks: Vec<Vec<ArrayRef>>,
    bytes: usize,
    max_bytes: usize,
    /// Where a filtered scan remembers the file (by this hash) when its columns exceed
    /// `max_bytes`.
    decline: Option<(Cache<u64, ()>, u64)>,
    /// Masked batches: the rows of the batches the mask was applied to.
    unmasked_rows: Option<usize>,
    /// The file is being kept by this recording until it is dropped (masked batches are not
    /// guarded: the batches they come from were cached).
    _guard: Option<FillGuard>,
}

/// A file (by its hash) marked as being read to be kept, while this lives.
struct FillGuard {
    filling: Arc<Mutex<HashSet<u64>>>,
    file: u64,
}

impl FillGuard {
    /// Marks `file` as being kept; `None` when another scan is keeping it.
    fn take(filling: &Arc<Mutex<HashSet<u64>>>, file: u64) -> Option<Self> {
        let mut files = filling
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        files.insert(file).then(|| Self {
            filling: Arc::clone(filling),
            file,
        })
    }
}

impl Drop for FillGuard {
    fn drop(&mut self) {
        let mut files = self
            .filling
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        files.remove(&self.file);
    }
}

impl Recording {
    /// Adds one batch; `false` once the file's columns are too large to keep (a filtered
    /// scan's file is then declined).
    fn push(&mut self, batch: &RecordBatch) -> bool {
        if self.chunks.is_empty() && !self.holds_keys(batch) {
            return false;
        }
        self.bytes += batch.get_array_memory_size();
        if self.bytes > self.max_bytes {
            if let Some((declined, hash)) = &self.decline {
                declined.insert(*hash, ());
            }
            return false;
        }
        if self.chunks.is_empty() {
            self.chunks = vec![Vec::new(); self.keys.len()];
        }
        for (chunks, column) in self.chunks.iter_mut().zip(batch.columns()) {
            chunks.push(Arc::clone(column));
        }
        true
    }

    /// Whether `batch` has the keys' columns, in order: each field id as an Arrow type (the
    /// read that fills the cache is the scan's own, or the same scan without its filters).
    fn holds_keys(&self, batch: &RecordBatch) -> bool {
        let schema = batch.schema();
        schema.fields().len() == self.keys.len()
            && schema.fields().iter().zip(&self.keys).all(|(field, key)| {
                field.data_type() == &key.data_type && field_id_of(field) == Some(key.field_id)
            })
    }

    /// The file was read to its end: its columns are kept, with their zones (masked
    /// batches: with the rows the mask removed instead, as only whole scans take them).
    fn finish(mut self) {
        if self.chunks.is_empty() {
            // No batches (a byte range in which no row group starts, or every row deleted):
            // kept as such, so the next scan need not open the file to find that out.
            self.chunks = vec![Vec::new(); self.keys.len()];
        }
        let kept_rows: usize = self
            .chunks
            .first()
            .map_or(0, |c| c.iter().map(|a| a.len()).sum());
        let removed = self
            .unmasked_rows
            .map_or(0, |rows| rows.saturating_sub(kept_rows));
        for (key, chunks) in self.keys.into_iter().zip(self.chunks) {
            let zones = match key.mask {
                None => ColumnZones::of(&chunks, &key.data_type),
                Some(_) => None,
            };
            let bytes = chunks
                .iter()
                .map(|c| c.get_array_memory_size())
                .sum::<usize>()
                + zones.as_ref().map_or(0, ColumnZones::memory_size)
                + key.mask.as_ref().map_or(0, |m| m.positions.memory_size());
            self.columns.insert(
                key,
                Arc::new(CachedColumn {
                    chunks,
                    zones,
                    bytes,
                    removed,
                }),
            );
        }
    }
}

/// A file's batches, passed on as they come and recorded for the cache; the recording is
/// kept only when the stream ends without an error.
struct RecordingStream {
    inner: BoxStream<'static, DFResult<RecordBatch>>,
    recording: Option<Recording>,
}

impl Stream for RecordingStream {
    type Item = DFResult<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let polled = self.inner.poll_next_unpin(cx);
        match &polled {
            Poll::Ready(Some(Ok(batch))) => {
                if let Some(recording) = self.recording.as_mut()
                    && !recording.push(batch)
                {
                    self.recording = None;
                }
            }
            Poll::Ready(Some(Err(_))) => self.recording = None,
            Poll::Ready(None) => {
                if let Some(recording) = self.recording.take() {
                    recording.finish();
                }
            }
            Poll::Pending => {}
        }
        polled
    }
}
