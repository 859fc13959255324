//! The query engine behind the Flight SQL service.
//!
//! [`QueryEngine`] owns a template DataFusion `SessionState` in which every configured catalog is
//! registered (an `IcebergCatalogProvider` per Iceberg catalog). Each statement is planned in a
//! fresh `SessionContext` derived from it, with:
//!
//! - the caller's session defaults (current catalog and schema);
//! - `SQLOptions` that refuse DDL, DML and `SET`-style statements, an allow-list of table
//!   functions (`generate_series`, `range`) and no table factories, so SQL can neither read nor
//!   write the server's files (no `CREATE EXTERNAL TABLE`, `COPY`, URL tables);
//! - its own memory pool (`--query-memory-limit`), attached when the statement executes (the
//!   `TaskContext` gets a `RuntimeEnv` with the query's pool: `query_report::execute`): a query
//!   over the limit fails with RESOURCE_EXHAUSTED and the server keeps serving.
//!
//! Building a `SessionState` re-registers every built-in function, so the state of each
//! (catalog, schema) default is built once and cloned per statement ([`QueryEngine::context`]).
//! Its runtime's pool is the server-wide pool, which anything run outside a statement's task
//! context would take from (the query limit is the task context's).
//!
//! Execution ([`QueryEngine::execute`]) takes a work slot (`admission`, shared with planning
//! RPCs and metadata calls), streams batches as DataFusion produces them, and holds the query's
//! entry in the cancellation registry (`cancellation`) so CancelFlightInfo / CancelQuery can
//! stop it. Dropping the stream (a client that disconnects, or a cancel) stops the work:
//! DataFusion's tasks are aborted on drop and their memory returned to the pool.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use arrow::array::{RecordBatch, UInt64Array};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::catalog::CatalogProvider;
use datafusion::common::{ParamValues, ScalarValue};
use datafusion::dataframe::DataFrame;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::context::{SQLOptions, SessionConfig, SessionContext, SessionState};
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::logical_expr::{DmlStatement, LogicalPlan, Union, WriteOp};
use futures::stream::{BoxStream, Stream, StreamExt, TryStreamExt};
use petrel_table_provider::catalog::Catalog;
use petrel_table_provider::changes::TableChangesFunction;
use petrel_table_provider::checked_arithmetic::CheckArithmetic;
use petrel_table_provider::output_limits;
use petrel_table_provider::statements::{is_petrel_write, is_procedure_call, plan_statement};
use petrel_table_provider::{
    ColumnCache, IcebergCatalogProvider, NarrowStructColumns, NestedValuesTypes,
    PetrelQueryPlanner, RowLevelDml, ScanPlanner, SignedZeroEquality, SingleRowSubqueries,
};
use tokio_util::sync::WaitForCancellationFutureOwned;
use tonic::Status;

use crate::admission::{Admission, Admitted};
use crate::cancellation::{Cancellations, Registration};
use crate::error::{Error, df_status};
use crate::executor::{QueryExecutor, is_write, parameter_schema};
use crate::information_schema::TruthfulNumericPrecision;
use crate::memory::ServerMemory;
use crate::parameters::{DEFAULT_MAX_PARAMETER_ROWS, ParameterRows};
use crate::plan_cache::{PREPARED_PLAN_MAX_AGE, PlanCache, prepared_plan_ticket};
use crate::plan_freshness::{reads_current_tables, still_current};
use crate::policy::{self, Policy};
use crate::proto::petrel::{PreparedStatementHandle, SessionDefaults, StatementTicket};
use crate::query_report::QueryReport;
use crate::sql_text::{normalize_sql, order_placeholders};
use crate::statement_cache::{StatementCache, keepable};

/// A catalog as the server sees it: Iceberg catalogs are listed through Petrel's async
/// [`Catalog`] trait (metadata calls, primary keys); other DataFusion catalogs (tests,
/// benchmarks) through DataFusion's `CatalogProvider`.
#[derive(Debug, Clone)]
pub enum CatalogSource {
    /// An Iceberg catalog.
    Iceberg(Arc<dyn Catalog>),
    /// Any DataFusion catalog (in-memory tables).
    DataFusion(Arc<dyn CatalogProvider>),
}

