//! Merge-on-read for one scan: loads the delete files its tasks need (each once, shared by
//! every partition of the scan), turns position deletes and deletion vectors into Parquet
//! access plans, builds equality-delete sets (memory reserved in DataFusion's pool), and
//! filters batches by them.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use arrow::array::{
    ArrayRef, AsArray, BooleanArray, BooleanBufferBuilder, RecordBatch, new_null_array,
};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::{DataType, UInt32Type};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::ParquetAccessPlan;
use datafusion::execution::TaskContext;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::physical_plan::metrics::{Count, ExecutionPlanMetricsSet, MetricBuilder, Time};
use futures::{StreamExt, TryStreamExt};
use roaring::RoaringTreemap;
use tokio::sync::OnceCell;

use super::equality::{EqualityDeleteSet, canonical_type, read_equality_keys};
use super::position::{access_plan, read_deletion_vector, read_position_delete_file};
use crate::error::{Error, Result};
use crate::io::{TableIo, normalize_location};
use crate::plan::{DeleteFileRef, DeleteKind};

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
    delete_bytes: Count,
    rows_deleted_by_position: Count,
    rows_deleted_by_equality: Count,
    equality_keys: Count,
    build_time: Time,
}

impl DeleteMetrics {
    fn new(metrics: &ExecutionPlanMetricsSet) -> Self {
        let counter = |name: &'static str| MetricBuilder::new(metrics).global_counter(name);
        Self {
            position_files: counter("delete_files_position"),
            deletion_vectors: counter("delete_files_dv"),
            equality_files: counter("delete_files_equality"),
            delete_bytes: counter("delete_bytes_read"),
            rows_deleted_by_position: counter("rows_deleted_by_position"),
            rows_deleted_by_equality: counter("rows_deleted_by_equality"),
            equality_keys: counter("equality_delete_keys"),
            build_time: MetricBuilder::new(metrics).subset_time("delete_build_time", 0),
        }
    }
}

