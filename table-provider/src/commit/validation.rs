//! Conflict checks of a row delta (DELETE, UPDATE, MERGE in either mode): before each commit
//! attempt, the commits made since the snapshot the statement read must not have changed the
//! rows it read. As Iceberg Java's `BaseRowDelta` / `BaseOverwriteFiles` check them
//! (`validateDataFilesExist`, `validateNoConflictingDeleteFiles`, `validateNoConflictingData`):
//!
//! - the snapshot read must still be an ancestor of `main` (not rolled back or replaced);
//! - no data file the statement deletes from was removed since (a concurrent overwrite,
//!   DELETE in copy-on-write mode or compaction rewrote it: its rows may live elsewhere now);
//! - no delete file that may apply to those data files was added since: a file-scoped one
//!   naming one of them (a concurrent DELETE or UPDATE of the same file; in format 3 two
//!   deletion vectors for one data file are not allowed), a partition-scoped position delete,
//!   or an equality delete (conservatively, without a filter);
//! - under `serializable` isolation (the statement's `write.{delete,update,merge}.isolation-level`,
//!   Iceberg's default), with a [`RowDeltaCheck::conflict_filter`]: no data file added since by
//!   an `append` or `overwrite` may hold rows matching the statement's filter (Java's
//!   `validateAddedDataFiles` with Spark's `conflictDetectionFilter`, the filters pushed to the
//!   scan of the target), judged by partition values and column metrics as scan planning judges
//!   them. Under `snapshot` isolation there is no filter and new data never conflicts. An append
//!   that cannot match the filter does not conflict: the commit retries over it.
//!
//! A compaction (`validate_rewrite`, Java's `BaseRewriteFiles`) gets the same checks for the
//! data files it replaces (no added-data check), except that equality deletes added since do
//! not conflict: its new files keep the data sequence number of the snapshot read, so those
//! deletes still apply.
//!
//! A failed check is [`Error::ConcurrentModification`]: the statement must be run again (it is
//! not retried: its rows were chosen from the old snapshot).

use std::collections::HashSet;

use iceberg::spec::{
    DataContentType, MAIN_BRANCH, ManifestContentType, ManifestList, ManifestStatus, Operation,
};

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::io::normalize_location;
use crate::plan::{Predicate, data_file_might_match};

/// What a row delta read and changes.
#[derive(Debug, Clone, PartialEq)]
pub struct RowDeltaCheck {
    /// The snapshot of `main` the statement read.
    pub from_snapshot_id: i64,
    /// The data files it deletes rows from (locations as the manifests name them).
    pub data_files: HashSet<String>,
    /// Under serializable isolation, the statement's conflict-detection filter (over the
    /// table's field ids; `Predicate::True` for "any row"): a data file added since that may
    /// hold matching rows conflicts. `None`: added data files are not checked (snapshot
    /// isolation, compactions).
    pub conflict_filter: Option<Predicate>,
}

/// Checks `base` (the table as this attempt sees it) against `check`.
pub async fn validate_row_delta(base: &LoadedTable, check: &RowDeltaCheck) -> Result<()> {
    validate(base, check, true).await
}

/// Checks `base` for a compaction that read `check` (Java's `BaseRewriteFiles` with a data
/// sequence number): the same checks as a row delta's, except that equality deletes added since
/// are no conflict, since the rewritten rows keep the data sequence number of the snapshot read
/// and so stay under them.
pub async fn validate_rewrite(base: &LoadedTable, check: &RowDeltaCheck) -> Result<()> {
    validate(base, check, false).await
}