/// Limits and tuning for [`QueryEngine`].
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// DataFusion target partitions (None: number of cores).
    pub target_partitions: Option<usize>,
    /// The server-wide memory pool and the per-query limit inside it.
    pub memory: ServerMemory,
    /// Parameter rows one execution may bind.
    pub max_parameter_rows: usize,
    /// Queries executing at once.
    pub max_concurrent_queries: usize,
    /// How long a query waits for an execution slot.
    pub queue_timeout: Duration,
    /// Refuse every write (`--read-only`).
    pub read_only: bool,
    /// The Ballista cluster big reads go to (`--engine`; None: every query runs here).
    pub cluster: Option<petrel_distributed::ClusterEngine>,
    /// Decoded columns kept across queries, shared by every Iceberg catalog (`--column-cache`).
    pub column_cache: ColumnCache,
    /// Disk space all queries together may spill to (`--spill-limit`; 0: no spilling).
    pub spill_limit: u64,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            target_partitions: None,
            memory: ServerMemory::new(None, None),
            max_parameter_rows: DEFAULT_MAX_PARAMETER_ROWS,
            max_concurrent_queries: 16,
            queue_timeout: Duration::from_secs(30),
            read_only: false,
            cluster: None,
            column_cache: ColumnCache::default(),
            spill_limit: crate::spill::MAX_DEFAULT_SPILL_LIMIT,
        }
    }
}

/// Plans and runs SQL over the configured catalogs.
pub struct QueryEngine {
    base: SessionState,
    catalogs: Vec<(String, CatalogSource)>,
    /// The Iceberg catalogs' names (the only write targets).
    iceberg_catalogs: Vec<String>,
    options: EngineOptions,
    /// Work slots shared by queries, writes, planning RPCs and metadata calls.
    admission: Admission,
    /// Running queries and the fate of recent ones (CancelFlightInfo).
    cancellations: Arc<Cancellations>,
    /// Statements planned by GetFlightInfo, waiting for their DoGet.
    planned: PlanCache,
    /// Optimized plans of query texts run before (`statement_cache`).
    statements: StatementCache,
    /// `base` with each (catalog, schema) default seen, built once (module docs).
    states: Mutex<HashMap<(String, String), SessionState>>,
}

/// Session states kept by (catalog, schema) default; the map starts over when it is full.
const STATES_KEPT: usize = 64;

impl std::fmt::Debug for QueryEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryEngine")
            .field("catalogs", &self.catalogs)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// A planned statement.
#[derive(Debug)]
pub struct Planned {
    /// The DataFrame (parameters bound, if any were given).
    pub frame: DataFrame,
    /// The result schema as sent over Flight.
    pub schema: SchemaRef,
    /// The frame's plan is already optimized (a kept plan: `statement_cache`); execution
    /// goes straight to physical planning.
    pub optimized: bool,
}

impl Planned {
    /// A statement planned from its text (not yet optimized).
    pub fn new(frame: DataFrame, schema: SchemaRef) -> Self {
        Self {
            frame,
            schema,
            optimized: false,
        }
    }
}

