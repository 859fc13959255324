//! The stream of one partition of a scan with deletes.
//!
//! A partition's files are read in order, as runs:
//!
//! - consecutive files without positional deletes are one run, read by DataFusion's Parquet
//!   scan as planned (pushed filters prune row groups and pages);
//! - each file with position deletes or a deletion vector is a run of its own: its deleted
//!   positions are loaded when the scan reaches it (each delete file once per query, shared with
//!   the other partitions), long deleted runs become a Parquet access plan, and the rest are
//!   dropped from the decoded batches by a keep-mask (`deletes::position_filter`). Its row
//!   groups are pruned here — by the task's byte range and the pushed filters' statistics —
//!   and so are its pages, by the page index (except while equality positions are recorded,
//!   which covers whole row groups); the reader gets the resulting row selection and no
//!   predicate, so the positions of the rows it emits are known.
//!
//! When the scan reads every row of its files (`MergeSpec::columns`), plain runs and positional
//! runs read whole take their files' columns from the decoded-column cache (`column_cache`),
//! a positional run masking its deleted rows out of the cached batches (or, when its deletes
//! hold none of its positions, reading as a plain run).
//!
//! The next runs are prepared (delete files loaded and decoded, footer fetched) on tasks of
//! their own while the current one streams, so that their reads and decoding overlap it.
//!
//! Files without equality deletes of their own, in a scan whose other files have some, are read
//! without the key columns only those others need (`MergeSpec::keyless`): the columns are never
//! decoded, and null columns take their places in the batches (no equality set is probed for
//! those files, and the query did not ask for the columns).
//!
//! Equality deletes are applied last, to every batch, once the scan's equality sets are built
//! — except in files whose equality-deleted positions are cached (applied with the positional
//! deletes of their run) or being recorded (a positional run with no filter probes its batches
//! itself and, once it reaches its end, hands the deleted positions of the row groups it read
//! to the merge state, which caches them when the file is covered; see
//! `deletes::merge_on_read`).
//!
//! A **positional scan** (DELETE, UPDATE and MERGE find the rows they change with one) reads
//! every file as a positional run, deletes or not, and appends to each batch the data file's
//! path (as the manifests name it) and each row's position in it, both known from the run's
//! access plan — never from a column stored in the data.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int64Array, RecordBatch, RecordBatchOptions, StringArray,
    new_null_array,
};
use arrow::compute::FilterBuilder;
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::runtime::SpawnedTask;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::FileScanConfig;
use datafusion::datasource::physical_plan::parquet::{
    PagePruningAccessPlanFilter, ParquetAccessPlan, ParquetFileMetrics, RowGroupAccessPlanFilter,
    apply_file_schema_type_coercions,
};
use datafusion::datasource::source::DataSourceExec;
use datafusion::execution::TaskContext;
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr_adapter::PhysicalExprAdapterFactory;
use datafusion::physical_optimizer::pruning::PruningPredicate;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::parquet_to_arrow_schema;
use parquet::file::metadata::ParquetMetaData;

use super::column_cache::{CachedScan, Mask};
use super::nan_safe_stats::{NanFreeColumns, nan_safe_metadata};
use super::reader::files_only;
use roaring::RoaringTreemap;

use crate::deletes::{
    DeletedPositions, EqualityMode, EqualityPositionsKey, EqualitySets, GroupRead, MergeOnRead,
    PositionFilter, positional_plan_of, whole_groups_plan,
};

/// Column of a positional scan holding each row's data file, as the manifests name it.
pub const FILE_PATH_COLUMN: &str = "__petrel_file_path";
/// Column of a positional scan holding each row's position in its data file.
pub const POSITION_COLUMN: &str = "__petrel_pos";

/// How many runs are prepared ahead of the one streaming.
const RUNS_AHEAD: usize = 2;

