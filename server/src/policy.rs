//! What SQL may do, decided on the logical plan before anything runs: an explicit allow-list of
//! plan nodes ([`refusal_of`] names every kind DataFusion has), of write targets (Iceberg tables
//! of the server's catalogs) and, in the engine, of table functions.
//!
//! DataFusion's `SQLOptions` switches are too coarse for a server that accepts writes: allowing
//! DML also allows `COPY ... TO` (a file write anywhere the process can write) and inserts into
//! any table provider. So the engine plans every statement with
//! `SessionState::create_logical_plan` (which executes nothing) and hands the plan to
//! [`check`], which walks it, subqueries included:
//!
//! - a query (any plan without a write) is allowed, as before;
//! - `INSERT INTO t ...`, `INSERT OVERWRITE t ...` ([`WriteOp::Insert`] with
//!   [`InsertOp::Append`] or [`InsertOp::Overwrite`], a dynamic partition overwrite) and
//!   `DELETE FROM t ...` / `UPDATE t SET ...` ([`WriteOp::Delete`], [`WriteOp::Update`]) are
//!   allowed when the write is the statement itself (or what a plain `EXPLAIN` explains), its
//!   target resolves to a catalog the server serves as an Iceberg catalog, and the target
//!   provider in the plan is an [`IcebergTableProvider`] — so `information_schema` tables,
//!   in-memory tables and anything else cannot be written;
//! - Spark's DDL for Iceberg tables (`CREATE/DROP SCHEMA`, `CREATE [OR …] TABLE`, `DROP
//!   TABLE`) never reaches this check: the engine plans it itself (`petrel_table_provider::ddl`);
//! - Spark's `CALL catalog.system.procedure(…)` and branch / tag statements
//!   (`petrel_table_provider::procedures`), planned by the engine, pass as the statement
//!   itself (a `CALL` runs on the query path and returns the procedure's rows);
//! - `MERGE INTO` an Iceberg table (`petrel_table_provider::row_level::merge_plan`, through
//!   `plan_statement`) passes as the statement itself or under a plain `EXPLAIN`; its source
//!   and ON condition are part of its plan, so what it reads is walked like any query;
//! - everything else is refused with a message saying why: `COPY ... TO`, DataFusion's DDL
//!   (`CREATE EXTERNAL TABLE`, views, functions), `SET` and other statements, `REPLACE INTO`,
//!   a write nested in `EXPLAIN ANALYZE` (which would run it);
//! - in read-only mode (`--read-only`) every write is refused;
//! - metadata tables (`t$files`, Spark's `t.files`) are read like any table and never written.
//!
//! Reads keep their own guards in the engine: no table factories (so no `CREATE EXTERNAL
//! TABLE` could resolve anyway), an allow-list of table functions, no URL tables.

use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::source_as_provider;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::logical_expr::dml::InsertOp;
use datafusion::logical_expr::{DdlStatement, DmlStatement, LogicalPlan, WriteOp};
use petrel_table_provider::IcebergTableProvider;
use petrel_table_provider::statements::{is_petrel_write, is_procedure_call};
use tonic::Status;

/// The table functions SQL may call (they compute rows; none reads or writes a file). The
/// engine registers only these, whatever DataFusion offers.
/// `table_changes` (Petrel's change feed over Iceberg snapshots) reads only Iceberg tables of the
/// server's catalogs.
pub const TABLE_FUNCTIONS: &[&str] = &["generate_series", "range", "table_changes"];

/// What a statement that passed [`check`] does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StatementKind {
    /// Reads only (queries, `EXPLAIN`, `DESCRIBE`, `SHOW`).
    Query,
    /// `INSERT INTO` an Iceberg table (the fully qualified name).
    Insert(String),
}

/// The facts [`check`] decides with.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// Names of the server's Iceberg catalogs (the only possible write targets).
    pub iceberg_catalogs: &'a [String],
    /// Catalog and schema of unqualified names in this statement's session.
    pub default_catalog: &'a str,
    /// See `default_catalog`.
    pub default_schema: &'a str,
    /// Refuse every write.
    pub read_only: bool,
}

/// Decides whether `plan` may run; see the module documentation.
pub fn check(plan: &LogicalPlan, policy: &Policy<'_>) -> Result<StatementKind, Status> {
    // The write a statement may be: the statement itself, or what a plain EXPLAIN explains
    // (explained, not run).
    let (top, explained) = match plan {
        LogicalPlan::Explain(e) => (e.plan.as_ref(), true),
        p => (p, false),
    };
    let kind = match top {
        LogicalPlan::Dml(dml) => check_dml(dml, policy)?,
        _ => StatementKind::Query,
    };
    let mut refusal: Option<Status> = None;
    let walk = plan.apply_with_subqueries(|node| match refusal_of(node, std::ptr::eq(node, top)) {
        Some(status) => {
            refusal = Some(status);
            Ok(TreeNodeRecursion::Stop)
        }
        None => Ok(TreeNodeRecursion::Continue),
    });
    if let Some(status) = refusal {
        return Err(status);
    }
    walk.map_err(crate::error::df_status)?;
    Ok(if explained {
        StatementKind::Query
    } else {
        kind
    })
}

