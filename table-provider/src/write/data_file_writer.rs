//! Writing one partition's rows as Parquet data files: rolling at the table's target file size,
//! with exact column metrics, through Petrel's object_store IO.
//!
//! The table's write properties, as Iceberg Java reads them:
//! `write.target-file-size-bytes` (512 MiB), `write.parquet.compression-codec` (zstd),
//! `write.parquet.compression-level`, `write.parquet.row-group-size-bytes` (128 MiB),
//! `write.parquet.page-size-bytes` (1 MiB), `write.data.path` (`<location>/data`), and the
//! metrics configuration ([`super::metrics::MetricsConfig`]).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::SchemaRef;
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, PartitionSpec, Schema, Struct,
};
use parquet::arrow::AsyncArrowWriter;
use parquet::arrow::async_writer::ParquetObjectWriter;
use parquet::basic::{BrotliLevel, Compression, GzipLevel, ZstdLevel};
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use super::metrics::{MetricsCollector, MetricsConfig};
use super::partition_path::partition_path;
use super::tracker::WriteTracker;
use crate::error::{Error, Result};
use crate::io::TableIo;

/// Iceberg's default target file size.
const DEFAULT_TARGET_FILE_SIZE: u64 = 512 * 1024 * 1024;
/// Iceberg's default row-group size.
const DEFAULT_ROW_GROUP_BYTES: usize = 128 * 1024 * 1024;

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

    /// Writes `batch` (rows of this writer's partition, in the table's Arrow schema).
    pub async fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let batch = self.conform(batch)?;
        if self.open.is_none() {
            self.open = Some(self.start_file()?);
        }
        let Some(file) = self.open.as_mut() else {
            return Ok(());
        };
        let table = &self.settings.table;
        file.writer
            .write(&batch)
            .await
            .map_err(|e| write_error(table, &file.location, e))?;
        file.metrics.update(&batch)?;
        file.rows += batch.num_rows() as u64;
        let size = (file.writer.bytes_written() + file.writer.in_progress_size()) as u64;
        if size >= self.settings.target_file_size {
            self.finish_file().await?;
        }
        Ok(())
    }

    /// Finishes the open file and returns every data file written.
    pub async fn close(mut self) -> Result<Vec<DataFile>> {
        self.finish_file().await?;
        Ok(self.written)
    }

    /// Gives up the open file: its upload is aborted, so no part of it is left in the store
    /// (the files already finished are the tracker's to delete).
    pub async fn abort(mut self) {
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

    fn start_file(&mut self) -> Result<OpenFile> {
        self.count += 1;
        let location = format!(
            "{}/{:05}-{}-{:05}.parquet",
            self.directory, self.task, self.settings.write_id, self.count
        );
        self.settings.tracker.record_started(location.clone());
        let (store, _, path) = self.io.resolve(&location)?;
        let writer = AsyncArrowWriter::try_new(
            ParquetObjectWriter::new(store, path),
            Arc::clone(&self.settings.arrow_schema),
            Some(self.settings.parquet.clone()),
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
