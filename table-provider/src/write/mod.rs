//! Writing Iceberg data files: what a writer computes for each file it writes.
//!
//! - [`data_file_writer`]: one partition's rows as rolling Parquet files with exact metrics.
//! - [`distribution`]: `write.distribution-mode`: rows hash-distributed on the partition key
//!   so that one writer task writes each table partition.
//! - [`dictionary`]: which columns a data file writes without a dictionary (parquet-mr's test,
//!   on the file's first rows).
//! - [`position_deletes`]: position-delete files (format 2): `(file_path, pos)` rows in Parquet,
//!   with the metrics and `referenced_data_file` Iceberg Java writes.
//! - [`deletion_vector`]: deletion vectors (format 3): `deletion-vector-v1` blobs in one Puffin
//!   file, one per data file.
//! - [`equality_deletes`]: equality-delete files on a table's key columns, as Java's
//!   `EqualityDeleteWriter` writes them for Flink's upserts.
//! - [`upsert`]: upserts (identifier fields + `write.upsert.enabled`): the key, the checks, a
//!   statement's duplicate keys reduced to their last row.
//! - [`metrics`]: exact column metrics from the Arrow data (counts, NaN counts, bounds truncated
//!   as Iceberg Java truncates them), honouring the table's metrics configuration.
//! - [`partition_path`]: the partition directory of a data file, spelt as Iceberg Java spells it
//!   (human strings, URL-encoded), so other engines find the same layout.
//! - [`partitioner`]: batches split by partition (the spec's transforms over Arrow arrays).
//! - [`partition_key_expr`]: a partition field's transform as a DataFusion physical expression
//!   (what rows are hash-distributed on).
//! - [`writer_task_expr`]: the writer task of each row under hash distribution: its partition
//!   key's, a table partition larger than the advisory partition size spread over every task.
//! - [`tracker`]: the files one write started and its running writer tasks, so a failed or
//!   abandoned statement stops them and deletes every file they wrote.

pub mod data_file_writer;
pub mod deletion_vector;
pub mod dictionary;
pub mod distribution;
pub mod equality_deletes;
pub mod metrics;
pub mod partition_key_expr;
pub mod partition_path;
pub mod partitioner;
pub mod position_deletes;
pub mod tracker;
pub mod upsert;
pub mod writer_task_expr;
