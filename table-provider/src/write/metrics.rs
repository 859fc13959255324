//! Exact Iceberg column metrics of a data file, computed from its Arrow batches.
