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
//! Only scans that read every row of their files use the cache: no limit, no struct
//! narrowing, no filter other than ones the planner decided exactly by partition values (those
//! hold for every row of every planned file), not a positional scan (DELETE, UPDATE, MERGE),
//! and the Parquet scan right below the Iceberg scan (a sort pushed between them, as DataFusion
//! does for an `ORDER BY` right above a scan, keeps the usual read). Deletes do not stop it: a
//! file with position deletes, a deletion vector or equality-deleted positions already known is
//! kept whole and its deleted rows are masked out of the cached batches (`merge_stream`); only
//! files whose equality deletes are still probed (or recorded) are read as before.
//!
//! A file's columns are served from the cache when every projected column is there. Otherwise
//! the file is read, and its columns are kept once it has been read to its end — but only from
//! its second whole read on: the first is only remembered. Keeping a file's batches costs fresh
//! memory for each of them (on a cold `sum` over the bench table, +50% of the query's time), so
//! a file read once (an export, a one-off scan, the first query after a start) costs nothing
//! more, and a scan none of whose files is cached or read before runs exactly as without the
//! cache (DataFusion's scan opens the next file while one streams). Entries are then admitted
//! and evicted by `moka` (TinyLFU: a large scan does not push out columns that are read
//! often). Lookups are counted per file ([`ColumnCache::stats`]) and each scan reports
//! `column_cache_files_hit` / `column_cache_files_read` in `EXPLAIN ANALYZE`.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use arrow::array::{ArrayRef, RecordBatch, RecordBatchOptions};
use arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::Result as DFResult;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::Count;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use moka::sync::Cache;

use super::reader::files_only;
use crate::cache_stats::{CacheCounters, CacheStats, moka_stats};
use crate::spec::FIELD_ID_KEY;

/// How many files read whole the cache remembers (to keep a file's columns from its second
/// whole read on).
const SEEN_FILES: u64 = 64 * 1024;

/// One file's columns are kept only while they take at most this share of the capacity (one
/// in this many): a file that would push out most of the cache is read as usual.
const MAX_FILE_SHARE: u64 = 4;

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
}

/// The arrays of one column's batches, in order.
#[derive(Debug)]
struct CachedColumn {
    chunks: Vec<ArrayRef>,
    bytes: usize,
}

/// Decoded columns shared by every scan of a process (module docs).
#[derive(Debug, Clone)]
pub struct ColumnCache {
    columns: Option<Cache<ColumnKey, Arc<CachedColumn>>>,
    /// Files read whole before (hashes of their source, location, size, range and batch size):
    /// a file's columns are kept from its second whole read on.
    seen: Option<Cache<u64, ()>>,
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
        Self {
            columns,
            seen,
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

/// How one scan uses the column cache, and its counts (files served from the cache, files
/// read through it; shared by the scan's partitions).
#[derive(Debug, Clone)]
pub(crate) struct CachedScan {
    pub(crate) cache: ColumnCache,
    pub(crate) source: Arc<ColumnSource>,
    pub(crate) hit: Count,
    pub(crate) read: Count,
}

impl CachedScan {
    /// The batches of partition `partition` of the Parquet scan `config`: each file's columns
    /// from the cache when they are all there, a file read whole before read and kept, any
    /// other read as usual. `None` when the scan should run as usual: it reads no column or a
    /// column without a field id, or none of its files is in the cache or was read before
    /// (they are now marked as read: the usual scan keeps opening the next file while one
    /// streams, and keeps no batch).
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
        if plans
            .iter()
            .all(|(_, plan)| matches!(plan, FilePlan::FirstRead))
        {
            return None;
        }
        let batches = futures::stream::iter(plans)
            .flat_map(move |(file, plan)| reader.stream(file, plan, Arc::clone(&context)));
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
    ) -> Option<BoxStream<'static, DFResult<RecordBatch>>> {
        let reader = self.file_reader(config)?;
        match reader.plan(&file, context.session_config().batch_size()) {
            FilePlan::FirstRead => None,
            plan => Some(reader.stream(file, plan, context)),
        }
    }