impl QueryEngine {
    /// An engine serving `catalogs` (name, source), in order; the first is the default catalog
    /// unless `defaults` names another.
    pub fn new(catalogs: Vec<(String, CatalogSource)>, options: EngineOptions) -> Self {
        let mut config = SessionConfig::new()
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(true);
        if let Some(n) = options.target_partitions {
            config = config.with_target_partitions(n.max(1));
        }
        // `9999999.99` is the exact decimal it spells, as in Spark, Trino and PostgreSQL, not
        // the nearest double: compared with a decimal column, a double literal carried its
        // rounding error into the comparison (`dec >= 9999999.99` missed the row holding it).
        config.options_mut().sql_parser.parse_float_as_decimal = true;
        // The statements' pools are attached at execution (`query_report::execute`); the
        // template's own is the server-wide pool.
        let runtime = RuntimeEnvBuilder::new()
            .with_memory_pool(Arc::clone(options.memory.shared()))
            .with_disk_manager_builder(crate::spill::disk_manager(options.spill_limit))
            .build_arc()
            // (Fails only when the OS temp directory is unusable: DataFusion's default then.)
            .ok();
        // One function call's output, and one plan node's copies of literals, are bounded
        // before Arrow allocates them (`output_limits`).
        let output_limit = output_limits::output_limit(options.memory.query_limit());
        let mut state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(runtime.unwrap_or_default())
            .with_default_features()
            .with_optimizer_rule(Arc::new(SignedZeroEquality::new()))
            .with_optimizer_rule(Arc::new(NestedValuesTypes::new()))
            .with_optimizer_rule(Arc::new(output_limits::LiteralCopies::new(output_limit)))
            .with_physical_optimizer_rule(Arc::new(NarrowStructColumns::new()))
            // Joins, windows and `unnest` copy one row into many: their inputs are checked so
            // that a batch of copies stays within the query's memory (`output_limits`).
            .with_physical_optimizer_rule(Arc::new(output_limits::BoundRowCopies::new(
                output_limits::copy_limit(options.memory.query_limit()),
            )))
            .with_query_planner(match &options.cluster {
                Some(cluster) => cluster.query_planner(Arc::new(PetrelQueryPlanner)),
                None => Arc::new(PetrelQueryPlanner),
            })
            .with_analyzer_rule(Arc::new(RowLevelDml::new()))
            .with_analyzer_rule(Arc::new(SingleRowSubqueries))
            .with_analyzer_rule(Arc::new(TruthfulNumericPrecision))
            .with_analyzer_rule(Arc::new(output_limits::BoundFunctionOutputs::new(
                output_limits::bounded_scalar_functions(output_limit),
            )))
            // Integer and decimal `+`, `-`, `*` fail on overflow instead of wrapping around.
            .with_analyzer_rule(Arc::new(CheckArithmetic::new()))
            .with_table_factories(HashMap::new())
            .with_table_functions(
                datafusion::functions_table::all_default_table_functions()
                    .into_iter()
                    .filter(|f| policy::TABLE_FUNCTIONS.contains(&f.name()))
                    .map(|f| (f.name().to_string(), f))
                    .collect(),
            )
            .build();
        // Grouped `min` / `max` of floats in the same order as ungrouped (NaN greatest), the
        // single-row check of scalar subqueries (`SingleRowSubqueries`), and the bounded
        // growing functions (`output_limits`).
        if let Err(e) = petrel_table_provider::register_functions(&mut state, output_limit) {
            tracing::warn!(error = %e, "Petrel's functions not registered");
        }
        for (name, source) in &catalogs {
            let provider: Arc<dyn CatalogProvider> = match source {
                CatalogSource::Iceberg(c) => Arc::new(IcebergCatalogProvider::with_planner(
                    Arc::clone(c),
                    Arc::new(
                        ScanPlanner::default().with_column_cache(options.column_cache.clone()),
                    ),
                )),
                CatalogSource::DataFusion(p) => Arc::clone(p),
            };
            state
                .catalog_list()
                .register_catalog(name.clone(), provider);
        }
        // Petrel's change feed over the Iceberg catalogs (two-part names: the first catalog).
        let mut changes = TableChangesFunction::new(Arc::clone(state.catalog_list()));
        if let Some((name, _)) = catalogs
            .iter()
            .find(|(_, s)| matches!(s, CatalogSource::Iceberg(_)))
        {
            changes = changes.with_default_catalog(name.clone());
        }
        state.register_udtf("table_changes", Arc::new(changes));
        let admission = Admission::new(options.max_concurrent_queries, options.queue_timeout);
        let iceberg_catalogs = catalogs
            .iter()
            .filter(|(_, s)| matches!(s, CatalogSource::Iceberg(_)))
            .map(|(n, _)| n.clone())
            .collect();
        Self {
            base: state,
            catalogs,
            iceberg_catalogs,
            options,
            admission,
            cancellations: Cancellations::new(),
            planned: PlanCache::default(),
            statements: StatementCache::default(),
            states: Mutex::new(HashMap::new()),
        }
    }

    /// The configured catalogs, in order.
    pub fn catalogs(&self) -> &[(String, CatalogSource)] {
        &self.catalogs
    }

    /// The engine's limits.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// The work slots (`admission`): planning RPCs and metadata calls take one too.
    pub fn admission(&self) -> &Admission {
        &self.admission
    }

    /// The cancellation registry.
    pub fn cancellations(&self) -> &Arc<Cancellations> {
        &self.cancellations
    }

    /// Plans kept for their DoGet now (`plan_cache`).
    pub fn plans_kept(&self) -> usize {
        self.planned.len()
    }

    /// The kept optimized plans of query texts (`statement_cache`), for metrics.
    pub fn statement_cache_stats(&self) -> petrel_table_provider::cache_stats::CacheStats {
        self.statements.stats()
    }

    /// The template session state (catalogs, runtime and its caches), for metrics.
    pub fn state(&self) -> &SessionState {
        &self.base
    }

    /// A fresh context for one statement under `session`: a clone of the state kept for its
    /// (catalog, schema) default. Its runtime has no query pool yet: executing a statement's
    /// plan goes through `query_report::execute`, which attaches one.
    pub fn context(&self, session: &SessionDefaults) -> Result<SessionContext, Status> {
        Ok(SessionContext::new_with_state(self.session_state(session)?))
    }

    /// [`Self::context`]'s state alone (one clone of the kept state, where
    /// `context(..).state()` makes two).
    fn session_state(&self, session: &SessionDefaults) -> Result<SessionState, Status> {
        let catalog = if session.catalog.is_empty() {
            self.catalogs
                .first()
                .map(|(n, _)| n.clone())
                .unwrap_or_else(|| "datafusion".into())
        } else {
            session.catalog.clone()
        };
        let schema = if session.schema.is_empty() {
            "default".to_string()
        } else {
            session.schema.clone()
        };
        let key = (catalog, schema);
        let mut states = self
            .states
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(state) = states.get(&key) {
            return Ok(state.clone());
        }
        let config = self
            .base
            .config()
            .clone()
            .with_default_catalog_and_schema(key.0.clone(), key.1.clone());
        let state = SessionStateBuilder::new_from_existing(self.base.clone())
            .with_config(config)
            .build();
        if states.len() >= STATES_KEPT {
            states.clear();
        }
        states.insert(key, state.clone());
        Ok(state)
    }

