//! Writing Iceberg data files: what a writer computes for each file it writes.
//!
//! - [`data_file_writer`]: one partition's rows as rolling Parquet files with exact metrics.
//! - [`metrics`]: exact column metrics from the Arrow data (counts, NaN counts, bounds truncated
//!   as Iceberg Java truncates them), honouring the table's metrics configuration.
//! - [`partition_path`]: the partition directory of a data file, spelt as Iceberg Java spells it
//!   (human strings, URL-encoded), so other engines find the same layout.
//! - [`partitioner`]: batches split by partition (the spec's transforms over Arrow arrays).

pub mod data_file_writer;
pub mod metrics;
pub mod partition_path;
pub mod partitioner;
