//! Spark's stored procedures for Iceberg tables (`CALL <catalog>.system.<name>(…)`) and its
//! branch / tag statements (`ALTER TABLE t CREATE BRANCH b …`), parsed and run by Petrel.
//!
//! A `CALL` is planned like any statement ([`plan`]): checked when planned (procedure known,
//! arguments of the right names and types, catalog an Iceberg catalog), run when executed, and
//! its result is Spark's output for that procedure (same column names and types, Iceberg 1.10's
//! `spark/v3.5/.../procedures/`). Procedures commit through the catalogs' atomic swap with the
//! table's retry settings ([`commit`] for metadata-only changes).
//!
//! - [`parser`]: `CALL` with positional or named arguments (strings, numbers, booleans,
//!   `TIMESTAMP '…'`, `array(…)`, `map(…)`) and the branch / tag statements.
//! - [`args`]: the parameters a procedure declares, and [`ProcedureArgs`], the call's values
//!   bound to them with typed accessors.
//! - [`context`]: [`ProcedureContext`]: the session, the catalog named by the `CALL`, and the
//!   table a `table => 'ns.t'` argument names.
//! - [`plan`]: the plan node and exec.
//! - [`commit`]: the commit loop of a metadata-only change.
//! - [`refs`]: `CREATE / REPLACE / DROP BRANCH / TAG`.
//! - [`reachable`]: the files a table's snapshots reach (what expiry and orphan removal
//!   compare).
//! - one file per procedure: [`rollback_to_snapshot`], [`set_current_snapshot`],
//!   [`expire_snapshots`], [`remove_orphan_files`], [`rewrite_data_files`] and
//!   [`rewrite_position_delete_files`] (both run by [`crate::maintenance`]), and
//!   [`rewrite_table_path`] (a relocated copy of a table's metadata, staged with its copy list).
//!
//! Adding a procedure: a file with `pub const PROCEDURE: Procedure` (its name, parameters,
//! output schema and `run` function) and one line in [`PROCEDURES`].

pub mod args;
pub mod commit;
pub mod context;
pub mod expire_snapshots;
pub mod parser;
pub mod plan;
pub mod reachable;
pub mod refs;
pub mod remove_orphan_files;
pub mod rewrite_data_files;
pub mod rewrite_position_delete_files;
pub mod rewrite_table_path;
pub mod rollback_to_snapshot;
pub mod set_current_snapshot;

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use futures::future::BoxFuture;

pub use args::{ArgValue, CallArgs, Param, ParamType, ProcedureArgs};
pub use context::ProcedureContext;
pub use parser::{MaintenanceStatement, ProcedureCall, RefAction, RefStatement, parse_maintenance};
pub use plan::{MaintenanceNode, MaintenancePlanner, as_maintenance, maintenance_plan};

use crate::error::{Error, Result};

/// What a procedure's `run` returns: its output rows (one batch, of its output schema).
pub type ProcedureFuture<'a> = BoxFuture<'a, Result<RecordBatch>>;

/// A procedure: its name, parameters, output and how it runs.
#[derive(Clone, Copy)]
pub struct Procedure {
    /// The name after `system.` (lower case).
    pub name: &'static str,
    /// Its parameters, in positional order.
    pub params: &'static [Param],
    /// Its output columns (Spark's).
    pub output: fn() -> SchemaRef,
    /// Runs it.
    pub run: for<'a> fn(&'a ProcedureContext, ProcedureArgs) -> ProcedureFuture<'a>,
}

impl std::fmt::Debug for Procedure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Procedure")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// Every procedure Petrel runs.
pub const PROCEDURES: &[Procedure] = &[
    rollback_to_snapshot::PROCEDURE,
    set_current_snapshot::PROCEDURE,
    expire_snapshots::PROCEDURE,
    remove_orphan_files::PROCEDURE,
    rewrite_data_files::PROCEDURE,
    rewrite_position_delete_files::PROCEDURE,
    rewrite_table_path::PROCEDURE,
];

/// The procedure called `name` (case-insensitive).
pub fn procedure(name: &str) -> Result<Procedure> {
    PROCEDURES
        .iter()
        .find(|p| p.name.eq_ignore_ascii_case(name))
        .copied()
        .ok_or_else(|| {
            let known: Vec<&str> = PROCEDURES.iter().map(|p| p.name).collect();
            Error::NotFound(format!(
                "procedure system.{name} (procedures: {})",
                known.join(", ")
            ))
        })
}
