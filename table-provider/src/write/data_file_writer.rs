//! Writing one partition's rows as Parquet data files: rolling at the table's target file size,
//! with exact column metrics, through Petrel's object_store IO.
//!
//! The table's write properties, as Iceberg Java reads them:
//! `write.target-file-size-bytes` (512 MiB), `write.parquet.compression-codec` (zstd),
//! `write.parquet.compression-level`, `write.parquet.row-group-size-bytes` (128 MiB),
//! `write.parquet.page-size-bytes` (1 MiB), `write.parquet.page-row-limit` (20,000),
//! `write.parquet.dict-size-bytes` (2 MiB), `write.data.path` (`<location>/data`), and the
//! metrics configuration ([`super::metrics::MetricsConfig`]).
//!
//! Each file decides on its first rows which columns it writes without a dictionary
//! ([`super::dictionary`]). A partitioned write hands each partition's writer a few rows of each
//! input batch; the writer gathers them until it has [`BATCH_ROWS`] rows (or
//! [`WRITER_BUFFER_BYTES`], or all writers of the statement hold [`WRITE_BUFFER_BYTES`]) and
//! gives the Parquet writer and the metrics one batch: per-call costs are paid per 8k rows, not
//! per slice of an input batch.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::{cast, concat_batches};
use arrow::datatypes::SchemaRef;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, PartitionSpec, Schema, Struct,
};
use parquet::arrow::AsyncArrowWriter;
use parquet::arrow::async_writer::ParquetObjectWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use super::dictionary::plain_columns;
use super::metrics::{MetricsCollector, MetricsConfig};
use super::partition_path::partition_path;
use super::tracker::WriteTracker;
use crate::error::{Error, Result};
use crate::io::TableIo;

/// Iceberg's default target file size.
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;
/// Iceberg's default row-group size.
const DEFAULT_ROW_GROUP_BYTES: usize = 128 * 1024 * 1024;
/// Iceberg's default `write.parquet.dict-size-bytes`.
const DEFAULT_DICTIONARY_BYTES: usize = 2 * 1024 * 1024;
/// Iceberg's default `write.parquet.page-row-limit`.
const DEFAULT_PAGE_ROWS: usize = 20_000;

/// A writer gathers rows until it has this many (DataFusion's batch size), then writes them as
/// one batch.
pub const BATCH_ROWS: usize = 8192;
/// ... or until the rows it gathers take this much memory.
pub const WRITER_BUFFER_BYTES: usize = 8 * 1024 * 1024;
/// ... or until the rows all writers of one write gather take this much memory.
pub const WRITE_BUFFER_BYTES: usize = 64 * 1024 * 1024;
/// A writer task keeps the input batches its writers' gathered slices come from (a slice keeps
/// its whole batch alive) up to this much memory: past it, the writers still holding rows of the
/// oldest kept batch write them (`RollingFileWriter::flush_if_kept_since`).
pub const KEPT_INPUT_BYTES: usize = 16 * 1024 * 1024;

/// How one write (one statement) writes data files of one table.
#[derive(Debug)]
pub struct WriteSettings {
    table: String,
    schema: Arc<Schema>,
    arrow_schema: SchemaRef,
    spec: Arc<PartitionSpec>,
    data_location: String,
    target_file_size: u64,
    parquet: WriterProperties,
    metrics: MetricsConfig,
    /// Unique per write: file names never collide with another writer's.
    write_id: Uuid,
    /// Every file this write started and the writer tasks still running, so a failed statement
    /// can delete them all (the writer tasks that finished as well as the one that failed).
    tracker: Arc<WriteTracker>,
    /// The memory of the rows all writers of this write have gathered and not written yet.
    buffered: AtomicUsize,
}