    /// Parses and plans `sql` (no parameters bound).
    pub async fn plan_sql(
        &self,
        sql: &str,
        session: &SessionDefaults,
    ) -> Result<DataFrame, Status> {
        let ctx = self.context(session)?;
        let started = Instant::now();
        let planned = self.plan_in(&ctx, sql).await;
        crate::metrics::global().planned(crate::metrics::Stage::Sql, started.elapsed());
        planned
    }

    async fn plan_in(&self, ctx: &SessionContext, sql: &str) -> Result<DataFrame, Status> {
        let state = ctx.state();
        crate::sql_limits::check(sql, state.config().options().sql_parser.dialect.as_ref())?;
        let text = normalize_sql(sql);
        let text = petrel_table_provider::rewrite_time_travel(&text)
            .map_err(|e| crate::error::to_status(&e))?;
        // Statements Petrel plans itself (Spark's DDL for Iceberg tables: CREATE/DROP SCHEMA,
        // CREATE TABLE [AS], DROP TABLE) become plans that run when executed, like an INSERT
        // (writes: run once).
        let options = state.config().options();
        let policy = Policy {
            iceberg_catalogs: &self.iceberg_catalogs,
            default_catalog: &options.catalog.default_catalog,
            default_schema: &options.catalog.default_schema,
            read_only: self.options.read_only,
        };
        if let Some(plan) = plan_statement(&state, &text)
            .await
            .map_err(|e| crate::error::to_status(&e))?
        {
            // Catalog views (`SHOW CREATE TABLE`, …) are reads: only writes and calls are
            // refused here.
            if self.options.read_only && (is_petrel_write(&plan) || is_procedure_call(&plan)) {
                return Err(Error::Refused(
                    "this server is read-only (read_only / --read-only): writes and DDL are \
                     refused"
                        .into(),
                )
                .into());
            }
            // Whatever such a statement reads (a MERGE's source) passes the same check.
            policy::check(&plan, &policy)?;
            return Ok(DataFrame::new(state, plan));
        }
        // Planning executes nothing; DDL would run in `SessionContext::sql`, so the plan is
        // checked (`policy`) before the context sees it.
        let planned = crate::engine_panics::guarded_async("planning", async {
            Ok(state.create_logical_plan(&text).await)
        })
        .await?;
        let plan = match planned {
            Ok(plan) => plan,
            Err(e) => return Err(crate::error::planning_error(&state, &text, e).await),
        };
        policy::check(&plan, &policy)?;
        // DataFusion's own switches stay on as a second line (the policy allowed at most an
        // INSERT INTO an Iceberg table).
        SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(!self.options.read_only)
            .with_allow_statements(false)
            .verify_plan(&plan)
            .map_err(|e| Status::from(Error::refused_by_sql_options(e)))?;
        ctx.execute_logical_plan(plan).await.map_err(df_status)
    }

    /// Keeps the plan of `ticket`'s statement for its DoGet (see `plan_cache`).
    pub fn keep_plan(&self, ticket: &StatementTicket, planned: Planned) {
        self.planned.insert(ticket, planned);
    }

    /// Keeps a CreatePreparedStatement's plan (of a read without parameters) for the
    /// GetFlightInfo of the same `handle` (see `plan_cache`).
    pub fn keep_prepared_plan(&self, handle: &PreparedStatementHandle, planned: Planned) {
        if let Some(ticket) = prepared_plan_ticket(handle) {
            self.planned.insert(&ticket, planned);
        }
    }

    /// The plan CreatePreparedStatement kept for `handle`, removed, when it is young enough and
    /// every table it scans is still at the version planned (`plan_freshness`); `None`: plan
    /// again.
    pub async fn take_prepared_plan(&self, handle: &PreparedStatementHandle) -> Option<Planned> {
        let ticket = prepared_plan_ticket(handle)?;
        let planned = self
            .planned
            .take_younger_than(&ticket, PREPARED_PLAN_MAX_AGE)?;
        reads_current_tables(planned.frame.logical_plan())
            .await
            .then_some(planned)
    }