/// Why `node` may not appear in a statement's plan, or `None` when it may. The match names
/// every kind of plan node (no wildcard): a kind DataFusion adds must be decided here before
/// the server compiles. `is_top` says whether the node is the statement itself (or what a plain
/// `EXPLAIN` explains), the only place a write may be.
fn refusal_of(node: &LogicalPlan, is_top: bool) -> Option<Status> {
    match node {
        // The relational operators of a read. Scans come only from the catalogs the server
        // registered and the table functions it allows (`engine`): no table factories, no URL
        // tables, so no scan can name a file.
        LogicalPlan::Projection(_)
        | LogicalPlan::Filter(_)
        | LogicalPlan::Window(_)
        | LogicalPlan::Aggregate(_)
        | LogicalPlan::Sort(_)
        | LogicalPlan::Join(_)
        | LogicalPlan::Repartition(_)
        | LogicalPlan::Union(_)
        | LogicalPlan::TableScan(_)
        | LogicalPlan::EmptyRelation(_)
        | LogicalPlan::Subquery(_)
        | LogicalPlan::SubqueryAlias(_)
        | LogicalPlan::Limit(_)
        | LogicalPlan::Values(_)
        | LogicalPlan::Distinct(_)
        | LogicalPlan::Unnest(_)
        | LogicalPlan::RecursiveQuery(_)
        | LogicalPlan::DescribeTable(_) => None,
        // EXPLAIN plans; EXPLAIN ANALYZE runs its input, which the walk checks (a write inside
        // it is not the statement itself, so it is refused).
        LogicalPlan::Explain(_) | LogicalPlan::Analyze(_) => None,
        LogicalPlan::Dml(_) if is_top => None,
        LogicalPlan::Dml(dml) => Some(nested_write(dml)),
        // Petrel's own statements (DDL, and the writes `plan_statement` plans), as the statement.
        LogicalPlan::Extension(_)
            if is_top && (is_petrel_write(node) || is_procedure_call(node)) =>
        {
            None
        }
        LogicalPlan::Extension(e) => Some(Status::permission_denied(format!(
            "{} is only allowed as the statement itself",
            e.node.name()
        ))),
        LogicalPlan::Copy(_) => Some(Status::permission_denied(
            "COPY ... TO is not allowed: SQL cannot write files; INSERT INTO an Iceberg \
             table of a configured catalog instead",
        )),
        LogicalPlan::Ddl(ddl) => Some(refuse_ddl(ddl)),
        LogicalPlan::Statement(s) => Some(Status::permission_denied(format!(
            "statement not allowed ({}): only queries, Iceberg DDL and writes to Iceberg tables \
             are accepted",
            s.name()
        ))),
    }
}

fn check_dml(dml: &DmlStatement, policy: &Policy<'_>) -> Result<StatementKind, Status> {
    let target = dml
        .table_name
        .clone()
        .resolve(policy.default_catalog, policy.default_schema);
    let name = target.to_string();
    match &dml.op {
        WriteOp::Insert(InsertOp::Append | InsertOp::Overwrite) => {}
        WriteOp::Insert(InsertOp::Replace) => {
            return Err(Status::unimplemented(format!(
                "REPLACE INTO / INSERT OR REPLACE is not supported ({name}); use INSERT INTO \
                 or INSERT OVERWRITE"
            )));
        }
        // Planned by `petrel_table_provider::row_level` (merge-on-read deletes).
        WriteOp::Delete => {}
        // Planned by `petrel_table_provider::row_level` too.
        WriteOp::Update => {}
        WriteOp::Ctas => {
            return Err(Status::unimplemented(format!(
                "CREATE TABLE AS SELECT is not supported yet ({name})"
            )));
        }
        WriteOp::Truncate => {
            return Err(Status::unimplemented(format!(
                "TRUNCATE is not supported yet ({name})"
            )));
        }
    }
    let what = match &dml.op {
        WriteOp::Insert(_) => "INSERT into",
        WriteOp::Delete => "DELETE from",
        WriteOp::Update => "UPDATE of",
        WriteOp::Ctas | WriteOp::Truncate => "writing",
    };
    if policy.read_only {
        return Err(Status::permission_denied(format!(
            "{what} {name} refused: this Petrel server is read-only (--read-only, \
             read_only = true or PETREL_READ_ONLY)"
        )));
    }
    let metadata_table = source_as_provider(&dml.target).is_ok_and(|p| {
        p.as_any()
            .downcast_ref::<petrel_table_provider::MetadataTableProvider>()
            .is_some()
    });
    if metadata_table {
        return Err(Status::permission_denied(format!(
            "{what} {name} is not allowed: metadata tables ($snapshots, $files, …) are read-only"
        )));
    }
    let in_iceberg_catalog = policy
        .iceberg_catalogs
        .iter()
        .any(|c| c.as_str() == target.catalog.as_ref());
    let iceberg_table = source_as_provider(&dml.target)
        .map(|p| is_iceberg(p.as_ref()))
        .unwrap_or(false);
    if !in_iceberg_catalog || !iceberg_table {
        return Err(Status::permission_denied(format!(
            "{what} {name} is not allowed: only tables of the server's Iceberg catalogs \
             ({}) can be written",
            policy.iceberg_catalogs.join(", ")
        )));
    }
    Ok(StatementKind::Insert(name))
}