impl WriteSettings {
    /// The settings for writing to a table with this metadata (`table` names it in errors;
    /// `arrow_schema` is the Arrow form of `schema` with field ids).
    pub fn new(
        table: impl Into<String>,
        metadata: &iceberg::spec::TableMetadata,
        arrow_schema: SchemaRef,
    ) -> Result<Self> {
        let table = table.into();
        let props = metadata.properties();
        let invalid = |key: &str, value: &str| {
            Error::InvalidArgument(format!(
                "table {table}: property {key}={value:?} is invalid"
            ))
        };
        let number = |key: &str, default: u64| -> Result<u64> {
            props
                .get(key)
                .map(|v| v.trim().parse::<u64>().map_err(|_| invalid(key, v)))
                .transpose()
                .map(|v| v.unwrap_or(default))
        };
        let target_file_size =
            number("write.target-file-size-bytes", DEFAULT_TARGET_FILE_SIZE)?.max(1);
        let row_group_bytes = number(
            "write.parquet.row-group-size-bytes",
            DEFAULT_ROW_GROUP_BYTES as u64,
        )? as usize;
        let page_bytes = number("write.parquet.page-size-bytes", 1024 * 1024)? as usize;
        let page_rows = number("write.parquet.page-row-limit", DEFAULT_PAGE_ROWS as u64)? as usize;
        let dictionary_bytes = number(
            "write.parquet.dict-size-bytes",
            DEFAULT_DICTIONARY_BYTES as u64,
        )? as usize;
        let codec = props
            .get("write.parquet.compression-codec")
            .map_or("zstd", String::as_str);
        let level = props
            .get("write.parquet.compression-level")
            .map(|v| {
                v.trim()
                    .parse::<i32>()
                    .map_err(|_| invalid("write.parquet.compression-level", v))
            })
            .transpose()?;
        let compression = compression(codec, level)
            .ok_or_else(|| invalid("write.parquet.compression-codec", codec))?;
        let parquet = WriterProperties::builder()
            .set_compression(compression)
            .set_max_row_group_bytes(Some(row_group_bytes.max(1)))
            .set_data_page_size_limit(page_bytes.max(1))
            .set_data_page_row_count_limit(page_rows.max(1))
            .set_dictionary_page_size_limit(dictionary_bytes.max(1))
            .set_coerce_types(true)
            .set_created_by(format!("petrel {}", env!("CARGO_PKG_VERSION")))
            .build();
        let schema = Arc::clone(metadata.current_schema());
        let data_location = props
            .get("write.data.path")
            .cloned()
            .unwrap_or_else(|| format!("{}/data", metadata.location()))
            .trim_end_matches('/')
            .to_string();
        Ok(Self {
            metrics: MetricsConfig::from_properties(props, &schema),
            table,
            schema,
            arrow_schema,
            spec: Arc::clone(metadata.default_partition_spec()),
            data_location,
            target_file_size,
            parquet,
            write_id: Uuid::new_v4(),
            tracker: Arc::default(),
            buffered: AtomicUsize::new(0),
        })
    }

    /// These settings rolling files at `bytes` instead of the table's
    /// `write.target-file-size-bytes` (a compaction's `target-file-size-bytes` option).
    pub fn with_target_file_size(mut self, bytes: u64) -> Self {
        self.target_file_size = bytes.max(1);
        self
    }

    /// The target size files roll at.
    pub fn target_file_size(&self) -> u64 {
        self.target_file_size
    }

    /// The files this write has started and its running writer tasks.
    pub fn tracker(&self) -> &Arc<WriteTracker> {
        &self.tracker
    }

    /// The partition spec files are written with.
    pub fn spec(&self) -> &Arc<PartitionSpec> {
        &self.spec
    }

    /// The table's schema.
    pub fn schema(&self) -> &Arc<Schema> {
        &self.schema
    }

    /// The Arrow schema files are written with.
    pub fn arrow_schema(&self) -> &SchemaRef {
        &self.arrow_schema
    }

    /// The table's name, for errors.
    pub(crate) fn table_name(&self) -> &str {
        &self.table
    }

    /// Where the table's files go (no trailing slash).
    pub(crate) fn data_location(&self) -> &str {
        &self.data_location
    }

    /// The table's metrics configuration.
    pub(crate) fn metrics(&self) -> &MetricsConfig {
        &self.metrics
    }

    /// This write's id, part of every file name it writes.
    pub(crate) fn write_id(&self) -> Uuid {
        self.write_id
    }
}

/// `write.parquet.compression-codec` (and `-level`) as Parquet compression.
pub(crate) fn compression(codec: &str, level: Option<i32>) -> Option<Compression> {
    Some(match codec.to_ascii_lowercase().as_str() {
        "zstd" => Compression::ZSTD(match level {
            Some(l) => ZstdLevel::try_new(l).ok()?,
            None => ZstdLevel::default(),
        }),
        "gzip" => Compression::GZIP(match level {
            Some(l) => GzipLevel::try_new(u32::try_from(l).ok()?).ok()?,
            None => GzipLevel::default(),
        }),
        "brotli" => Compression::BROTLI(match level {
            Some(l) => BrotliLevel::try_new(u32::try_from(l).ok()?).ok()?,
            None => BrotliLevel::default(),
        }),
        "snappy" => Compression::SNAPPY,
        "lz4" => Compression::LZ4_RAW,
        "uncompressed" | "none" => Compression::UNCOMPRESSED,
        _ => return None,
    })
}