/// Merge-on-read wiring of a scan: the delete state, how to read files with positional
/// deletes, and the columns to output.
#[derive(Debug, Clone)]
pub struct MergeSpec {
    /// The shared delete state.
    pub merge: Arc<MergeOnRead>,
    /// Which child columns to output.
    pub output: Vec<usize>,
    /// The output schema.
    pub schema: SchemaRef,
    /// The child's scan without its predicate: files with positional deletes are read with it
    /// (their row groups pruned here instead).
    pub unfiltered: Arc<FileScanConfig>,
    /// The pushed filters, over `file_schema`.
    pub predicate: Option<Arc<dyn PhysicalExpr>>,
    /// The table schema the data files are mapped to.
    pub file_schema: SchemaRef,
    /// Maps `file_schema` expressions onto a data file's own schema (by field id).
    pub adapter: Arc<dyn PhysicalExprAdapterFactory>,
    /// Which float columns of which files may prune by their statistics.
    pub(crate) nan_free: Arc<NanFreeColumns>,
    /// A positional scan: every inner batch gets the data file's path and the rows' positions
    /// appended (as its last two columns, which `output` may then pick).
    pub positional: bool,
    /// The decoded-column cache, when the scan reads every row of its files (no limit, no
    /// filter but ones partition values decide; never a positional scan): files with
    /// positional deletes take their columns from it and drop their deleted rows with a
    /// keep-mask.
    pub(crate) columns: Option<CachedScan>,
    /// How files without equality deletes are read when the scan adds key columns for the
    /// others (`None`: no key column was added, or the scan narrows struct columns).
    pub(crate) keyless: Option<KeylessRead>,
}

/// The scan's files without equality deletes, read without the key columns the scan added for
/// the others: the same scans (filtered and unfiltered) with those columns left out of their
/// projection, and where the columns go back as nulls.
#[derive(Debug, Clone)]
pub(crate) struct KeylessRead {
    /// The child's scan without the added key columns.
    pub filtered: Arc<FileScanConfig>,
    /// `MergeSpec::unfiltered` without them.
    pub unfiltered: Arc<FileScanConfig>,
    /// Where the added key columns are in the inner batches.
    pub key_slots: Vec<usize>,
    /// The inner batches' schema with those columns nullable (they hold nulls here).
    pub padded_schema: SchemaRef,
}

impl KeylessRead {
    /// Keyless reads of scans projecting `inner` (the child's output schema) whose added key
    /// columns are at `key_slots`.
    pub(crate) fn new(
        filtered: Arc<FileScanConfig>,
        unfiltered: Arc<FileScanConfig>,
        key_slots: Vec<usize>,
        inner: &Schema,
    ) -> Self {
        let fields: Vec<Arc<Field>> = inner
            .fields()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                if key_slots.contains(&i) {
                    Arc::new(f.as_ref().clone().with_nullable(true))
                } else {
                    Arc::clone(f)
                }
            })
            .collect();
        let padded_schema = Arc::new(Schema::new_with_metadata(fields, inner.metadata().clone()));
        Self {
            filtered,
            unfiltered,
            key_slots,
            padded_schema,
        }
    }

    /// The null columns that take the added key columns' places in batches without them.
    fn null_columns(&self) -> NullColumns {
        NullColumns {
            slots: self.key_slots.clone(),
            schema: Arc::clone(&self.padded_schema),
            nulls: Vec::new(),
        }
    }
}

/// A run of a partition's files read by one Parquet scan.
enum Run {
    /// Files without positional deletes.
    Plain(Vec<PartitionedFile>),
    /// Files without positional or equality deletes, read without the added key columns.
    Keyless(Vec<PartitionedFile>),
    /// One file with positional deletes (its index in the merge state).
    Positional(Box<PartitionedFile>, usize),
}