    /// Plans `sql` and binds one row of `params` (if given); returns the frame and the schema
    /// the client will see.
    pub async fn plan(
        &self,
        sql: &str,
        session: &SessionDefaults,
        params: Option<Vec<ScalarValue>>,
    ) -> Result<Planned, Status> {
        if params.is_none()
            && let Some(kept) = self.kept_plan(sql, session).await?
        {
            return Ok(kept);
        }
        let frame = self.plan_sql(sql, session).await?;
        let frame = match params {
            Some(values) => bind(frame, values)?,
            None => frame,
        };
        let schema = flight_schema(frame.schema().inner());
        Ok(Planned::new(frame, schema))
    }

    /// The optimized plan kept from an earlier run of `sql` under `session`
    /// (`statement_cache`), when every table it scans is still at the version planned; a
    /// stale one is dropped. `None`: plan the text.
    async fn kept_plan(
        &self,
        sql: &str,
        session: &SessionDefaults,
    ) -> Result<Option<Planned>, Status> {
        let started = Instant::now();
        let Some(kept) = self.statements.lookup(sql, session) else {
            return Ok(None);
        };
        if !still_current(&kept.tables).await {
            self.statements.forget(sql, session);
            return Ok(None);
        }
        let state = self.session_state(session)?;
        let planned = Planned {
            frame: DataFrame::new(state, kept.plan),
            schema: kept.schema,
            optimized: true,
        };
        crate::metrics::global().planned(crate::metrics::Stage::Sql, started.elapsed());
        Ok(Some(planned))
    }

    /// Optimizes a query planned from its text and, when its result is fixed by its text and
    /// the tables' versions, keeps the optimized plan for the next run of the same text
    /// (`statement_cache`).
    fn optimize_and_keep(
        &self,
        ticket: &StatementTicket,
        session: &SessionDefaults,
        planned: Planned,
        observer: &crate::query_report::Observer,
    ) -> Result<DataFrame, Status> {
        if planned.optimized {
            return Ok(planned.frame);
        }
        let tables = if ticket.parameters.is_empty() {
            keepable(planned.frame.logical_plan())
        } else {
            None
        };
        let frame = crate::query_report::optimize(planned.frame, observer)?;
        if let Some(tables) = tables {
            self.statements.keep(
                &ticket.sql,
                session,
                frame.logical_plan().clone(),
                planned.schema,
                tables,
            );
        }
        Ok(frame)
    }

    /// Plans the write `sql` with every bound parameter row (IPC bytes; empty: none) as ONE
    /// statement: each row is bound to its own copy of the statement, and the copies' inputs
    /// are combined under one `INSERT` (UNION ALL), so a parameter batch is one commit. Several
    /// rows for any other write (DELETE, UPDATE, MERGE) are refused (UNIMPLEMENTED): each row
    /// would read the table and commit on its own.
    pub async fn plan_write(
        &self,
        sql: &str,
        session: &SessionDefaults,
        parameters: &[u8],
    ) -> Result<DataFrame, Status> {
        let rows = self.parameter_rows(parameters)?;
        let unbound = self.plan_sql(sql, session).await?;
        if rows.is_empty() {
            let n = parameter_schema(&unbound)?.fields().len();
            if n > 0 {
                return Err(Status::invalid_argument(format!(
                    "the statement has {n} parameter(s) but no values were bound"
                )));
            }
            return Ok(unbound);
        }
        if rows.len() == 1 {
            return bind(unbound, rows.row(0)?);
        }
        // Only INSERTs combine into one statement (their inputs, as one commit); a DELETE,
        // UPDATE or MERGE per row would each read the table and commit on its own.
        let binder = Binder::of(unbound.logical_plan())?;
        let (state, plan) = unbound.into_parts();
        let dml = match plan {
            LogicalPlan::Dml(dml) if matches!(dml.op, WriteOp::Insert(_)) => dml,
            _ => {
                return Err(Status::unimplemented(format!(
                    "{} bound parameter rows in one execution: only INSERT runs a batch of rows \
                     as one statement; bind and execute DELETE, UPDATE and MERGE one row at a \
                     time",
                    rows.len()
                )));
            }
        };
        // The input planned once, bound per row, under one flat union: a union of two built
        // row by row nested 10,000 deep, and planning it took minutes.
        let mut inputs = Vec::with_capacity(rows.len());
        for index in 0..rows.len() {
            let values = binder.values(rows.row(index)?)?;
            let input = dml
                .input
                .as_ref()
                .clone()
                .with_param_values(values)
                .map_err(df_status)?;
            inputs.push(Arc::new(input));
        }
        drop(rows);
        let union = LogicalPlan::Union(Union::try_new(inputs).map_err(df_status)?);
        let combined = DmlStatement::new(
            dml.table_name.clone(),
            Arc::clone(&dml.target),
            dml.op.clone(),
            Arc::new(union),
        );
        Ok(DataFrame::new(state, LogicalPlan::Dml(combined)))
    }

