//! The scan planner: snapshot → manifest list → manifests → pruned, delete-matched,
//! bin-packed scan tasks.
//!
//! Manifests are pruned by their partition summaries, data files by their partition tuple
//! (projected per spec) and by column metrics. Manifests are fetched and parsed concurrently
//! and cached by path. A limit with no filter stops planning once enough rows are guaranteed
//! by files without deletes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataFile, ManifestContentType, ManifestFile, ManifestStatus, PartitionSpec, Schema, SchemaRef,
};

use super::bin_pack::bin_pack;
use super::evaluator::{FieldStats, might_match};
use super::manifest_cache::ManifestCache;
use super::partition::PartitionFilter;
use super::predicate::Predicate;
use super::task::{DataFileRef, ScanTask};
use crate::catalog::LoadedTable;
use crate::deletes::DeleteCache;
use crate::deletes::DeleteFileIndex;
use crate::error::{Error, Result};
use crate::scan::ColumnCache;
use crate::spec::SnapshotSelector;

/// Default split size (Iceberg's `read.split.target-size`).
pub const DEFAULT_SPLIT_SIZE: u64 = 128 * 1024 * 1024;

/// What to plan.
#[derive(Debug, Clone)]
pub struct ScanRequest {
    /// Which snapshot.
    pub selector: SnapshotSelector,
    /// The pushed-down filter (`True` for none).
    pub filter: Predicate,
    /// Stop once this many rows are guaranteed; only honoured with no filter at all.
    pub limit: Option<usize>,
    /// How many partitions to bin-pack tasks into.
    pub target_partitions: usize,
}

/// Counts of what planning read and skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanMetrics {
    /// Manifests listed by the snapshot (data and delete).
    pub manifests_total: usize,
    /// Manifests skipped by their partition summaries.
    pub manifests_pruned: usize,
    /// Manifests read (from cache or storage).
    pub manifests_read: usize,
    /// Live data files seen in the manifests read.
    pub data_files_seen: usize,
    /// Data files skipped by their partition tuple.
    pub files_pruned_by_partition: usize,
    /// Data files skipped by column metrics.
    pub files_pruned_by_metrics: usize,
    /// Data files selected for scanning.
    pub files_selected: usize,
    /// Bytes of the selected data files.
    pub bytes_selected: u64,
    /// Delete files in the snapshot (after manifest pruning).
    pub delete_files: usize,
    /// (data file, equality delete file) pairs skipped because the two files' column metrics
    /// show that no key of the delete file can match a row of the data file.
    pub equality_deletes_pruned: usize,
    /// Whether a limit stopped planning early.
    pub stopped_by_limit: bool,
    /// Wall time spent planning.
    pub planning_time: Duration,
}

/// The result of planning.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// The snapshot read (`None`: the table has no snapshot; the scan is empty).
    pub snapshot_id: Option<i64>,
    /// The schema the snapshot is read with.
    pub schema: SchemaRef,
    /// Tasks, bin-packed into partitions.
    pub partitions: Vec<Vec<ScanTask>>,
    /// What planning did.
    pub metrics: PlanMetrics,
}

impl ScanPlan {
    /// Every task, across partitions.
    pub fn tasks(&self) -> impl Iterator<Item = &ScanTask> {
        self.partitions.iter().flatten()
    }
}

/// Plans scans; holds the caches shared by every scan of its tables: parsed manifests (for
/// planning), parsed delete files (for merge-on-read) and decoded columns (none unless
/// given one: [`ScanPlanner::with_column_cache`]).
#[derive(Debug, Clone)]
pub struct ScanPlanner {
    cache: ManifestCache,
    deletes: DeleteCache,
    columns: ColumnCache,
    concurrency: usize,
}

impl Default for ScanPlanner {
    fn default() -> Self {
        Self::new(ManifestCache::default())
    }
}

impl ScanPlanner {
    /// A planner over this manifest cache (and a default delete cache).
    pub fn new(cache: ManifestCache) -> Self {
        Self::with_caches(cache, DeleteCache::default())
    }

    /// A planner over these caches.
    pub fn with_caches(cache: ManifestCache, deletes: DeleteCache) -> Self {
        Self {
            cache,
            deletes,
            columns: ColumnCache::default(),
            concurrency: 64,
        }
    }

    /// This planner with scans keeping their decoded columns in `columns`.
    pub fn with_column_cache(mut self, columns: ColumnCache) -> Self {
        self.columns = columns;
        self
    }

    /// The decoded-column cache (disabled unless one was given).
    pub fn column_cache(&self) -> &ColumnCache {
        &self.columns
    }

    /// The manifest cache.
    pub fn cache(&self) -> &ManifestCache {
        &self.cache
    }

    /// The delete-file cache.
    pub fn delete_cache(&self) -> &DeleteCache {
        &self.deletes
    }

