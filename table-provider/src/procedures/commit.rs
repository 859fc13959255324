//! The commit loop of a metadata-only change (refs moved, created or dropped; snapshots
//! removed): the change is re-applied to the table as loaded at each attempt and swapped in
//! through [`Catalog::commit_table`], retried on [`Error::CommitConflict`] with the table's
//! `commit.retry.*` settings ([`RetryPolicy`]), as Iceberg Java's `SnapshotManager` and
//! `RemoveSnapshots` commit. No files are written besides the metadata file, so a failed
//! attempt leaves nothing behind; an unknown outcome ([`Error::CommitStateUnknown`]) is never
//! retried.

use std::time::Instant;

use iceberg::spec::TableMetadata;

use crate::catalog::{Catalog, LoadedTable};
use crate::commit::RetryPolicy;
use crate::error::{Error, Result};

/// What an attempt decided: the new metadata and a value for the caller, or nothing to commit.
#[derive(Debug)]
pub enum Change<T> {
    /// Commit this metadata; return the value.
    Commit(Box<TableMetadata>, T),
    /// Nothing changes; return the value.
    Unchanged(T),
}

/// Applies `change` to `table` (reloaded after every lost race) and commits its result.
/// Returns the table as committed (or as loaded when nothing changed) and the change's value.
pub async fn commit_metadata_change<T, F>(
    catalog: &dyn Catalog,
    mut table: LoadedTable,
    change: F,
) -> Result<(LoadedTable, T)>
where
    F: Fn(&LoadedTable) -> Result<Change<T>>,
{
    let policy = RetryPolicy::from_properties(table.metadata().properties());
    let started = Instant::now();
    let mut attempt: u32 = 0;
    loop {
        attempt += 1;
        let (metadata, value) = match change(&table)? {
            Change::Unchanged(value) => return Ok((table, value)),
            Change::Commit(metadata, value) => (*metadata, value),
        };
        match catalog.commit_table(&table, metadata).await {
            Ok(committed) => return Ok((committed, value)),
            Err(Error::CommitConflict { .. }) if policy.may_retry(attempt, started) => {
                tokio::time::sleep(policy.wait(attempt)).await;
                table = catalog.load_table(table.ident()).await?;
            }
            Err(e) => return Err(e),
        }
    }
}
