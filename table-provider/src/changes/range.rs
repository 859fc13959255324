//! Which snapshots a change range covers, as Spark's changelog scan picks them: the ancestors
//! of the end snapshot newer than the start (start exclusive, end inclusive), oldest first.
//!
//! - A start snapshot id must be an ancestor of the end snapshot (or the end itself: an empty
//!   range). No start: from the table's first snapshot.
//! - A start timestamp: the snapshots committed after it (Spark's `start-timestamp`: the oldest
//!   ancestor at or after it is excluded only when committed exactly then).
//! - An end timestamp: the snapshot current then (the snapshot log); no end: the current one.
//!
//! `replace` snapshots (compaction) are in the range but change no row; the caller skips them.

use std::sync::Arc;

use iceberg::spec::SnapshotRef;

use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::spec::SnapshotSelector;

/// One end of a change range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeBound {
    /// A snapshot id.
    SnapshotId(i64),
    /// Milliseconds since the epoch (UTC).
    TimestampMs(i64),
}

/// The snapshots of `table` in the range (`start` exclusive, `end` inclusive), oldest first.
pub fn snapshots_in_range(
    table: &LoadedTable,
    start: Option<ChangeBound>,
    end: Option<ChangeBound>,
) -> Result<Vec<SnapshotRef>> {
    let metadata = table.metadata();
    let ident = table.ident();
    let end = match end {
        None => match metadata.current_snapshot() {
            Some(s) => Arc::clone(s),
            None => return Ok(Vec::new()),
        },
        Some(ChangeBound::SnapshotId(id)) => {
            metadata.snapshot_by_id(id).cloned().ok_or_else(|| {
                Error::NotFound(format!("table {ident} has no snapshot with id {id}"))
            })?
        }
        Some(ChangeBound::TimestampMs(ms)) => {
            match SnapshotSelector::AsOfTimestampMs(ms)
                .resolve(table)?
                .snapshot
            {
                Some(s) => s,
                None => return Ok(Vec::new()),
            }
        }
    };
    let ancestors = ancestors(table, &end);
    let start_exclusive = match start {
        None => None,
        Some(ChangeBound::SnapshotId(id)) => {
            if !ancestors.iter().any(|s| s.snapshot_id() == id) {
                return Err(Error::InvalidArgument(format!(
                    "table {ident}: the start snapshot {id} is not an ancestor of the end \
                     snapshot {}",
                    end.snapshot_id()
                )));
            }
            Some(id)
        }
        Some(ChangeBound::TimestampMs(ms)) => {
            // `ancestors` is newest first: the oldest at or after `ms` is the last such.
            match ancestors.iter().rev().find(|s| s.timestamp_ms() >= ms) {
                None => return Ok(Vec::new()),
                Some(s) if s.timestamp_ms() == ms => Some(s.snapshot_id()),
                Some(s) => s.parent_snapshot_id(),
            }
        }
    };
    let mut range: Vec<SnapshotRef> = ancestors
        .into_iter()
        .take_while(|s| Some(s.snapshot_id()) != start_exclusive)
        .collect();
    range.reverse();
    Ok(range)
}

/// The snapshots of `table` after `position` up to the current one, oldest first (a stream's
/// next step). Fails when `position` is no longer an ancestor of the current snapshot (the
/// table was rolled back past it).
pub fn snapshots_after(table: &LoadedTable, position: Option<i64>) -> Result<Vec<SnapshotRef>> {
    let Some(current) = table.metadata().current_snapshot() else {
        return match position {
            None => Ok(Vec::new()),
            Some(id) => Err(rolled_back(table, id)),
        };
    };
    let ancestors = ancestors(table, current);
    if let Some(id) = position
        && !ancestors.iter().any(|s| s.snapshot_id() == id)
    {
        return Err(rolled_back(table, id));
    }
    let mut after: Vec<SnapshotRef> = ancestors
        .into_iter()
        .take_while(|s| Some(s.snapshot_id()) != position)
        .collect();
    after.reverse();
    Ok(after)
}

fn rolled_back(table: &LoadedTable, id: i64) -> Error {
    Error::InvalidArgument(format!(
        "table {}: snapshot {id} is no longer an ancestor of the current snapshot (rolled \
         back?); start again from a current ancestor",
        table.ident()
    ))
}

/// `snapshot` and its ancestors still in the metadata, newest first.
fn ancestors(table: &LoadedTable, snapshot: &SnapshotRef) -> Vec<SnapshotRef> {
    let metadata = table.metadata();
    let mut out = vec![Arc::clone(snapshot)];
    let mut next = snapshot.parent_snapshot_id();
    while let Some(id) = next {
        let Some(s) = metadata.snapshot_by_id(id) else {
            break;
        };
        out.push(Arc::clone(s));
        next = s.parent_snapshot_id();
    }
    out
}
