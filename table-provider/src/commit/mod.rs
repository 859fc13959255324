//! Committing new snapshots: Petrel's snapshot producer.
//!
//! The `iceberg` crate's `Transaction` only fast-appends, always to `main`, and re-applies its
//! actions on retry without validation; the row-level operations to come need overwrites and
//! row deltas with validation. So Petrel produces snapshots itself, reusing the crate's spec
//! writers (manifest, manifest list, metadata builder) and writing every byte through its own
//! object_store IO:
//!
//! - [`avro_out`]: the crate's Avro writers into memory, so the bytes go out through
//!   [`crate::io::TableIo`].
//! - [`summary`]: snapshot summaries (`added-*`, `deleted-*`, `total-*`) as Iceberg Java writes
//!   them.
//! - [`removal`]: which files a snapshot removes, and the manifests rewritten to remove them.
//! - [`producer`]: a new snapshot (append, overwrite or row delta): new data files and delete
//!   files in new manifests, the parent's manifests carried over or rewritten, the manifest list
//!   and the new table metadata (row lineage in format 3).
//! - [`retry`]: the commit loop: atomic swap through the catalog, retried on conflict.
//! - [`replace`]: replacing a table (new schema, spec and first snapshot in one commit, history
//!   kept), as Iceberg's `REPLACE TABLE`.
//! - [`validation`]: a row delta's and a compaction's conflict checks against the commits made
//!   since they read.

pub mod avro_out;
pub mod producer;
pub mod removal;
pub mod replace;
pub mod retry;
pub mod summary;
pub mod validation;

pub use producer::{DeleteFile, Rewrite, SnapshotAttempt, SnapshotChange, SnapshotProducer};
pub use removal::{FileKey, Removal};
pub use replace::{TableReplacement, commit_replacement, commit_replacement_without_rows};
pub use retry::{CommitOutcome, RetryPolicy, commit_snapshot};
pub use validation::RowDeltaCheck;