    /// Plans a scan of `table`.
    pub async fn plan(&self, table: &LoadedTable, request: &ScanRequest) -> Result<ScanPlan> {
        let started = Instant::now();
        let resolved = request.selector.resolve(table)?;
        let mut metrics = PlanMetrics::default();
        let Some(snapshot) = resolved.snapshot else {
            return Ok(ScanPlan {
                snapshot_id: None,
                schema: resolved.schema,
                partitions: Vec::new(),
                metrics,
            });
        };
        let metadata = table.metadata();
        let name = table.ident().to_string();
        let name = name.as_str();
        let io = table.io();
        let list = self
            .cache
            .manifest_list(
                io,
                name,
                snapshot.manifest_list(),
                metadata.format_version(),
            )
            .await?;
        metrics.manifests_total = list.entries().len();

        let mut filters: HashMap<i32, Arc<PartitionFilter>> = HashMap::new();
        let mut filter_for = |spec_id: i32| -> Result<Arc<PartitionFilter>> {
            if let Some(f) = filters.get(&spec_id) {
                return Ok(Arc::clone(f));
            }
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                Error::corrupt(
                    name,
                    "metadata file",
                    table.metadata_location(),
                    format!(
                        "snapshot {} uses unknown partition spec {spec_id}",
                        snapshot.snapshot_id()
                    ),
                )
            })?;
            let f = Arc::new(PartitionFilter::project(
                &request.filter,
                spec,
                &resolved.schema,
            ));
            filters.insert(spec_id, Arc::clone(&f));
            Ok(f)
        };

        let mut data_manifests = Vec::new();
        let mut delete_manifests = Vec::new();
        for mf in list.entries() {
            let filter = filter_for(mf.partition_spec_id)?;
            if !filter.matches_summaries(mf.partitions.as_deref()) {
                metrics.manifests_pruned += 1;
                continue;
            }
            match mf.content {
                ManifestContentType::Data => data_manifests.push((mf.clone(), filter)),
                ManifestContentType::Deletes => delete_manifests.push(mf.clone()),
            }
        }

        // Delete manifests first: their files decide whether a limit can stop early.
        let fetches = delete_manifests.into_iter().map(|mf| {
            let (cache, io, name) = (self.cache.clone(), io.clone(), name.to_string());
            async move {
                let manifest = cache.manifest(&io, &name, &mf.manifest_path).await?;
                Ok::<_, Error>((mf.sequence_number, manifest))
            }
        });
        let loaded: Vec<_> = futures::stream::iter(fetches)
            .buffer_unordered(self.concurrency)
            .try_collect()
            .await?;
        metrics.manifests_read += loaded.len();
        let deletes = DeleteFileIndex::of_manifests(
            loaded
                .iter()
                .map(|(sequence_number, manifest)| (manifest.as_ref(), *sequence_number)),
        );
        metrics.delete_files = deletes.len();

        let limit = request.limit.filter(|_| request.filter.is_true());
        let mut guaranteed_rows: u64 = 0;
        let split_size = metadata
            .properties()
            .get("read.split.target-size")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_SPLIT_SIZE);

        let filter_keys = {
            let mut keys = Vec::new();
            request.filter.keys(&mut keys);
            keys.sort_unstable();
            keys.dedup();
            keys
        };
        let mut tasks = Vec::new();
        let fetches = data_manifests.into_iter().map(|(mf, filter)| {
            let (cache, io, name) = (self.cache.clone(), io.clone(), name.to_string());
            async move {
                let manifest = cache.manifest(&io, &name, &mf.manifest_path).await?;
                Ok::<_, Error>((mf, filter, manifest))
            }
        });
        let mut stream = futures::stream::iter(fetches).buffered(self.concurrency);
        'manifests: while let Some(next) = stream.next().await {
            let (mf, filter, manifest) = next?;
            metrics.manifests_read += 1;
            let spec_id = manifest.metadata().partition_spec().spec_id();
            // Row ids a data file without its own `first_row_id` inherits (format 3), as
            // `commit::removal` counts them: the manifest's, then per live entry in order.
            let mut next_row_id = mf.first_row_id.map(|id| id as i64);
            for entry in manifest.entries() {
                if entry.status() == ManifestStatus::Deleted {
                    continue;
                }
                let file = entry.data_file();
                let first_row_id = file.first_row_id().or_else(|| {
                    let first = next_row_id?;
                    next_row_id = Some(first + file.record_count() as i64);
                    Some(first)
                });
                metrics.data_files_seen += 1;
                if !filter.matches_partition(file.partition()) {
                    metrics.files_pruned_by_partition += 1;
                    continue;
                }
                if !metrics_might_match(&request.filter, &filter_keys, file) {
                    metrics.files_pruned_by_metrics += 1;
                    continue;
                }
                let sequence_number = data_sequence_number(entry.sequence_number(), &mf);
                let (file_deletes, pruned) =
                    deletes.deletes_for_counting(file, spec_id, sequence_number);
                metrics.equality_deletes_pruned += pruned;
                metrics.files_selected += 1;
                metrics.bytes_selected += file.file_size_in_bytes();
                let data = DataFileRef {
                    path: file.file_path().to_string(),
                    format: format!("{:?}", file.file_format()).to_uppercase(),
                    file_size: file.file_size_in_bytes(),
                    record_count: file.record_count(),
                    spec_id,
                    sequence_number,
                    first_row_id,
                    nan_free_field_ids: file
                        .nan_value_counts()
                        .iter()
                        .filter(|(_, count)| **count == 0)
                        .map(|(id, _)| *id)
                        .collect(),
                };
                if file_deletes.is_empty() {
                    guaranteed_rows += file.record_count();
                }
                split_file(
                    data,
                    file.split_offsets(),
                    split_size,
                    file_deletes,
                    &mut tasks,
                );
                if let Some(limit) = limit
                    && guaranteed_rows >= limit as u64
                {
                    metrics.stopped_by_limit = true;
                    break 'manifests;
                }
            }
        }
        let partitions = bin_pack(tasks, request.target_partitions.max(1));
        metrics.planning_time = started.elapsed();
        Ok(ScanPlan {
            snapshot_id: Some(snapshot.snapshot_id()),
            schema: resolved.schema,
            partitions,
            metrics,
        })
    }
}

