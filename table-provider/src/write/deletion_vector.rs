//! Writing deletion vectors (format 3): one Puffin file holding one `deletion-vector-v1` blob
//! per data file, as Iceberg Java's `BaseDVFileWriter` writes them for Spark's merge-on-read
//! DELETE.
//!
//! - A blob (the spec's "deletion-vector-v1"): the length of magic + bitmap (4 bytes,
//!   big-endian), the magic `D1 D3 39 64`, the deleted positions as a 64-bit Roaring bitmap in
//!   the portable format (8-byte little-endian count of 32-bit bitmaps, then per bitmap its
//!   4-byte little-endian key and the standard portable 32-bit Roaring bitmap, run containers
//!   where they are smaller, as Java's `runLengthEncode` leaves them), and the CRC-32 of magic +
//!   bitmap (4 bytes, big-endian). The `roaring` crate's `RoaringTreemap` serialises exactly
//!   that 64-bit layout (keys ascending, no empty bitmaps).
//! - Blob metadata as Java writes it: type `deletion-vector-v1`, fields `[2147483645]` (the
//!   `_pos` metadata column), `snapshot-id` and `sequence-number` -1 (inherited from the
//!   manifest entry), uncompressed, properties `referenced-data-file` and `cardinality`. The
//!   footer (uncompressed JSON) has a `created-by` property.
//! - Location: the table's data location (`write.data.path`, default `<location>/data`),
//!   not a partition directory, since one file may hold vectors of several partitions; named as
//!   Java names delete files (`00000-0-<uuid>-00001-deletes.puffin`).
//! - Each vector becomes a delete file of its data file's partition: content position deletes,
//!   format Puffin, record count = cardinality, `referenced_data_file`, `content_offset` and
//!   `content_size_in_bytes` of its blob (exactly the footer's offset and length), the size of
//!   the whole Puffin file, no column metrics.
//!
//! The Puffin file is assembled in memory by the `iceberg` crate's `PuffinWriter` (deletion
//! vectors are small: about 2 bytes per deleted row at worst, far less for runs), its footer
//! read back with the crate's `PuffinReader` for the blobs' offsets, and stored through
//! Petrel's IO.

use std::collections::{HashMap, HashSet};

use iceberg::puffin::{
    Blob, CREATED_BY_PROPERTY, CompressionCodec, DELETION_VECTOR_V1, PuffinReader, PuffinWriter,
};
use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat, Struct};
use roaring::RoaringTreemap;
use uuid::Uuid;

use super::position_deletes::data_location;
use crate::catalog::LoadedTable;
use crate::commit::DeleteFile;
use crate::commit::avro_out::MemoryOutput;
use crate::error::{Error, Result};

/// Magic bytes that start a `deletion-vector-v1` blob (after its length).
pub const DELETION_VECTOR_MAGIC: [u8; 4] = [0xD1, 0xD3, 0x39, 0x64];
/// Field id of the `_pos` metadata column, the field a deletion-vector blob is computed for.
pub const ROW_POSITION_FIELD_ID: i32 = 2147483645;
/// Blob property naming the data file a deletion vector applies to.
pub const REFERENCED_DATA_FILE_PROPERTY: &str = "referenced-data-file";
/// Blob property holding a deletion vector's number of deleted positions.
pub const CARDINALITY_PROPERTY: &str = "cardinality";

/// One data file's deletion vector to write: the data file's location exactly as the manifests
/// record it, its partition spec id and partition tuple, and the deleted positions.
pub type DeletionVectorInput = (String, i32, Struct, RoaringTreemap);

/// Serialises `positions` as a `deletion-vector-v1` blob (length, magic, portable 64-bit Roaring
/// bitmap, CRC-32).
pub fn serialize_deletion_vector(positions: &RoaringTreemap) -> Result<Vec<u8>> {
    let mut bitmap = positions.clone();
    bitmap.optimize();
    let mut body = Vec::with_capacity(4 + bitmap.serialized_size());
    body.extend_from_slice(&DELETION_VECTOR_MAGIC);
    bitmap
        .serialize_into(&mut body)
        .map_err(|e| Error::InvalidArgument(format!("serialising a deletion vector: {e}")))?;
    let length = u32::try_from(body.len()).map_err(|_| {
        Error::InvalidArgument(format!(
            "a deletion vector of {} bytes is larger than a blob can be",
            body.len()
        ))
    })?;
    let mut crc = flate2::Crc::new();
    crc.update(&body);
    let mut blob = Vec::with_capacity(body.len() + 8);
    blob.extend_from_slice(&length.to_be_bytes());
    blob.extend_from_slice(&body);
    blob.extend_from_slice(&crc.sum().to_be_bytes());
    Ok(blob)
}

