//! Writing Iceberg data files: what a writer computes for each file it writes.
//!
//! - [`metrics`]: exact column metrics from the Arrow data (counts, NaN counts, bounds truncated
//!   as Iceberg Java truncates them), honouring the table's metrics configuration.
//! - [`partition_path`]: the partition directory of a data file, spelt as Iceberg Java spells it
//!   (human strings, URL-encoded), so other engines find the same layout.

pub mod metrics;
pub mod partition_path;