/// The batches of partition `partition` of `child` (the Parquet scan), deletes applied.
pub(crate) fn partition_stream(
    spec: &MergeSpec,
    child: &Arc<dyn ExecutionPlan>,
    table: &str,
    partition: usize,
    context: Arc<TaskContext>,
) -> DFResult<BoxStream<'static, DFResult<RecordBatch>>> {
    let config = child
        .as_any()
        .downcast_ref::<DataSourceExec>()
        .and_then(|exec| exec.data_source().as_any().downcast_ref::<FileScanConfig>())
        .ok_or_else(|| {
            DataFusionError::Internal(format!(
                "IcebergScanExec of {table}: deletes need a Parquet file scan child, found {}",
                child.name()
            ))
        })?;
    let files = config
        .file_groups
        .get(partition)
        .map(|g| g.files().to_vec())
        .unwrap_or_default();
    let mut runs: Vec<Run> = Vec::new();
    // Read with no filter: the files' equality-deleted positions may be recorded.
    let unfiltered = spec.predicate.is_none() && !spec.positional;
    for file in files {
        if let Some(index) = spec.merge.file_index(file.object_meta.location.as_ref()) {
            spec.merge.equality_mode(index, unfiltered);
        }
        let index = spec.merge.file_index(file.object_meta.location.as_ref());
        match index.filter(|i| spec.merge.has_positional(*i)) {
            Some(index) => runs.push(Run::Positional(Box::new(file), index)),
            None if spec.keyless.is_some()
                && !index.is_some_and(|i| spec.merge.has_equality_groups(i)) =>
            {
                match runs.last_mut() {
                    Some(Run::Keyless(files)) => files.push(file),
                    _ => runs.push(Run::Keyless(vec![file])),
                }
            }
            None => match runs.last_mut() {
                Some(Run::Plain(plain)) => plain.push(file),
                _ => runs.push(Run::Plain(vec![file])),
            },
        }
    }

    let filtered = Arc::new(config.clone());
    // Row-group pruning done here is counted with the Parquet scan's own metrics.
    let metrics = spec.unfiltered.file_source.metrics().clone();
    let (spec_for_runs, ctx) = (spec.clone(), Arc::clone(&context));
    let batches = futures::stream::iter(runs)
        .map(move |run| {
            let (spec, filtered, ctx, metrics) = (
                spec_for_runs.clone(),
                Arc::clone(&filtered),
                Arc::clone(&ctx),
                metrics.clone(),
            );
            // Spawned: `try_flatten` polls the next runs only once the current one has ended,
            // so a run prepared ahead progresses on its own task, on another thread.
            let task = SpawnedTask::spawn(async move {
                open_run(run, &spec, &filtered, ctx, partition, &metrics).await
            });
            async move {
                task.join()
                    .await
                    .map_err(|e| DataFusionError::ExecutionJoin(Box::new(e)))?
            }
        })
        .buffered(RUNS_AHEAD)
        .try_flatten();

    if !spec.merge.has_equality() {
        if !spec.positional {
            return Ok(batches.boxed());
        }
        let (output, schema) = (spec.output.clone(), Arc::clone(&spec.schema));
        return Ok(batches
            .map(move |batch| {
                let batch = batch?;
                let columns = output
                    .iter()
                    .map(|i| Arc::clone(batch.column(*i)))
                    .collect();
                Ok(RecordBatch::try_new_with_options(
                    Arc::clone(&schema),
                    columns,
                    &RecordBatchOptions::new().with_row_count(Some(batch.num_rows())),
                )?)
            })
            .boxed());
    }
    let spec = spec.clone();
    let with_equality = async move {
        let sets = spec
            .merge
            .equality_sets(&context)
            .await
            .map_err(DataFusionError::from)?;
        let MergeSpec {
            merge,
            output,
            schema,
            ..
        } = spec;
        Ok::<_, DataFusionError>(
            batches.map(move |batch| batch.and_then(|b| merge.apply(&sets, b, &output, &schema))),
        )
    };
    Ok(futures::stream::once(with_equality).try_flatten().boxed())
}

