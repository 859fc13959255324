//! `petrel executor`: Ballista's executor with Petrel's codecs, stores and caches.
//!
//! It registers with a scheduler (`petrel scheduler`), runs the tasks it is given and serves
//! their shuffle output over Arrow Flight. Petrel's scans arrive as
//! [`ShippedScanExec`](crate::ShippedScanExec)s and read through this executor's own stores —
//! configured here, never sent in plans — with metadata, manifest and delete-file caches
//! shared by every task the executor runs.
//!
//! Stopping: on SIGTERM or SIGINT Ballista fences the executor, tells the scheduler and waits
//! for the tasks it runs. Those tasks may never end on their own (a scheduler that died left
//! them running, and nobody will cancel them), so the executor gives them
//! [`ExecutorOptions::shutdown_grace`] and then exits anyway; a second signal exits at once.

use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::error::Result as BallistaResult;
use ballista_executor::executor_process::{ExecutorProcessConfig, start_executor_process};
use petrel_table_provider::io::StoreRegistry;

use crate::cluster_codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use crate::shipped_scan::ExecutorScans;

/// How to run an executor.
#[derive(Debug, Clone)]
pub struct ExecutorOptions {
    /// Host the executor's services bind to.
    pub bind_host: String,
    /// Host name the scheduler and clients reach this executor by (default: the bind host).
    pub external_host: Option<String>,
    /// Port of the Arrow Flight service (shuffle and result partitions).
    pub flight_port: u16,
    /// Port of the gRPC service the scheduler pushes tasks to.
    pub grpc_port: u16,
    /// The scheduler's host.
    pub scheduler_host: String,
    /// The scheduler's port.
    pub scheduler_port: u16,
    /// Tasks run at once (0: one per core).
    pub concurrent_tasks: usize,
    /// Directory for shuffle files (default: a temporary directory).
    pub work_dir: Option<String>,
    /// Memory all tasks together may use, split evenly between task slots (default: no limit).
    pub memory_limit: Option<u64>,
    /// How often the executor tells the scheduler it is alive.
    pub heartbeat: Duration,
    /// How long a stop signal waits for the running tasks before the executor exits anyway.
    pub shutdown_grace: Duration,
    /// The stores table files are read through.
    pub stores: StoreRegistry,
}

/// Runs the executor until the process is stopped (or the scheduler stops it).
/// Ballista's functions with Petrel's (`register_functions`), as the front end and scheduler
/// plan with them.
fn function_registry() -> ballista_core::registry::BallistaFunctionRegistry {
    let mut registry = ballista_core::registry::BallistaFunctionRegistry::default();
    for f in petrel_table_provider::petrel_functions() {
        registry
            .aggregate_functions
            .insert(f.name().to_string(), Arc::new(f));
    }
    // The growing functions, bounded (`output_limits`); the server bounds its own by its
    // query memory limit, an executor by the default.
    let limit = petrel_table_provider::output_limits::DEFAULT_OUTPUT_LIMIT;
    for f in petrel_table_provider::output_limits::bounded_aggregate_functions(limit) {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            registry
                .aggregate_functions
                .insert(name.to_string(), Arc::new(f.clone()));
        }
    }
    for f in petrel_table_provider::output_limits::bounded_scalar_functions(limit)
        .into_iter()
        .chain(petrel_table_provider::checked_arithmetic::checked_arithmetic_functions())
    {
        for name in std::iter::once(f.name()).chain(f.aliases().iter().map(String::as_str)) {
            registry
                .scalar_functions
                .insert(name.to_string(), Arc::new(f.clone()));
        }
    }
    registry
}

pub async fn run_executor(options: ExecutorOptions) -> BallistaResult<()> {
    let scans = ExecutorScans::new(options.stores.clone());
    let config = ExecutorProcessConfig {
        bind_host: options.bind_host.clone(),
        external_host: Some(
            options
                .external_host
                .clone()
                .unwrap_or_else(|| options.bind_host.clone()),
        ),
        port: options.flight_port,
        grpc_port: options.grpc_port,
        scheduler_host: options.scheduler_host.clone(),
        scheduler_port: options.scheduler_port,
        concurrent_tasks: options.concurrent_tasks,
        work_dir: options.work_dir.clone(),
        memory_pool_size: options.memory_limit,
        executor_heartbeat_interval_seconds: options.heartbeat.as_secs().max(1),
        print_thread_info: false,
        // As the scheduler (`petrel scheduler`) expects: executors pull their tasks.
        task_scheduling_policy: TaskSchedulingPolicy::PullStaged,
        override_logical_codec: Some(Arc::new(ClusterLogicalCodec::new(scans.clone()))),
        override_physical_codec: Some(Arc::new(ClusterPhysicalCodec::new(scans))),
        override_function_registry: Some(Arc::new(function_registry())),
        ..ExecutorProcessConfig::default()
    };
    tracing::info!(
        flight_port = options.flight_port,
        grpc_port = options.grpc_port,
        scheduler = %format!("{}:{}", options.scheduler_host, options.scheduler_port),
        "Ballista executor (Petrel's codecs) starting"
    );
    let process = start_executor_process(Arc::new(config));
    tokio::pin!(process);
    tokio::select! {
        result = &mut process => return result,
        () = stop_signal() => {}
    }
    // Ballista's process received the same signal and is draining its tasks.
    tokio::select! {
        result = &mut process => result,
        () = tokio::time::sleep(options.shutdown_grace) => {
            tracing::warn!(
                grace_secs = options.shutdown_grace.as_secs(),
                "tasks still running after the shutdown grace period; the executor stops anyway"
            );
            Ok(())
        }
        () = stop_signal() => {
            tracing::warn!("a second stop signal; the executor stops without waiting for its tasks");
            Ok(())
        }
    }
}

/// Resolves on SIGTERM or SIGINT (on SIGINT alone where there is no SIGTERM).
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = terminate.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
            return;
        }
    }
    // Without a SIGINT handler either, nothing can stop the process but a kill.
    if tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await;
    }
}
