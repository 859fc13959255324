//! Reading position delete files (into sorted positions per data file) and deletion vectors
//! (into row-position bitmaps); `position_filter` applies them.
//!
//! A position delete file may cover many data files (Spark's partition-granularity deletes);
//! it is read once (then cached: `deletes::cache`) and split by `file_path`. A deletion vector
//! (v3) is one Puffin blob: only its byte range is read.

use std::collections::HashMap;
use std::io::Cursor;
use std::sync::Arc;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Field, Int32Type, Int64Type, Schema};
use bytes::Bytes;
use futures::TryStreamExt;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{ParquetObjectReader, ParquetRecordBatchStreamBuilder};
use parquet::file::metadata::ParquetMetaData;
use roaring::RoaringTreemap;

use crate::error::{Error, Result};
use crate::io::{TableIo, normalize_location};

/// Field id of `file_path` in position delete files.
const FILE_PATH_ID: &str = "2147483546";
/// Field id of `pos` in position delete files.
const POS_ID: &str = "2147483545";
/// Magic bytes of a `deletion-vector-v1` blob.
const DV_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];

/// Reads a position delete file: deleted positions (sorted, distinct) by (normalised) data
/// file path, and the bytes of column chunks fetched. Only the `file_path` and `pos` column
/// chunks are fetched (never the optional `row` payload).
pub(crate) async fn read_position_delete_file(
    io: &TableIo,
    table: &str,
    path: &str,
    file_size: u64,
) -> Result<(HashMap<String, Arc<[u64]>>, u64)> {
    let corrupt =
        |e: &dyn std::fmt::Display| Error::corrupt(table, "position delete file", path, e);
    let (store, _, object) = io.resolve(path)?;
    let mut reader = ParquetObjectReader::new(store, object).with_file_size(file_size);
    let loaded = ArrowReaderMetadata::load_async(&mut reader, ArrowReaderOptions::new())
        .await
        .map_err(|e| corrupt(&e))?;
    let schema = Arc::clone(loaded.schema());
    let find = |id: &str, name: &str| {
        schema.fields().iter().position(|f| {
            f.metadata()
                .get(crate::spec::FIELD_ID_KEY)
                .map(String::as_str)
                == Some(id)
                || f.name() == name
        })
    };
    let (Some(path_col), Some(pos_col)) = (find(FILE_PATH_ID, "file_path"), find(POS_ID, "pos"))
    else {
        return Err(corrupt(&"no file_path / pos columns"));
    };
    // Read file_path as a dictionary: runs of one data file are then runs of one integer key,
    // and the (long, repeated) path strings are decoded once, not once per deleted row.
    let hinted_fields: Vec<Field> = schema
        .fields()
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let field = f.as_ref().clone();
            if i == path_col && matches!(f.data_type(), DataType::Utf8 | DataType::LargeUtf8) {
                field.with_data_type(DataType::Dictionary(
                    Box::new(DataType::Int32),
                    Box::new(DataType::Utf8),
                ))
            } else {
                field
            }
        })
        .collect();
    let hint = Arc::new(Schema::new_with_metadata(
        hinted_fields,
        schema.metadata().clone(),
    ));
    let metadata = ArrowReaderMetadata::try_new(
        Arc::clone(loaded.metadata()),
        ArrowReaderOptions::new().with_schema(hint),
    )
    .unwrap_or(loaded);
    let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, metadata);
    let (path_out, pos_out) = if path_col < pos_col { (0, 1) } else { (1, 0) };
    let mask = ProjectionMask::roots(builder.parquet_schema(), [path_col, pos_col]);
    let fetched = projected_bytes(builder.metadata(), &[path_col, pos_col]);
    let mut stream = builder
        .with_projection(mask)
        .build()
        .map_err(|e| corrupt(&e))?;
    let mut out: HashMap<String, Vec<u64>> = HashMap::new();
    while let Some(batch) = stream.try_next().await.map_err(|e| corrupt(&e))? {
        let positions = batch.column(pos_out);
        if positions.data_type() != &DataType::Int64 {
            return Err(corrupt(&format!(
                "pos column has type {}, expected long",
                positions.data_type()
            )));
        }
        let positions = positions.as_primitive::<Int64Type>();
        let paths = batch.column(path_out);
        if paths.null_count() > 0 || positions.null_count() > 0 {
            return Err(corrupt(&"null file_path or pos"));
        }
        let values = positions.values();
        if let Some(negative) = values.iter().find(|p| **p < 0) {
            return Err(corrupt(&format!("negative position {negative}")));
        }
        let mut insert = |data_file: &str, run: &[i64]| {
            out.entry(normalize_location(data_file))
                .or_default()
                .extend(run.iter().map(|p| *p as u64));
        };
        // Rows are sorted by file_path: insert each run of one file's positions at once.
        if let Some(dict) = paths.as_dictionary_opt::<Int32Type>() {
            let keys = dict.keys().values();
            let names = dict
                .values()
                .as_string_opt::<i32>()
                .ok_or_else(|| corrupt(&format!("file_path has type {}", paths.data_type())))?;
            let mut start = 0;
            while start < keys.len() {
                let key = keys[start];
                let end = (start..keys.len())
                    .find(|i| keys[*i] != key)
                    .unwrap_or(keys.len());
                insert(names.value(key as usize), &values[start..end]);
                start = end;
            }
        } else {
            let paths = arrow::compute::cast(paths, &DataType::Utf8).map_err(|e| corrupt(&e))?;
            let paths = paths.as_string::<i32>();
            let mut start = 0;
            while start < paths.len() {
                let current = paths.value(start);
                let end = (start..paths.len())
                    .find(|i| paths.value(*i) != current)
                    .unwrap_or(paths.len());
                insert(current, &values[start..end]);
                start = end;
            }
        }
    }
    // The spec has writers sort by (file_path, pos); do not rely on it.
    let out = out
        .into_iter()
        .map(|(path, mut positions)| {
            if !positions.is_sorted() {
                positions.sort_unstable();
            }
            positions.dedup();
            (path, Arc::from(positions))
        })
        .collect();
    Ok((out, fetched))
}