/// Starts reading one run.
async fn open_run(
    run: Run,
    spec: &MergeSpec,
    filtered: &FileScanConfig,
    ctx: Arc<TaskContext>,
    partition: usize,
    metrics: &ExecutionPlanMetricsSet,
) -> DFResult<BoxStream<'static, DFResult<RecordBatch>>> {
    let scan = |config: &FileScanConfig, files: Vec<PartitionedFile>, ctx: Arc<TaskContext>| {
        DataSourceExec::from_data_source(files_only(config, files)).execute(0, ctx)
    };
    // Files read as planned by `filtered` (`unfiltered` when whole), with no deletes to apply:
    // whole files take their columns from the decoded-column cache when they can.
    let read = |filtered: &FileScanConfig,
                unfiltered: &FileScanConfig,
                files: Vec<PartitionedFile>,
                ctx: Arc<TaskContext>| {
        if let Some(columns) = &spec.columns
            && let Some(stream) = columns.partition_stream(
                &files_only(unfiltered, files.clone()),
                0,
                Arc::clone(&ctx),
            )
        {
            return Ok(stream);
        }
        Ok(scan(filtered, files, ctx)?.boxed())
    };
    let plain = |files: Vec<PartitionedFile>, ctx: Arc<TaskContext>| {
        read(filtered, &spec.unfiltered, files, ctx)
    };
    let (file, index) = match run {
        Run::Plain(files) => return plain(files, ctx),
        Run::Keyless(files) => {
            let Some(keyless) = &spec.keyless else {
                return plain(files, ctx);
            };
            spec.merge.record_read_without_keys(files.len());
            let stream = read(&keyless.filtered, &keyless.unfiltered, files, ctx)?;
            return Ok(with_null_columns(stream, keyless.null_columns()));
        }
        Run::Positional(file, index) => (*file, index),
    };
    let merge = Arc::clone(&spec.merge);
    let record = match merge.equality_mode(index, false) {
        EqualityMode::Record(key) => Some(key.clone()),
        _ => None,
    };
    let deleted = match merge.deleted_positions(index).await? {
        Some(deleted) => deleted,
        // Read position by position all the same.
        None if spec.positional || record.is_some() => {
            DeletedPositions::Bitmap(RoaringTreemap::new())
        }
        // Its delete files (and cached equality positions) turned out to hold no position of
        // it.
        None => return plain(vec![file], ctx),
    };
    // Read whole (no equality positions being recorded): the columns of the file's row groups
    // in its byte range may come from the decoded-column cache, deleted rows masked — or
    // already masked, when a scan with the same deleted positions kept them so.
    let whole = spec.columns.as_ref().filter(|_| record.is_none());
    let batch_rows = ctx.session_config().batch_size();
    let mask = Mask::new(deleted);
    let deleted = mask.positions();
    if let Some(columns) = whole
        && let Some((batches, removed)) =
            columns.masked_batches(&spec.unfiltered, &file, &mask, batch_rows)
    {
        merge.record_removed_in(index, removed);
        return Ok(futures::stream::iter(batches.into_iter().map(Ok)).boxed());
    }
    let metadata = merge.data_file_metadata(index, &ctx).await?;
    if let Some(columns) = whole
        && let Some(read_whole) =
            columns.file_stream(&spec.unfiltered, file.clone(), Arc::clone(&ctx))
    {
        let read: Vec<bool> = row_groups_in_range(&metadata, &file)
            .build()
            .inner()
            .iter()
            .map(|a| a.should_scan())
            .collect();
        let plan = whole_groups_plan(deleted, &row_group_rows(&metadata), &read);
        let stream = masked(read_whole.batches, PositionFilter::new(&plan), merge, index);
        // Masked from cached columns (the file is read often): kept masked as well.
        return Ok(match read_whole.cached_rows {
            Some(rows) => {
                columns.keep_masked(&spec.unfiltered, &file, &mask, rows, stream, batch_rows)
            }
            None => stream,
        });
    }
    let object_path = file.object_meta.location.as_ref();
    let metadata = nan_safe_metadata(metadata, |id| spec.nan_free.is_nan_free(object_path, id));
    let row_groups = metadata.row_groups();
    let mut pruned = row_groups_in_range(&metadata, &file);
    let predicate = file_predicate(spec, &metadata);
    let file_metrics = predicate
        .as_ref()
        .map(|_| ParquetFileMetrics::new(partition, file.object_meta.location.as_ref(), metrics));
    if let (Some(predicate), Some(file_metrics)) = (&predicate, &file_metrics) {
        pruned.prune_by_statistics(
            &predicate.schema,
            metadata.file_metadata().schema_descr(),
            row_groups,
            &predicate.pruning,
            file_metrics,
        );
    }
    let mut pruned = pruned.build();
    // The pages the filter cannot match are skipped too, except while recording equality
    // positions (which covers whole row groups).
    if let (None, Some(predicate), Some(file_metrics)) = (&record, &predicate, &file_metrics) {
        pruned = PagePruningAccessPlanFilter::new(&predicate.expr, Arc::clone(&predicate.schema))
            .prune_plan_with_page_index(
                pruned,
                &predicate.schema,
                metadata.file_metadata().schema_descr(),
                &metadata,
                file_metrics,
            );
    }
    let rows = row_group_rows(&metadata);
    let reads: Vec<GroupRead> = pruned
        .inner()
        .iter()
        .zip(&rows)
        .map(|(access, &rows)| GroupRead::of_access(access, rows))
        .collect();
    let scanned: Vec<bool> = reads.iter().map(|r| *r != GroupRead::Skip).collect();
    let plan = positional_plan_of(deleted, &rows, &reads);
    merge.record_removed_in(index, plan.skipped_deleted as usize);

    let mut file = file;
    file.range = None;
    file.extensions = Some(Arc::new(plan.access.clone()));
    let mut filter = PositionFilter::new(&plan);
    if let Some(key) = record {
        let sets = merge
            .equality_sets(&ctx)
            .await
            .map_err(DataFusionError::from)?;
        let stream = scan(&spec.unfiltered, vec![file], ctx)?;
        let nulls = spec
            .keyless
            .as_ref()
            .filter(|k| !k.key_slots.is_empty())
            .map(KeylessRead::null_columns);
        return Ok(recording(
            stream, filter, merge, sets, index, key, scanned, nulls,
        ));
    }
    let stream = scan(&spec.unfiltered, vec![file], ctx)?;
    if spec.positional {
        let path: Arc<str> = merge
            .data_file_path(index)
            .ok_or_else(|| DataFusionError::Internal(format!("no data file #{index}")))?
            .into();
        return Ok(stream
            .map(move |batch| {
                let (batch, removed, positions) = filter.apply_with_positions(batch?)?;
                merge.record_removed_in(index, removed);
                with_positions(batch, &path, positions)
            })
            .try_filter(|batch| futures::future::ready(batch.num_rows() > 0))
            .boxed());
    }
    Ok(masked(stream.boxed(), filter, merge, index))
}

