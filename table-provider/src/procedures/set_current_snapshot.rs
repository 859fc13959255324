//! `CALL system.set_current_snapshot(table, snapshot_id | ref)`: makes a snapshot (or the one a
//! branch or tag points at) the current snapshot of `main`, whatever its ancestry (Iceberg
//! Java's `SnapshotManager.setCurrentSnapshot`). Output: `previous_snapshot_id` (null for a
//! table without one), `current_snapshot_id`.

use std::sync::Arc;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use iceberg::spec::TableMetadataBuilder;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadata};

use super::args::{Param, ParamType, ProcedureArgs};
use super::commit::{Change, commit_metadata_change};
use super::context::ProcedureContext;
use super::refs::snapshot_refs;
use super::{Procedure, ProcedureFuture};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "set_current_snapshot",
    params: &[
        Param::required("table", ParamType::String),
        Param::optional("snapshot_id", ParamType::Long),
        Param::optional("ref", ParamType::String),
    ],
    output: || output_schema(true),
    run,
};

/// `previous_snapshot_id`, `current_snapshot_id` (Spark's output of both procedures that move
/// `main`; only set_current_snapshot's previous id may be null).
pub(super) fn output_schema(previous_nullable: bool) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("previous_snapshot_id", DataType::Int64, previous_nullable),
        Field::new("current_snapshot_id", DataType::Int64, false),
    ]))
}

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let table = ctx.load_table(&args, "table").await?;
        let snapshot_id = args.long_opt("snapshot_id")?;
        let ref_name = args.string_opt("ref")?;
        let (_, (previous, current)) =
            commit_metadata_change(ctx.catalog.as_ref(), table, |table| {
                let target = match (snapshot_id, &ref_name) {
                    (Some(id), None) => id,
                    (None, Some(name)) => table
                        .refs()
                        .get(name)
                        .map(|r| r.snapshot_id)
                        .ok_or_else(|| {
                            Error::NotFound(format!(
                                "procedure set_current_snapshot: table {} has no branch or tag \
                                 named {name:?}",
                                table.ident()
                            ))
                        })?,
                    _ => {
                        return Err(Error::InvalidArgument(
                            "procedure set_current_snapshot: either snapshot_id or ref must be \
                             provided, not both"
                                .into(),
                        ));
                    }
                };
                set_main(table, target, "set_current_snapshot")
            })
            .await?;
        let batch = RecordBatch::try_new(
            output_schema(true),
            vec![
                Arc::new(Int64Array::from(vec![previous])),
                Arc::new(Int64Array::from(vec![current])),
            ],
        )?;
        Ok(batch)
    })
}

/// The change that points `main` at snapshot `target` of `table` (nothing when it already
/// does); its value is the previous and new current snapshot ids.
pub(super) fn set_main(
    table: &LoadedTable,
    target: i64,
    procedure: &str,
) -> Result<Change<(Option<i64>, i64)>> {
    let metadata = table.metadata();
    let previous = metadata.current_snapshot().map(|s| s.snapshot_id());
    if metadata.snapshot_by_id(target).is_none() {
        return Err(Error::NotFound(format!(
            "procedure {procedure}: table {} has no snapshot with id {target}",
            table.ident()
        )));
    }
    if previous == Some(target) {
        return Ok(Change::Unchanged((previous, target)));
    }
    let retention = snapshot_refs(metadata)?
        .remove(MAIN_BRANCH)
        .map_or(SnapshotRetention::branch(None, None, None), |r| r.retention);
    let updated = builder(table)
        .set_ref(MAIN_BRANCH, SnapshotReference::new(target, retention))?
        .build()?
        .metadata;
    Ok(Change::Commit(Box::new(updated), (previous, target)))
}

/// A metadata builder over `table`'s metadata (recording its file in the metadata log).
pub(super) fn builder(table: &LoadedTable) -> TableMetadataBuilder {
    TableMetadataBuilder::new_from_metadata(
        TableMetadata::clone(table.metadata()),
        Some(table.metadata_location().to_string()),
    )
}
