//! `CALL system.expire_snapshots(table, older_than, retain_last, snapshot_ids, …)`: removes old
//! snapshots from the table's metadata, then deletes the files no remaining snapshot reaches.
//! Iceberg Java's `RemoveSnapshots` with `ReachableFileCleanup` is the reference:
//!
//! - Refs: `main` is always kept; another branch or tag is dropped when its snapshot is older
//!   than its `max-ref-age-ms` (else the table's `history.expire.max-ref-age-ms`, default
//!   forever). A snapshot a kept ref points at is never expired (`snapshot_ids` naming one is
//!   an error).
//! - Each kept branch keeps its ancestors while fewer than its `min-snapshots-to-keep` are kept
//!   (else `retain_last`, else `history.expire.min-snapshots-to-keep`, default 1) or while they
//!   are newer than its `max-snapshot-age-ms` (else `older_than`, else now −
//!   `history.expire.max-snapshot-age-ms`, default 5 days).
//! - Snapshots no kept ref reaches stay while newer than that cutoff.
//! - Everything else, and every snapshot in `snapshot_ids`, is removed in one metadata commit
//!   (with their statistics entries; the snapshot log keeps only the entries after the last
//!   removed one, so time travel never reads a gap).
//! - Then the files reachable from the metadata before the commit and not from the metadata
//!   committed are deleted: manifest lists, manifests, data files, position / equality delete
//!   files, statistics files. Nothing else is touched.
//!
//! Output (Spark's): `deleted_data_files_count`, `deleted_position_delete_files_count`,
//! `deleted_equality_delete_files_count`, `deleted_manifest_files_count`,
//! `deleted_manifest_lists_count`, `deleted_statistics_files_count` (longs). Accepted and
//! ignored: `max_concurrent_deletes`, `stream_results`. `clean_expired_metadata` (removing
//! unused schemas and specs) is not done yet: `true` is refused.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::{ArrayRef, Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{SnapshotRetention, TableMetadata};

use super::args::{Param, ParamType, ProcedureArgs};
use super::commit::{Change, commit_metadata_change};
use super::context::ProcedureContext;
use super::reachable::{ManifestReader, not_in};
use super::refs::snapshot_refs;
use super::set_current_snapshot::builder;
use super::{Procedure, ProcedureFuture};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "expire_snapshots",
    params: &[
        Param::required("table", ParamType::String),
        Param::optional("older_than", ParamType::Timestamp),
        Param::optional("retain_last", ParamType::Int),
        Param::optional("max_concurrent_deletes", ParamType::Int),
        Param::optional("stream_results", ParamType::Boolean),
        Param::optional("snapshot_ids", ParamType::LongArray),
        Param::optional("clean_expired_metadata", ParamType::Boolean),
    ],
    output: output_schema,
    run,
};

const OUTPUT_COLUMNS: [&str; 6] = [
    "deleted_data_files_count",
    "deleted_position_delete_files_count",
    "deleted_equality_delete_files_count",
    "deleted_manifest_files_count",
    "deleted_manifest_lists_count",
    "deleted_statistics_files_count",
];

fn output_schema() -> SchemaRef {
    Arc::new(Schema::new(
        OUTPUT_COLUMNS
            .iter()
            .map(|name| Field::new(*name, DataType::Int64, true))
            .collect::<Vec<_>>(),
    ))
}

const MAX_SNAPSHOT_AGE_MS: &str = "history.expire.max-snapshot-age-ms";
const MIN_SNAPSHOTS_TO_KEEP: &str = "history.expire.min-snapshots-to-keep";
const MAX_REF_AGE_MS: &str = "history.expire.max-ref-age-ms";
const DEFAULT_MAX_SNAPSHOT_AGE_MS: i64 = 5 * 24 * 60 * 60 * 1000;

