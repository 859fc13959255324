//! `spec::parse_manifest` (Petrel's direct Avro decoder, falling back to iceberg's parser)
//! against `Manifest::parse_avro` on every manifest of the test datasets: tables written by
//! Spark 3.5 + Iceberg 1.10 (formats v1, v2 and v3, position and equality deletes, deletion
//! vectors, partition transforms of every kind), the Iceberg Java API and PyIceberg. Both must
//! give equal manifests, entry for entry; the test also counts how many the direct decoder
//! decoded itself, so a change that silently sends everything to the fallback fails it.

use std::path::{Path, PathBuf};

use iceberg::spec::Manifest;
use petrel_table_provider::spec::{decodes_directly, parse_manifest};

use crate::common::{corpus_dir, dataset, run_ddl, session, warehouse_with_db, write_count};

/// Every Avro file under `dir` whose header names the manifest entry schema.
fn manifests_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            manifests_under(&path, out);
        } else if path.extension().is_some_and(|e| e == "avro") {
            let bytes = std::fs::read(&path).expect("read avro");
            let head = &bytes[..bytes.len().min(64 << 10)];
            let name = b"\"manifest_entry\"";
            if head.windows(name.len()).any(|w| w == name) {
                out.push(path);
            }
        }
    }
}

#[test]
fn the_direct_decoder_reads_every_dataset_manifest_as_iceberg_does() {
    let mut files = Vec::new();
    manifests_under(&corpus_dir(), &mut files);
    for name in ["pyiceberg-tables", "pyiceberg-deletes"] {
        manifests_under(&dataset(name), &mut files);
    }
    assert!(files.len() >= 40, "only {} manifests found", files.len());
    assert_same_as_iceberg(&files);
}

/// Manifests Petrel writes (through iceberg's manifest writer): partitioned by identity,
/// bucket, truncate and day, with position deletes, both format versions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_decoder_reads_petrels_own_manifests_as_iceberg_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (warehouse, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    for version in [2, 3] {
        run_ddl(
            &ctx,
            &format!(
                "CREATE TABLE iceberg.db.t{version} (id bigint, s string, d date, x double, b boolean) \
                 PARTITIONED BY (s, bucket(4, id), truncate(2, s), days(d), b) \
                 TBLPROPERTIES ('format-version' = '{version}', 'write.delete.mode' = 'merge-on-read')"
            ),
        )
        .await;
        let insert = format!(
            "INSERT INTO iceberg.db.t{version} SELECT value, CASE WHEN value % 7 = 0 THEN NULL \
             ELSE concat('s', CAST(value % 3 AS VARCHAR)) END, \
             CAST(to_timestamp(value * 86400) AS DATE), value / 3.0, value % 2 = 0 \
             FROM generate_series(0, 99)"
        );
        assert_eq!(write_count(&ctx, &insert).await, 100);
        let delete = format!("DELETE FROM iceberg.db.t{version} WHERE id % 10 = 1");
        assert_eq!(write_count(&ctx, &delete).await, 10);
    }
    let mut files = Vec::new();
    manifests_under(&warehouse, &mut files);
    assert!(files.len() >= 4, "only {} manifests found", files.len());
    assert_same_as_iceberg(&files);
}

/// Each of `files` parses to the same manifest both ways, and the direct decoder read every
/// one itself: every manifest of these writers is in a form it reads (codec null or deflate,
/// partition values of the plain types).
fn assert_same_as_iceberg(files: &[PathBuf]) {
    let mut direct = 0;
    for path in files {
        let bytes = std::fs::read(path).expect("read manifest");
        let Ok(want) = Manifest::parse_avro(&bytes) else {
            // iceberg cannot read it: the fallback gives iceberg's error.
            assert!(parse_manifest(&bytes).is_err(), "{}", path.display());
            continue;
        };
        let got = parse_manifest(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(got, want, "{}", path.display());
        if decodes_directly(&bytes) {
            direct += 1;
        }
    }
    // Every manifest of these writers is in a form the direct decoder reads (codec null or
    // deflate, partition values of the plain types).
    assert_eq!(
        direct,
        files.len(),
        "decoded directly: {direct} of {}",
        files.len()
    );
}

#[test]
fn corrupt_manifests_fail_as_iceberg_fails() {
    let mut files = Vec::new();
    manifests_under(&corpus_dir(), &mut files);
    let bytes = std::fs::read(&files[0]).expect("read manifest");
    for cut in [0, 3, 40, bytes.len() / 2, bytes.len() - 1] {
        let truncated = &bytes[..cut];
        assert_eq!(
            parse_manifest(truncated).is_err(),
            Manifest::parse_avro(truncated).is_err(),
            "cut at {cut}"
        );
    }
    let mut flipped = bytes.clone();
    let at = flipped.len() - 20;
    flipped[at] ^= 0xff;
    assert_eq!(
        parse_manifest(&flipped).map_err(|_| ()),
        Manifest::parse_avro(&flipped).map_err(|_| ())
    );
}
