//! `petrel scheduler`: Ballista's scheduler with Petrel's codecs and planning.
//!
//! The scheduler receives each query's logical plan from a Petrel front end
//! (`petrel serve --engine ballista://HOST:PORT`), decodes its Iceberg tables as
//! [`ClusterTable`](crate::ClusterTable)s, plans them as a Petrel server does (DataFusion's
//! defaults plus Petrel's optimizer rules, [`ShipScans`] last), cuts the plan into stages and
//! hands their tasks to the executors (`petrel executor`). The scheduler reads table metadata
//! and manifests itself (planning), through the stores of its own configuration, with one
//! metadata and manifest cache for all its queries.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ballista_core::config::TaskSchedulingPolicy;
use ballista_core::error::Result as BallistaResult;
use ballista_core::extension::SessionConfigExt;
use ballista_scheduler::cluster::BallistaCluster;
use ballista_scheduler::config::{SchedulerConfig, TaskDistributionPolicy};
use ballista_scheduler::scheduler_process::start_server;
use datafusion::execution::SessionStateBuilder;
use datafusion::execution::runtime_env::RuntimeEnvBuilder;
use datafusion::prelude::SessionConfig;
use petrel_table_provider::io::StoreRegistry;
use petrel_table_provider::{NarrowStructColumns, NestedValuesTypes, SignedZeroEquality};

use crate::cluster_codec::{ClusterLogicalCodec, ClusterPhysicalCodec};
use crate::ship_scans::ShipScans;
use crate::shipped_scan::ExecutorScans;

/// How to run a scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// Address the scheduler's gRPC service listens on.
    pub bind: SocketAddr,
    /// Host name executors and front ends reach this scheduler by (default: the bind host).
    pub external_host: Option<String>,
    /// The stores table metadata and manifests are read through (planning).
    pub stores: StoreRegistry,
    /// An executor silent (no heartbeat) this long is taken as lost: its tasks run again
    /// elsewhere.
    pub executor_timeout: Duration,
    /// The cluster's task slots, for planning (its target partitions: a scan smaller than one
    /// `read.split.target-size` per slot is split into smaller tasks); `None`: the front
    /// end's target partitions.
    pub parallelism: Option<usize>,
}

/// Runs the scheduler until the process is stopped.
pub async fn run_scheduler(options: SchedulerOptions) -> BallistaResult<()> {
    let scans = ExecutorScans::new(options.stores.clone());
    let session_scans = scans.clone();
    let parallelism = options.parallelism;
    let session_builder = Arc::new(move |mut config: SessionConfig| {
        // Iceberg scans are split into tasks by the table's read.split.* sizes when planned;
        // DataFusion's byte-range split of their Parquet scans afterwards would leave a scan
        // with more partitions than its recipe has task groups (what executors rebuild).
        config.options_mut().optimizer.repartition_file_scans = false;
        if let Some(slots) = parallelism {
            config = config.with_target_partitions(slots.max(1));
        }
        let mut state = SessionStateBuilder::new()
            .with_default_features()
            .with_config(config)
            .with_runtime_env(Arc::new(RuntimeEnvBuilder::new().build()?))
            .with_optimizer_rule(Arc::new(SignedZeroEquality::new()))
            .with_optimizer_rule(Arc::new(NestedValuesTypes::new()))
            .with_physical_optimizer_rule(Arc::new(NarrowStructColumns::new()))
            .with_physical_optimizer_rule(Arc::new(ShipScans::new(session_scans.clone())))
            .build();
        petrel_table_provider::register_functions(
            &mut state,
            petrel_table_provider::output_limits::DEFAULT_OUTPUT_LIMIT,
        )?;
        Ok(state)
    });
    let timeout = options.executor_timeout.as_secs().max(1);
    let config = SchedulerConfig {
        bind_host: options.bind.ip().to_string(),
        bind_port: options.bind.port(),
        external_host: options
            .external_host
            .clone()
            .unwrap_or_else(|| options.bind.ip().to_string()),
        // Executors pull tasks: a task reset when its executor is lost runs again on the next
        // poll of another one (with Ballista's push scheduling nothing offers it again).
        scheduling_policy: TaskSchedulingPolicy::PullStaged,
        // Spread a stage's tasks over the executors (Ballista's default fills one first).
        task_distribution: TaskDistributionPolicy::RoundRobin,
        executor_timeout_seconds: timeout,
        expire_dead_executor_interval_seconds: (timeout / 3).clamp(1, 15),
        override_session_builder: Some(session_builder),
        override_config_producer: Some(Arc::new(SessionConfig::new_with_ballista)),
        override_logical_codec: Some(Arc::new(ClusterLogicalCodec::new(scans.clone()))),
        override_physical_codec: Some(Arc::new(ClusterPhysicalCodec::new(scans))),
        ..SchedulerConfig::default()
    };
    let cluster = BallistaCluster::new_from_config(&config).await?;
    tracing::info!(
        bind = %options.bind,
        executor_timeout_secs = timeout,
        "Ballista scheduler (Petrel's codecs) listening"
    );
    start_server(cluster, options.bind, Arc::new(config)).await
}