fn data_sequence_number(entry_seq: Option<i64>, mf: &ManifestFile) -> i64 {
    entry_seq.unwrap_or(mf.sequence_number)
}

/// Whether data file `file` (of partition spec `spec`) may hold rows matching `filter` (over
/// `schema`'s field ids), judged as scan planning judges it: its partition tuple, then its
/// column metrics. Conflict validation uses it for the files a concurrent commit added.
pub fn data_file_might_match(
    filter: &Predicate,
    spec: &PartitionSpec,
    schema: &Schema,
    file: &DataFile,
) -> bool {
    if filter.is_true() {
        return true;
    }
    if !PartitionFilter::project(filter, spec, schema).matches_partition(file.partition()) {
        return false;
    }
    let mut keys = Vec::new();
    filter.keys(&mut keys);
    keys.sort_unstable();
    keys.dedup();
    metrics_might_match(filter, &keys, file)
}

/// Whether column metrics allow `file` to hold rows matching `filter`.
fn metrics_might_match(filter: &Predicate, keys: &[i32], file: &DataFile) -> bool {
    if filter.is_true() {
        return true;
    }
    if file.record_count() == 0 {
        return false;
    }
    // Each referenced column's statistics, looked up once per file (not once per leaf).
    let stats: Vec<(i32, FieldStats<'_>)> = keys
        .iter()
        .map(|&id| {
            let lower = file.lower_bounds().get(&id).map(|d| d.literal());
            let upper = file.upper_bounds().get(&id).map(|d| d.literal());
            let null_count = file.null_value_counts().get(&id).copied();
            // A bound exists only when some value is non-null.
            let all_null = lower.is_none()
                && matches!((file.value_counts().get(&id), null_count), (Some(v), Some(n)) if *v == n);
            let stats = FieldStats {
                lower,
                upper,
                has_null: null_count.map(|n| n > 0),
                all_null,
                has_nan: file.nan_value_counts().get(&id).map(|n| *n > 0),
            };
            (id, stats)
        })
        .collect();
    might_match(filter, &|id| {
        stats
            .iter()
            .find(|(key, _)| *key == id)
            .map(|(_, s)| s.clone())
            .unwrap_or_default()
    })
}

/// Splits a data file at its row-group offsets into tasks of about `split_size` bytes.
fn split_file(
    file: DataFileRef,
    split_offsets: Option<&[i64]>,
    split_size: u64,
    deletes: Vec<std::sync::Arc<crate::plan::DeleteFileRef>>,
    out: &mut Vec<ScanTask>,
) {
    let size = file.file_size;
    let offsets: Vec<u64> = split_offsets
        .unwrap_or_default()
        .iter()
        .filter_map(|o| u64::try_from(*o).ok())
        .filter(|o| *o < size)
        .collect();
    let sorted = offsets.windows(2).all(|w| w[0] < w[1]);
    if size <= split_size || offsets.len() < 2 || !sorted {
        out.push(ScanTask {
            file,
            start: 0,
            length: size,
            whole_file: true,
            deletes,
        });
        return;
    }
    let mut start = 0u64;
    for offset in offsets.iter().skip(1) {
        if offset - start >= split_size {
            out.push(ScanTask {
                file: file.clone(),
                start,
                length: offset - start,
                whole_file: false,
                deletes: deletes.clone(),
            });
            start = *offset;
        }
    }
    out.push(ScanTask {
        file,
        start,
        length: size - start,
        whole_file: start == 0,
        deletes,
    });
}

/// Whether column metrics allow `file` to hold rows matching `filter` (change planning).
pub(super) fn data_file_metrics_might_match(filter: &Predicate, file: &DataFile) -> bool {
    let mut keys = Vec::new();
    filter.keys(&mut keys);
    keys.sort_unstable();
    keys.dedup();
    metrics_might_match(filter, &keys, file)
}

/// [`split_file`] at `file`'s own split offsets (change planning).
pub(super) fn split_file_tasks(
    data: DataFileRef,
    file: &DataFile,
    split_size: u64,
    deletes: Vec<std::sync::Arc<crate::plan::DeleteFileRef>>,
    out: &mut Vec<ScanTask>,
) {
    split_file(data, file.split_offsets(), split_size, deletes, out);
}