    fn file_reader(&self, config: &FileScanConfig) -> Option<FileReader> {
        let columns = self.cache.columns.clone()?;
        let seen = self.cache.seen.clone()?;
        let schema = config.projected_schema().ok()?;
        let field_ids = schema
            .fields()
            .iter()
            .map(|f| f.metadata().get(FIELD_ID_KEY)?.parse::<i32>().ok())
            .collect::<Option<Vec<i32>>>()?;
        // No columns (`count(*)`): nothing to keep, and nothing to decode either.
        if field_ids.is_empty() {
            return None;
        }
        Some(FileReader {
            columns,
            seen,
            scan: self.clone(),
            config: Arc::new(config.clone()),
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
    /// Every column is in the cache: these batches.
    Cached(Vec<RecordBatch>),
    /// Read whole before: read it and keep its columns under these keys.
    Keep(Vec<ColumnKey>),
    /// Not read whole before (now marked as read): read it, keep nothing.
    FirstRead,
}

/// Reads files of one Parquet scan through the cache.
#[derive(Clone)]
struct FileReader {
    columns: Cache<ColumnKey, Arc<CachedColumn>>,
    seen: Cache<u64, ()>,
    scan: CachedScan,
    config: Arc<FileScanConfig>,
    store: String,
    schema: SchemaRef,
    field_ids: Arc<[i32]>,
    max_file_bytes: usize,
}

impl FileReader {
    /// Looks `file` up (and counts it as served from the cache or read).
    fn plan(&self, file: &PartitionedFile, batch_rows: usize) -> FilePlan {
        let location: Arc<str> = format!("{}{}", self.store, file.object_meta.location).into();
        let keys: Vec<ColumnKey> = self
            .field_ids
            .iter()
            .zip(self.schema.fields())
            .map(|(id, field)| ColumnKey {
                source: Arc::clone(&self.scan.source),
                file: Arc::clone(&location),
                size: file.object_meta.size,
                range: file.range.as_ref().map(|r| (r.start, r.end)),
                batch_rows,
                field_id: *id,
                data_type: field.data_type().clone(),
            })
            .collect();
        let lookups = &self.scan.cache.lookups;
        if let Some(batches) = lookups.observe(cached_batches(&self.columns, &keys, &self.schema)) {
            self.scan.hit.add(1);
            return FilePlan::Cached(batches);
        }
        self.scan.read.add(1);
        // The file as read whole by a scan (whatever its columns).
        let mut hasher = DefaultHasher::new();
        (&self.scan.source, &location, file.object_meta.size).hash(&mut hasher);
        (keys[0].range, batch_rows).hash(&mut hasher);
        let read_whole = hasher.finish();
        if self.seen.contains_key(&read_whole) {
            FilePlan::Keep(keys)
        } else {
            self.seen.insert(read_whole, ());
            FilePlan::FirstRead
        }
    }

    /// The batches of `file` as `plan` says.
    fn stream(
        &self,
        file: PartitionedFile,
        plan: FilePlan,
        context: Arc<TaskContext>,
    ) -> BoxStream<'static, DFResult<RecordBatch>> {
        let keys = match plan {
            FilePlan::Cached(batches) => {
                return futures::stream::iter(batches.into_iter().map(Ok)).boxed();
            }
            FilePlan::Keep(keys) => Some(keys),
            FilePlan::FirstRead => None,
        };
        let stream = match read_file(&self.config, file, context) {
            Ok(stream) => stream,
            Err(e) => return futures::stream::once(async move { Err(e) }).boxed(),
        };
        match keys {
            Some(keys) => RecordingStream {
                inner: stream,
                recording: Some(Recording {
                    columns: self.columns.clone(),
                    keys,
                    chunks: Vec::new(),
                    bytes: 0,
                    max_bytes: self.max_file_bytes,
                }),
            }
            .boxed(),
            None => stream,
        }
    }
}

/// The batches of one file from the cache: `None` unless every column is there, with the
/// same batch lengths.
fn cached_batches(
    columns: &Cache<ColumnKey, Arc<CachedColumn>>,
    keys: &[ColumnKey],
    schema: &SchemaRef,
) -> Option<Vec<RecordBatch>> {
    // Every key is looked up (none skipped after a miss): lookups are what admission counts.
    let found: Vec<Option<Arc<CachedColumn>>> = keys.iter().map(|k| columns.get(k)).collect();
    let found: Vec<Arc<CachedColumn>> = found.into_iter().collect::<Option<_>>()?;
    let first = found.first()?;
    let lengths: Vec<usize> = first.chunks.iter().map(|c| c.len()).collect();
    let aligned = found.iter().all(|c| {
        c.chunks.len() == lengths.len() && c.chunks.iter().zip(&lengths).all(|(a, n)| a.len() == *n)
    });
    if !aligned {
        return None;
    }
    lengths
        .iter()
        .enumerate()
        .map(|(i, rows)| {
            let arrays = found.iter().map(|c| Arc::clone(&c.chunks[i])).collect();
            RecordBatch::try_new_with_options(
                Arc::clone(schema),
                arrays,
                &RecordBatchOptions::new().with_row_count(Some(*rows)),
            )
            .ok()
        })
        .collect()
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
}

impl Recording {
    /// Adds one batch; `false` once the file's columns are too large to keep.
    fn push(&mut self, batch: &RecordBatch) -> bool {
        if batch.num_columns() != self.keys.len() {
            return false;
        }
        self.bytes += batch.get_array_memory_size();
        if self.bytes > self.max_bytes {
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

    /// The file was read to its end: its columns are kept.
    fn finish(mut self) {
        if self.chunks.is_empty() {
            // No batches (a byte range in which no row group starts): kept as such, so the
            // next scan need not open the file to find that out.
            self.chunks = vec![Vec::new(); self.keys.len()];
        }
        for (key, chunks) in self.keys.into_iter().zip(self.chunks) {
            let bytes = chunks.iter().map(|c| c.get_array_memory_size()).sum();
            self.columns
                .insert(key, Arc::new(CachedColumn { chunks, bytes }));
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