/// What to expire, from the call's arguments.
#[derive(Debug, Clone)]
struct Expiry {
    now_ms: i64,
    older_than_ms: Option<i64>,
    retain_last: Option<i32>,
    snapshot_ids: Vec<i64>,
}

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let retain_last = args.int_opt("retain_last")?;
        if let Some(n) = retain_last
            && n < 1
        {
            return Err(Error::InvalidArgument(format!(
                "procedure expire_snapshots: retain_last must be at least 1, not {n}"
            )));
        }
        if let Some(n) = args.int_opt("max_concurrent_deletes")?
            && n < 1
        {
            return Err(Error::InvalidArgument(format!(
                "procedure expire_snapshots: max_concurrent_deletes should have value > 0, \
                 value: {n}"
            )));
        }
        if args.bool_opt("clean_expired_metadata")? == Some(true) {
            return Err(Error::InvalidArgument(
                "procedure expire_snapshots: clean_expired_metadata is not supported yet".into(),
            ));
        }
        let expiry = Expiry {
            now_ms: now_ms(),
            older_than_ms: args.timestamp_ms_opt("older_than")?,
            retain_last,
            snapshot_ids: args.long_array_opt("snapshot_ids")?.unwrap_or_default(),
        };
        let table = ctx.load_table(&args, "table").await?;
        let (committed, base) =
            commit_metadata_change(ctx.catalog.as_ref(), table, |table| match expired_metadata(
                table, &expiry,
            )? {
                Some(metadata) => Ok(Change::Commit(Box::new(metadata), Some(table.clone()))),
                None => Ok(Change::Unchanged(None)),
            })
            .await?;
        let counts = match base {
            Some(base) => {
                // As Java: the files are compared with the table as it is now, so a commit that
                // landed since (its base our metadata) keeps what it references.
                let now = match ctx.catalog.load_table(committed.ident()).await {
                    Ok(now) => now,
                    Err(_) => committed,
                };
                delete_unreachable(&base, &now).await?
            }
            None => [0; 6],
        };
        let columns: Vec<ArrayRef> = counts
            .iter()
            .map(|n| Arc::new(Int64Array::from(vec![*n])) as ArrayRef)
            .collect();
        Ok(RecordBatch::try_new(output_schema(), columns)?)
    })
}

/// `table`'s metadata with the expired snapshots and refs removed; `None` when nothing expires.
fn expired_metadata(table: &LoadedTable, expiry: &Expiry) -> Result<Option<TableMetadata>> {
    let metadata = table.metadata();
    let name = table.ident();
    let props = metadata.properties();
    let property = |key: &str| -> Result<Option<i64>> {
        props
            .get(key)
            .map(|v| {
                v.trim().parse::<i64>().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "table {name}: property {key}={v} is not a number"
                    ))
                })
            })
            .transpose()
    };
    let default_older_than = match expiry.older_than_ms {
        Some(ms) => ms,
        None => {
            expiry.now_ms - property(MAX_SNAPSHOT_AGE_MS)?.unwrap_or(DEFAULT_MAX_SNAPSHOT_AGE_MS)
        }
    };
    let default_min_keep = match expiry.retain_last {
        Some(n) => i64::from(n),
        None => property(MIN_SNAPSHOTS_TO_KEEP)?.unwrap_or(1),
    };
    let default_max_ref_age = property(MAX_REF_AGE_MS)?.unwrap_or(i64::MAX);

    // Refs kept: main, and the others younger than their max age.
    let refs = snapshot_refs(metadata)?;
    let mut kept_refs = HashMap::new();
    let mut dropped_refs = Vec::new();
    for (ref_name, reference) in &refs {
        let max_age = match &reference.retention {
            SnapshotRetention::Branch { max_ref_age_ms, .. }
            | SnapshotRetention::Tag { max_ref_age_ms } => {
                max_ref_age_ms.unwrap_or(default_max_ref_age)
            }
        };
        let keep = ref_name == iceberg::spec::MAIN_BRANCH
            || metadata
                .snapshot_by_id(reference.snapshot_id)
                .is_some_and(|s| expiry.now_ms.saturating_sub(s.timestamp_ms()) <= max_age);
        if keep {
            kept_refs.insert(ref_name.clone(), reference.clone());
        } else {
            dropped_refs.push(ref_name.clone());
        }
    }
    for id in &expiry.snapshot_ids {
        let mut holders: Vec<&str> = kept_refs
            .iter()
            .filter(|(_, r)| r.snapshot_id == *id)
            .map(|(n, _)| n.as_str())
            .collect();
        if !holders.is_empty() {
            holders.sort();
            return Err(Error::InvalidArgument(format!(
                "procedure expire_snapshots: cannot expire snapshot {id} of table {name}: still \
                 referenced by refs: {}",
                holders.join(", ")
            )));
        }
    }

    let mut retain: HashSet<i64> = kept_refs.values().map(|r| r.snapshot_id).collect();
    let mut reached: HashSet<i64> = HashSet::new();
    for reference in kept_refs.values() {
        let SnapshotRetention::Branch {
            min_snapshots_to_keep,
            max_snapshot_age_ms,
            ..
        } = &reference.retention
        else {
            reached.insert(reference.snapshot_id);
            continue;
        };
        let older_than = max_snapshot_age_ms.map_or(default_older_than, |age| expiry.now_ms - age);
        let min_keep = min_snapshots_to_keep.map_or(default_min_keep, i64::from);
        let mut kept = 0i64;
        let mut keeping = true;
        let mut at = metadata.snapshot_by_id(reference.snapshot_id);
        while let Some(snapshot) = at {
            reached.insert(snapshot.snapshot_id());
            if keeping && (kept < min_keep || snapshot.timestamp_ms() >= older_than) {
                retain.insert(snapshot.snapshot_id());
                kept += 1;
            } else {
                keeping = false;
            }
            at = snapshot
                .parent_snapshot_id()
                .and_then(|p| metadata.snapshot_by_id(p));
        }
    }
    for snapshot in metadata.snapshots() {
        if !reached.contains(&snapshot.snapshot_id())
            && snapshot.timestamp_ms() >= default_older_than
        {
            retain.insert(snapshot.snapshot_id());
        }
    }
    let explicit: HashSet<i64> = expiry.snapshot_ids.iter().copied().collect();
    let removed: Vec<i64> = metadata
        .snapshots()
        .map(|s| s.snapshot_id())
        .filter(|id| explicit.contains(id) || !retain.contains(id))
        .collect();
    if removed.is_empty() && dropped_refs.is_empty() {
        return Ok(None);
    }
    let mut updated = builder(table);
    for ref_name in &dropped_refs {
        updated = updated.remove_ref(ref_name);
    }
    for id in &removed {
        updated = updated
            .remove_statistics(*id)
            .remove_partition_statistics(*id);
    }
    let updated = updated.remove_snapshots(&removed).build()?.metadata;
    Ok(Some(updated))
}

