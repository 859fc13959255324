//! Writing position-delete files (format 2): one Parquet file of `(file_path, pos)` rows, as
//! Iceberg Java's `PositionDeleteWriter` writes them for Spark's merge-on-read DELETE.
//!
//! - Schema (the spec's): `file_path` string, field id 2147483546, required; `pos` long, field id
//!   2147483545, required; no `row` column. Rows sorted by `(file_path, pos)`.
//! - Location: the partition's directory under the table's data location (`write.data.path`,
//!   default `<location>/data`), named as Java's `OutputFileFactory` names delete files
//!   (`00000-0-<uuid>-00001-deletes.parquet`).
//! - Parquet settings: `write.delete.parquet.compression-codec` / `-level`,
//!   `write.delete.parquet.row-group-size-bytes` and `write.delete.parquet.page-size-bytes`,
//!   each falling back to the data-file property (`write.parquet.*`) and then to Java's default
//!   (zstd, 128 MiB, 1 MiB).
//! - Metrics as Java 1.10 keeps them for position deletes (`MetricsConfig.forPositionDelete`,
//!   then `PositionDeleteWriter.metrics()`): column sizes; no value, null or NaN counts for
//!   `file_path` and `pos`; full (untruncated) lower and upper bounds of both when the file names
//!   one data file, no bounds when it names several. `referenced_data_file` is set when the file
//!   names exactly one data file (a file-scoped delete file, what Petrel writes per data file).

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use iceberg::spec::{
    DataContentType, DataFile, DataFileBuilder, DataFileFormat, Datum, Struct, TableMetadata,
};
use parquet::arrow::AsyncArrowWriter;
use parquet::arrow::async_writer::ParquetObjectWriter;
use parquet::file::properties::WriterProperties;
use uuid::Uuid;

use super::data_file_writer::compression;
use super::partition_path::partition_path;
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::spec::FIELD_ID_KEY;

/// Field id of `file_path` in position-delete files (the spec's reserved id).
pub const DELETE_FILE_PATH_FIELD_ID: i32 = 2147483546;
/// Field id of `pos` in position-delete files (the spec's reserved id).
pub const DELETE_FILE_POS_FIELD_ID: i32 = 2147483545;

/// Rows per Arrow batch handed to the Parquet writer.
const BATCH_ROWS: usize = 16 * 1024;
/// Java's default row-group size.
const DEFAULT_ROW_GROUP_BYTES: u64 = 128 * 1024 * 1024;
/// Java's default page size.
const DEFAULT_PAGE_BYTES: u64 = 1024 * 1024;

/// The Arrow schema of a position-delete file: `file_path`, `pos`, both required, with the
/// spec's field ids.
pub fn position_delete_schema() -> SchemaRef {
    let field = |name: &str, data_type: DataType, id: i32| {
        Field::new(name, data_type, false)
            .with_metadata(HashMap::from([(FIELD_ID_KEY.to_string(), id.to_string())]))
    };
    Arc::new(Schema::new(vec![
        field("file_path", DataType::Utf8, DELETE_FILE_PATH_FIELD_ID),
        field("pos", DataType::Int64, DELETE_FILE_POS_FIELD_ID),
    ]))
}

/// Where a table's data files (and delete files) go: `write.data.path`, else `<location>/data`,
/// without a trailing slash.
pub(crate) fn data_location(metadata: &TableMetadata) -> String {
    metadata
        .properties()
        .get("write.data.path")
        .cloned()
        .unwrap_or_else(|| format!("{}/data", metadata.location()))
        .trim_end_matches('/')
        .to_string()
}