    /// Runs a planned write once (under an execution permit) and returns the rows it wrote.
    /// Logs one `query` line (rows = rows written) or `query failed`.
    pub async fn run_write(
        &self,
        frame: DataFrame,
        query_id: &[u8],
        user: &str,
        sql: &str,
    ) -> Result<u64, Status> {
        let report = QueryReport::new(query_id, user, sql);
        let observer = report.observer();
        let result = async {
            if !is_write(&frame) {
                return Err(Status::invalid_argument(
                    "not a write: updates accept INSERT, DELETE, UPDATE, MERGE INTO and DDL on \
                     Iceberg tables; run queries with CommandStatementQuery",
                ));
            }
            let _permit = self.admission.admit("write").await?;
            let pool = self.options.memory.query_pool();
            let stream = crate::query_report::execute(frame, &pool, &observer).await?;
            let batches: Vec<RecordBatch> = stream.try_collect().await.map_err(df_status)?;
            write_count(&batches)
        }
        .await;
        report.write_finished(&result);
        result
    }

    /// Runs a ticket's statement for `user`: once, or once per bound parameter row with the
    /// results concatenated. `registration` is the query's entry in the cancellation registry
    /// (taken before planning, so a cancel during planning or queueing is seen). Returns the
    /// result schema and the stream of batches (which logs and counts the query when it ends:
    /// `query_report`).
    pub async fn execute(
        &self,
        ticket: StatementTicket,
        user: &str,
        registration: Registration,
    ) -> Result<(SchemaRef, BoxStream<'static, Result<RecordBatch, Status>>), Status> {
        let report = QueryReport::new(&ticket.query_id, user, &ticket.sql);
        let observer = report.observer();
        let cancelled = || -> Status {
            Error::Cancelled("query cancelled (CancelFlightInfo / CancelQuery)".into()).into()
        };
        let token = registration.token().clone();
        let permit = tokio::select! {
            permit = self.admission.admit("query") => permit?,
            _ = token.cancelled() => return Err(cancelled()),
        };
        let session = ticket.session.clone().unwrap_or_default();
        let rows = self.parameter_rows(&ticket.parameters)?;
        // One pool for the query (every parameter row's execution).
        let pool = self.options.memory.query_pool();
        let (schema, stream): (SchemaRef, BoxStream<'static, _>) = if rows.is_empty() {
            let planned = match self.planned.take(&ticket) {
                Some(planned) => planned,
                // Planning (catalog and manifest reads) stops at a cancel too.
                None => tokio::select! {
                    planned = self.plan(&ticket.sql, &session, None) => planned?,
                    _ = token.cancelled() => return Err(cancelled()),
                },
            };
            refuse_write_ticket(&planned.frame)?;
            let schema = Arc::clone(&planned.schema);
            let started = Instant::now();
            let frame = self.optimize_and_keep(&ticket, &session, planned, &observer)?;
            let stream =
                crate::query_report::execute_optimized(frame, &pool, &observer, started).await?;
            (schema, stream.map(|r| r.map_err(df_status)).boxed())
        } else {
            // Planned once; each row is bound and run when the previous one's results are
            // sent, so only one row's plan exists at a time.
            let unbound = tokio::select! {
                unbound = self.plan_sql(&ticket.sql, &session) => unbound?,
                _ = token.cancelled() => return Err(cancelled()),
            };
            refuse_write_ticket(&unbound)?;
            // The placeholders' types are read once, not per row.
            let binder = Arc::new(Binder::of(unbound.logical_plan())?);
            let first = binder.bind(unbound.clone(), rows.row(0)?)?;
            let schema = flight_schema(first.schema().inner());
            let expected = Arc::clone(&schema);
            let rows = Arc::new(rows);
            let stream = futures::stream::iter(0..rows.len())
                .then(move |index| {
                    let (unbound, binder, rows, expected, observer, pool) = (
                        unbound.clone(),
                        Arc::clone(&binder),
                        Arc::clone(&rows),
                        Arc::clone(&expected),
                        observer.clone(),
                        Arc::clone(&pool),
                    );
                    async move {
                        let frame = rows
                            .row(index)
                            .and_then(|row| binder.bind(unbound, row))
                            .and_then(|frame| same_result_type(frame, &expected));
                        match frame {
                            Ok(frame) => {
                                match crate::query_report::execute(frame, &pool, &observer).await {
                                    Ok(s) => s.map(|r| r.map_err(df_status)).boxed(),
                                    Err(status) => {
                                        futures::stream::once(async move { Err(status) }).boxed()
                                    }
                                }
                            }
                            Err(status) => {
                                futures::stream::once(async move { Err(status) }).boxed()
                            }
                        }
                    }
                })
                .flatten()
                .boxed();
            (schema, stream)
        };
        // (A cancel during planning cancelled the token: the stream's first poll ends it.)
        let guarded = QueryStream {
            inner: crate::engine_panics::GuardedStream::new(stream).boxed(),
            cancelled: Box::pin(token.cancelled_owned()),
            done: false,
            permit: Some(permit),
            registration: Some(registration),
        };
        // The report logs and counts the query when its stream ends (`query_report`).
        Ok((schema, report.stream(guarded.boxed())))
    }