/// Compressed bytes of the column chunks under the given root columns.
pub(crate) fn projected_bytes(metadata: &ParquetMetaData, roots: &[usize]) -> u64 {
    let schema = metadata.file_metadata().schema_descr();
    let leaves: Vec<usize> = (0..schema.num_columns())
        .filter(|leaf| roots.contains(&schema.get_column_root_idx(*leaf)))
        .collect();
    metadata
        .row_groups()
        .iter()
        .flat_map(|rg| {
            leaves
                .iter()
                .map(move |leaf| rg.column(*leaf).compressed_size())
        })
        .map(|size| size.max(0) as u64)
        .sum()
}

/// Reads one deletion vector blob (`offset..offset+length` of a Puffin file).
pub(crate) async fn read_deletion_vector(
    io: &TableIo,
    table: &str,
    path: &str,
    offset: u64,
    length: u64,
) -> Result<RoaringTreemap> {
    let corrupt = |e: &dyn std::fmt::Display| Error::corrupt(table, "deletion vector", path, e);
    let blob: Bytes = io
        .read_range(path, offset..offset + length)
        .await
        .map_err(|e| corrupt(&e))?;
    parse_deletion_vector(&blob).map_err(|e| corrupt(&e))
}

/// Parses a `deletion-vector-v1` blob: length (4 bytes BE), magic, a portable 64-bit roaring
/// bitmap, CRC-32 (4 bytes BE) of magic + bitmap.
pub(crate) fn parse_deletion_vector(blob: &[u8]) -> std::result::Result<RoaringTreemap, String> {
    if blob.len() < 12 {
        return Err(format!("blob of {} bytes is too short", blob.len()));
    }
    let declared = u32::from_be_bytes([blob[0], blob[1], blob[2], blob[3]]) as usize;
    if declared + 8 != blob.len() {
        return Err(format!(
            "declared length {declared} does not match blob of {} bytes",
            blob.len()
        ));
    }
    if blob[4..8] != DV_MAGIC {
        return Err("bad deletion-vector magic".to_string());
    }
    let body = &blob[4..4 + declared];
    let crc = u32::from_be_bytes([
        blob[4 + declared],
        blob[5 + declared],
        blob[6 + declared],
        blob[7 + declared],
    ]);
    let mut hasher = flate2::Crc::new();
    hasher.update(body);
    if hasher.sum() != crc {
        return Err("deletion-vector checksum mismatch".to_string());
    }
    RoaringTreemap::deserialize_from(Cursor::new(&body[4..]))
        .map_err(|e| format!("bad bitmap: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deletion_vector_round_trip() {
        let bitmap: RoaringTreemap = [3u64, 7, 1 << 33].into_iter().collect();
        let mut body = DV_MAGIC.to_vec();
        bitmap.serialize_into(&mut body).unwrap();
        let mut crc = flate2::Crc::new();
        crc.update(&body);
        let mut blob = (body.len() as u32).to_be_bytes().to_vec();
        blob.extend_from_slice(&body);
        blob.extend_from_slice(&crc.sum().to_be_bytes());
        assert_eq!(parse_deletion_vector(&blob).unwrap(), bitmap);
        blob[9] ^= 0xff;
        assert!(parse_deletion_vector(&blob).is_err());
    }
}