/// Deletes the files `before` reaches and `after` does not; returns Spark's six counts.
async fn delete_unreachable(before: &LoadedTable, after: &LoadedTable) -> Result<[i64; 6]> {
    let mut reader = ManifestReader::new(before.ident().to_string(), before.io().clone());
    let old = reader.reachable(before.metadata()).await?;
    let new = reader.reachable(after.metadata()).await?;
    let groups = [
        not_in(&old.data_files, &new.data_files),
        not_in(&old.position_deletes, &new.position_deletes),
        not_in(&old.equality_deletes, &new.equality_deletes),
        not_in(&old.manifests, &new.manifests),
        not_in(&old.manifest_lists, &new.manifest_lists),
        not_in(&old.statistics, &new.statistics),
    ];
    let mut counts = [0i64; 6];
    for (count, files) in counts.iter_mut().zip(&groups) {
        *count = i64::try_from(files.len()).unwrap_or(i64::MAX);
    }
    let table = after.ident().to_string();
    // Content files first, then manifests, then manifest lists (as Java deletes them): an
    // interrupted clean-up leaves unreferenced files, never a reachable manifest without its
    // files.
    for files in [&groups[..3], &groups[5..], &groups[3..4], &groups[4..5]] {
        let all: Vec<String> = files.iter().flatten().cloned().collect();
        delete_all(after.io(), &table, all).await?;
    }
    Ok(counts)
}

/// Deletes `locations` of `table` (a missing file is not an error), a few at a time.
async fn delete_all(io: &crate::io::TableIo, table: &str, locations: Vec<String>) -> Result<()> {
    let deletes = locations.into_iter().map(|location| {
        let io = io.clone();
        let table = table.to_string();
        async move {
            io.delete(&location).await.map_err(|e| Error::WriteFailed {
                table,
                path: location,
                message: format!("expire_snapshots cannot delete it: {e}"),
            })
        }
    });
    futures::stream::iter(deletes)
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
