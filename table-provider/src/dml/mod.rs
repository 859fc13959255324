//! DataFusion glue for writes: `INSERT` plans as N writer partitions under one commit.
//!
//! ```text
//! IcebergCommitExec            (one partition: gathers the data files, commits one snapshot,
//!   └─ CoalescePartitionsExec   returns `count`)
//!        └─ IcebergWriteExec    (N partitions: split rows by partition, roll Parquet files,
//!             └─ input          exact metrics; emits each file's description)
//! ```
//!
//! DataFusion's own `DataSinkExec` needs a single input partition; this layout keeps the write
//! parallel and the commit single. Data files of a failed write or commit are deleted, except
//! when the commit's outcome is unknown.

mod commit_exec;
mod count;
mod write_exec;

pub(crate) use commit_exec::read_data_files;
pub use commit_exec::{IcebergCommitExec, WriteMode};
pub use count::{count_properties, count_schema};
pub use write_exec::IcebergWriteExec;