/// The batches of `stream` with `nulls`' null columns put in.
fn with_null_columns(
    stream: BoxStream<'static, DFResult<RecordBatch>>,
    mut nulls: NullColumns,
) -> BoxStream<'static, DFResult<RecordBatch>> {
    stream
        .map(move |batch| {
            let batch = batch?;
            nulls.fill(batch.columns().iter().cloned(), batch.num_rows())
        })
        .boxed()
}

/// Null columns put in at `slots` of batches that were read or kept without those columns,
/// making batches of `schema` (the inner batches' schema with those columns nullable).
struct NullColumns {
    slots: Vec<usize>,
    schema: SchemaRef,
    /// One null column per slot, as long as the longest batch so far, sliced for each batch.
    nulls: Vec<ArrayRef>,
}

impl NullColumns {
    /// A batch of `rows` rows of `columns` (every column but those at the slots, in order)
    /// with the null columns put in.
    fn fill(
        &mut self,
        columns: impl ExactSizeIterator<Item = ArrayRef>,
        rows: usize,
    ) -> DFResult<RecordBatch> {
        let width = self.schema.fields().len();
        if columns.len() + self.slots.len() != width {
            return Err(DataFusionError::Internal(format!(
                "a batch read without its key columns has {} columns, expected {}",
                columns.len(),
                width - self.slots.len()
            )));
        }
        if self.nulls.first().is_none_or(|n| n.len() < rows) {
            self.nulls = self
                .slots
                .iter()
                .map(|&i| new_null_array(self.schema.field(i).data_type(), rows))
                .collect();
        }
        let mut columns = columns;
        let mut out = Vec::with_capacity(width);
        for i in 0..width {
            match self.slots.iter().position(|&s| s == i) {
                Some(k) => out.push(self.nulls[k].slice(0, rows)),
                None => out.extend(columns.next()),
            }
        }
        Ok(RecordBatch::try_new_with_options(
            Arc::clone(&self.schema),
            out,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }

    /// The rows of `batch` (an inner batch, key columns included) that `keep` marks, with
    /// null columns in place of the key columns: those are not copied.
    fn kept(&mut self, batch: &RecordBatch, keep: &BooleanArray) -> DFResult<RecordBatch> {
        let filter = FilterBuilder::new(keep).optimize().build();
        let columns = batch
            .columns()
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.slots.contains(i))
            .map(|(_, column)| filter.filter(column))
            .collect::<Result<Vec<_>, _>>()?;
        self.fill(columns.into_iter(), filter.count())
    }
}

/// The batches of `stream` (data file `index`'s) with the rows `filter` masks dropped (and
/// counted), empty batches left out.
fn masked(
    stream: BoxStream<'static, DFResult<RecordBatch>>,
    mut filter: PositionFilter,
    merge: Arc<MergeOnRead>,
    index: usize,
) -> BoxStream<'static, DFResult<RecordBatch>> {
    stream
        .map(move |batch| {
            let (batch, removed) = filter.apply(batch?)?;
            merge.record_removed_in(index, removed);
            Ok(batch)
        })
        .try_filter(|batch| futures::future::ready(batch.num_rows() > 0))
        .boxed()
}