/// The checks; equality deletes added since conflict when `equality_deletes_conflict`.
async fn validate(
    base: &LoadedTable,
    check: &RowDeltaCheck,
    equality_deletes_conflict: bool,
) -> Result<()> {
    let name = base.ident().to_string();
    let metadata = base.metadata();
    let conflict = |message: String| Error::ConcurrentModification {
        table: name.clone(),
        message,
    };
    // The snapshots committed since the one read, newest first.
    let mut since = Vec::new();
    let mut at = metadata.snapshot_for_ref(MAIN_BRANCH);
    loop {
        let Some(snapshot) = at else {
            return Err(conflict(format!(
                "snapshot {} that the statement read is no longer in main's history",
                check.from_snapshot_id
            )));
        };
        if snapshot.snapshot_id() == check.from_snapshot_id {
            break;
        }
        since.push(std::sync::Arc::clone(snapshot));
        at = snapshot
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p));
    }
    let wanted: HashSet<String> = check
        .data_files
        .iter()
        .map(|p| normalize_location(p))
        .collect();
    if wanted.is_empty() && check.conflict_filter.is_none() {
        // Nothing read whose rows could change (a rewrite of delete files only).
        return Ok(());
    }
    let schema = metadata.current_schema();
    for snapshot in since {
        let id = snapshot.snapshot_id();
        let operation = snapshot.summary().operation.as_str();
        let list_path = snapshot.manifest_list();
        let bytes = base
            .io()
            .read(list_path)
            .await
            .map_err(|e| Error::corrupt(&name, "manifest list", list_path, e))?;
        let list = ManifestList::parse_with_version(&bytes, metadata.format_version())
            .map_err(|e| Error::corrupt(&name, "manifest list", list_path, e))?;
        for manifest_file in list.entries().iter().filter(|m| m.added_snapshot_id == id) {
            let path = &manifest_file.manifest_path;
            let bytes = base
                .io()
                .read(path)
                .await
                .map_err(|e| Error::corrupt(&name, "manifest", path, e))?;
            let manifest = crate::spec::parse_manifest(&bytes)
                .map_err(|e| Error::corrupt(&name, "manifest", path, e))?;
            let deletes = matches!(manifest.metadata().content(), ManifestContentType::Deletes);
            let spec = manifest.metadata().partition_spec();
            // Only appends and overwrites add rows that the statement did not see (a
            // compaction's `replace` moves rows it did see).
            let added_filter = check.conflict_filter.as_ref().filter(|_| {
                !deletes
                    && matches!(
                        snapshot.summary().operation,
                        Operation::Append | Operation::Overwrite
                    )
            });
            for entry in manifest.entries() {
                let by_this = entry.snapshot_id().is_none_or(|s| s == id);
                if !by_this {
                    continue;
                }
                let file = entry.data_file();
                if let Some(filter) = added_filter
                    && entry.status() == ManifestStatus::Added
                    && data_file_might_match(filter, spec, schema, file)
                {
                    return Err(conflict(format!(
                        "a concurrent commit (snapshot {id}, {operation}) added data file {} \
                         that may hold rows matching the statement's filter (serializable \
                         isolation); run the statement again",
                        file.file_path()
                    )));
                }
                match (deletes, entry.status()) {
                    (false, ManifestStatus::Deleted)
                        if wanted.contains(&normalize_location(file.file_path())) =>
                    {
                        return Err(conflict(format!(
                            "data file {} was removed by a concurrent commit (snapshot {id}, \
                             {operation}); run the statement again",
                            file.file_path()
                        )));
                    }
                    (true, ManifestStatus::Added) => {
                        let applies = match (file.content_type(), file.referenced_data_file()) {
                            (DataContentType::PositionDeletes, Some(referenced)) => {
                                wanted.contains(&normalize_location(&referenced))
                            }
                            (DataContentType::EqualityDeletes, _) => equality_deletes_conflict,
                            // Partition-scoped position deletes and equality deletes may apply.
                            _ => true,
                        };
                        if applies {
                            return Err(conflict(format!(
                                "a concurrent commit (snapshot {id}, {operation}) added delete \
                                 file {} that may delete the same rows; run the statement again",
                                file.file_path()
                            )));
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}
