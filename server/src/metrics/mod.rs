//! Prometheus metrics: what the server counts, and the text it answers a scrape with.
//!
//! Served over HTTP by [`http`] when `metrics_addr` (`--metrics-addr`) is set (off by default:
//! an operator opts in and picks the port, usually 9464), at `GET /metrics`.
//!
//! Counted as queries run (process-wide counters and histograms, [`global`]):
//!
//! | family                                         | what                                       |
//! |------------------------------------------------|--------------------------------------------|
//! | `petrel_queries_total{status}`                 | finished queries: `ok`, `user_error`, `server_error`, `cancelled` (one per query log line) |
//! | `petrel_query_errors_total{code}`              | failed queries by gRPC code                |
//! | `petrel_planning_seconds{stage}`               | `sql`: SQL → logical plan (catalog loads); `physical`: → physical plan (Iceberg scan planning) |
//! | `petrel_query_execution_seconds`               | execution: first poll → stream end         |
//! | `petrel_slow_queries_total`                    | queries over `slow_query_ms`               |
//! | `petrel_streamed_rows_total`, `petrel_streamed_bytes_total` | rows and Flight bytes (IPC header + body) sent by DoGet |
//! | `petrel_iceberg_*_total`                       | the Iceberg scans' planning counts (manifests, data files total / pruned / scanned, delete files planned / applied), fed once per query from its plan |
//! | `petrel_parquet_row_groups_pruned_total`       | row groups skipped by statistics or bloom filters |
//! | `petrel_object_store_requests_total{store,operation}` | requests to object stores (`remote`: S3/GCS/Azure, `local`: files) by operation: get, head, list, put, delete, copy |
//!
//! Sampled when scraped (gauges): the memory pool (reserved, limit, per-query limit), work
//! slots (`max_concurrent_queries`: in all, free), sessions, plans kept for their DoGet, and
//! each cache (`petrel_cache_entries`, `_bytes`, `_capacity_bytes` and `_hits_total` /
//! `_misses_total` for the manifest, manifest-list and delete-file caches of each catalog, its
//! table cache when `table_cache_ms` is set, and DataFusion's Parquet footer cache).
//!
//! Why hand-written: the metrics are a few dozen counters and histograms, and the text format
//! is simple ([`registry`], ~150 lines of atomics and formatting). The `prometheus` and
//! `metrics` crates would bring a registry, a macro layer and (for `prometheus`) protobuf code
//! for a format we do not serve; the HTTP side uses the hyper that tonic already builds.
//!
//! Counters are process-wide (like a Prometheus client's default registry): servers started
//! in one process (tests) share them.

pub mod http;
pub mod registry;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use petrel_table_provider::IcebergCatalogProvider;
use petrel_table_provider::cache_stats::CacheStats;
use petrel_table_provider::io::{CountedStore, object_store_requests};
use tonic::Code;

use crate::engine::{CatalogSource, QueryEngine};
use crate::scan_stats::ScanStats;
use crate::session::SessionStore;
use registry::{Counter, Exposition, Histogram};

/// How a query ended, as counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueryStatus {
    /// Its results were sent (or its write committed).
    Ok,
    /// The request could not be served as asked: bad SQL, unknown table, refused, conflict.
    UserError,
    /// The server could not serve it: storage, corrupt files, out of memory or slots, bugs.
    ServerError,
    /// Cancelled, past its deadline, or dropped by the client before the end.
    Cancelled,
}

impl QueryStatus {
    const ALL: [QueryStatus; 4] = [
        QueryStatus::Ok,
        QueryStatus::UserError,
        QueryStatus::ServerError,
        QueryStatus::Cancelled,
    ];

    /// The status of a query that failed with `code`.
    pub fn of_code(code: Code) -> Self {
        match code {
            Code::Ok => QueryStatus::Ok,
            Code::Cancelled | Code::DeadlineExceeded => QueryStatus::Cancelled,
            Code::InvalidArgument
            | Code::NotFound
            | Code::AlreadyExists
            | Code::PermissionDenied
            | Code::FailedPrecondition
            | Code::Aborted
            | Code::OutOfRange
            | Code::Unimplemented
            | Code::Unauthenticated => QueryStatus::UserError,
            Code::Unknown
            | Code::ResourceExhausted
            | Code::Internal
            | Code::Unavailable
            | Code::DataLoss => QueryStatus::ServerError,
        }
    }

    /// The label value.
    pub fn label(self) -> &'static str {
        match self {
            QueryStatus::Ok => "ok",
            QueryStatus::UserError => "user_error",
            QueryStatus::ServerError => "server_error",
            QueryStatus::Cancelled => "cancelled",
        }
    }
}