/// Writes one position-delete file of `table` in partition `partition` of spec `spec_id` (the
/// spec and partition of the data files it deletes from) and returns it as a delete file of
/// that partition (the caller adds it with `spec_id`, see [`crate::commit::DeleteFile`]).
///
/// `deletes` holds, per data file (its location exactly as the manifests record it), the
/// positions of the rows deleted, ascending; each data file once, each with at least one
/// position. The rows are written sorted by `(file_path, pos)` whatever the order of `deletes`.
pub async fn write_position_deletes(
    table: &LoadedTable,
    spec_id: i32,
    partition: &Struct,
    deletes: &[(&str, &[u64])],
) -> Result<DataFile> {
    let name = table.ident().to_string();
    let metadata = table.metadata();
    let invalid = |message: String| Error::InvalidArgument(format!("table {name}: {message}"));
    let spec = metadata
        .partition_spec_by_id(spec_id)
        .ok_or_else(|| invalid(format!("no partition spec {spec_id}")))?;
    let mut sorted: Vec<(&str, &[u64])> = deletes.to_vec();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    if sorted.is_empty() {
        return Err(invalid("no position deletes to write".into()));
    }
    for pair in sorted.windows(2) {
        if pair[0].0 == pair[1].0 {
            return Err(invalid(format!(
                "data file {} is named twice in one position-delete file",
                pair[0].0
            )));
        }
    }
    for (path, positions) in &sorted {
        if positions.is_empty() {
            return Err(invalid(format!("no positions to delete in {path}")));
        }
        if !positions.windows(2).all(|w| w[0] < w[1]) {
            return Err(invalid(format!(
                "positions to delete in {path} are not ascending and distinct"
            )));
        }
        if positions.last().is_some_and(|p| *p > i64::MAX as u64) {
            return Err(invalid(format!("position out of range in {path}")));
        }
    }

    let relative = partition_path(spec, metadata.current_schema(), partition)?;
    let base = data_location(metadata);
    let directory = if relative.is_empty() {
        base
    } else {
        format!("{base}/{relative}")
    };
    let location = format!(
        "{directory}/00000-0-{}-00001-deletes.parquet",
        Uuid::new_v4()
    );
    let properties = writer_properties(&name, metadata)?;
    let write_error = |message: String| Error::WriteFailed {
        table: name.clone(),
        path: location.clone(),
        message,
    };

    let (store, _, object) = table.io().resolve(&location)?;
    let schema = position_delete_schema();
    let mut writer = AsyncArrowWriter::try_new(
        ParquetObjectWriter::new(Arc::clone(&store), object.clone()),
        Arc::clone(&schema),
        Some(properties),
    )
    .map_err(|e| write_error(e.to_string()))?;
    let written = async {
        for (path, positions) in &sorted {
            for chunk in positions.chunks(BATCH_ROWS) {
                let paths: ArrayRef = Arc::new(StringArray::from_iter_values(std::iter::repeat_n(
                    *path,
                    chunk.len(),
                )));
                let pos: ArrayRef = Arc::new(Int64Array::from_iter_values(
                    chunk.iter().map(|p| *p as i64),
                ));
                let batch = RecordBatch::try_new(Arc::clone(&schema), vec![paths, pos])?;
                writer.write(&batch).await?;
            }
        }
        writer.finish().await
    }
    .await;
    let footer = match written {
        Ok(footer) => footer,
        Err(e) => {
            // Nothing references the file yet: remove what was written.
            let _ = table.io().delete(&location).await;
            return Err(write_error(e.to_string()));
        }
    };
    let size = writer.bytes_written() as u64;
    let records: u64 = sorted.iter().map(|(_, p)| p.len() as u64).sum();

    let mut column_sizes: HashMap<i32, u64> = HashMap::new();
    for group in footer.row_groups() {
        for column in group.columns() {
            let info = column.column_descr().self_type().get_basic_info();
            if info.has_id() {
                *column_sizes.entry(info.id()).or_insert(0) +=
                    column.compressed_size().max(0) as u64;
            }
        }
    }
    let split_offsets: Vec<i64> = footer
        .row_groups()
        .iter()
        .filter_map(|g| g.file_offset())
        .collect();
    let (mut lower, mut upper) = (HashMap::new(), HashMap::new());
    let mut referenced = None;
    if let [(path, positions)] = sorted.as_slice() {
        lower.insert(DELETE_FILE_PATH_FIELD_ID, Datum::string(*path));
        upper.insert(DELETE_FILE_PATH_FIELD_ID, Datum::string(*path));
        if let (Some(first), Some(last)) = (positions.first(), positions.last()) {
            lower.insert(DELETE_FILE_POS_FIELD_ID, Datum::long(*first as i64));
            upper.insert(DELETE_FILE_POS_FIELD_ID, Datum::long(*last as i64));
        }
        referenced = Some(path.to_string());
    }
    DataFileBuilder::default()
        .content(DataContentType::PositionDeletes)
        .file_path(location.clone())
        .file_format(DataFileFormat::Parquet)
        .partition(partition.clone())
        .partition_spec_id(spec_id)
        .record_count(records)
        .file_size_in_bytes(size)
        .column_sizes(column_sizes)
        .lower_bounds(lower)
        .upper_bounds(upper)
        .split_offsets(Some(split_offsets))
        .referenced_data_file(referenced)
        .build()
        .map_err(|e| write_error(e.to_string()))
}

/// The Parquet settings of a table's delete files: `write.delete.parquet.*`, else
/// `write.parquet.*`, else Java's defaults.
pub(crate) fn writer_properties(table: &str, metadata: &TableMetadata) -> Result<WriterProperties> {
    let props = metadata.properties();
    let get = |key: &'static str| -> Option<(&'static str, &str)> {
        props
            .get(&format!("write.delete.parquet.{key}"))
            .or_else(|| props.get(&format!("write.parquet.{key}")))
            .map(|v| (key, v.trim()))
    };
    let invalid = |key: &str, value: &str| {
        Error::InvalidArgument(format!(
            "table {table}: property write[.delete].parquet.{key}={value:?} is invalid"
        ))
    };
    let number = |key: &'static str, default: u64| -> Result<u64> {
        get(key)
            .map(|(key, v)| v.parse::<u64>().map_err(|_| invalid(key, v)))
            .transpose()
            .map(|v| v.unwrap_or(default).max(1))
    };
    let row_group_bytes = number("row-group-size-bytes", DEFAULT_ROW_GROUP_BYTES)?;
    let page_bytes = number("page-size-bytes", DEFAULT_PAGE_BYTES)?;
    let codec = get("compression-codec").map_or("zstd", |(_, v)| v);
    let level = get("compression-level")
        .map(|(key, v)| v.parse::<i32>().map_err(|_| invalid(key, v)))
        .transpose()?;
    let compression =
        compression(codec, level).ok_or_else(|| invalid("compression-codec", codec))?;
    Ok(WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_bytes(Some(row_group_bytes as usize))
        .set_data_page_size_limit(page_bytes as usize)
        .set_created_by(format!("petrel {}", env!("CARGO_PKG_VERSION")))
        .build())
}
