//! Merge-on-read deletes.
//!
//! - [`DeleteFileIndex`] (planning): which delete files apply to which data file;
//!   `equality_bounds` skips equality delete files whose metrics cannot meet a data file's.
//! - `position`: position delete files and deletion vectors → deleted positions per data file.
//! - `position_filter`: a data file's deleted positions → a Parquet access plan skipping long
//!   deleted runs, and a keep-mask filter for the scattered rest.
//! - `equality`: equality-delete key sets, read with only the key columns, probed per batch.
//! - `equality_extension`: a data file's recorded equality-deleted positions extended by the
//!   groups later commits added (only those probed, over only their key columns).
//! - `equality_union`: many equality groups over the same key columns joined into one index
//!   (tables upserted by many commits), probed once per row.
//! - [`DeleteCache`]: parsed delete files shared by the scans of a process.
//! - [`MergeOnRead`] (execution): loads each delete file once per scan, shares the result
//!   across partitions, reserves set memory, filters batches by equality deletes.

mod cache;
mod equality;
mod equality_bounds;
mod equality_extension;
mod equality_union;
mod index;
mod merge_on_read;
mod position;
mod position_filter;

pub(crate) use cache::EqualityPositionsKey;
pub use cache::{DEFAULT_DELETE_CACHE_BYTES, DeleteCache};
pub(crate) use equality_extension::{
    EqualityLayout, Extended, KeyColumns, extend_equality_positions,
};
pub use index::DeleteFileIndex;
pub use merge_on_read::{EqualityGroup, FileDeletes, MergeOnRead};
pub(crate) use merge_on_read::{
    EqualityMode, EqualitySets, cached_equality_positions, equality_keys, group_entries, key_type,
};
pub(crate) use position::{read_deletion_vector, read_position_delete_file};
pub(crate) use position_filter::{
    DeletedPositions, GroupRead, PositionFilter, positional_plan_of, whole_groups_plan,
};