/// Planning stages timed by `petrel_planning_seconds`.
#[derive(Debug, Clone, Copy)]
pub enum Stage {
    /// SQL text to a logical plan (parsing, resolving tables: catalog loads).
    Sql,
    /// Logical to physical plan (Iceberg scan planning: manifests, pruning).
    Physical,
}

/// gRPC codes 0..=16.
const CODES: usize = 17;

/// The process-wide counters and histograms.
#[derive(Debug, Default)]
pub struct Metrics {
    queries: [Counter; 4],
    errors: [Counter; CODES],
    planning: [Histogram; 2],
    execution: Histogram,
    slow_queries: Counter,
    streamed_rows: Counter,
    streamed_bytes: Counter,
    scans: Counter,
    scan_planning: Histogram,
    manifests: Counter,
    manifests_pruned: Counter,
    data_files: Counter,
    files_pruned_by_partition: Counter,
    files_pruned_by_metrics: Counter,
    files_scanned: Counter,
    bytes_planned: Counter,
    delete_files_planned: Counter,
    delete_files_position: Counter,
    delete_files_dv: Counter,
    delete_files_equality: Counter,
    delete_files_cached: Counter,
    rows_deleted: Counter,
    row_groups_pruned: Counter,
}

static METRICS: LazyLock<Metrics> = LazyLock::new(Metrics::default);

/// The process's metrics.
pub fn global() -> &'static Metrics {
    &METRICS
}

impl Metrics {
    /// Counts a finished query (`code`: its failure, None when it did not fail).
    pub fn query_finished(&self, status: QueryStatus, code: Option<Code>) {
        self.queries[status as usize].inc();
        if let Some(code) = code
            && let Some(c) = self.errors.get(code as usize)
        {
            c.inc();
        }
    }

    /// Finished queries with `status` so far.
    pub fn queries(&self, status: QueryStatus) -> u64 {
        self.queries[status as usize].get()
    }

    /// Times a planning stage.
    pub fn planned(&self, stage: Stage, took: Duration) {
        self.planning[stage as usize].observe(took);
    }

    /// Times a query's execution.
    pub fn executed(&self, took: Duration) {
        self.execution.observe(took);
    }

    /// Counts a query logged as slow.
    pub fn slow_query(&self) {
        self.slow_queries.inc();
    }

    /// Counts a DoGet's result sent: rows, and Flight bytes.
    pub fn streamed(&self, rows: u64, bytes: u64) {
        self.streamed_rows.add(rows);
        self.streamed_bytes.add(bytes);
    }

    /// Adds a finished query's Iceberg scans.
    pub fn scanned(&self, scans: &[ScanStats]) {
        for s in scans {
            let p = &s.plan;
            self.scans.add(s.count);
            self.scan_planning.observe(p.planning_time);
            self.manifests.add(p.manifests_total as u64);
            self.manifests_pruned.add(p.manifests_pruned as u64);
            self.data_files.add(p.data_files_seen as u64);
            self.files_pruned_by_partition
                .add(p.files_pruned_by_partition as u64);
            self.files_pruned_by_metrics
                .add(p.files_pruned_by_metrics as u64);
            self.files_scanned.add(p.files_selected as u64);
            self.bytes_planned.add(p.bytes_selected);
            self.delete_files_planned.add(p.delete_files as u64);
            self.delete_files_position.add(s.delete_files_position);
            self.delete_files_dv.add(s.delete_files_dv);
            self.delete_files_equality.add(s.delete_files_equality);
            self.delete_files_cached.add(s.delete_files_cached);
            self.rows_deleted.add(s.rows_deleted);
            self.row_groups_pruned.add(s.row_groups_pruned);
        }
    }
}

/// What a scrape samples besides the counters: the live server's parts.
#[derive(Debug, Clone)]
pub struct Sources {
    /// The engine: memory pool, work slots, catalogs' caches.
    pub engine: Arc<QueryEngine>,
    /// The Flight sessions.
    pub sessions: Arc<SessionStore>,
}