/// What loading produced, shared by the scan's partitions.
#[derive(Debug)]
pub(crate) struct LoadedDeletes {
    /// Access plans by data file index.
    pub(crate) access_plans: HashMap<usize, Arc<ParquetAccessPlan>>,
    sets: Vec<Arc<EqualityDeleteSet>>,
    _reservation: Option<MemoryReservation>,
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
    loaded: OnceCell<Arc<LoadedDeletes>>,
    metrics: DeleteMetrics,
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
        metrics: &ExecutionPlanMetricsSet,
    ) -> Self {
        Self {
            table,
            io,
            files,
            groups,
            by_object_path,
            file_column,
            key_columns,
            loaded: OnceCell::new(),
            metrics: DeleteMetrics::new(metrics),
        }
    }

    /// The data file index of an object path.
    pub(crate) fn file_index(&self, object_path: &str) -> Option<usize> {
        self.by_object_path.get(object_path).copied()
    }

    /// Loads every delete file once (later callers wait for the first).
    pub(crate) async fn load(&self, ctx: &TaskContext) -> Result<Arc<LoadedDeletes>> {
        self.loaded
            .get_or_try_init(|| async {
                let started = Instant::now();
                let loaded = self.load_uncached(ctx).await;
                self.metrics.build_time.add_duration(started.elapsed());
                loaded.map(Arc::new)
            })
            .await
            .cloned()
    }

    async fn load_uncached(&self, ctx: &TaskContext) -> Result<LoadedDeletes> {
        let table = self.table.as_str();
        // Distinct positional delete sources.
        let mut position_files: Vec<&DeleteFileRef> = Vec::new();
        let mut vectors: Vec<(&DeleteFileRef, u64, u64)> = Vec::new();
        for d in self.files.iter().flat_map(|f| &f.positional) {
            match &d.kind {
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
                    if !position_files.iter().any(|p| p.path == d.path) {
                        position_files.push(d);
                    }
                }
                DeleteKind::DeletionVector { offset, length } => {
                    if !vectors
                        .iter()
                        .any(|(v, o, _)| v.path == d.path && o == offset)
                    {
                        vectors.push((d, *offset, *length));
                    }
                }
                DeleteKind::Equality { .. } => {}
            }
        }
        let io = &self.io;
        let positions: HashMap<String, (HashMap<String, RoaringTreemap>, u64)> =
            futures::stream::iter(collect_futures(position_files.iter().map(|d| {
                let (io, table, path, size) =
                    (io.clone(), table.to_string(), d.path.clone(), d.file_size);
                async move {
                    let (parsed, fetched) =
                        read_position_delete_file(&io, &table, &path, size).await?;
                    Ok::<_, Error>((path, (parsed, fetched)))
                }
            })))
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        self.metrics.position_files.add(position_files.len());
        self.metrics.delete_bytes.add(
            positions
                .values()
                .map(|(_, fetched)| *fetched as usize)
                .sum(),
        );
        let dvs: HashMap<(String, u64), RoaringTreemap> = futures::stream::iter(collect_futures(
            vectors.iter().map(|(d, offset, length)| {
                let (io, table, path) = (io.clone(), table.to_string(), d.path.clone());
                let (offset, length) = (*offset, *length);
                async move {
                    let bitmap = read_deletion_vector(&io, &table, &path, offset, length).await?;
                    Ok::<_, Error>(((path, offset), bitmap))
                }
            }),
        ))
        .buffer_unordered(LOAD_CONCURRENCY)
        .try_collect()
        .await?;
        self.metrics.deletion_vectors.add(vectors.len());
        self.metrics
            .delete_bytes
            .add(vectors.iter().map(|(_, _, l)| *l as usize).sum());

        // One bitmap and access plan per data file with positional deletes.
        let with_positions: Vec<(usize, RoaringTreemap)> = self
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| !f.positional.is_empty())
            .map(|(index, f)| {
                let key = normalize_location(&f.path);
                let mut bitmap = RoaringTreemap::new();
                for d in &f.positional {
                    match &d.kind {
                        DeleteKind::Position => {
                            if let Some(b) = positions.get(&d.path).and_then(|(m, _)| m.get(&key)) {
                                bitmap |= b;
                            }
                        }
                        DeleteKind::DeletionVector { offset, .. } => {
                            if let Some(b) = dvs.get(&(d.path.clone(), *offset)) {
                                bitmap |= b;
                            }
                        }
                        DeleteKind::Equality { .. } => {}
                    }
                }
                (index, bitmap)
            })
            .filter(|(_, b)| !b.is_empty())
            .collect();
        let plans: Vec<(usize, Arc<ParquetAccessPlan>)> = futures::stream::iter(collect_futures(
            with_positions.into_iter().map(|(index, bitmap)| {
                let (io, table) = (io.clone(), table.to_string());
                let (path, size) = (self.files[index].path.clone(), self.files[index].file_size);
                let removed_rows = self.metrics.rows_deleted_by_position.clone();
                let cache = ctx.runtime_env().cache_manager.get_file_metadata_cache();
                async move {
                    let row_groups = row_group_rows(&io, &table, &path, size, cache).await?;
                    let (plan, removed) = access_plan(&bitmap, &row_groups);
                    removed_rows.add(removed as usize);
                    Ok::<_, Error>((index, Arc::new(plan)))
                }
            }),
        ))
        .buffer_unordered(LOAD_CONCURRENCY)
        .try_collect()
        .await?;

        // Equality sets: read each delete file's key columns once.
        let mut eq_files: Vec<(&DeleteFileRef, &Vec<i32>)> = Vec::new();
        for group in &self.groups {
            if group.field_ids.is_empty() {
                let path = group.files.first().map_or("?", |f| f.path.as_str());
                return Err(Error::corrupt(
                    table,
                    "equality delete file",
                    path,
                    "its manifest entry has no equality_ids",
                ));
            }
            for f in &group.files {
                if !eq_files
                    .iter()
                    .any(|(e, ids)| e.path == f.path && *ids == &group.field_ids)
                {
                    eq_files.push((f, &group.field_ids));
                }
            }
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
                    let (columns, fetched) =
                        read_equality_keys(&io, &table, &path, size, &ids).await?;
                    Ok::<_, Error>((path, (columns, fetched)))
                }
            })))
            .buffer_unordered(LOAD_CONCURRENCY)
            .try_collect()
            .await?;
        self.metrics.equality_files.add(eq_files.len());
        self.metrics
            .delete_bytes
            .add(keys.values().map(|(_, fetched)| *fetched as usize).sum());
        let mut reservation = (!self.groups.is_empty()).then(|| {
            MemoryConsumer::new(format!("IcebergEqualityDeletes[{table}]"))
                .register(ctx.memory_pool())
        });
        let mut sets = Vec::with_capacity(self.groups.len());
        for group in &self.groups {
            let columns: Vec<Vec<ArrayRef>> = group
                .files
                .iter()
                .filter_map(|f| keys.get(&f.path).map(|(columns, _)| columns.clone()))
                .collect();
            let set = EqualityDeleteSet::build(&columns)?;
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
            sets.push(Arc::new(set));
        }
        Ok(LoadedDeletes {
            access_plans: plans.into_iter().collect(),
            sets,
            _reservation: reservation,
        })
    }

    /// Removes the rows of `batch` that equality deletes delete, then keeps `output` columns.
    pub(crate) fn apply(
        &self,
        loaded: &LoadedDeletes,
        batch: RecordBatch,
        output: &[usize],
        output_schema: &arrow::datatypes::SchemaRef,
    ) -> DFResult<RecordBatch> {
        let rows = batch.num_rows();
        let batch = match self.file_column {
            Some(column) if rows > 0 => {
                let files = batch.column(column).as_primitive::<UInt32Type>().values();
                let first = files[0];
                let deleted = if files.iter().all(|f| *f == first) {
                    // The usual case: the whole batch comes from one data file.
                    self.deleted_rows(loaded, &batch, first)?
                } else {
                    let mut builder = BooleanBufferBuilder::new(rows);
                    let mut start = 0;
                    while start < rows {
                        let file = files[start];
                        let end = (start..rows).find(|i| files[*i] != file).unwrap_or(rows);
                        let run = batch.slice(start, end - start);
                        match self.deleted_rows(loaded, &run, file)? {
                            Some(mask) => builder.append_buffer(&mask),
                            None => builder.append_n(end - start, false),
                        }
                        start = end;
                    }
                    Some(builder.finish())
                };
                match deleted {
                    Some(deleted) if deleted.count_set_bits() > 0 => {
                        let removed = deleted.count_set_bits();
                        self.metrics.rows_deleted_by_equality.add(removed);
                        let keep = BooleanArray::new(!&deleted, None);
                        arrow::compute::filter_record_batch(&batch, &keep)?
                    }
                    _ => batch,
                }
            }
            _ => batch,
        };
        let columns = output
            .iter()
            .map(|i| Arc::clone(batch.column(*i)))
            .collect();
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(output_schema),
            columns,
            &arrow::array::RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
        )?)
    }

    /// The rows of `batch` (all from data file `file`) its equality deletes delete; `None`
    /// when none apply.
    fn deleted_rows(
        &self,
        loaded: &LoadedDeletes,
        batch: &RecordBatch,
        file: u32,
    ) -> DFResult<Option<BooleanBuffer>> {
        let Some(f) = self.files.get(file as usize) else {
            return Ok(None);
        };
        let mut deleted: Option<BooleanBuffer> = None;
        for &group in &f.equality_groups {
            let keys = self.key_columns[group]
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
                .collect::<DFResult<Vec<_>>>()?;
            let mask = loaded.sets[group].deleted(&keys)?;
            deleted = Some(match deleted {
                Some(previous) => &previous | &mask,
                None => mask,
            });
        }
        Ok(deleted)
    }
}

/// Builds every future now, so the stream over them holds no closure (and no borrow).
fn collect_futures<F>(futures: impl Iterator<Item = F>) -> Vec<F> {
    futures.collect()
}

/// Row counts of a data file's row groups, from its footer, read through DataFusion's
/// file-metadata cache so that the scan that follows does not read the footer again.
async fn row_group_rows(
    io: &TableIo,
    table: &str,
    path: &str,
    file_size: u64,
    metadata_cache: Arc<dyn FileMetadataCache>,
) -> Result<Vec<u64>> {
    let (store, _, object) = io.resolve(path)?;
    let factory = CachedParquetFileReaderFactory::new(store, metadata_cache);
    let mut reader = factory.create_reader(
        0,
        PartitionedFile::new(object.to_string(), file_size),
        None,
        &ExecutionPlanMetricsSet::new(),
    )?;
    let metadata = reader
        .get_metadata(None)
        .await
        .map_err(|e| Error::corrupt(table, "data file", path, e))?;
    Ok(metadata
        .row_groups()
        .iter()
        .map(|rg| rg.num_rows().max(0) as u64)
        .collect())
}

/// The canonical key type of a field of the scan schema.
pub(crate) fn key_type(dt: &DataType) -> DataType {
    canonical_type(dt)
}
