//! Which snapshot a scan reads, and with which schema.
//!
//! Iceberg's rule (as Spark applies it): a snapshot id, a timestamp or a tag reads with that
//! snapshot's schema; a branch (and the current state) reads with the table's current schema.

use std::fmt;

use iceberg::spec::{SchemaRef, SnapshotRef};

use crate::catalog::{LoadedTable, RefKind};
use crate::error::{Error, Result};

/// How a query picks the snapshot of a table.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SnapshotSelector {
    /// The current snapshot (the `main` branch).
    Current,
    /// A snapshot id.
    Id(i64),
    /// A branch or tag name.
    Ref(String),
    /// The snapshot that was current at this time (ms since the epoch): the last snapshot-log
    /// entry at or before it.
    AsOfTimestampMs(i64),
}

impl fmt::Display for SnapshotSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotSelector::Current => write!(f, "current snapshot"),
            SnapshotSelector::Id(id) => write!(f, "snapshot {id}"),
            SnapshotSelector::Ref(name) => write!(f, "ref {name:?}"),
            SnapshotSelector::AsOfTimestampMs(ms) => {
                let ts = chrono::DateTime::from_timestamp_millis(*ms)
                    .map(|t| t.to_rfc3339())
                    .unwrap_or_else(|| ms.to_string());
                write!(f, "timestamp {ts}")
            }
        }
    }
}

/// The snapshot a scan reads and the schema it reads it with.
#[derive(Debug, Clone)]
pub struct ResolvedSnapshot {
    /// `None` for a table without snapshots (it reads as empty).
    pub snapshot: Option<SnapshotRef>,
    /// The schema the scan projects.
    pub schema: SchemaRef,
}

impl SnapshotSelector {
    /// Resolves this selector against `table`. Unknown ids / refs and timestamps before the
    /// first snapshot are [`Error::NotFound`] naming the table.
    pub fn resolve(&self, table: &LoadedTable) -> Result<ResolvedSnapshot> {
        let metadata = table.metadata();
        let ident = table.ident();
        let current_schema = || std::sync::Arc::clone(metadata.current_schema());
        let snapshot_schema = |snapshot: &SnapshotRef| -> Result<SchemaRef> {
            match snapshot.schema_id() {
                Some(id) => metadata.schema_by_id(id).cloned().ok_or_else(|| {
                    Error::corrupt(
                        ident.to_string(),
                        "metadata file",
                        table.metadata_location(),
                        format!(
                            "snapshot {} names unknown schema {id}",
                            snapshot.snapshot_id()
                        ),
                    )
                }),
                None => Ok(current_schema()),
            }
        };
        let by_id = |id: i64| -> Result<SnapshotRef> {
            metadata.snapshot_by_id(id).cloned().ok_or_else(|| {
                Error::NotFound(format!("table {ident} has no snapshot with id {id}"))
            })
        };
        match self {
            SnapshotSelector::Current => Ok(ResolvedSnapshot {
                snapshot: metadata.current_snapshot().cloned(),
                schema: current_schema(),
            }),
            SnapshotSelector::Id(id) => {
                let snapshot = by_id(*id)?;
                let schema = snapshot_schema(&snapshot)?;
                Ok(ResolvedSnapshot {
                    snapshot: Some(snapshot),
                    schema,
                })
            }
            SnapshotSelector::Ref(name) => {
                let Some(r) = table.refs().get(name) else {
                    let mut known: Vec<&str> = table.refs().keys().map(String::as_str).collect();
                    known.sort();
                    return Err(Error::NotFound(format!(
                        "table {ident} has no branch or tag named {name:?} (refs: {})",
                        known.join(", ")
                    )));
                };
                let snapshot = by_id(r.snapshot_id)?;
                let schema = match r.kind {
                    RefKind::Branch => current_schema(),
                    RefKind::Tag => snapshot_schema(&snapshot)?,
                };
                Ok(ResolvedSnapshot {
                    snapshot: Some(snapshot),
                    schema,
                })
            }
            SnapshotSelector::AsOfTimestampMs(ms) => {
                let entry = metadata
                    .history()
                    .iter()
                    .filter(|log| log.timestamp_ms <= *ms)
                    .max_by_key(|log| log.timestamp_ms);
                let Some(entry) = entry else {
                    let first = metadata.history().iter().map(|l| l.timestamp_ms).min();
                    return Err(Error::NotFound(match first {
                        Some(first) => format!(
                            "table {ident} has no snapshot at or before {self}: its first snapshot is at {}",
                            SnapshotSelector::AsOfTimestampMs(first)
                        ),
                        None => format!("table {ident} has no snapshots"),
                    }));
                };
                let snapshot = by_id(entry.snapshot_id)?;
                let schema = snapshot_schema(&snapshot)?;
                Ok(ResolvedSnapshot {
                    snapshot: Some(snapshot),
                    schema,
                })
            }
        }
    }
}
