//! `petrel scheduler` and `petrel executor`: a Ballista cluster that runs Petrel's Iceberg scans
//! for `petrel serve --engine ballista://HOST:PORT` (issue #15). The processes themselves are
//! Ballista's scheduler and executor with Petrel's codecs ([`petrel_distributed`]); this file
//! is their flags and the store settings each process reads table files with. Credentials are
//! configured here, per process (`--storage` keys over the `AWS_*` environment), and never
//! travel inside plans.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;
use petrel_distributed::{ExecutorOptions, SchedulerOptions};
use petrel_table_provider::io::{StoreConfig, StoreRegistry};

use crate::config::{LogFormat, parse_bytes};

/// Flags of `petrel scheduler`.
#[derive(Debug, Clone, Args)]
pub struct SchedulerArgs {
    /// Address the scheduler listens on (front ends and executors connect to it).
    #[arg(long, env = "PETREL_SCHEDULER_BIND", default_value = "127.0.0.1:50050")]
    pub bind: SocketAddr,

    /// Host name executors and front ends reach this scheduler by [default: the bind address].
    #[arg(long, env = "PETREL_SCHEDULER_EXTERNAL_HOST")]
    pub external_host: Option<String>,

    /// Seconds without a heartbeat after which an executor is taken as lost and its tasks run
    /// elsewhere.
    #[arg(long, env = "PETREL_EXECUTOR_TIMEOUT_SECS", default_value_t = 30)]
    pub executor_timeout_secs: u64,

    /// The cluster's task slots (all executors' concurrent tasks): queries are planned for
    /// that many partitions, and a scan smaller than one `read.split.target-size` per slot is
    /// split into smaller tasks [default: the front end's target partitions].
    #[arg(long, env = "PETREL_CLUSTER_PARALLELISM")]
    pub parallelism: Option<usize>,

    /// An object store setting, `KEY=VALUE` with Iceberg FileIO names (`s3.endpoint=...`),
    /// over the `AWS_*` environment (repeatable). The scheduler reads table metadata and
    /// manifests with it.
    #[arg(long = "storage", env = "PETREL_STORAGE", value_delimiter = ' ')]
    pub storage: Vec<String>,

    /// Log lines as `text` or `json` [default: text].
    #[arg(long, value_enum, env = "PETREL_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
}

/// Flags of `petrel executor`.
#[derive(Debug, Clone, Args)]
pub struct ExecutorArgs {
    /// The scheduler to register with (`petrel scheduler`), HOST:PORT.
    #[arg(long, env = "PETREL_SCHEDULER", default_value = "127.0.0.1:50050")]
    pub scheduler: String,

    /// Host the executor's services bind to.
    #[arg(long, env = "PETREL_EXECUTOR_BIND_HOST", default_value = "127.0.0.1")]
    pub bind_host: String,

    /// Host name the scheduler and front ends reach this executor by [default: --bind-host].
    #[arg(long, env = "PETREL_EXECUTOR_EXTERNAL_HOST")]
    pub external_host: Option<String>,

    /// Port of the Arrow Flight service that serves task output (shuffles, results).
    #[arg(long, env = "PETREL_EXECUTOR_FLIGHT_PORT", default_value_t = 50061)]
    pub flight_port: u16,

    /// Port of the gRPC service the scheduler sends tasks to.
    #[arg(long, env = "PETREL_EXECUTOR_GRPC_PORT", default_value_t = 50062)]
    pub grpc_port: u16,

    /// Tasks run at once (0: one per core).
    #[arg(long, env = "PETREL_EXECUTOR_CONCURRENT_TASKS", default_value_t = 0)]
    pub concurrent_tasks: usize,

    /// Directory for shuffle files [default: a temporary directory].
    #[arg(long, env = "PETREL_EXECUTOR_WORK_DIR")]
    pub work_dir: Option<String>,

    /// Memory all tasks together may use, e.g. `8GiB`, split evenly between task slots
    /// [default: no limit].
    #[arg(long, env = "PETREL_EXECUTOR_MEMORY_LIMIT")]
    pub memory_limit: Option<String>,

    /// Seconds between heartbeats to the scheduler (keep it well under the scheduler's
    /// --executor-timeout-secs).
    #[arg(long, env = "PETREL_EXECUTOR_HEARTBEAT_SECS", default_value_t = 5)]
    pub heartbeat_secs: u64,

