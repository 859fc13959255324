//! The delete-file writers (`write::position_deletes`, `write::deletion_vector`) and the row-delta
//! commit (`commit::SnapshotChange::added_deletes`): deletes written for real tables, committed,
//! then read by Petrel and by Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB against a model of
//! the rows; Spark's `delete_files` and `position_deletes` metadata tables against what was
//! written. And the bytes of a deletion-vector blob against the spec.

use crate::common;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use common::{duckdb_rows, query, read_back, rows_json, run_ddl, session, warehouse_with_db};
use datafusion::prelude::SessionContext;
use iceberg::spec::{
    DataContentType, DataFile, DataFileFormat, Datum, Manifest, ManifestList, ManifestStatus,
    Struct,
};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use petrel_table_provider::commit::{
    DeleteFile, FileKey, Removal, SnapshotChange, commit_snapshot,
};
use petrel_table_provider::write::deletion_vector::{
    DELETION_VECTOR_MAGIC, serialize_deletion_vector, write_deletion_vectors,
};
use petrel_table_provider::write::position_deletes::{
    DELETE_FILE_PATH_FIELD_ID, DELETE_FILE_POS_FIELD_ID, write_position_deletes,
};
use petrel_table_provider::{Catalog, LoadedTable, Namespace, TableIdent};
use roaring::RoaringTreemap;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------- DV bytes

/// `crc` of `bytes` (CRC-32, IEEE, as `java.util.zip.CRC32`), bit by bit: independent of the
/// writer's CRC implementation.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Checks the frame of a `deletion-vector-v1` blob (length, magic, CRC) and returns the bitmap
/// bytes inside it.
fn bitmap_of(blob: &[u8]) -> &[u8] {
    let length = u32::from_be_bytes(blob[0..4].try_into().expect("4 bytes")) as usize;
    assert_eq!(length, blob.len() - 8, "length counts magic + bitmap");
    assert_eq!(blob[4..8], DELETION_VECTOR_MAGIC, "magic");
    let crc = u32::from_be_bytes(blob[blob.len() - 4..].try_into().expect("4 bytes"));
    assert_eq!(
        crc,
        crc32(&blob[4..blob.len() - 4]),
        "CRC-32 of magic + bitmap"
    );
    &blob[8..blob.len() - 4]
}

#[test]
fn deletion_vector_blob_follows_the_spec() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926, "the CRC-32 check value");

    // {3, 5}: one 32-bit bitmap (key 0), one array container.
    let blob = serialize_deletion_vector(&RoaringTreemap::from_iter([3u64, 5])).expect("blob");
    let expected_bitmap: Vec<u8> = [
        &1u64.to_le_bytes()[..], // one 32-bit bitmap
        &0u32.to_le_bytes(),     // its key
        &12346u32.to_le_bytes(), // SERIAL_COOKIE_NO_RUNCONTAINER
        &1u32.to_le_bytes(),     // one container
        &[0, 0, 1, 0],           // container key 0, cardinality - 1 = 1
        &16u32.to_le_bytes(),    // offset of the container's data
        &[3, 0, 5, 0],           // the values, u16 LE
    ]
    .concat();
    assert_eq!(bitmap_of(&blob), expected_bitmap.as_slice());
    assert_eq!(blob.len(), 4 + 4 + expected_bitmap.len() + 4);
    assert_eq!(blob[0..4], [0, 0, 0, 0x24], "length 36, big-endian");

    // 0..=99 and 2^32 + 7: two 32-bit bitmaps (keys 0 and 1); the run is run-length encoded as
    // Java's runLengthEncode leaves it.
    let mut positions = RoaringTreemap::from_iter(0u64..100);
    positions.insert((1u64 << 32) + 7);
    let blob = serialize_deletion_vector(&positions).expect("blob");
    let expected_bitmap: Vec<u8> = [
        &2u64.to_le_bytes()[..],
        &0u32.to_le_bytes(),
        &(12347u32).to_le_bytes(), // SERIAL_COOKIE | (containers - 1) << 16
        &[0b1],                    // container 0 is a run container
        &[0, 0, 99, 0],            // key 0, cardinality - 1 = 99
        &1u16.to_le_bytes(),       // one run
        &[0, 0, 99, 0],            // start 0, length - 1 = 99
        &1u32.to_le_bytes(),
        &12346u32.to_le_bytes(),
        &1u32.to_le_bytes(),
        &[0, 0, 0, 0], // key 0, cardinality - 1 = 0
        &16u32.to_le_bytes(),
        &[7, 0],
    ]
    .concat();
    assert_eq!(bitmap_of(&blob), expected_bitmap.as_slice());
    // And it reads back.
    let read = RoaringTreemap::deserialize_from(bitmap_of(&blob)).expect("portable bitmap");
    assert_eq!(read, positions);
}

