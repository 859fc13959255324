//! Execution of planned scans: DataFusion's Parquet scan with field-id schema mapping,
//! wrapped by [`IcebergScanExec`].

mod exec;
mod reader;
mod schema_mapping;

pub use exec::{IcebergScanExec, MergeSpec};
pub use reader::NamedFileReaderFactory;
pub use schema_mapping::{FieldIdAdapterFactory, FieldIdCastExpr, adapt_array};