fn is_iceberg(provider: &dyn TableProvider) -> bool {
    provider
        .as_any()
        .downcast_ref::<IcebergTableProvider>()
        .is_some()
}

fn nested_write(dml: &DmlStatement) -> Status {
    Status::permission_denied(format!(
        "a write ({} into {}) is only allowed as the statement itself, not inside another \
         (EXPLAIN ANALYZE would run it)",
        dml.op.name(),
        dml.table_name
    ))
}

fn refuse_ddl(ddl: &DdlStatement) -> Status {
    match ddl {
        DdlStatement::CreateExternalTable(_) => Status::permission_denied(
            "CREATE EXTERNAL TABLE is not allowed: SQL cannot read or write files outside the \
             configured Iceberg catalogs",
        ),
        other => Status::permission_denied(format!(
            "DDL is not supported ({}): Petrel runs queries, DML and Spark's DDL (schemas, \
             tables, branches and tags) on Iceberg catalogs",
            other.name()
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::datasource::MemTable;
    use datafusion::prelude::SessionContext;
    use tonic::Code;

    use super::*;

    async fn plan(sql: &str) -> LogicalPlan {
        let ctx = SessionContext::new();
        let schema = Arc::new(Schema::new(vec![Field::new("a", DataType::Int64, true)]));
        let table = MemTable::try_new(schema, vec![vec![]]).unwrap();
        ctx.register_table("t", Arc::new(table)).unwrap();
        ctx.state().create_logical_plan(sql).await.unwrap()
    }

    fn policy(read_only: bool) -> Policy<'static> {
        static CATALOGS: std::sync::LazyLock<Vec<String>> =
            std::sync::LazyLock::new(|| vec!["datafusion".to_string()]);
        Policy {
            iceberg_catalogs: &CATALOGS,
            default_catalog: "datafusion",
            default_schema: "public",
            read_only,
        }
    }

    async fn refused(sql: &str) -> Status {
        check(&plan(sql).await, &policy(false)).unwrap_err()
    }

    #[tokio::test]
    async fn queries_pass_and_writes_to_other_tables_do_not() {
        assert_eq!(
            check(&plan("SELECT * FROM t").await, &policy(false)).unwrap(),
            StatementKind::Query
        );
        // A memory table in a catalog named like an Iceberg one: still not an Iceberg table.
        let s = refused("INSERT INTO t VALUES (1)").await;
        assert_eq!(s.code(), Code::PermissionDenied, "{s}");
        assert!(s.message().contains("only tables of"), "{s}");
        let s = check(&plan("INSERT INTO t VALUES (1)").await, &policy(true)).unwrap_err();
        assert!(s.message().contains("read-only"), "{s}");
    }

    #[tokio::test]
    async fn file_writes_ddl_and_unsupported_writes_are_refused() {
        for (sql, code, needle) in [
            (
                "COPY (SELECT 1) TO '/tmp/x.csv'",
                Code::PermissionDenied,
                "COPY",
            ),
            (
                "CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'",
                Code::PermissionDenied,
                "CREATE EXTERNAL TABLE",
            ),
            ("CREATE TABLE n (a INT)", Code::PermissionDenied, "DDL"),
            ("DROP TABLE t", Code::PermissionDenied, "DDL"),
            (
                "SET datafusion.execution.batch_size = 1",
                Code::PermissionDenied,
                "statement",
            ),
            // Allowed for Iceberg tables only.
            (
                "DELETE FROM t WHERE a = 1",
                Code::PermissionDenied,
                "only tables of",
            ),
            (
                "UPDATE t SET a = 2",
                Code::PermissionDenied,
                "only tables of",
            ),
            (
                "REPLACE INTO t VALUES (1)",
                Code::Unimplemented,
                "REPLACE INTO",
            ),
            (
                "EXPLAIN ANALYZE INSERT INTO t VALUES (1)",
                Code::PermissionDenied,
                "statement itself",
            ),
        ] {
            let s = refused(sql).await;
            assert_eq!(s.code(), code, "{sql}: {s}");
            assert!(s.message().contains(needle), "{sql}: {s}");
        }
    }
}