/// Writes `vectors` (one per data file, each non-empty) of `table` as deletion vectors in one
/// Puffin file and returns one delete file per vector, in the order given.
pub async fn write_deletion_vectors(
    table: &LoadedTable,
    vectors: &[DeletionVectorInput],
) -> Result<Vec<DeleteFile>> {
    let name = table.ident().to_string();
    let metadata = table.metadata();
    let invalid = |message: String| Error::InvalidArgument(format!("table {name}: {message}"));
    if vectors.is_empty() {
        return Err(invalid("no deletion vectors to write".into()));
    }
    let mut seen = HashSet::new();
    for (path, spec_id, _, positions) in vectors {
        if !seen.insert(path.as_str()) {
            return Err(invalid(format!(
                "two deletion vectors for data file {path}"
            )));
        }
        if positions.is_empty() {
            return Err(invalid(format!(
                "empty deletion vector for data file {path}"
            )));
        }
        if positions.max().is_some_and(|p| p > i64::MAX as u64) {
            return Err(invalid(format!("position out of range in {path}")));
        }
        if metadata.partition_spec_by_id(*spec_id).is_none() {
            return Err(invalid(format!(
                "data file {path}: no partition spec {spec_id}"
            )));
        }
    }

    let location = format!(
        "{}/00000-0-{}-00001-deletes.puffin",
        data_location(metadata),
        Uuid::new_v4()
    );
    let write_error = |e: &dyn std::fmt::Display| Error::WriteFailed {
        table: name.clone(),
        path: location.clone(),
        message: e.to_string(),
    };
    let output = MemoryOutput::new(location.clone());
    let output_file = output.output_file();
    let properties = HashMap::from([(
        CREATED_BY_PROPERTY.to_string(),
        format!("petrel {}", env!("CARGO_PKG_VERSION")),
    )]);
    let mut writer = PuffinWriter::new(&output_file, properties, false)
        .await
        .map_err(|e| write_error(&e))?;
    for (path, _, _, positions) in vectors {
        let blob = Blob::builder()
            .r#type(DELETION_VECTOR_V1.to_string())
            .fields(vec![ROW_POSITION_FIELD_ID])
            .snapshot_id(-1)
            .sequence_number(-1)
            .data(serialize_deletion_vector(positions)?)
            .properties(HashMap::from([
                (REFERENCED_DATA_FILE_PROPERTY.to_string(), path.clone()),
                (
                    CARDINALITY_PROPERTY.to_string(),
                    positions.len().to_string(),
                ),
            ]))
            .build();
        writer
            .add(blob, CompressionCodec::None)
            .await
            .map_err(|e| write_error(&e))?;
    }
    writer.close().await.map_err(|e| write_error(&e))?;
    let reader = PuffinReader::new(output_file.to_input_file());
    let footer = reader.file_metadata().await.map_err(|e| write_error(&e))?;
    let blobs = footer.blobs();
    if blobs.len() != vectors.len() {
        return Err(write_error(&format!(
            "{} blobs written for {} deletion vectors",
            blobs.len(),
            vectors.len()
        )));
    }
    let bytes = output.bytes().await?;
    let size = bytes.len() as u64;

    let mut files = Vec::with_capacity(vectors.len());
    for ((path, spec_id, partition, positions), blob) in vectors.iter().zip(blobs) {
        let file = DataFileBuilder::default()
            .content(DataContentType::PositionDeletes)
            .file_path(location.clone())
            .file_format(DataFileFormat::Puffin)
            .partition(partition.clone())
            .partition_spec_id(*spec_id)
            .record_count(positions.len())
            .file_size_in_bytes(size)
            .referenced_data_file(Some(path.clone()))
            .content_offset(Some(blob.offset() as i64))
            .content_size_in_bytes(Some(blob.length() as i64))
            .build()
            .map_err(|e| write_error(&e))?;
        files.push(DeleteFile {
            spec_id: *spec_id,
            file,
        });
    }
    table.io().create(&location, bytes).await?;
    Ok(files)
}