/// The text of a scrape.
pub fn render(sources: &Sources) -> String {
    let m = global();
    let mut e = Exposition::default();
    e.family(
        "petrel_queries_total",
        "counter",
        "Finished queries by status (one per `query` / `query failed` log line).",
    );
    for status in QueryStatus::ALL {
        e.sample(
            "petrel_queries_total",
            &[("status", status.label())],
            m.queries(status) as f64,
        );
    }
    e.family(
        "petrel_query_errors_total",
        "counter",
        "Failed queries by gRPC status code.",
    );
    // Every code but OK, so that a series exists before its first error.
    for (i, c) in m.errors.iter().enumerate().skip(1) {
        let code = format!("{:?}", Code::from_i32(i as i32));
        e.sample(
            "petrel_query_errors_total",
            &[("code", &code)],
            c.get() as f64,
        );
    }
    e.family(
        "petrel_planning_seconds",
        "histogram",
        "Planning time: sql = SQL to logical plan (catalog loads), physical = to the physical \
         plan (Iceberg scan planning).",
    );
    e.histogram(
        "petrel_planning_seconds",
        &[("stage", "sql")],
        &m.planning[Stage::Sql as usize],
    );
    e.histogram(
        "petrel_planning_seconds",
        &[("stage", "physical")],
        &m.planning[Stage::Physical as usize],
    );
    e.family(
        "petrel_query_execution_seconds",
        "histogram",
        "Query execution, from the start of its stream to its end (any outcome).",
    )
    .histogram("petrel_query_execution_seconds", &[], &m.execution);
    e.counter(
        "petrel_slow_queries_total",
        "Queries slower than slow_query_ms (each logged as `slow query`).",
        m.slow_queries.get(),
    );
    e.counter(
        "petrel_streamed_rows_total",
        "Rows sent by DoGet (query, metadata and write-count results).",
        m.streamed_rows.get(),
    );
    e.counter(
        "petrel_streamed_bytes_total",
        "Flight data bytes (IPC header and body) sent by DoGet.",
        m.streamed_bytes.get(),
    );
    render_scans(&mut e, m);
    render_object_store_requests(&mut e);
    render_live(&mut e, sources);
    e.finish()
}

/// Requests to object stores (`store="remote"`: S3, GCS, Azure; `store="local"`: files), by
/// operation, counted by the table provider's store wrapper.
fn render_object_store_requests(e: &mut Exposition) {
    const NAME: &str = "petrel_object_store_requests_total";
    e.family(
        NAME,
        "counter",
        "Requests sent to object stores by store (remote: S3/GCS/Azure, local: files) and \
         operation (get, head, list, put, delete, copy).",
    );
    for (store, kind) in [
        ("remote", CountedStore::Remote),
        ("local", CountedStore::Local),
    ] {
        for (operation, count) in object_store_requests(kind).by_operation() {
            e.sample(
                NAME,
                &[("store", store), ("operation", operation)],
                count as f64,
            );
        }
    }
}

fn render_scans(e: &mut Exposition, m: &Metrics) {
    e.counter(
        "petrel_iceberg_scans_total",
        "Iceberg table scans run by finished queries.",
        m.scans.get(),
    );
    e.family(
        "petrel_iceberg_scan_planning_seconds",
        "histogram",
        "Iceberg scan planning (snapshot, manifest list, manifests, pruning), per scan.",
    )
    .histogram(
        "petrel_iceberg_scan_planning_seconds",
        &[],
        &m.scan_planning,
    );
    e.counter(
        "petrel_iceberg_manifests_total",
        "Manifests listed by the scanned snapshots.",
        m.manifests.get(),
    );
    e.counter(
        "petrel_iceberg_manifests_pruned_total",
        "Manifests skipped by their partition summaries.",
        m.manifests_pruned.get(),
    );
    e.counter(
        "petrel_iceberg_data_files_total",
        "Live data files in the manifests read.",
        m.data_files.get(),
    );
    e.family(
        "petrel_iceberg_data_files_pruned_total",
        "counter",
        "Data files skipped at planning, by their partition tuple or column metrics.",
    )
    .sample(
        "petrel_iceberg_data_files_pruned_total",
        &[("by", "partition")],
        m.files_pruned_by_partition.get() as f64,
    )
    .sample(
        "petrel_iceberg_data_files_pruned_total",
        &[("by", "metrics")],
        m.files_pruned_by_metrics.get() as f64,
    );
    e.counter(
        "petrel_iceberg_data_files_scanned_total",
        "Data files selected for reading.",
        m.files_scanned.get(),
    );
    e.counter(
        "petrel_iceberg_data_bytes_planned_total",
        "Bytes of the data files selected for reading.",
        m.bytes_planned.get(),
    );
    e.counter(
        "petrel_iceberg_delete_files_planned_total",
        "Delete files matched at planning.",
        m.delete_files_planned.get(),
    );
    e.family(
        "petrel_iceberg_delete_files_applied_total",
        "counter",
        "Delete files applied while reading, by kind.",
    )
    .sample(
        "petrel_iceberg_delete_files_applied_total",
        &[("kind", "position")],
        m.delete_files_position.get() as f64,
    )
    .sample(
        "petrel_iceberg_delete_files_applied_total",
        &[("kind", "deletion_vector")],
        m.delete_files_dv.get() as f64,
    )
    .sample(
        "petrel_iceberg_delete_files_applied_total",
        &[("kind", "equality")],
        m.delete_files_equality.get() as f64,
    );
    e.counter(
        "petrel_iceberg_delete_files_from_cache_total",
        "Delete files applied from the delete cache instead of storage.",
        m.delete_files_cached.get(),
    );
    e.counter(
        "petrel_iceberg_rows_deleted_total",
        "Rows removed by position or equality deletes while reading.",
        m.rows_deleted.get(),
    );
    e.counter(
        "petrel_parquet_row_groups_pruned_total",
        "Parquet row groups skipped by statistics or bloom filters.",
        m.row_groups_pruned.get(),
    );
}

