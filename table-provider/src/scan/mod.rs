//! Execution of planned scans: DataFusion's Parquet scan with field-id schema mapping,
//! wrapped by [`IcebergScanExec`].

mod column_cache;
mod column_zones;
mod exec;
mod footer_rewrite;
mod leaf_projection;
mod merge_stream;
mod metadata_stats;
mod nan_safe_stats;
mod narrow_rule;
mod reader;
mod recipe;
mod schema_mapping;

pub use column_cache::ColumnCache;
pub(crate) use column_cache::{CachedScan, ColumnSource, FileColumn, FilteredScan};
pub use exec::IcebergScanExec;
pub use footer_rewrite::{FooterRewrite, FooterRewritingReaderFactory};
pub use leaf_projection::{LeafProjectingReaderFactory, LeafProjection};
pub(crate) use merge_stream::KeylessRead;
pub use merge_stream::{FILE_PATH_COLUMN, MergeSpec, POSITION_COLUMN};
pub(crate) use metadata_stats::metadata_statistics;
pub(crate) use nan_safe_stats::{NanFreeColumns, NanSafeReaderFactory};
pub use narrow_rule::NarrowStructColumns;
pub use reader::NamedFileReaderFactory;
pub(crate) use reader::partitioned_file;
pub use recipe::{ScanRecipe, TableRecipe};
pub use schema_mapping::{FieldIdAdapterFactory, FieldIdCastExpr, adapt_array};