/// A data file being written.
struct OpenFile {
    location: String,
    writer: AsyncArrowWriter<ParquetObjectWriter>,
    metrics: MetricsCollector,
    rows: u64,
}

/// Writes the rows of one partition (of one writer task) as data files, starting a new file
/// whenever the current one reaches the target size.
pub struct RollingFileWriter {
    /// Rows gathered and not written yet (in the writer's schema), their count and memory.
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    pending_bytes: usize,
    /// The number of the input batch the first gathered rows came from.
    pending_since: u64,
    settings: Arc<WriteSettings>,
    io: TableIo,
    partition: Struct,
    directory: String,
    /// Distinguishes the writer tasks of one write (`task`) and this writer's files (`count`).
    task: usize,
    count: usize,
    open: Option<OpenFile>,
    written: Vec<DataFile>,
}

impl std::fmt::Debug for RollingFileWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RollingFileWriter")
            .field("directory", &self.directory)
            .field("written", &self.written.len())
            .finish_non_exhaustive()
    }
}

impl RollingFileWriter {
    /// A writer of partition `partition` for writer task `task`.
    pub fn new(
        settings: Arc<WriteSettings>,
        io: TableIo,
        partition: Struct,
        task: usize,
    ) -> Result<Self> {
        let relative = partition_path(&settings.spec, &settings.schema, &partition)?;
        let directory = if relative.is_empty() {
            settings.data_location.clone()
        } else {
            format!("{}/{relative}", settings.data_location)
        };
        Ok(Self {
            pending: Vec::new(),
            pending_rows: 0,
            pending_bytes: 0,
            pending_since: 0,
            settings,
            io,
            partition,
            directory,
            task,
            count: 0,
            open: None,
            written: Vec::new(),
        })
    }

