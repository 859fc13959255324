//! Iceberg's metadata tables as read-only DataFusion tables, with Spark 3.5 + Iceberg 1.10's
//! names and columns: `snapshots`, `history`, `refs`, `metadata_log_entries`, `manifests`,
//! `all_manifests`, `files`, `data_files`, `delete_files`, `all_files`, `all_data_files`,
//! `all_delete_files`, `entries`, `all_entries`, `partitions`, `position_deletes`.
//!
//! Named both ways: Trino's `ns."t$files"` and Spark's `catalog.ns.t.files` (four parts, which
//! [`crate::rewrite_time_travel`] turns into the first form before DataFusion parses). The schema
//! provider splits the `$` suffix ([`split_metadata_table`]) and builds a
//! [`MetadataTableProvider`].
//!
//! One file per family, each a [`MetadataRows`]: the rows of one table as a stream of batches
//! of the projected columns (only those are built):
//!
//! - [`history`]: `snapshots`, `history`, `refs`, `metadata_log_entries` (from the metadata file);
//! - [`manifests`]: `manifests`, `all_manifests` (from manifest lists);
//! - [`files`]: the six files tables and `entries`, `all_entries`: one batch per manifest, read
//!   through the planner's [`crate::ManifestCache`] as planning reads them, so a large table is
//!   streamed, never held whole;
//! - [`partitions`]: `partitions` (an aggregate over the snapshot's manifests);
//! - [`position_deletes`]: the rows of the snapshot's position-delete files and deletion vectors;
//! - [`readable_metrics`] and [`partition_type`]: the column types the files tables share;
//! - [`pushdown`]: filters of the files and entries tables that skip manifests.
//!
//! Time travel (`FOR VERSION AS OF`, a ref, a timestamp) selects the snapshot of the
//! snapshot-scoped tables (files, entries, manifests, partitions, position deletes), as Spark
//! does; the others describe the whole table and refuse it. Every write to a metadata table is
//! refused.

mod exec;
mod files;
mod history;
mod manifests;
mod partition_type;
mod partitions;
mod position_deletes;
mod provider;
mod pushdown;
mod readable_metrics;

pub use exec::MetadataScanExec;
pub use provider::MetadataTableProvider;

use std::fmt;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use datafusion::logical_expr::Expr;
use futures::stream::BoxStream;

use crate::error::Result;

/// The separator of Trino's metadata-table names (`t$snapshots`).
pub const METADATA_TABLE_SEPARATOR: char = '$';

/// The table type GetTables lists metadata tables under (when asked for it).
pub const METADATA_TABLE_TYPE: &str = "METADATA TABLE";

/// Which metadata table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetadataTableKind {
    /// `snapshots`: every snapshot of the table.
    Snapshots,
    /// `history`: the snapshot log, with whether each was an ancestor of the current one.
    History,
    /// `refs`: branches and tags.
    Refs,
    /// `metadata_log_entries`: every metadata file of the log, and the current one.
    MetadataLogEntries,
    /// `manifests`: the manifests of the snapshot.
    Manifests,
    /// `all_manifests`: the manifests of every snapshot.
    AllManifests,
    /// `files`: the live data and delete files of the snapshot.
    Files,
    /// `data_files`: the live data files of the snapshot.
    DataFiles,
    /// `delete_files`: the live delete files of the snapshot.
    DeleteFiles,
    /// `all_files`: the live files of every snapshot's manifests.
    AllFiles,
    /// `all_data_files`: the data files of `all_files`.
    AllDataFiles,
    /// `all_delete_files`: the delete files of `all_files`.
    AllDeleteFiles,
    /// `entries`: every manifest entry of the snapshot (deleted ones included).
    Entries,
    /// `all_entries`: every manifest entry of every snapshot's manifests.
    AllEntries,
    /// `partitions`: per partition, its files and rows.
    Partitions,
    /// `position_deletes`: every position deleted by a position-delete file or deletion vector.
    PositionDeletes,
}