/// The row groups of `metadata` a read of `file` covers: those starting in its byte range, as
/// DataFusion's Parquet opener decides.
fn row_groups_in_range(
    metadata: &ParquetMetaData,
    file: &PartitionedFile,
) -> RowGroupAccessPlanFilter {
    let row_groups = metadata.row_groups();
    let mut in_range = RowGroupAccessPlanFilter::new(ParquetAccessPlan::new_all(row_groups.len()));
    if let Some(range) = &file.range {
        in_range.prune_by_range(row_groups, range);
    }
    in_range
}

/// The rows of each row group of `metadata`.
fn row_group_rows(metadata: &ParquetMetaData) -> Vec<u64> {
    metadata
        .row_groups()
        .iter()
        .map(|g| g.num_rows().max(0) as u64)
        .collect()
}

/// The batches of a run recording data file `index`'s equality-deleted positions: each batch's
/// deleted rows found by probing, dropped, and their positions collected; at the end of the
/// stream, the positions found in the row groups `read` go to the merge state (which caches
/// them under `key` once every row group of the file is covered). With `nulls` (the key columns
/// the scan added, which nothing reads past the probe), the batches keep null columns in their
/// places instead of filtered copies.
#[allow(clippy::too_many_arguments)]
fn recording(
    stream: datafusion::execution::SendableRecordBatchStream,
    mut filter: PositionFilter,
    merge: Arc<MergeOnRead>,
    sets: Arc<EqualitySets>,
    index: usize,
    key: EqualityPositionsKey,
    read: Vec<bool>,
    mut nulls: Option<NullColumns>,
) -> BoxStream<'static, DFResult<RecordBatch>> {
    let found = Arc::new(std::sync::Mutex::new(Some(RoaringTreemap::new())));
    let (found_in, merge_in) = (Arc::clone(&found), Arc::clone(&merge));
    let batches = stream.map(move |batch| {
        let batch = batch.inspect_err(|_| {
            // A failed read records nothing.
            if let Ok(mut found) = found_in.lock() {
                *found = None;
            }
        })?;
        let (batch, _, origins) = filter.apply_with_origins(batch)?;
        let file = u32::try_from(index).unwrap_or(u32::MAX);
        let Some(deleted) = merge_in.probe_equality(&sets, &batch, file)? else {
            return Ok(batch);
        };
        let removed = deleted.count_set_bits();
        if removed == 0 {
            return Ok(batch);
        }
        if let Ok(mut found) = found_in.lock()
            && let Some(found) = found.as_mut()
        {
            // Ascending, and past the positions of the batches before: appended in order.
            let positions = origins.positions_of(&deleted)?;
            if let Err(unsorted) = found.append(positions.iter().copied()) {
                found.extend(positions[unsorted.valid_until() as usize..].iter().copied());
            }
        }
        merge_in.record_removed_by_equality(removed);
        let keep = BooleanArray::new(!&deleted, None);
        match &mut nulls {
            Some(nulls) => nulls.kept(&batch, &keep),
            None => Ok(arrow::compute::filter_record_batch(&batch, &keep)?),
        }
    });
    let finish = futures::stream::once(async move {
        let positions = found.lock().ok().and_then(|mut f| f.take());
        if let Some(positions) = positions {
            merge.record_equality_positions(index, &key, positions, &read);
        }
        Ok(None)
    });
    batches
        .map(|b: DFResult<RecordBatch>| b.map(Some))
        .chain(finish)
        .try_filter_map(|b| futures::future::ready(Ok(b.filter(|b| b.num_rows() > 0))))
        .boxed()
}