// ------------------------------------------------------------------------------- tables

fn region(id: i64) -> &'static str {
    ["a", "b", "c"][((id / 10) % 3) as usize]
}

/// The model's rows of live `ids`: `[id, region, amount]` as JSON texts, sorted.
fn model_rows(ids: &BTreeSet<i64>) -> Vec<String> {
    let mut rows: Vec<String> = ids
        .iter()
        .map(|id| json!([id, region(*id), id * 10]).to_string())
        .collect();
    rows.sort();
    rows
}

async fn petrel_rows(ctx: &SessionContext, table: &str) -> Vec<String> {
    let sql = format!("SELECT id, region, amount FROM iceberg.db.{table}");
    let batches = query(ctx, &sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    let mut rows: Vec<String> = rows_json(&batches, &[])
        .into_iter()
        .map(|r| Value::Array(r).to_string())
        .collect();
    rows.sort();
    rows
}

/// The live data files of the table's current snapshot, with their spec ids.
async fn live_data_files(table: &LoadedTable) -> Vec<(i32, DataFile)> {
    let metadata = table.metadata();
    let snapshot = metadata.current_snapshot().expect("a snapshot");
    let bytes = table
        .io()
        .read(snapshot.manifest_list())
        .await
        .expect("manifest list");
    let list =
        ManifestList::parse_with_version(&bytes, metadata.format_version()).expect("parse list");
    let mut out = Vec::new();
    for manifest_file in list.entries() {
        let bytes = table
            .io()
            .read(&manifest_file.manifest_path)
            .await
            .expect("manifest");
        let manifest = Manifest::parse_avro(&bytes).expect("parse manifest");
        let spec_id = manifest.metadata().partition_spec().spec_id();
        for entry in manifest.entries() {
            if entry.status() != ManifestStatus::Deleted
                && entry.data_file().content_type() == DataContentType::Data
            {
                out.push((spec_id, entry.data_file().clone()));
            }
        }
    }
    out.sort_by(|a, b| a.1.file_path().cmp(b.1.file_path()));
    out
}

fn local(path: &str) -> &str {
    path.trim_start_matches("file://")
        .trim_start_matches("file:")
}

/// The `id` of each row of a data file, by position.
fn ids_of(path: &str) -> Vec<i64> {
    let file = std::fs::File::open(local(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .expect("parquet")
        .build()
        .expect("reader");
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.expect("batch");
        let column = batch.column_by_name("id").expect("id column");
        ids.extend(column.as_primitive::<Int64Type>().values().iter().copied());
    }
    ids
}

/// A table of `version` partitioned by region, written by two INSERTs (ids 0..30 and 30..60):
/// two data files per region.
async fn create_table(ctx: &SessionContext, table: &str, version: u8) {
    run_ddl(
        ctx,
        &format!(
            "CREATE TABLE iceberg.db.{table} (id BIGINT, region STRING, amount BIGINT) \
             PARTITIONED BY (region) TBLPROPERTIES ('format-version'='{version}', \
             'write.delete.mode'='merge-on-read')"
        ),
    )
    .await;
    for range in [0..30, 30..60] {
        let values: Vec<String> = range
            .map(|id: i64| format!("({id}, '{}', {})", region(id), id * 10))
            .collect();
        let sql = format!(
            "INSERT INTO iceberg.db.{table} VALUES {}",
            values.join(", ")
        );
        query(ctx, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// For each live data file, the positions of the live rows `doomed` selects.
fn positions_to_delete(
    files: &[(i32, DataFile)],
    live: &BTreeSet<i64>,
    doomed: impl Fn(i64) -> bool,
) -> Vec<(i32, DataFile, Vec<u64>, Vec<i64>)> {
    let mut out = Vec::new();
    for (spec_id, file) in files {
        let ids = ids_of(file.file_path());
        let (positions, deleted): (Vec<u64>, Vec<i64>) = ids
            .iter()
            .enumerate()
            .filter(|(_, id)| live.contains(id) && doomed(**id))
            .map(|(pos, id)| (pos as u64, *id))
            .unzip();
        if !positions.is_empty() {
            out.push((*spec_id, file.clone(), positions, deleted));
        }
    }
    out
}

async fn load(catalog: &Arc<dyn Catalog>, table: &str) -> LoadedTable {
    catalog
        .load_table(&TableIdent::new(Namespace::new(vec!["db".into()]), table))
        .await
        .expect("load table")
}

/// Runs `tests/spark/delete_files.py` over `tables` of `warehouse`: Spark's `delete_files` and
/// `position_deletes` metadata tables.
fn spark_delete_files(warehouse: &std::path::Path, tables: &[&str]) -> Value {
    let mut args: Vec<std::ffi::OsString> = vec![warehouse.into()];
    args.extend(tables.iter().map(Into::into));
    common::spark_script("delete_files.py", &args)
}

/// A round of deletes: what it deletes, and which ids.
type Round = (&'static str, fn(i64) -> bool);

/// What the test wrote and expects, per round of deletes.
struct History {
    /// Live ids after each snapshot, oldest first.
    states: Vec<BTreeSet<i64>>,
    /// (data file, position) pairs deleted so far.
    deleted: BTreeSet<(String, u64)>,
}

/// Checks what Spark, PyIceberg and DuckDB read, and the snapshots' operations and summaries.
fn check_read_back(seen: &Value, history: &History, operations: &[&str]) {
    let live = history.states.last().expect("a state");
    let columns = ["id", "region", "amount"];
    assert_eq!(
        common::result_rows(&seen["spark"], &columns),
        model_rows(live),
        "Spark's rows"
    );
    assert_eq!(
        duckdb_rows(seen, &columns),
        model_rows(live),
        "DuckDB's rows"
    );
    let mut pyiceberg: Vec<String> = seen["pyiceberg"]
        .as_array()
        .expect("pyiceberg rows")
        .iter()
        .map(|r| {
            let r: Value = serde_json::from_str(r.as_str().expect("row text")).expect("row");
            json!([r["id"], r["region"], r["amount"]]).to_string()
        })
        .collect();
    pyiceberg.sort();
    assert_eq!(pyiceberg, model_rows(live), "PyIceberg's rows");
    // Data files' metrics still bound their rows. (read_back.py also reports bounds wider than
    // the rows left after deletes, and the delete files that Spark's `files` table lists beside
    // the data files: expected here.)
    let violations: Vec<&Value> = seen["metric_mismatches"]
        .as_array()
        .expect("metric_mismatches")
        .iter()
        .filter(|m| {
            let m = m.as_str().unwrap_or_default();
            m.contains("above min") || m.contains("below max") || m.contains("null count")
        })
        .collect();
    assert!(violations.is_empty(), "{violations:?}");
    let snapshots = seen["snapshots"].as_array().expect("snapshots");
    let ops: Vec<&str> = snapshots
        .iter()
        .map(|s| s["operation"].as_str().expect("operation"))
        .collect();
    assert_eq!(ops, operations);
    // Spark's time travel to every snapshot.
    let versions = seen["versions"].as_array().expect("versions");
    assert_eq!(versions.len(), history.states.len());
    for (i, (version, state)) in versions.iter().zip(&history.states).enumerate() {
        assert_eq!(
            common::result_rows(&version["spark"], &columns),
            model_rows(state),
            "Spark at snapshot {i}"
        );
    }
}

/// Checks Spark's `position_deletes` (every deleted position, as Spark reads the delete files)
/// against the model.
fn check_position_deletes(spark: &Value, history: &History) {
    let mut seen: Vec<(String, u64)> = spark["position_deletes"]
        .as_array()
        .expect("position_deletes")
        .iter()
        .map(|p| {
            (
                p[0].as_str().expect("path").to_string(),
                p[1].as_u64().expect("pos"),
            )
        })
        .collect();
    seen.sort();
    seen.dedup();
    let expected: Vec<(String, u64)> = history.deleted.iter().cloned().collect();
    assert_eq!(seen, expected, "Spark's position_deletes");
}

// ------------------------------------------------------------------------------- format 2

/// Format 2: one position-delete file per data file per round, committed as `delete`
/// snapshots; a second round adds new files beside the first round's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn position_delete_files_are_applied_by_every_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let table = "pos_v2";
    create_table(&ctx, table, 2).await;
    let mut live: BTreeSet<i64> = (0..60).collect();
    let mut history = History {
        states: vec![(0..30).collect(), live.clone()],
        deleted: BTreeSet::new(),
    };
    assert_eq!(petrel_rows(&ctx, table).await, model_rows(&live));

    let rounds: [Round; 2] = [
        ("a and b, id % 4 = 0", |id| {
            matches!(region(id), "a" | "b") && id % 4 == 0
        }),
        ("a and c, id % 3 = 0", |id| {
            matches!(region(id), "a" | "c") && id % 3 == 0
        }),
    ];
    let mut written_files: Vec<DataFile> = Vec::new();
    for (what, doomed) in rounds {
        let loaded = load(&catalog, table).await;
        let files = live_data_files(&loaded).await;
        assert_eq!(files.len(), 6, "two data files per region");
        let mut added = Vec::new();
        let mut records = 0;
        for (spec_id, data_file, positions, ids) in positions_to_delete(&files, &live, doomed) {
            let path = data_file.file_path();
            let file = write_position_deletes(
                &loaded,
                spec_id,
                data_file.partition(),
                &[(path, positions.as_slice())],
            )
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            // What the writer says of the file.
            assert_eq!(file.content_type(), DataContentType::PositionDeletes);
            assert_eq!(file.file_format(), DataFileFormat::Parquet);
            assert_eq!(file.record_count(), positions.len() as u64);
            assert_eq!(file.referenced_data_file().as_deref(), Some(path));
            assert_eq!(file.partition(), data_file.partition());
            let on_disk = std::fs::metadata(local(file.file_path())).expect("delete file");
            assert_eq!(file.file_size_in_bytes(), on_disk.len());
            let directory = |p: &str| p.rsplit_once('/').map(|(d, _)| d.to_string());
            assert_eq!(
                directory(file.file_path()),
                directory(path),
                "beside its data file, in the partition's directory"
            );
            assert!(file.file_path().ends_with("-deletes.parquet"));
            assert_eq!(
                file.lower_bounds().get(&DELETE_FILE_PATH_FIELD_ID),
                Some(&Datum::string(path))
            );
            assert_eq!(
                file.upper_bounds().get(&DELETE_FILE_PATH_FIELD_ID),
                Some(&Datum::string(path))
            );
            assert_eq!(
                file.lower_bounds().get(&DELETE_FILE_POS_FIELD_ID),
                Some(&Datum::long(positions[0] as i64))
            );
            assert_eq!(
                file.upper_bounds().get(&DELETE_FILE_POS_FIELD_ID),
                Some(&Datum::long(*positions.last().expect("a position") as i64))
            );
            assert!(file.value_counts().is_empty() && file.null_value_counts().is_empty());
            records += positions.len();
            for id in ids {
                live.remove(&id);
            }
            for pos in positions {
                history.deleted.insert((path.to_string(), pos));
            }
            written_files.push(file.clone());
            added.push(DeleteFile { spec_id, file });
        }
        let count = added.len();
        let change = SnapshotChange {
            added_deletes: added,
            ..SnapshotChange::default()
        };
        let outcome = commit_snapshot(catalog.as_ref(), loaded, change)
            .await
            .unwrap_or_else(|e| panic!("{what}: commit: {e}"));
        history.states.push(live.clone());
        let snapshot = outcome
            .table
            .metadata()
            .current_snapshot()
            .map(Arc::clone)
            .expect("snapshot");
        let summary = &snapshot.summary().additional_properties;
        assert_eq!(snapshot.summary().operation.as_str(), "delete");
        assert_eq!(summary["added-delete-files"], count.to_string());
        assert_eq!(summary["added-position-delete-files"], count.to_string());
        assert_eq!(summary["added-position-deletes"], records.to_string());
        assert!(!summary.contains_key("added-dvs"), "{summary:?}");
        assert!(!summary.contains_key("added-data-files"), "{summary:?}");
        assert_eq!(summary["total-records"], "60");
        assert_eq!(summary["total-data-files"], "6");
        assert_eq!(
            summary["total-delete-files"],
            written_files.len().to_string()
        );
        assert_eq!(
            summary["total-position-deletes"],
            history.deleted.len().to_string()
        );
        assert_eq!(
            petrel_rows(&ctx, table).await,
            model_rows(&live),
            "Petrel after {what}"
        );
    }

    let seen = read_back(&warehouse, &[table]);
    check_read_back(
        &seen[table],
        &history,
        &["append", "append", "delete", "delete"],
    );
    let spark = &spark_delete_files(&warehouse, &[table])[table];
    check_position_deletes(spark, &history);
    let delete_files = spark["delete_files"].as_array().expect("delete_files");
    assert_eq!(delete_files.len(), written_files.len());
    let by_path: HashMap<&str, &DataFile> =
        written_files.iter().map(|f| (f.file_path(), f)).collect();
    for seen in delete_files {
        let path = seen["file_path"].as_str().expect("path");
        let file = by_path[path];
        assert_eq!(seen["content"], 1, "position deletes");
        assert_eq!(seen["file_format"], "PARQUET");
        assert_eq!(seen["record_count"].as_u64(), Some(file.record_count()));
        assert_eq!(
            seen["file_size_in_bytes"].as_u64(),
            Some(file.file_size_in_bytes())
        );
        assert_eq!(
            seen["referenced_data_file"].as_str(),
            file.referenced_data_file().as_deref()
        );
        assert!(seen["content_offset"].is_null(), "{seen}");
        assert!(
            seen["value_counts"].is_null() || seen["value_counts"] == json!({}),
            "no value counts for file_path and pos: {seen}"
        );
        let referenced = file.referenced_data_file().expect("referenced");
        assert_eq!(
            seen["lower_bounds"][DELETE_FILE_PATH_FIELD_ID.to_string()],
            json!(hex(referenced.as_bytes())),
            "{seen}"
        );
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

// ------------------------------------------------------------------------------- format 3

/// Format 3: deletion vectors for several data files in one Puffin file; a second round merges
/// the first round's vector of a data file into a new one and removes the old (only that blob:
/// the other vectors of its Puffin file stay), and adds vectors for data files that had none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_vectors_are_applied_by_every_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    let table = "dv_v3";
    create_table(&ctx, table, 3).await;
    let mut live: BTreeSet<i64> = (0..60).collect();
    let mut history = History {
        states: vec![(0..30).collect(), live.clone()],
        deleted: BTreeSet::new(),
    };
    // The live deletion vector of each data file.
    let mut vectors: BTreeMap<String, (DeleteFile, RoaringTreemap)> = BTreeMap::new();

    let rounds: [Round; 2] = [
        ("a and b, id % 4 = 0", |id| {
            matches!(region(id), "a" | "b") && id % 4 == 0
        }),
        ("a and c, id % 3 = 0", |id| {
            matches!(region(id), "a" | "c") && id % 3 == 0
        }),
    ];
    for (round, (what, doomed)) in rounds.into_iter().enumerate() {
        let loaded = load(&catalog, table).await;
        let files = live_data_files(&loaded).await;
        assert_eq!(files.len(), 6, "two data files per region");
        let mut inputs = Vec::new();
        let mut removed = HashSet::new();
        let mut new_positions = 0u64;
        for (spec_id, data_file, positions, ids) in positions_to_delete(&files, &live, doomed) {
            let path = data_file.file_path().to_string();
            let mut set = RoaringTreemap::from_iter(positions.iter().copied());
            new_positions += set.len();
            if let Some((old, old_set)) = vectors.get(&path) {
                set |= old_set;
                removed.insert(FileKey::of(&old.file));
            }
            for id in ids {
                live.remove(&id);
            }
            for pos in positions {
                history.deleted.insert((path.clone(), pos));
            }
            inputs.push((path, spec_id, data_file.partition().clone(), set));
        }
        let written = write_deletion_vectors(&loaded, &inputs)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(written.len(), inputs.len());
        let puffin = written[0].file.file_path().to_string();
        assert!(
            puffin.ends_with("-deletes.puffin") && puffin.contains("/dv_v3/data/0"),
            "at the data location's root: {puffin}"
        );
        let puffin_size = std::fs::metadata(local(&puffin)).expect("puffin").len();
        let bytes = std::fs::read(local(&puffin)).expect("puffin bytes");
        let mut offsets = Vec::new();
        for (delete, (path, spec_id, partition, set)) in written.iter().zip(&inputs) {
            let file = &delete.file;
            assert_eq!(delete.spec_id, *spec_id);
            assert_eq!(file.file_path(), puffin, "one Puffin file");
            assert_eq!(file.content_type(), DataContentType::PositionDeletes);
            assert_eq!(file.file_format(), DataFileFormat::Puffin);
            assert_eq!(file.record_count(), set.len());
            assert_eq!(file.referenced_data_file().as_deref(), Some(path.as_str()));
            assert_eq!(file.partition(), partition);
            assert_eq!(file.file_size_in_bytes(), puffin_size);
            let offset = file.content_offset().expect("offset") as usize;
            let size = file.content_size_in_bytes().expect("size") as usize;
            let blob = &bytes[offset..offset + size];
            let read = RoaringTreemap::deserialize_from(bitmap_of(blob)).expect("bitmap");
            assert_eq!(&read, set, "the blob holds the vector");
            offsets.push(offset);
        }
        assert_eq!(offsets[0], 4, "blobs follow the Puffin magic");
        let footer = puffin_footer(&bytes);
        let blobs = footer["blobs"].as_array().expect("blobs");
        assert_eq!(blobs.len(), written.len());
        for (blob, delete) in blobs.iter().zip(&written) {
            assert_eq!(blob["type"], "deletion-vector-v1");
            assert_eq!(blob["fields"], json!([2147483645]));
            assert_eq!(blob["snapshot-id"], -1);
            assert_eq!(blob["sequence-number"], -1);
            assert_eq!(blob["offset"].as_i64(), delete.file.content_offset());
            assert_eq!(blob["length"].as_i64(), delete.file.content_size_in_bytes());
            assert!(blob.get("compression-codec").is_none(), "uncompressed");
            assert_eq!(
                blob["properties"]["referenced-data-file"].as_str(),
                delete.file.referenced_data_file().as_deref()
            );
            assert_eq!(
                blob["properties"]["cardinality"],
                delete.file.record_count().to_string()
            );
        }

        let blob_bytes: i64 = written
            .iter()
            .map(|d| d.file.content_size_in_bytes().expect("size"))
            .sum();
        let removed_count = removed.len();
        let change = SnapshotChange {
            added_deletes: written.clone(),
            removal: if removed.is_empty() {
                Removal::Nothing
            } else {
                Removal::Files(removed)
            },
            ..SnapshotChange::default()
        };
        let outcome = commit_snapshot(catalog.as_ref(), loaded, change)
            .await
            .unwrap_or_else(|e| panic!("{what}: commit: {e}"));
        history.states.push(live.clone());
        for (delete, (path, _, _, set)) in written.into_iter().zip(inputs) {
            vectors.insert(path, (delete, set));
        }
        let snapshot = outcome
            .table
            .metadata()
            .current_snapshot()
            .map(Arc::clone)
            .expect("snapshot");
        let summary = &snapshot.summary().additional_properties;
        assert_eq!(snapshot.summary().operation.as_str(), "delete");
        assert_eq!(summary["added-delete-files"], offsets.len().to_string());
        assert_eq!(summary["added-dvs"], offsets.len().to_string());
        assert!(
            !summary.contains_key("added-position-delete-files"),
            "{summary:?}"
        );
        assert_eq!(summary["added-files-size"], blob_bytes.to_string());
        let total: u64 = vectors.values().map(|(_, set)| set.len()).sum();
        assert_eq!(summary["total-delete-files"], vectors.len().to_string());
        assert_eq!(summary["total-position-deletes"], total.to_string());
        assert_eq!(summary["total-records"], "60");
        if round == 0 {
            assert!(!summary.contains_key("removed-dvs"), "{summary:?}");
        } else {
            assert!(removed_count > 0, "the second round replaces vectors");
            assert_eq!(summary["removed-dvs"], removed_count.to_string());
            assert_eq!(summary["removed-delete-files"], removed_count.to_string());
        }
        assert!(new_positions > 0);
        assert_eq!(
            petrel_rows(&ctx, table).await,
            model_rows(&live),
            "Petrel after {what}"
        );
    }
    // Region b's vectors of the first round share their Puffin file with region a's replaced
    // ones and stay live.
    let first_puffins: HashSet<&str> = vectors.values().map(|(d, _)| d.file.file_path()).collect();
    assert_eq!(first_puffins.len(), 2, "vectors of both rounds are live");

    let seen = read_back(&warehouse, &[table]);
    check_read_back(
        &seen[table],
        &history,
        &["append", "append", "delete", "delete"],
    );
    let lineage = &seen[table]["row_lineage"];
    assert_eq!(
        lineage["rows"].as_u64(),
        Some(live.len() as u64),
        "{lineage}"
    );
    assert_eq!(lineage["distinct"], lineage["rows"], "{lineage}");
    let spark = &spark_delete_files(&warehouse, &[table])[table];
    check_position_deletes(spark, &history);
    let delete_files = spark["delete_files"].as_array().expect("delete_files");
    assert_eq!(
        delete_files.len(),
        vectors.len(),
        "one live vector per data file"
    );
    let by_data_file: HashMap<&str, &DeleteFile> = vectors
        .iter()
        .map(|(path, (d, _))| (path.as_str(), d))
        .collect();
    for seen in delete_files {
        let referenced = seen["referenced_data_file"].as_str().expect("referenced");
        let file = &by_data_file[referenced].file;
        assert_eq!(seen["content"], 1, "position deletes");
        assert_eq!(seen["file_format"], "PUFFIN");
        assert_eq!(seen["file_path"].as_str(), Some(file.file_path()));
        assert_eq!(seen["record_count"].as_u64(), Some(file.record_count()));
        assert_eq!(seen["content_offset"].as_i64(), file.content_offset());
        assert_eq!(
            seen["content_size_in_bytes"].as_i64(),
            file.content_size_in_bytes()
        );
        assert_eq!(
            seen["file_size_in_bytes"].as_u64(),
            Some(file.file_size_in_bytes())
        );
    }
}

/// The JSON footer of an uncompressed Puffin file.
fn puffin_footer(bytes: &[u8]) -> Value {
    assert_eq!(&bytes[..4], b"PFA1", "header magic");
    let n = bytes.len();
    assert_eq!(&bytes[n - 4..], b"PFA1", "footer magic");
    assert_eq!(
        bytes[n - 8..n - 4],
        [0, 0, 0, 0],
        "no flags: uncompressed footer"
    );
    let size = u32::from_le_bytes(bytes[n - 12..n - 8].try_into().expect("4 bytes")) as usize;
    let start = n - 12 - size;
    assert_eq!(&bytes[start - 4..start], b"PFA1", "footer start magic");
    let footer: Value = serde_json::from_slice(&bytes[start..n - 12]).expect("footer json");
    assert!(
        footer["properties"]["created-by"]
            .as_str()
            .is_some_and(|s| s.starts_with("petrel")),
        "{footer}"
    );
    footer
}

/// A deletion vector of a format-2 table, a Parquet position-delete file of a format-3 table
/// and two new vectors for one data file are refused before anything is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_files_must_suit_the_format_version() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", Arc::clone(&catalog))]);
    create_table(&ctx, "v2", 2).await;
    create_table(&ctx, "v3", 3).await;
    let v2 = load(&catalog, "v2").await;
    let v3 = load(&catalog, "v3").await;
    let (spec_id, data_file) = live_data_files(&v3).await.remove(0);
    let path = data_file.file_path().to_string();
    let partition: Struct = data_file.partition().clone();
    let dvs = write_deletion_vectors(
        &v3,
        &[(
            path.clone(),
            spec_id,
            partition.clone(),
            RoaringTreemap::from_iter([0u64]),
        )],
    )
    .await
    .expect("dv");
    let parquet = write_position_deletes(&v3, spec_id, &partition, &[(path.as_str(), &[0])])
        .await
        .expect("position deletes");
    let refused = |change: SnapshotChange, table: LoadedTable| {
        let catalog = Arc::clone(&catalog);
        async move {
            let error = commit_snapshot(catalog.as_ref(), table, change)
                .await
                .expect_err("refused");
            error.to_string()
        }
    };
    let change = |files: Vec<DeleteFile>| SnapshotChange {
        added_deletes: files,
        ..SnapshotChange::default()
    };
    let e = refused(change(dvs.clone()), v2.clone()).await;
    assert!(e.contains("format version 3"), "{e}");
    let e = refused(
        change(vec![DeleteFile {
            spec_id,
            file: parquet,
        }]),
        v3.clone(),
    )
    .await;
    assert!(e.contains("deletion vectors"), "{e}");
    let e = refused(change([dvs.clone(), dvs].concat()), v3.clone()).await;
    assert!(e.contains("two new deletion vectors"), "{e}");
    // Nothing was committed.
    assert_eq!(load(&catalog, "v3").await.metadata().snapshots().count(), 2);
    // A removal naming a file that is not in the table fails as a concurrent change.
    let e = refused(
        SnapshotChange {
            removal: Removal::Files(HashSet::from([FileKey::path(format!("{path}.gone"))])),
            ..SnapshotChange::default()
        },
        v3,
    )
    .await;
    assert!(e.contains("no longer in the table"), "{e}");
}