    /// Writes `batch` (rows of this writer's partition, in the table's Arrow schema): gathers
    /// it with the rows before it until there are enough to write.
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.write_slice(batch, batch.get_array_memory_size(), 0)
            .await
    }

    /// Writes `batch` as [`Self::write`] does, where `batch` may be a slice of a larger batch:
    /// `bytes` is its share of that batch's memory (what the writer counts while it keeps the
    /// rows) and `input` the number of the input batch it came from (see
    /// [`Self::flush_if_kept_since`]).
    pub async fn write_slice(
        &mut self,
        batch: &RecordBatch,
        bytes: usize,
        input: u64,
    ) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = self.conform(batch)?;
        if self.pending.is_empty() && batch.num_rows() >= BATCH_ROWS {
            return self.write_to_file(&batch).await;
        }
        if self.pending.is_empty() {
            self.pending_since = input;
        }
        self.pending_rows += batch.num_rows();
        self.pending_bytes += bytes;
        self.pending.push(batch);
        let all = self.settings.buffered.fetch_add(bytes, Ordering::Relaxed) + bytes;
        if self.pending_rows >= BATCH_ROWS
            || self.pending_bytes >= WRITER_BUFFER_BYTES
            || all >= WRITE_BUFFER_BYTES
        {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the gathered rows if the first of them came from input batch `input` or an
    /// earlier one: the gathered slices keep their whole input batches alive, and a writer
    /// task calls this for its oldest input batch so that the batches it keeps stay bounded.
    pub async fn flush_if_kept_since(&mut self, input: u64) -> Result<()> {
        if !self.pending.is_empty() && self.pending_since <= input {
            self.flush().await?;
        }
        Ok(())
    }

    /// Writes the gathered rows.
    async fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        self.release_pending();
        let batch = match <[RecordBatch; 1]>::try_from(pending) {
            Ok([one]) => one,
            Err(pending) => concat_batches(&self.settings.arrow_schema, &pending)?,
        };
        self.write_to_file(&batch).await
    }

    /// Forgets the memory of the gathered rows (written or given up).
    fn release_pending(&mut self) {
        self.settings
            .buffered
            .fetch_sub(self.pending_bytes, Ordering::Relaxed);
        self.pending_bytes = 0;
        self.pending_rows = 0;
    }

    /// Writes `batch` to the open file (a new one if none is open), and finishes the file when
    /// it reaches the target size.
    async fn write_to_file(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        if self.open.is_none() {
            self.open = Some(self.start_file(batch)?);
        }
        let Some(file) = self.open.as_mut() else {
            return Ok(());
        };
        let table = &self.settings.table;
        file.writer
            .write(batch)
            .await
            .map_err(|e| write_error(table, &file.location, e))?;
        file.metrics.update(batch)?;
        file.rows += batch.num_rows() as u64;
        let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as u64;
        if size >= self.settings.target_file_size {
            self.finish_file().await?;
        }
        Ok(())
    }

    /// Writes the gathered rows, finishes the open file and returns every data file written.
    pub async fn close(mut self) -> Result<Vec<DataFile>> {
        self.flush().await?;
        self.finish_file().await?;
        Ok(std::mem::take(&mut self.written))
    }

    /// Gives up the gathered rows and the open file: its upload is aborted, so no part of it is
    /// left in the store (the files already finished are the tracker's to delete).
    pub async fn abort(mut self) {
        self.pending.clear();
        self.release_pending();
        if let Some(file) = self.open.take() {
            // Best effort: an upload that cannot be aborted leaves at most an unreferenced
            // staging object.
            let _ = file.writer.into_inner().into_inner().abort().await;
        }
    }

    /// `batch` with the writer's schema (field ids on every field; DataFusion's casts to the
    /// table schema drop field metadata).
    fn conform(&self, batch: &RecordBatch) -> Result<RecordBatch> {
        let schema = &self.settings.arrow_schema;
        if batch.schema().fields() == schema.fields() {
            return Ok(batch.clone());
        }
        let columns = batch
            .columns()
            .iter()
            .zip(schema.fields())
            .map(|(column, field)| -> Result<ArrayRef> {
                if column.data_type() == field.data_type() {
                    Ok(Arc::clone(column))
                } else {
                    Ok(cast(column, field.data_type())?)
                }
            })
            .collect::<Result<Vec<_>>>()?;
        RecordBatch::try_new(Arc::clone(schema), columns)
            .map_err(|e| Error::InvalidArgument(format!("table {}: {e}", self.settings.table)))
    }

    /// Starts a file whose first rows are `first`: the columns whose dictionary does not pay on
    /// them are written without one.
    fn start_file(&mut self, first: &RecordBatch) -> Result<OpenFile> {
        self.count += 1;
        let location = format!(
            "{}/{:05}-{}-{:05}.parquet",
            self.directory, self.task, self.settings.write_id, self.count
        );
        self.settings.tracker.record_started(location.clone());
        let (store, _, path) = self.io.resolve(&location)?;
        let mut properties = self.settings.parquet.clone();
        let plain = plain_columns(first);
        if !plain.is_empty() {
            properties = plain
                .into_iter()
                .fold(properties.into_builder(), |builder, column| {
                    builder.set_column_dictionary_enabled(column, false)
                })
                .build();
        }
        let writer = AsyncArrowWriter::try_new(
            ParquetObjectWriter::new(store, path),
            Arc::clone(&self.settings.arrow_schema),
            Some(properties),
        )
        .map_err(|e| write_error(&self.settings.table, &location, e))?;
        let metrics = MetricsCollector::new(
            &self.settings.schema,
            &self.settings.arrow_schema,
            &self.settings.metrics,
        )?;
        Ok(OpenFile {
            location,
            writer,
            metrics,
            rows: 0,
        })
    }

    async fn finish_file(&mut self) -> Result<()> {
        let Some(mut file) = self.open.take() else {
            return Ok(());
        };
        let footer = file
            .writer
            .finish()
            .await
            .map_err(|e| write_error(&self.settings.table, &file.location, e))?;
        let size = file.writer.bytes_written() as u64;
        let metrics = file.metrics.finish();
        let split_offsets: Vec<i64> = footer
            .row_groups()
            .iter()
            .filter_map(|g| g.file_offset())
            .collect();
        let data_file = DataFileBuilder::default()
            .content(DataContentType::Data)
            .file_path(file.location.clone())
            .file_format(DataFileFormat::Parquet)
            .partition(self.partition.clone())
            .partition_spec_id(self.settings.spec.spec_id())
            .record_count(file.rows)
            .file_size_in_bytes(size)
            .column_sizes(column_sizes(&footer))
            .value_counts(metrics.value_counts)
            .null_value_counts(metrics.null_value_counts)
            .nan_value_counts(metrics.nan_value_counts)
            .lower_bounds(metrics.lower_bounds)
            .upper_bounds(metrics.upper_bounds)
            .split_offsets(Some(split_offsets))
            .sort_order_id(0)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("data file {}: {e}", file.location)))?;
        self.written.push(data_file);
        Ok(())
    }
}

