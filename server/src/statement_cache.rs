//! Optimized plans of queries run before, for the next run of the same text.
//!
//! Dashboards and drivers send the same query text again and again: a BI tile's refresh, a
//! connection pool's validation query, ADBC preparing and executing every statement. For a
//! small query, parsing, the catalog lookups and DataFusion's logical optimizer cost as much as
//! running it (about a third of the server's CPU for a `count(*)` answered from the manifests:
//! `docs/benchmarks.md`). So after a query without parameters runs, its optimized logical plan
//! is kept under its exact SQL text and session defaults; planning the same text again takes
//! the kept plan when every table it scans is still at the version planned (`plan_freshness`:
//! the same catalog read a fresh plan makes, so another writer's commit is seen at once), and
//! its execution goes straight to physical planning, which plans the Iceberg scan anew.
//!
//! Only plans whose result is fixed by their text and the versions of the tables they read are
//! kept:
//!
//! - every table is an Iceberg table of a configured catalog, plainly read at its current
//!   version (not time travel, metadata tables, table functions or other providers:
//!   `plan_freshness`; nor a row-level write's target);
//! - no writes, DDL, extension nodes (Petrel's own statements), `EXPLAIN`, `DESCRIBE` or
//!   session statements;
//! - no parameters, and only immutable functions: the optimizer folds `now()`,
//!   `current_date()` and every other stable function into a literal, so a plan calling one is
//!   planned anew each time (volatile ones such as `random()` are never folded and are fine);
//! - the optimizer kept every scan of the plan it was given (a plan reduced to nothing would no
//!   longer notice that its table was dropped).
//!
//! The server's configuration does not change while it runs, and statements are checked by the
//! same plan-walking policy whoever sends them, so the text and the session defaults decide the
//! plan. At most [`STATEMENT_CAPACITY`] plans weighing [`STATEMENT_CACHE_BYTES`] together are
//! kept; the least recently used go first, and a plan found stale is dropped.

use std::collections::VecDeque;
use std::sync::Mutex;

use arrow::datatypes::SchemaRef;
use datafusion::common::tree_node::{TreeNode, TreeNodeRecursion};
use datafusion::logical_expr::{Expr, LogicalPlan, Volatility};
use petrel_table_provider::cache_stats::CacheStats;

use crate::locks::lock;
use crate::plan_freshness::{TableRead, tables_read};
use crate::proto::petrel::SessionDefaults;

/// Plans kept at most.
pub(crate) const STATEMENT_CAPACITY: usize = 256;
/// Estimated bytes of all kept plans at most.
pub(crate) const STATEMENT_CACHE_BYTES: usize = 64 << 20;
/// What a kept table version is counted as (its metadata is shared with the catalog's loads,
/// but a kept plan can keep an old version alive until the plan is found stale).
const TABLE_WEIGHT: usize = 64 << 10;

/// A kept plan, as a lookup returns it.
#[derive(Debug, Clone)]
pub(crate) struct KeptStatement {
    /// The optimized logical plan.
    pub plan: LogicalPlan,
    /// The result schema as sent over Flight.
    pub schema: SchemaRef,
    /// The tables it scans, at the versions planned.
    pub tables: Vec<TableRead>,
}

struct Entry {
    sql: String,
    session: SessionDefaults,
    kept: KeptStatement,
    bytes: usize,
}

#[derive(Default)]
struct Entries {
    /// Least recently used first.
    list: VecDeque<Entry>,
    bytes: usize,
    hits: u64,
    misses: u64,
}

impl Entries {
    fn position(&self, sql: &str, session: &SessionDefaults) -> Option<usize> {
        self.list
            .iter()
            .position(|e| e.sql == sql && e.session == *session)
    }

    fn remove(&mut self, at: usize) -> Option<Entry> {
        let entry = self.list.remove(at)?;
        self.bytes -= entry.bytes;
        Some(entry)
    }
}

/// The optimized plans of recent query texts (module docs).
#[derive(Default)]
pub(crate) struct StatementCache {
    entries: Mutex<Entries>,
}

impl std::fmt::Debug for StatementCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementCache")
            .field("entries", &lock(&self.entries).list.len())
            .finish()
    }
}

