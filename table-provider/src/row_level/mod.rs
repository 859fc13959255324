//! Row-level writes: `DELETE FROM t WHERE …`, `UPDATE t SET … WHERE …` and `MERGE INTO t USING
//! s ON … WHEN …`, each over a positional scan of the target.
//!
//! ```text
//! IcebergDeleteExec                    (one partition: gathers the positions, writes the
//!   └─ Projection [file path, position]  delete files, commits one row-delta snapshot,
//!        └─ Filter <the WHERE clause>     returns `count`)
//!             └─ IcebergScanExec (positional scan of the table at the snapshot read)
//! ```
//!
//! [`RowLevelDml`], an analyzer rule, turns DataFusion's `Dml(Delete)` on an Iceberg table into
//! a [`DeleteNode`] over a positional scan of the same table and snapshot, keeping the WHERE
//! clause as a `Filter` of the query. So the rows deleted are exactly the rows that query
//! returns: subqueries (`IN (SELECT …)`, `EXISTS`) are planned as DataFusion plans any query's,
//! `WHERE false` becomes an empty input (nothing deleted, no snapshot), and a predicate that is
//! NULL for a row keeps the row. DataFusion's `TableProvider::delete_from` hook is not used:
//! it receives the filters without their subqueries. `DELETE … LIMIT` is refused (it would
//! delete arbitrary rows; Spark has no such form). `EXPLAIN DELETE` plans and explains without
//! executing, as for any plan.
//!
//! [`IcebergDeleteExec`] then changes, for each data file with deleted rows, what the table's
//! `write.delete.mode` asks for:
//!
//! - **merge-on-read**: its positions as Iceberg deletes, a position-delete file per data file
//!   in format 2, a deletion vector in format 3, each merged with the data file's earlier
//!   file-scoped deletes (and vector), which the same commit removes: one per data file;
//!   snapshot operation `delete`;
//! - **copy-on-write** (Iceberg's default): the data file rewritten without those rows
//!   (`copy_on_write`), the old file and its file-scoped deletes removed; operation
//!   `overwrite`.
//!
//! Either way the snapshot is committed with the row-delta checks of `commit::validation`.
//!
//! `UPDATE` is planned the same way, its input DataFusion's projection of the new values over
//! the positional scan: [`IcebergUpdateExec`] writes the new rows with the table's writers and
//! deletes the old ones as DELETE does, in `write.update.mode`, all in one `overwrite`
//! snapshot. `UPDATE … FROM` is refused. In format 3 the new versions keep the rows' `_row_id`
//! (`lineage`: written explicitly, as Spark does, with a null `_last_updated_sequence_number`
//! that inherits the commit's), and rows a copy-on-write rewrite copies keep both.
//!
//! `MERGE INTO` has no DataFusion plan to rewrite: `crate::statements` hands its text to
//! [`merge_plan`] (`merge_parse` reads Spark's grammar, `*` forms included), which joins the
//! source with the target's positional scan, picks each row's first WHEN clause that holds and
//! computes its action and new values as a query; a [`MergeNode`] over it becomes an
//! [`IcebergMergeExec`]: `MergeRowsExec` applies the actions (a target row matched by several
//! source rows fails the statement, as in Spark), the updated and inserted rows are written
//! (`write_rows`, shared with UPDATE and copy-on-write) and the changed rows deleted as above,
//! in `write.merge.mode`, in one snapshot; a MERGE that only inserts is an `append`.

mod copy_on_write;
mod delete_exec;
mod delete_node;
pub(crate) mod lineage;
mod merge_exec;
mod merge_node;
mod merge_parse;
mod merge_plan;
mod merge_rows;
mod position_columns;
mod rule;
mod targets;
mod update_exec;
mod write_rows;

pub use delete_exec::IcebergDeleteExec;
pub use delete_node::{DeleteNode, DeletePlanner, RowLevelOp, as_delete};
pub use lineage::scan_with_lineage;
pub use merge_exec::IcebergMergeExec;
pub use merge_node::{MergeNode, MergePlanner, as_merge};
pub use merge_plan::merge_plan;
pub use rule::RowLevelDml;
pub use update_exec::IcebergUpdateExec;
