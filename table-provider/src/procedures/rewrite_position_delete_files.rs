//! `CALL system.rewrite_position_delete_files(table, options, where)`: Spark's procedure, run by
//! [`crate::maintenance::rewrite_position_delete_files`] (format 2: one file-scoped
//! position-delete file per data file, deletes of data files no longer live dropped; format 3
//! has one deletion vector per data file already: all zero). Spark's options are accepted and
//! change nothing. Output (Spark's): `rewritten_delete_files_count`, `added_delete_files_count`,
//! `rewritten_bytes_count`, `added_bytes_count`.

use std::collections::BTreeMap;

use super::args::{Param, ParamType, ProcedureArgs};
use super::context::ProcedureContext;
use super::rewrite_data_files::current_table;
use super::{Procedure, ProcedureFuture};
use crate::maintenance::{
    RewritePositionDeletesResult, check_position_delete_options, rewrite_position_delete_files,
};

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "rewrite_position_delete_files",
    params: &[
        Param::required("table", ParamType::String),
        Param::optional("options", ParamType::StringMap),
        Param::optional("where", ParamType::String),
    ],
    output: RewritePositionDeletesResult::schema,
    run,
};

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let options: BTreeMap<String, String> = args.string_map("options")?.into_iter().collect();
        check_position_delete_options(&options)?;
        let filter = args.string_opt("where")?;
        let table = current_table(ctx, &args).await?;
        rewrite_position_delete_files(&ctx.state, &table, filter.as_deref())
            .await?
            .to_batch()
    })
}