    /// The bound parameter rows of an execution (IPC bytes; empty: none), bounded by
    /// `max_parameter_rows` and counted in the server's memory.
    fn parameter_rows(&self, ipc: &[u8]) -> Result<ParameterRows, Status> {
        ParameterRows::decode(ipc, self.options.max_parameter_rows, &self.options.memory)
    }
}

/// Binds one row of values to the frame's placeholders, casting each to the type DataFusion
/// inferred for it (clients bind Python ints as Int64 against Int32 columns, say).
fn bind(frame: DataFrame, values: Vec<ScalarValue>) -> Result<DataFrame, Status> {
    Binder::of(frame.logical_plan())?.bind(frame, values)
}

/// A plan's placeholders (`$1`, `$2`, …) and the types DataFusion inferred for them, to bind
/// rows of values to it.
struct Binder {
    ids: Vec<String>,
    types: HashMap<String, Option<DataType>>,
}

impl Binder {
    fn of(plan: &LogicalPlan) -> Result<Self, Status> {
        let types = plan.get_parameter_types().map_err(df_status)?;
        let mut ids: Vec<String> = types.keys().cloned().collect();
        order_placeholders(&mut ids);
        for (i, id) in ids.iter().enumerate() {
            if id != &format!("${}", i + 1) {
                return Err(Status::invalid_argument(format!(
                    "parameters must be numbered $1..${} (found {id})",
                    ids.len()
                )));
            }
        }
        Ok(Self { ids, types })
    }

    /// `frame` (the plan this binder was made of) with one row of values bound.
    fn bind(&self, frame: DataFrame, values: Vec<ScalarValue>) -> Result<DataFrame, Status> {
        frame
            .with_param_values(self.values(values)?)
            .map_err(df_status)
    }

    /// One row's values, each cast to its placeholder's type.
    fn values(&self, values: Vec<ScalarValue>) -> Result<ParamValues, Status> {
        if self.ids.len() != values.len() {
            return Err(Status::invalid_argument(format!(
                "the statement has {} parameter(s) but {} value(s) were bound",
                self.ids.len(),
                values.len()
            )));
        }
        let mut bound = Vec::with_capacity(values.len());
        for (id, value) in self.ids.iter().zip(values) {
            let value = match self.types.get(id).cloned().flatten() {
                Some(ty) if ty != value.data_type() && !value.is_null() => {
                    // (The value itself stays out of the message, which the query log records.)
                    value.cast_to(&ty).map_err(|_| {
                        Status::invalid_argument(format!(
                            "parameter {id}: a {} value cannot be used where {ty} is expected",
                            value.data_type()
                        ))
                    })?
                }
                Some(ty) if value.is_null() => ScalarValue::try_from(&ty).unwrap_or(value),
                _ => value,
            };
            bound.push(value);
        }
        Ok(ParamValues::from(bound))
    }
}

/// A DoGet ticket never runs a write: writes run once, when GetFlightInfo or DoPut receives
/// them, and their ticket carries the result (`tickets::write_result_ticket`). A statement
/// ticket with a write in it was not issued by Petrel for this statement (or comes from a
/// prepared-statement DoGet without GetFlightInfo); running it could insert twice.
fn refuse_write_ticket(frame: &DataFrame) -> Result<(), Status> {
    if is_write(frame) {
        return Err(Status::invalid_argument(
            "this ticket holds a write (INSERT), which runs only once, when it is submitted: \
             use GetFlightInfo (its ticket returns the row count), CommandStatementUpdate or \
             CommandPreparedStatementUpdate",
        ));
    }
    Ok(())
}

/// The rows a write reports (DataFusion's DML result: one `count` row per output batch).
fn write_count(batches: &[RecordBatch]) -> Result<u64, Status> {
    let mut total = 0u64;
    for b in batches {
        let Some(col) = b.column_by_name("count") else {
            return Err(Error::Internal("write returned no count column".into()).into());
        };
        let Some(counts) = col.as_any().downcast_ref::<UInt64Array>() else {
            return Err(Error::Internal("write returned a count that is not UInt64".into()).into());
        };
        total += counts.iter().flatten().sum::<u64>();
    }
    Ok(total)
}