    /// Seconds the executor waits for its running tasks after SIGTERM or SIGINT before it
    /// exits anyway (a second signal exits at once).
    #[arg(
        long,
        env = "PETREL_EXECUTOR_SHUTDOWN_GRACE_SECS",
        default_value_t = 20
    )]
    pub shutdown_grace_secs: u64,

    /// An object store setting, `KEY=VALUE` with Iceberg FileIO names (`s3.endpoint=...`),
    /// over the `AWS_*` environment (repeatable). The executor reads data and delete files
    /// with it.
    #[arg(long = "storage", env = "PETREL_STORAGE", value_delimiter = ' ')]
    pub storage: Vec<String>,

    /// Log lines as `text` or `json` [default: text].
    #[arg(long, value_enum, env = "PETREL_LOG_FORMAT")]
    pub log_format: Option<LogFormat>,
}

impl SchedulerArgs {
    /// What the scheduler runs with.
    pub fn resolve(&self) -> Result<SchedulerOptions, String> {
        if self.executor_timeout_secs == 0 {
            return Err("--executor-timeout-secs must be at least 1".into());
        }
        Ok(SchedulerOptions {
            bind: self.bind,
            external_host: self.external_host.clone(),
            stores: stores(&self.storage)?,
            executor_timeout: Duration::from_secs(self.executor_timeout_secs),
            parallelism: self.parallelism.filter(|n| *n > 0),
        })
    }
}

impl ExecutorArgs {
    /// What the executor runs with.
    pub fn resolve(&self) -> Result<ExecutorOptions, String> {
        let (host, port) = self
            .scheduler
            .rsplit_once(':')
            .filter(|(host, _)| !host.is_empty())
            .ok_or_else(|| format!("--scheduler {:?}: expected HOST:PORT", self.scheduler))?;
        let scheduler_port = port
            .parse::<u16>()
            .map_err(|_| format!("--scheduler {:?}: the port is not a number", self.scheduler))?;
        let memory_limit = match &self.memory_limit {
            Some(text) => match parse_bytes(text)? {
                0 => return Err("--memory-limit must be more than 0 bytes".into()),
                n => Some(n as u64),
            },
            None => None,
        };
        if self.heartbeat_secs == 0 {
            return Err("--heartbeat-secs must be at least 1".into());
        }
        Ok(ExecutorOptions {
            bind_host: self.bind_host.clone(),
            external_host: self.external_host.clone(),
            flight_port: self.flight_port,
            grpc_port: self.grpc_port,
            scheduler_host: host.to_string(),
            scheduler_port,
            concurrent_tasks: self.concurrent_tasks,
            work_dir: self.work_dir.clone(),
            memory_limit,
            heartbeat: Duration::from_secs(self.heartbeat_secs),
            shutdown_grace: Duration::from_secs(self.shutdown_grace_secs),
            stores: stores(&self.storage)?,
        })
    }
}

/// The stores of `KEY=VALUE` settings over the environment.
fn stores(settings: &[String]) -> Result<StoreRegistry, String> {
    let mut pairs = BTreeMap::new();
    for setting in settings.iter().filter(|s| !s.is_empty()) {
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| format!("--storage {setting:?}: expected KEY=VALUE"))?;
        pairs.insert(key.to_string(), value.to_string());
    }
    let config = StoreConfig::from_settings(&pairs).map_err(|e| format!("--storage: {e}"))?;
    Ok(StoreRegistry::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        executor: ExecutorArgs,
    }

    #[test]
    fn executor_flags_resolve_and_name_what_is_wrong() {
        let cli = Cli::parse_from([
            "x",
            "--scheduler",
            "sched.example:7000",
            "--memory-limit",
            "1GiB",
            "--storage",
            "s3.endpoint=http://127.0.0.1:9000",
        ]);
        let options = cli.executor.resolve().expect("valid flags");
        assert_eq!(options.scheduler_host, "sched.example");
        assert_eq!(options.scheduler_port, 7000);
        assert_eq!(options.memory_limit, Some(1 << 30));
        assert_eq!(options.shutdown_grace, Duration::from_secs(20));
        assert_eq!(
            options.stores.config().s3_endpoint(),
            Some("http://127.0.0.1:9000")
        );

        let cli = Cli::parse_from(["x", "--scheduler", "nohost"]);
        let error = cli.executor.resolve().expect_err("no port");
        assert!(error.contains("expected HOST:PORT"), "{error}");
        let cli = Cli::parse_from(["x", "--storage", "s3.endpointt=x"]);
        let error = cli.executor.resolve().expect_err("unknown key");
        assert!(error.contains("s3.endpointt"), "{error}");
    }
}