impl MetadataTableKind {
    /// Every metadata table, in Spark's documentation order.
    pub const ALL: [MetadataTableKind; 16] = [
        Self::Snapshots,
        Self::History,
        Self::Refs,
        Self::MetadataLogEntries,
        Self::Manifests,
        Self::AllManifests,
        Self::Files,
        Self::DataFiles,
        Self::DeleteFiles,
        Self::AllFiles,
        Self::AllDataFiles,
        Self::AllDeleteFiles,
        Self::Entries,
        Self::AllEntries,
        Self::Partitions,
        Self::PositionDeletes,
    ];

    /// The table's name (Spark's).
    pub fn name(self) -> &'static str {
        match self {
            Self::Snapshots => "snapshots",
            Self::History => "history",
            Self::Refs => "refs",
            Self::MetadataLogEntries => "metadata_log_entries",
            Self::Manifests => "manifests",
            Self::AllManifests => "all_manifests",
            Self::Files => "files",
            Self::DataFiles => "data_files",
            Self::DeleteFiles => "delete_files",
            Self::AllFiles => "all_files",
            Self::AllDataFiles => "all_data_files",
            Self::AllDeleteFiles => "all_delete_files",
            Self::Entries => "entries",
            Self::AllEntries => "all_entries",
            Self::Partitions => "partitions",
            Self::PositionDeletes => "position_deletes",
        }
    }

    /// The metadata table named `name` (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
    }

    /// Whether the table reads one snapshot (and so takes time travel); the others describe
    /// the whole table.
    pub fn reads_one_snapshot(self) -> bool {
        matches!(
            self,
            Self::Manifests
                | Self::Files
                | Self::DataFiles
                | Self::DeleteFiles
                | Self::Entries
                | Self::Partitions
                | Self::PositionDeletes
        )
    }
}

impl fmt::Display for MetadataTableKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Splits Trino's `t$snapshots` into the table's name and the metadata table; `None` for a
/// name without a known metadata-table suffix (a table may have `$` in its name).
pub fn split_metadata_table(name: &str) -> Option<(&str, MetadataTableKind)> {
    let (table, suffix) = name.rsplit_once(METADATA_TABLE_SEPARATOR)?;
    if table.is_empty() {
        return None;
    }
    MetadataTableKind::from_name(suffix).map(|kind| (table, kind))
}

/// The name of metadata table `kind` of `table` (Trino's form).
pub fn metadata_table_name(table: &str, kind: MetadataTableKind) -> String {
    format!("{table}{METADATA_TABLE_SEPARATOR}{kind}")
}

/// The rows of one metadata table: its schema and its batches of projected columns.
pub(crate) trait MetadataRows: fmt::Debug + Send + Sync {
    /// The full schema.
    fn schema(&self) -> SchemaRef;

    /// The rows, as batches of the columns `projection` picks of [`Self::schema`], streamed.
    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>>;

    /// Whether `filter` lets the table skip reading some of its sources (see `pushdown`).
    fn prunes(&self, _filter: &Expr) -> bool {
        false
    }

    /// [`Self::batches`], skipping what `filters` (those [`Self::prunes`] accepts) exclude.
    /// Rows the filters reject may remain: DataFusion applies them again.
    fn pruned_batches(
        &self,
        projection: Vec<usize>,
        _filters: &[Expr],
    ) -> BoxStream<'static, Result<RecordBatch>> {
        self.batches(projection)
    }
}

/// `location` (normalised: `file:///…`) spelt as `like` spells its prefix (`/…`, `file:/…`,
/// `file:///…`), so a path reads as the table's metadata spells its paths.
pub(crate) fn spelt_like(location: &str, like: &str) -> String {
    let Some(path) = location.strip_prefix("file://") else {
        return location.to_string();
    };
    if like.starts_with('/') {
        path.to_string()
    } else if like.starts_with("file:///") {
        location.to_string()
    } else if like.starts_with("file:/") {
        format!("file:{path}")
    } else {
        location.to_string()
    }
}