/// `frame` (a statement with one parameter row bound) if its result has the `expected` types,
/// which the first row's binding gave the client.
fn same_result_type(frame: DataFrame, expected: &SchemaRef) -> Result<DataFrame, Status> {
    if flight_schema(frame.schema().inner()).fields() != expected.fields() {
        return Err(Status::invalid_argument(
            "bound parameter rows give results of different types; bind values of one type \
             per parameter",
        ));
    }
    Ok(frame)
}

/// The schema a Flight client sees for a plan: dictionary columns are sent hydrated.
pub fn flight_schema(schema: &SchemaRef) -> SchemaRef {
    if !schema
        .fields()
        .iter()
        .any(|f| matches!(f.data_type(), DataType::Dictionary(..)))
    {
        return Arc::clone(schema);
    }
    let fields: Vec<Field> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Dictionary(_, v) => f.as_ref().clone().with_data_type(v.as_ref().clone()),
            _ => f.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// A query's result stream: ends with CANCELLED when the query is cancelled; releases its
/// work slot and its cancellation entry as soon as it ends (so a cancel right after the client
/// saw the end answers NOT_CANCELLABLE), or when dropped.
struct QueryStream {
    inner: BoxStream<'static, Result<RecordBatch, Status>>,
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    done: bool,
    permit: Option<Admitted>,
    /// Its entry in the cancellation registry, removed (the query recorded as finished) when
    /// the stream ends or is dropped.
    registration: Option<Registration>,
}

impl QueryStream {
    /// The query ended: its slot and its cancellation entry go now.
    fn end(&mut self) {
        self.done = true;
        self.permit = None;
        self.registration = None;
    }
}

impl Stream for QueryStream {
    type Item = Result<RecordBatch, Status>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.done {
            return Poll::Ready(None);
        }
        if self.cancelled.as_mut().poll(cx).is_ready() {
            // Stop DataFusion now (its tasks are aborted and its memory returned on drop),
            // not when the client gets around to dropping the response.
            self.inner = futures::stream::empty().boxed();
            self.end();
            return Poll::Ready(Some(Err(Error::Cancelled(
                "query cancelled (CancelFlightInfo / CancelQuery)".into(),
            )
            .into())));
        }
        let next = self.inner.poll_next_unpin(cx);
        if let Poll::Ready(None | Some(Err(_))) = &next {
            self.end();
        }
        next
    }
}

#[async_trait::async_trait]
impl QueryExecutor for QueryEngine {
    fn catalogs(&self) -> &[(String, CatalogSource)] {
        QueryEngine::catalogs(self)
    }

    fn options(&self) -> &EngineOptions {
        QueryEngine::options(self)
    }

    fn admission(&self) -> &Admission {
        QueryEngine::admission(self)
    }

    fn cancellations(&self) -> &Arc<Cancellations> {
        QueryEngine::cancellations(self)
    }

    fn plans_kept(&self) -> usize {
        QueryEngine::plans_kept(self)
    }

    fn context(&self, session: &SessionDefaults) -> Result<SessionContext, Status> {
        QueryEngine::context(self, session)
    }

    async fn plan_sql(&self, sql: &str, session: &SessionDefaults) -> Result<DataFrame, Status> {
        QueryEngine::plan_sql(self, sql, session).await
    }

    async fn plan(
        &self,
        sql: &str,
        session: &SessionDefaults,
        params: Option<Vec<ScalarValue>>,
    ) -> Result<Planned, Status> {
        QueryEngine::plan(self, sql, session, params).await
    }

    fn keep_plan(&self, ticket: &StatementTicket, planned: Planned) {
        QueryEngine::keep_plan(self, ticket, planned);
    }

    fn keep_prepared_plan(&self, handle: &PreparedStatementHandle, planned: Planned) {
        QueryEngine::keep_prepared_plan(self, handle, planned);
    }

    async fn take_prepared_plan(&self, handle: &PreparedStatementHandle) -> Option<Planned> {
        QueryEngine::take_prepared_plan(self, handle).await
    }

    async fn plan_write(
        &self,
        sql: &str,
        session: &SessionDefaults,
        parameters: &[u8],
    ) -> Result<DataFrame, Status> {
        QueryEngine::plan_write(self, sql, session, parameters).await
    }

    async fn run_write(
        &self,
        frame: DataFrame,
        query_id: &[u8],
        user: &str,
        sql: &str,
    ) -> Result<u64, Status> {
        QueryEngine::run_write(self, frame, query_id, user, sql).await
    }

    async fn execute(
        &self,
        ticket: StatementTicket,
        user: &str,
        registration: Registration,
    ) -> Result<(SchemaRef, BoxStream<'static, Result<RecordBatch, Status>>), Status> {
        QueryEngine::execute(self, ticket, user, registration).await
    }
}