/// What may be kept of `plan` (unoptimized, as planned from the text): the tables it reads,
/// when its result is fixed by its text and their versions (module docs); `None` otherwise.
pub(crate) fn keepable(plan: &LogicalPlan) -> Option<Vec<TableRead>> {
    let mut fixed = true;
    let walked = plan.apply_with_subqueries(|node| {
        fixed = !matches!(
            node,
            LogicalPlan::Explain(_)
                | LogicalPlan::Analyze(_)
                | LogicalPlan::DescribeTable(_)
                | LogicalPlan::Statement(_)
        );
        node.apply_expressions(|expr| {
            fixed &= !expr.exists(|e| Ok(!immutable(e)))?;
            Ok(continue_if(fixed))
        })?;
        Ok(continue_if(fixed))
    });
    // The scans (plain reads of Iceberg tables at their current version): `plan_freshness`.
    (walked.is_ok() && fixed)
        .then(|| tables_read(plan))
        .flatten()
}

fn continue_if(go_on: bool) -> TreeNodeRecursion {
    if go_on {
        TreeNodeRecursion::Continue
    } else {
        TreeNodeRecursion::Stop
    }
}

/// The table scans in `plan`, subqueries included.
fn scans(plan: &LogicalPlan) -> usize {
    let mut n = 0;
    // (The closure never fails; an error would only leave the count lower.)
    let _ = plan.apply_with_subqueries(|node| {
        n += usize::from(matches!(node, LogicalPlan::TableScan(_)));
        Ok(TreeNodeRecursion::Continue)
    });
    n
}

/// Whether the optimized form of `expr` itself (not its children) may serve later runs: a
/// stable function is folded into this run's value and a placeholder takes each run's
/// parameter; everything else is a constant of the text or evaluated when the plan runs
/// (volatile functions such as `random()` are never folded).
fn immutable(expr: &Expr) -> bool {
    match expr {
        Expr::Placeholder(_) => false,
        Expr::ScalarFunction(f) => f.func.signature().volatility != Volatility::Stable,
        _ => true,
    }
}

/// An estimate of the memory a kept plan holds.
fn weight(sql: &str, kept: &KeptStatement) -> usize {
    let (mut nodes, mut exprs) = (0usize, 0usize);
    // (The closure never fails; an error would only leave the counts lower.)
    let _ = kept.plan.apply_with_subqueries(|node| {
        nodes += 1;
        exprs += node.expressions().len();
        Ok(TreeNodeRecursion::Continue)
    });
    sql.len()
        + nodes * 1024
        + exprs * 256
        + kept.schema.fields().len() * 256
        + kept.tables.len() * TABLE_WEIGHT
}

impl StatementCache {
    /// The plan kept for `sql` under `session`, if any (counted as a hit or a miss; whether
    /// its tables are still current is the caller's to check, and [`Self::forget`] drops it
    /// when they are not).
    pub(crate) fn lookup(&self, sql: &str, session: &SessionDefaults) -> Option<KeptStatement> {
        let mut entries = lock(&self.entries);
        let Some(at) = entries.position(sql, session) else {
            entries.misses += 1;
            return None;
        };
        entries.hits += 1;
        // Most recently used last.
        let entry = entries.list.remove(at)?;
        let kept = entry.kept.clone();
        entries.list.push_back(entry);
        Some(kept)
    }

    /// Keeps `optimized` (the optimizer's result for a plan `keepable` answered `tables`
    /// for) for the next run of `sql` under `session`, replacing an older plan of the same
    /// text. Not kept when the optimizer dropped a scan, or when it alone outweighs the cache.
    pub(crate) fn keep(
        &self,
        sql: &str,
        session: &SessionDefaults,
        optimized: LogicalPlan,
        schema: SchemaRef,
        tables: Vec<TableRead>,
    ) {
        if scans(&optimized) != tables.len() {
            return;
        }
        let kept = KeptStatement {
            plan: optimized,
            schema,
            tables,
        };
        let bytes = weight(sql, &kept);
        if bytes > STATEMENT_CACHE_BYTES {
            return;
        }
        let mut entries = lock(&self.entries);
        if let Some(at) = entries.position(sql, session) {
            entries.remove(at);
        }
        while entries.list.len() >= STATEMENT_CAPACITY
            || (!entries.list.is_empty() && entries.bytes + bytes > STATEMENT_CACHE_BYTES)
        {
            entries.remove(0);
        }
        entries.bytes += bytes;
        entries.list.push_back(Entry {
            sql: sql.to_string(),
            session: session.clone(),
            kept,
            bytes,
        });
    }