impl Drop for RollingFileWriter {
    fn drop(&mut self) {
        // A writer dropped with rows gathered (its task failed) gives their memory back.
        self.release_pending();
    }
}

/// A failed Parquet write, naming the table and file.
fn write_error(table: &str, location: &str, e: parquet::errors::ParquetError) -> Error {
    Error::WriteFailed {
        table: table.to_string(),
        path: location.to_string(),
        message: e.to_string(),
    }
}

/// Compressed bytes per column (Iceberg field id), from the footer.
fn column_sizes(footer: &parquet::file::metadata::ParquetMetaData) -> HashMap<i32, u64> {
    let mut sizes = HashMap::new();
    for group in footer.row_groups() {
        for column in group.columns() {
            let info = column.column_descr().self_type().get_basic_info();
            if info.has_id() {
                *sizes.entry(info.id()).or_insert(0) += column.compressed_size().max(0) as u64;
            }
        }
    }
    sizes
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use iceberg::spec::{
        FormatVersion, NestedField, PrimitiveType, SortOrder, TableMetadataBuilder, Type,
    };
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;
    use crate::io::{LocationMap, StoreRegistry};
    use crate::spec::iceberg_schema_to_arrow;

    /// Writes `slices` (ids `start..end` each; `k = id % 10`, `s = "name-" + id`) through one
    /// writer of an unpartitioned table with `properties`, and returns the settings and files.
    async fn write_slices(
        dir: &std::path::Path,
        properties: &[(&str, &str)],
        slices: &[std::ops::Range<i64>],
    ) -> (Arc<WriteSettings>, Vec<DataFile>) {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "k", Type::Primitive(PrimitiveType::Int)).into(),
                NestedField::optional(3, "s", Type::Primitive(PrimitiveType::String)).into(),
            ])
            .build()
            .unwrap();
        let spec = PartitionSpec::builder(schema.clone()).build().unwrap();
        let metadata = TableMetadataBuilder::new(
            schema.clone(),
            spec,
            SortOrder::unsorted_order(),
            dir.to_str().unwrap().to_string(),
            FormatVersion::V2,
            properties
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<HashMap<_, _>>(),
        )
        .unwrap()
        .build()
        .unwrap()
        .metadata;
        let arrow_schema = Arc::new(iceberg_schema_to_arrow(&schema).unwrap());
        let settings =
            Arc::new(WriteSettings::new("db.t", &metadata, Arc::clone(&arrow_schema)).unwrap());
        let io = TableIo::new(StoreRegistry::default(), LocationMap::identity());
        let mut writer =
            RollingFileWriter::new(Arc::clone(&settings), io, Struct::empty(), 0).unwrap();
        for ids in slices {
            writer
                .write(&rows(&arrow_schema, ids.clone()))
                .await
                .unwrap();
        }
        (settings, writer.close().await.unwrap())
    }

    /// The rows `ids` of [`write_slices`]'s table.
    fn rows(arrow_schema: &SchemaRef, ids: std::ops::Range<i64>) -> RecordBatch {
        RecordBatch::try_new(
            Arc::clone(arrow_schema),
            vec![
                Arc::new(Int64Array::from_iter_values(ids.clone())),
                Arc::new(Int32Array::from_iter_values(
                    ids.clone().map(|i| (i % 10) as i32),
                )),
                Arc::new(StringArray::from_iter_values(
                    ids.map(|i| format!("name-{i:06}")),
                )),
            ],
        )
        .unwrap()
    }

    fn footer(file: &DataFile) -> SerializedFileReader<std::fs::File> {
        SerializedFileReader::new(std::fs::File::open(file.file_path()).unwrap()).unwrap()
    }

    /// The `id` values of a file, read back in order.
    fn ids(file: &DataFile) -> Vec<i64> {
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            std::fs::File::open(file.file_path()).unwrap(),
        )
        .unwrap()
        .build()
        .unwrap();
        reader
            .flat_map(|b| {
                let b = b.unwrap();
                let ids = b.column(0).as_any().downcast_ref::<Int64Array>().unwrap();
                ids.values().to_vec()
            })
            .collect()
    }

    #[tokio::test]
    async fn small_slices_are_gathered_and_unique_columns_written_plain() {
        let dir = tempfile::tempdir().unwrap();
        // 120 slices of 82 rows: one file, rows in order, exact counts.
        let slices: Vec<_> = (0..120i64).map(|n| n * 82..(n + 1) * 82).collect();
        let (settings, files) = write_slices(dir.path(), &[], &slices).await;
        assert_eq!(settings.buffered.load(Ordering::Relaxed), 0);
        assert_eq!(files.len(), 1);
        let file = &files[0];
        assert_eq!(file.record_count(), 120 * 82);
        assert_eq!(file.value_counts()[&1], 120 * 82);
        assert_eq!(ids(file), (0..120 * 82).collect::<Vec<_>>());
        let reader = footer(file);
        let metadata = reader.metadata();
        // The Parquet writer got the rows in batches of at least 8,192 rows.
        assert_eq!(metadata.num_row_groups(), 1);
        let group = metadata.row_group(0);
        let dictionary = |name: &str| {
            let column = group
                .columns()
                .iter()
                .find(|c| c.column_path().string() == name)
                .unwrap();
            column.dictionary_page_offset().is_some()
        };
        // `id` and `s` are unique: no dictionary; `k` has 10 values: a dictionary.
        assert!(!dictionary("id"));
        assert!(!dictionary("s"));
        assert!(dictionary("k"));
    }

    #[tokio::test]
    async fn gathered_rows_still_roll_at_the_target_size() {
        let dir = tempfile::tempdir().unwrap();
        let slices: Vec<_> = (0..300i64).map(|n| n * 100..(n + 1) * 100).collect();
        let (_, files) = write_slices(
            dir.path(),
            &[("write.target-file-size-bytes", "1")],
            &slices,
        )
        .await;
        // Each file is one batch of gathered rows: 8,200 rows (82 slices), the rest last.
        let counts: Vec<u64> = files.iter().map(DataFile::record_count).collect();
        assert_eq!(counts, vec![8200, 8200, 8200, 5400]);
        let read: Vec<i64> = files.iter().flat_map(ids).collect();
        assert_eq!(read, (0..30_000).collect::<Vec<_>>());
    }

    #[tokio::test]
    async fn gathered_slices_are_written_once_their_oldest_input_batch_is_let_go() {
        let dir = tempfile::tempdir().unwrap();
        // Write nothing, then read the settings of the same table for a writer of our own.
        let (settings, _) =
            write_slices(dir.path(), &[("write.target-file-size-bytes", "1")], &[]).await;
        let io = TableIo::new(StoreRegistry::default(), LocationMap::identity());
        let mut writer =
            RollingFileWriter::new(Arc::clone(&settings), io, Struct::empty(), 1).unwrap();
        let schema = settings.arrow_schema();
        // A slice of a larger batch counts its share, not the whole batch.
        let input = rows(schema, 0..1000);
        writer
            .write_slice(&input.slice(0, 10), 100, 3)
            .await
            .unwrap();
        writer
            .write_slice(&rows(schema, 10..20), 100, 4)
            .await
            .unwrap();
        assert_eq!(settings.buffered.load(Ordering::Relaxed), 200);
        // Batches before the first gathered rows' batch: nothing to write.
        writer.flush_if_kept_since(2).await.unwrap();
        assert!(writer.written.is_empty());
        assert_eq!(writer.pending_rows, 20);
        // The first rows' batch: everything gathered is written (one file: target size 1).
        writer.flush_if_kept_since(3).await.unwrap();
        assert_eq!(writer.written.len(), 1);
        assert_eq!(writer.pending_rows, 0);
        assert_eq!(settings.buffered.load(Ordering::Relaxed), 0);
        // The next rows start a new span at their own batch.
        writer
            .write_slice(&rows(schema, 20..25), 50, 9)
            .await
            .unwrap();
        writer.flush_if_kept_since(8).await.unwrap();
        assert_eq!(writer.written.len(), 1);
        let files = writer.close().await.unwrap();
        assert_eq!(
            files.iter().map(DataFile::record_count).collect::<Vec<_>>(),
            vec![20, 5]
        );
        assert_eq!(
            files.iter().flat_map(ids).collect::<Vec<_>>(),
            (0..25).collect::<Vec<_>>()
        );
    }
}
