//! The planning benchmark's table (`benches/planning.rs`), for the benchmarks that need a large
//! table's metadata: a format-v2 table `db.t` (`key long, part int, payload string`,
//! `identity(part)`) with one snapshot of 10,000 data files in 100 manifests, one manifest per
//! `part` value (0..99), 100 files per manifest; file `i` holds 1,000 rows with `key` bounds
//! `[i·1000, i·1000+999]`. Written with the `iceberg` crate's own writers into a filesystem
//! warehouse; the data files do not exist (only metadata is read until something is appended).

#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::io::FileIO;
use iceberg::spec::{
    DataContentType, DataFileBuilder, DataFileFormat, Datum, Literal, ManifestListWriter,
    ManifestWriterBuilder, Struct, TableMetadata,
};

pub(crate) const MANIFESTS: i64 = 100;
pub(crate) const FILES_PER_MANIFEST: i64 = 100;
pub(crate) const FILES: i64 = MANIFESTS * FILES_PER_MANIFEST;
/// Rows per file; file `i` holds keys `[i * ROWS, (i + 1) * ROWS - 1]`.
pub(crate) const ROWS: i64 = 1_000;
pub(crate) const SNAPSHOT_ID: i64 = 3_051_729_675_574_597_004;
const KEY_FIELD: i32 = 1;
const PART_FIELD: i32 = 2;

fn table_metadata_json(location: &str, manifest_list: &str) -> serde_json::Value {
    serde_json::json!({
        "format-version": 2,
        "table-uuid": "9c12d441-03fe-4693-9a96-a0705ddf69c1",
        "location": location,
        "last-sequence-number": 1,
        "last-updated-ms": 1_700_000_000_000_i64,
        "last-column-id": 3,
        "current-schema-id": 0,
        "schemas": [{
            "type": "struct",
            "schema-id": 0,
            "fields": [
                {"id": KEY_FIELD, "name": "key", "required": true, "type": "long"},
                {"id": PART_FIELD, "name": "part", "required": true, "type": "int"},
                {"id": 3, "name": "payload", "required": false, "type": "string"}
            ]
        }],
        "default-spec-id": 0,
        "partition-specs": [{
            "spec-id": 0,
            "fields": [{"name": "part", "transform": "identity", "source-id": PART_FIELD, "field-id": 1000}]
        }],
        "last-partition-id": 1000,
        "default-sort-order-id": 0,
        "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": {},
        "current-snapshot-id": SNAPSHOT_ID,
        "snapshots": [{
            "snapshot-id": SNAPSHOT_ID,
            "sequence-number": 1,
            "timestamp-ms": 1_700_000_000_000_i64,
            "manifest-list": manifest_list,
            "summary": {"operation": "append"},
            "schema-id": 0
        }],
        "snapshot-log": [{"snapshot-id": SNAPSHOT_ID, "timestamp-ms": 1_700_000_000_000_i64}],
        "metadata-log": [],
        "refs": {"main": {"snapshot-id": SNAPSHOT_ID, "type": "branch"}}
    })
}

/// The table as written.
pub(crate) struct Written {
    /// Its metadata (`v1.metadata.json`).
    pub(crate) metadata: TableMetadata,
    /// Where that metadata file is.
    pub(crate) metadata_location: String,
}

/// Writes table `db.t` into the warehouse directory `warehouse` (see the module docs).
pub(crate) async fn write_table(warehouse: &str) -> Written {
    let location = format!("file://{warehouse}/db/t");
    let metadata_dir = format!("{location}/metadata");
    let manifest_list_path = format!("{metadata_dir}/snap-{SNAPSHOT_ID}-1-list.avro");
    let metadata_location = format!("{metadata_dir}/v1.metadata.json");

    let json = table_metadata_json(&location, &manifest_list_path);
    let metadata: TableMetadata =
        serde_json::from_value(json.clone()).expect("valid table metadata");
    let schema = Arc::clone(metadata.current_schema());
    let spec = metadata.default_partition_spec().as_ref().clone();
    let file_io = FileIO::new_with_fs();

    let mut manifests = Vec::with_capacity(MANIFESTS as usize);
    for m in 0..MANIFESTS {
        let part = i32::try_from(m).expect("small");
        let output = file_io
            .new_output(format!("{metadata_dir}/manifest-{m:03}.avro"))
            .expect("manifest output");
        let mut writer = ManifestWriterBuilder::new(
            output,
            Some(SNAPSHOT_ID),
            Arc::clone(&schema),
            spec.clone(),
        )
        .build_v2_data();
        for f in 0..FILES_PER_MANIFEST {
            let i = m * FILES_PER_MANIFEST + f;
            let data_file = DataFileBuilder::default()
                .content(DataContentType::Data)
                .file_path(format!("{location}/data/part={part}/{i:05}.parquet"))
                .file_format(DataFileFormat::Parquet)
                .partition(Struct::from_iter([Some(Literal::int(part))]))
                .partition_spec_id(0)
                .record_count(ROWS as u64)
                .file_size_in_bytes(8 * 1024 * 1024)
                .value_counts(HashMap::from([(KEY_FIELD, ROWS as u64)]))
                .null_value_counts(HashMap::from([(KEY_FIELD, 0)]))
                .lower_bounds(HashMap::from([
                    (KEY_FIELD, Datum::long(i * ROWS)),
                    (PART_FIELD, Datum::int(part)),
                ]))
                .upper_bounds(HashMap::from([
                    (KEY_FIELD, Datum::long((i + 1) * ROWS - 1)),
                    (PART_FIELD, Datum::int(part)),
                ]))
                .build()
                .expect("data file");
            writer.add_file(data_file, 1).expect("add file");
        }
        manifests.push(writer.write_manifest_file().await.expect("write manifest"));
    }

    let list_writer = file_io
        .new_output(&manifest_list_path)
        .expect("manifest list output")
        .writer()
        .await
        .expect("manifest list writer");
    let mut list = ManifestListWriter::v2(list_writer, SNAPSHOT_ID, None, 1);
    list.add_manifests(manifests.into_iter())
        .expect("add manifests");
    list.close().await.expect("close manifest list");

    file_io
        .new_output(&metadata_location)
        .expect("metadata output")
        .write(serde_json::to_vec_pretty(&json).expect("json").into())
        .await
        .expect("write metadata");
    file_io
        .new_output(format!("{metadata_dir}/version-hint.text"))
        .expect("hint output")
        .write("1".into())
        .await
        .expect("write hint");
    Written {
        metadata,
        metadata_location,
    }
}
