//! Scan tasks: plain, serialisable data describing what to read.
//!
//! A [`ScanTask`] is a byte range of one data file plus the delete files that apply to it.
//! Planning produces them; execution (here, or later on a distributed engine) consumes them.
//! Paths are logical (as the metadata wrote them); IO maps them.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a delete file removes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DeleteKind {
    /// A Parquet/Avro/ORC position delete file (`file_path`, `pos` rows).
    Position,
    /// A v3 deletion vector: a Puffin blob at `offset..offset+length` for one data file.
    DeletionVector {
        /// Byte offset of the blob in the Puffin file.
        offset: u64,
        /// Blob length in bytes.
        length: u64,
    },
    /// An equality delete file on these field ids.
    Equality {
        /// The equality field ids.
        field_ids: Vec<i32>,
    },
}

/// A delete file that applies to a task's data file.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DeleteFileRef {
    /// Logical path of the delete file.
    pub path: String,
    /// File format name (`PARQUET`, `PUFFIN`, ...).
    pub format: String,
    /// What it deletes.
    pub kind: DeleteKind,
    /// Rows (or deleted positions) it holds.
    pub record_count: u64,
    /// Size in bytes.
    pub file_size: u64,
    /// Its data sequence number.
    pub sequence_number: i64,
}

/// A data file chosen by the planner.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DataFileRef {
    /// Logical path of the data file.
    pub path: String,
    /// File format name (`PARQUET`, ...).
    pub format: String,
    /// Size in bytes.
    pub file_size: u64,
    /// Rows in the whole file.
    pub record_count: u64,
    /// The partition spec it was written with.
    pub spec_id: i32,
    /// Its data sequence number (inherited when the manifest left it null).
    pub sequence_number: i64,
    /// In format 3, the row id of its first row (inherited from its manifest when the entry
    /// left it null): a row without an explicit `_row_id` has `first_row_id + position`.
    #[serde(default)]
    pub first_row_id: Option<i64>,
    /// Float columns (field ids) the file's metrics say hold no NaN (`nan_value_counts` of 0):
    /// only their Parquet min/max may prune (see `scan::nan_safe_stats`).
    pub nan_free_field_ids: Vec<i32>,
}

/// A byte range of one data file with the deletes that apply to it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScanTask {
    /// The data file.
    pub file: DataFileRef,
    /// First byte of the range (a row-group boundary, from `split_offsets`).
    pub start: u64,
    /// Length of the range in bytes.
    pub length: u64,
    /// Whether the task covers the whole file.
    pub whole_file: bool,
    /// Delete files applying to this data file, shared with the other tasks they apply to
    /// (an upsert's delete file applies to every older data file its bounds meet).
    pub deletes: Vec<Arc<DeleteFileRef>>,
}