fn render_live(e: &mut Exposition, sources: &Sources) {
    let engine = &sources.engine;
    let memory = &engine.options().memory;
    e.gauge(
        "petrel_memory_pool_reserved_bytes",
        "Bytes reserved in the server-wide memory pool (all queries, bound parameters).",
        memory.reserved() as f64,
    );
    e.gauge(
        "petrel_memory_pool_limit_bytes",
        "The server-wide memory pool's size (memory_limit).",
        memory.server_limit() as f64,
    );
    e.gauge(
        "petrel_query_memory_limit_bytes",
        "One query's memory limit (query_memory_limit).",
        memory.query_limit() as f64,
    );
    let admission = engine.admission();
    e.gauge(
        "petrel_work_slots",
        "Work slots in all (max_concurrent_queries): queries, writes and planning calls.",
        admission.slots() as f64,
    );
    e.gauge(
        "petrel_work_slots_available",
        "Work slots free now.",
        admission.available() as f64,
    );
    e.gauge(
        "petrel_sessions_active",
        "Flight sessions held (SetSessionOptions).",
        sources.sessions.len() as f64,
    );
    e.gauge(
        "petrel_plans_kept",
        "Plans made by GetFlightInfo kept for their DoGet.",
        engine.plans_kept() as f64,
    );
    let caches = cache_stats(engine);
    type Field = fn(&CacheStats) -> u64;
    let families: [(&str, &str, &str, Field); 5] = [
        ("petrel_cache_entries", "gauge", "Entries held.", |s| {
            s.entries
        }),
        (
            "petrel_cache_bytes",
            "gauge",
            "Bytes held (estimated, the unit of the capacity).",
            |s| s.bytes,
        ),
        ("petrel_cache_capacity_bytes", "gauge", "Capacity.", |s| {
            s.capacity_bytes
        }),
        (
            "petrel_cache_hits_total",
            "counter",
            "Lookups that found their entry (hit rate: hits / (hits + misses)).",
            |s| s.hits,
        ),
        (
            "petrel_cache_misses_total",
            "counter",
            "Lookups that did not.",
            |s| s.misses,
        ),
    ];
    for (name, kind, help, field) in families {
        e.family(name, kind, help);
        for (catalog, s) in &caches {
            if kind == "counter" && s.name == FOOTER_CACHE {
                // DataFusion counts hits per entry only (lost on eviction): not a counter.
                continue;
            }
            e.sample(
                name,
                &[("cache", s.name), ("catalog", catalog)],
                field(s) as f64,
            );
        }
    }
}

/// DataFusion's Parquet footer (file metadata) cache, shared by every catalog.
const FOOTER_CACHE: &str = "parquet_footer";

/// Each Iceberg catalog's caches (by catalog name), and the server's statement cache and footer
/// cache (catalog `""`).
fn cache_stats(engine: &QueryEngine) -> Vec<(String, CacheStats)> {
    let state = engine.state();
    let mut out = Vec::new();
    for (name, source) in engine.catalogs() {
        if let CatalogSource::Iceberg(catalog) = source {
            out.extend(catalog.cache_stats().into_iter().map(|s| (name.clone(), s)));
        }
        let Some(provider) = state.catalog_list().catalog(name) else {
            continue;
        };
        let Some(iceberg) = provider.as_any().downcast_ref::<IcebergCatalogProvider>() else {
            continue;
        };
        let planner = iceberg.planner();
        for s in planner
            .cache()
            .stats()
            .into_iter()
            .chain(planner.delete_cache().stats())
        {
            out.push((name.clone(), s));
        }
    }
    out.push((String::new(), engine.statement_cache_stats()));
    out.push((String::new(), engine.options().column_cache.stats()));
    let footers = state.runtime_env().cache_manager.get_file_metadata_cache();
    let entries = footers.list_entries();
    out.push((
        String::new(),
        CacheStats {
            name: FOOTER_CACHE,
            entries: entries.len() as u64,
            bytes: entries.values().map(|e| e.size_bytes as u64).sum(),
            capacity_bytes: footers.cache_limit() as u64,
            hits: entries.values().map(|e| e.hits as u64).sum(),
            misses: 0,
        },
    ));
    out
}