    /// Drops the plan kept for `sql` under `session` (found stale).
    pub(crate) fn forget(&self, sql: &str, session: &SessionDefaults) {
        let mut entries = lock(&self.entries);
        if let Some(at) = entries.position(sql, session) {
            entries.remove(at);
        }
    }

    /// Entries, weight and lookups, for `petrel_cache_*{cache="statement"}`.
    pub(crate) fn stats(&self) -> CacheStats {
        let entries = lock(&self.entries);
        CacheStats {
            name: "statement",
            entries: entries.list.len() as u64,
            bytes: entries.bytes as u64,
            capacity_bytes: STATEMENT_CACHE_BYTES as u64,
            hits: entries.hits,
            misses: entries.misses,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::prelude::SessionContext;

    use super::*;

    async fn plan(sql: &str) -> (LogicalPlan, SchemaRef) {
        let frame = SessionContext::new().sql(sql).await.unwrap();
        let schema = Arc::new(frame.schema().as_arrow().clone());
        (frame.logical_plan().clone(), schema)
    }

    fn session(schema: &str) -> SessionDefaults {
        SessionDefaults {
            catalog: "iceberg".into(),
            schema: schema.into(),
        }
    }

    #[tokio::test]
    async fn only_plans_fixed_by_their_text_are_keepable() {
        assert_eq!(
            keepable(&plan("SELECT 1 + 2").await.0).map(|t| t.len()),
            Some(0)
        );
        assert!(
            keepable(&plan("SELECT random() < 2").await.0).is_some(),
            "volatile functions are never folded"
        );
        for sql in [
            "SELECT now()",
            "SELECT current_date() + 1",
            "SELECT 1 WHERE 1 IN (SELECT 1 WHERE now() IS NOT NULL)",
            "SELECT $1",
            "EXPLAIN SELECT 1",
            // Not an Iceberg table (a table function's, DataFusion's in-memory ones).
            "SELECT count(*) FROM generate_series(1, 3)",
        ] {
            assert!(keepable(&plan(sql).await.0).is_none(), "{sql}");
        }
    }

    #[tokio::test]
    async fn kept_by_text_and_session_least_recently_used_first_out() {
        let cache = StatementCache::default();
        let (one, schema) = plan("SELECT 1").await;
        let keep = |sql: &str| {
            cache.keep(sql, &session("a"), one.clone(), Arc::clone(&schema), vec![]);
        };
        keep("SELECT 1");
        assert!(cache.lookup("SELECT 1", &session("a")).is_some());
        assert!(
            cache.lookup("SELECT 1", &session("b")).is_none(),
            "another session"
        );
        assert!(
            cache.lookup("SELECT  1", &session("a")).is_none(),
            "another text"
        );
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.hits, stats.misses), (1, 1, 2));

        // Full: the least recently used goes first; a lookup counts as a use.
        for i in 1..STATEMENT_CAPACITY {
            let sql = format!("SELECT {i} -- {i}");
            keep(&sql);
        }
        assert_eq!(cache.stats().entries, STATEMENT_CAPACITY as u64);
        assert!(cache.lookup("SELECT 1", &session("a")).is_some());
        keep("SELECT new");
        assert_eq!(cache.stats().entries, STATEMENT_CAPACITY as u64);
        assert!(
            cache.lookup("SELECT 1", &session("a")).is_some(),
            "used: kept"
        );
        assert!(
            cache.lookup("SELECT 1 -- 1", &session("a")).is_none(),
            "the least recently used went"
        );
        // The same text again replaces its plan; a stale one is forgotten.
        keep("SELECT new");
        assert_eq!(cache.stats().entries, STATEMENT_CAPACITY as u64);
        cache.forget("SELECT new", &session("a"));
        assert!(cache.lookup("SELECT new", &session("a")).is_none());
        assert_eq!(cache.stats().entries, STATEMENT_CAPACITY as u64 - 1);
        assert!(cache.stats().bytes <= STATEMENT_CACHE_BYTES as u64);
    }
}