/// `batch` with the data file's `path` and the rows' `positions` appended as its last columns.
fn with_positions(
    batch: RecordBatch,
    path: &Arc<str>,
    positions: Int64Array,
) -> DFResult<RecordBatch> {
    let rows = batch.num_rows();
    let mut fields: Vec<Arc<Field>> = batch.schema().fields().iter().cloned().collect();
    fields.push(Arc::new(Field::new(
        FILE_PATH_COLUMN,
        DataType::Utf8,
        false,
    )));
    fields.push(Arc::new(Field::new(
        POSITION_COLUMN,
        DataType::Int64,
        false,
    )));
    let mut columns = batch.columns().to_vec();
    columns.push(Arc::new(StringArray::from_iter_values(
        std::iter::repeat_n(path.as_ref(), rows),
    )));
    columns.push(Arc::new(positions));
    Ok(RecordBatch::try_new_with_options(
        Arc::new(Schema::new(fields)),
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )?)
}

/// The pushed filters as a row-group pruning predicate over one data file's own schema, as
/// DataFusion's Parquet opener builds it; `None` when there are none or they cannot prune.
fn file_predicate(spec: &MergeSpec, metadata: &ParquetMetaData) -> Option<FilePredicate> {
    let predicate = spec.predicate.as_ref()?;
    let footer = metadata.file_metadata();
    let physical =
        parquet_to_arrow_schema(footer.schema_descr(), footer.key_value_metadata()).ok()?;
    let physical = Arc::new(
        apply_file_schema_type_coercions(&spec.file_schema, &physical).unwrap_or(physical),
    );
    let rewriter = spec
        .adapter
        .create(Arc::clone(&spec.file_schema), Arc::clone(&physical))
        .ok()?;
    let expr = rewriter.rewrite(Arc::clone(predicate)).ok()?;
    let pruning = PruningPredicate::try_new(Arc::clone(&expr), Arc::clone(&physical)).ok()?;
    (!pruning.always_true()).then_some(FilePredicate {
        pruning,
        expr,
        schema: physical,
    })
}

/// The scan's pushed filters in terms of one data file's own schema.
struct FilePredicate {
    /// For the row groups' statistics.
    pruning: PruningPredicate,
    /// For the page index.
    expr: Arc<dyn PhysicalExpr>,
    /// The file's Arrow schema.
    schema: SchemaRef,
}
