//! Equality-delete files, as Iceberg Java's `EqualityDeleteWriter` writes them for Flink's
//! upsert (`FlinkAppenderFactory.newEqDeleteWriter` with the delete schema of the key columns).
//!
//! - Schema: the equality columns only (Flink's upsert `eqDeleteRowSchema` =
//!   `TypeUtil.select(schema, equalityFieldIds)`), with the table's field ids; content
//!   `EqualityDeletes`, `equality_ids` = those field ids. Rows sorted by the key (ascending,
//!   nulls first) — Java keeps arrival order; a sorted file is as valid and compresses better.
//!   No sort order id (Java sets none for Flink's writers).
//! - Location: the partition's directory under the table's data location, named as the data
//!   files of the same write are (`<task>-<write id>-<n>-deletes.parquet`), recorded in the
//!   write's tracker before it is started, so a failed statement deletes it with the rest.
//! - Parquet settings: `write.delete.parquet.*`, else `write.parquet.*`, else Java's defaults
//!   (as for position deletes, [`super::position_deletes`]).
//! - Metrics as `MetricsConfig.forTable` gives them to an equality-delete writer: the table's
//!   metrics modes on the key columns (value, null and NaN counts, bounds truncated by mode),
//!   column sizes, split offsets.

use std::sync::Arc;

use arrow::array::RecordBatch;
use arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Struct, TableMetadata,
};
use parquet::arrow::AsyncArrowWriter;
use parquet::arrow::async_writer::ParquetObjectWriter;
use parquet::file::properties::WriterProperties;

use super::data_file_writer::WriteSettings;
use super::metrics::MetricsCollector;
use super::partition_path::partition_path;
use super::position_deletes::writer_properties;
use super::upsert::UpsertKeys;
use crate::error::{Error, Result};
use crate::io::TableIo;

/// How one write writes equality-delete files on its table's upsert key.
#[derive(Debug)]
pub struct EqualityDeleteSettings {
    keys: UpsertKeys,
    parquet: WriterProperties,
}

impl EqualityDeleteSettings {
    /// The settings for table `table` (its name, for errors) with `metadata`, deleting by `keys`.
    pub fn new(table: &str, metadata: &TableMetadata, keys: UpsertKeys) -> Result<Self> {
        Ok(Self {
            keys,
            parquet: writer_properties(table, metadata)?,
        })
    }

    /// The key the files delete by.
    pub fn keys(&self) -> &UpsertKeys {
        &self.keys
    }
}

/// Writes the keys of `rows` (rows of partition `partition`, in the table's Arrow schema; each
/// key once) as one equality-delete file of that partition for writer task `task` (file number
/// `count` of the task), and describes it.
pub async fn write_equality_deletes(
    settings: &WriteSettings,
    deletes: &EqualityDeleteSettings,
    io: &TableIo,
    partition: &Struct,
    rows: &RecordBatch,
    task: usize,
    count: usize,
) -> Result<DataFile> {
    let keys = deletes.keys.project(rows)?;
    let sort: Vec<SortColumn> = keys
        .columns()
        .iter()
        .map(|c| SortColumn {
            values: Arc::clone(c),
            options: None,
        })
        .collect();
    let order = lexsort_to_indices(&sort, None)?;
    let keys = take_record_batch(&keys, &order)?;

    let relative = partition_path(settings.spec(), settings.schema(), partition)?;
    let directory = if relative.is_empty() {
        settings.data_location().to_string()
    } else {
        format!("{}/{relative}", settings.data_location())
    };
    let location = format!(
        "{directory}/{task:05}-{}-{count:05}-deletes.parquet",
        settings.write_id()
    );
    let table = settings.table_name();
    let write_error = |message: String| Error::WriteFailed {
        table: table.to_string(),
        path: location.clone(),
        message,
    };
    let mut metrics = MetricsCollector::new(
        settings.schema(),
        deletes.keys.delete_schema(),
        settings.metrics(),
    )?;
    metrics.update(&keys)?;
    let metrics = metrics.finish();

    settings.tracker().record_started(location.clone());
    let (store, _, object) = io.resolve(&location)?;
    let mut writer = AsyncArrowWriter::try_new(
        ParquetObjectWriter::new(store, object),
        Arc::clone(deletes.keys.delete_schema()),
        Some(deletes.parquet.clone()),
    )
    .map_err(|e| write_error(e.to_string()))?;
    if let Err(e) = writer.write(&keys).await {
        let _ = writer.into_inner().into_inner().abort().await;
        return Err(write_error(e.to_string()));
    }
    let footer = writer
        .finish()
        .await
        .map_err(|e| write_error(e.to_string()))?;
    let size = writer.bytes_written() as u64;
    let split_offsets: Vec<i64> = footer
        .row_groups()
        .iter()
        .filter_map(|g| g.file_offset())
        .collect();
    let mut column_sizes = std::collections::HashMap::new();
    for group in footer.row_groups() {
        for column in group.columns() {
            let info = column.column_descr().self_type().get_basic_info();
            if info.has_id() {
                *column_sizes.entry(info.id()).or_insert(0u64) +=
                    column.compressed_size().max(0) as u64;
            }
        }
    }
    DataFileBuilder::default()
        .content(DataContentType::EqualityDeletes)
        .file_path(location.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(partition.clone())
        .partition_spec_id(settings.spec().spec_id())
        .record_count(keys.num_rows() as u64)
        .file_size_in_bytes(size)
        .column_sizes(column_sizes)
        .value_counts(metrics.value_counts)
        .null_value_counts(metrics.null_value_counts)
        .nan_value_counts(metrics.nan_value_counts)
        .lower_bounds(metrics.lower_bounds)
        .upper_bounds(metrics.upper_bounds)
        .split_offsets(Some(split_offsets))
        .equality_ids(Some(deletes.keys.field_ids().to_vec()))
        .build()
        .map_err(|e| write_error(e.to_string()))
}
