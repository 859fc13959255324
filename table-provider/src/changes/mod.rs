//! Change feeds: `table_changes('<catalog>.<ns>.<table>', <start>, [<end>])`, the rows a range
//! of snapshots inserted and deleted, with Spark's changelog-view columns and semantics
//! (`create_changelog_view` with carry-over removal and, with identifier fields, updates), and
//! the same call kept open as a live stream of new commits.
//!
//! ```text
//! table_changes(...) ─► TableChangesFunction (arguments, the table)      function.rs
//!                         └─ TableChangesProvider (filters, projection)   provider.rs
//!                              └─ TableChangesExec (one partition)        exec.rs
//!                                   └─ ChangeFeed::run                    feed.rs
//!                                        ├─ snapshots_in_range / _after   range.rs
//!                                        ├─ ScanPlanner::plan_changes     plan/changes.rs
//!                                        ├─ IcebergTableProvider::scan_plan (merge-on-read)
//!                                        └─ diff_snapshot                 diff.rs
//! ```
//!
//! Beyond Spark 3.5 + Iceberg 1.10, which refuses ranges touching delete files, every kind of
//! change is read: position deletes, deletion vectors, equality deletes and copy-on-write
//! rewrites (a rewritten file's unchanged rows are carry-overs, not changes). `replace`
//! snapshots (compaction) change nothing and take no ordinal.

mod columns;
mod diff;
mod exec;
mod feed;
mod function;
mod provider;
mod range;

pub use columns::{
    CHANGE_ORDINAL_COLUMN, CHANGE_TYPE_COLUMN, COMMIT_SNAPSHOT_ID_COLUMN, ChangeType, change_schema,
};
pub use exec::TableChangesExec;
pub use feed::ChangeFeed;
pub use function::{DEFAULT_POLL_INTERVAL, TableChangesFunction};
pub use provider::TableChangesProvider;
pub use range::{ChangeBound, snapshots_after, snapshots_in_range};
