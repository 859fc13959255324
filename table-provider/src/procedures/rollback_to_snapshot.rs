//! `CALL system.rollback_to_snapshot(table, snapshot_id)`: makes an ancestor of the current
//! snapshot the current snapshot of `main` again (Iceberg Java's
//! `SnapshotManager.rollbackTo`: anything else is refused). Output: `previous_snapshot_id`,
//! `current_snapshot_id`.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};

use super::args::{Param, ParamType, ProcedureArgs};
use super::commit::commit_metadata_change;
use super::context::ProcedureContext;
use super::set_current_snapshot::{output_schema, set_main};
use super::{Procedure, ProcedureFuture};
use crate::error::Error;

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "rollback_to_snapshot",
    params: &[
        Param::required("table", ParamType::String),
        Param::required("snapshot_id", ParamType::Long),
    ],
    output: || output_schema(false),
    run,
};

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let table = ctx.load_table(&args, "table").await?;
        let target = args.long("snapshot_id")?;
        let (_, (previous, current)) =
            commit_metadata_change(ctx.catalog.as_ref(), table, |table| {
                let metadata = table.metadata();
                let Some(current) = metadata.current_snapshot() else {
                    return Err(Error::InvalidArgument(format!(
                        "procedure rollback_to_snapshot: table {} has no current snapshot",
                        table.ident()
                    )));
                };
                if metadata.snapshot_by_id(target).is_none() {
                    return Err(Error::NotFound(format!(
                        "procedure rollback_to_snapshot: table {} has no snapshot with id \
                         {target}",
                        table.ident()
                    )));
                }
                if !is_ancestor(metadata, current.snapshot_id(), target) {
                    return Err(Error::InvalidArgument(format!(
                        "procedure rollback_to_snapshot: cannot roll back table {} to snapshot \
                         {target}: it is not an ancestor of the current snapshot {}",
                        table.ident(),
                        current.snapshot_id()
                    )));
                }
                set_main(table, target, "rollback_to_snapshot")
            })
            .await?;
        let previous = previous.unwrap_or(current);
        Ok(RecordBatch::try_new(
            output_schema(false),
            vec![
                Arc::new(Int64Array::from(vec![previous])),
                Arc::new(Int64Array::from(vec![current])),
            ],
        )?)
    })
}

/// Whether `ancestor` is `of` or one of its ancestors.
pub(super) fn is_ancestor(metadata: &iceberg::spec::TableMetadata, of: i64, ancestor: i64) -> bool {
    let mut at = metadata.snapshot_by_id(of);
    while let Some(snapshot) = at {
        if snapshot.snapshot_id() == ancestor {
            return true;
        }
        at = snapshot
            .parent_snapshot_id()
            .and_then(|p| metadata.snapshot_by_id(p));
    }
    false
}
