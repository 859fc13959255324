//! `CALL system.rewrite_data_files(table, strategy, sort_order, options, where, branch)`:
//! Spark's compaction procedure, run by [`crate::maintenance::rewrite_data_files`] (bin-pack,
//! every delete applied, one `replace` snapshot). `strategy` may only be `binpack` (the
//! default); `sort_order` and a `branch` other than `main` are refused. Output (Spark's): `rewritten_data_files_count`,
//! `added_data_files_count`, `rewritten_bytes_count`, `failed_data_files_count`,
//! `removed_delete_files_count`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::args::{Param, ParamType, ProcedureArgs};
use super::context::ProcedureContext;
use super::{Procedure, ProcedureFuture};
use crate::catalog::IcebergCatalogProvider;
use crate::error::{Error, Result};
use crate::maintenance::{RewriteDataFilesOptions, RewriteDataFilesResult, rewrite_data_files};
use crate::plan::ScanPlanner;
use crate::provider::IcebergTableProvider;
use crate::spec::SnapshotSelector;

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "rewrite_data_files",
    params: &[
        Param::required("table", ParamType::String),
        Param::optional("strategy", ParamType::String),
        Param::optional("sort_order", ParamType::String),
        Param::optional("options", ParamType::StringMap),
        Param::optional("where", ParamType::String),
        Param::optional("branch", ParamType::String),
    ],
    output: RewriteDataFilesResult::schema,
    run,
};

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        let strategy = args.string_opt("strategy")?;
        if let Some(strategy) = strategy.filter(|s| !s.eq_ignore_ascii_case("binpack")) {
            return Err(Error::InvalidArgument(format!(
                "procedure rewrite_data_files: strategy {strategy:?} is not supported (binpack)"
            )));
        }
        if args.string_opt("sort_order")?.is_some() {
            return Err(Error::InvalidArgument(
                "procedure rewrite_data_files: sort_order is not supported (binpack only)".into(),
            ));
        }
        if let Some(branch) = args.string_opt("branch")?.filter(|b| b != "main") {
            return Err(Error::InvalidArgument(format!(
                "procedure rewrite_data_files: branch {branch:?} is not supported (main only)"
            )));
        }
        let options: BTreeMap<String, String> = args.string_map("options")?.into_iter().collect();
        let options = RewriteDataFilesOptions::parse(&options)?;
        let filter = args.string_opt("where")?;
        let table = current_table(ctx, &args).await?;
        rewrite_data_files(&ctx.state, &table, filter.as_deref(), &options)
            .await?
            .to_batch()
    })
}

/// The table the `table` argument names, at its current snapshot, writing through the `CALL`'s
/// catalog (planned with the session's planner and caches when the catalog has them).
pub(super) async fn current_table(
    ctx: &ProcedureContext,
    args: &ProcedureArgs,
) -> Result<IcebergTableProvider> {
    let table = ctx.load_table(args, "table").await?;
    let planner = ctx
        .state
        .catalog_list()
        .catalog(&ctx.catalog_name)
        .and_then(|c| {
            c.as_any()
                .downcast_ref::<IcebergCatalogProvider>()
                .map(|p| Arc::clone(p.planner()))
        })
        .unwrap_or_else(|| Arc::new(ScanPlanner::default()));
    Ok(
        IcebergTableProvider::try_new(table, SnapshotSelector::Current, planner)?
            .with_catalog(Arc::clone(&ctx.catalog)),
    )
}
