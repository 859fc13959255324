//! Table maintenance as Spark's procedures, as library functions over an
//! [`crate::IcebergTableProvider`] at the table's current snapshot (the `CALL` statements that
//! run them parse their arguments and call these):
//!
//! - [`rewrite_data_files`]: bin-pack compaction with every delete applied, one `replace`
//!   snapshot that also drops the delete files no remaining data file needs.
//! - [`rewrite_position_delete_files`]: format 2 position-delete files merged to one per data
//!   file, deletes of data files no longer live dropped.
//! - `live_files`: the snapshot's live files and which deletes may apply to which data file.

mod live_files;
pub mod rewrite_data_files;
pub mod rewrite_position_delete_files;

pub use rewrite_data_files::{RewriteDataFilesOptions, RewriteDataFilesResult, rewrite_data_files};
pub use rewrite_position_delete_files::{
    RewritePositionDeletesResult, check_position_delete_options, rewrite_position_delete_files,
};
