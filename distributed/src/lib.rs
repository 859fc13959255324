//! Petrel's Iceberg scans on a distributed DataFusion engine (issue #15): the pieces an engine
//! needs to ship a plan that reads Iceberg tables from the process that planned it (Petrel's
//! front end, or the engine's scheduler) to the processes that run it (executors).
//!
//! - [`codec`]: [`PetrelPhysicalCodec`], a `datafusion_proto` `PhysicalExtensionCodec` for
//!   Petrel's plan nodes. An [`IcebergScanExec`] travels as its
//!   [`ScanRecipe`]: the metadata file, the snapshot selection, the planned tasks (data file
//!   byte ranges, their position / DV / equality delete files, partition spec and sequence
//!   numbers), the projection, the pushed filters and limit, and the struct leaves read.
//!   Never object-store settings or credentials: a plan may be written to a log.
//! - [`shipped_scan`]: [`ShippedScanExec`], what a decoded scan is: on its first execution in
//!   the receiving process it re-reads the metadata file through that process's own stores
//!   ([`ExecutorScans`]: `StoreRegistry` from its store configuration, metadata, manifest and
//!   delete caches per process) and builds the very scan the front end built, over the same
//!   tasks — merge-on-read, field-id schema mapping and struct leaf projection included.
//!
//! ```text
//! front end / scheduler                        executor
//!   IcebergScanExec ── recipe (JSON) ──────▶ ShippedScanExec ── first execute ──▶
//!   (planned tasks)    + DataFusion's proto     (partitions,      IcebergTableProvider::scan_plan
//!                        for the nodes above     schema known)     (same tasks, no re-planning)
//! ```
//!
//! # Ballista or datafusion-distributed
//!
//! Both run DataFusion 53 physical plans on several machines, and both ship plans with
//! `datafusion_proto` and a user `PhysicalExtensionCodec`, so this codec serves either.
//!
//! - **Apache Ballista 53.0.0** (`ballista-core`, `ballista-scheduler`, `ballista-executor`):
//!   a scheduler process that owns jobs, splits plans into stages at shuffles, hands tasks to
//!   executor processes and retries tasks and stages when an executor is lost; executors write
//!   shuffle output to local disk and serve it over Arrow Flight. The scheduler plans from a
//!   *logical* plan (the client sends it), so a table provider needs a
//!   `LogicalExtensionCodec` too; executors take a `PhysicalExtensionCodec` and their own
//!   `RuntimeEnv` (object stores) in `ExecutorProcessConfig`. Same stack as Petrel (DataFusion
//!   53, arrow / arrow-flight 58, tonic 0.14, object_store 0.13), builds without `protoc`.
//! - **datafusion-distributed 1.0** (the DataFusion community's library): no scheduler and no
//!   job state. A physical optimizer rule (`DistributedPhysicalOptimizerRule`) cuts the plan
//!   at repartitions into stages with network boundaries (`NetworkShuffleExec`,
//!   `NetworkCoalesceExec`), and the process that planned drives the stages directly on
//!   workers (Arrow Flight endpoints the application runs and lists). Lighter to embed (the
//!   front end stays the coordinator; physical planning stays in Petrel, so no logical codec),
//!   but lost workers fail the query (no stage retry), and there is nothing to operate as a
//!   cluster beyond the workers.
//!
//! **Choice: Ballista.** Issue #15 asks for a cluster that Petrel hands work to rather than
//! one Petrel runs: Ballista's own scheduler, executors that can be deployed and scaled
//! apart from the front end (docker-compose profile), and a query that survives an executor
//! killed mid-way by retry — Ballista re-runs lost tasks and stages; datafusion-distributed
//! leaves that to the caller. The costs are Ballista's: a `LogicalExtensionCodec` for the
//! Iceberg table provider (the scheduler plans; it re-opens the table from its catalog
//! configuration, metadata location and snapshot id), and shuffle files on executor disks.
//! Nothing here depends on Ballista yet: the codec and the executor-side scan are the part
//! both engines need, so the choice stays cheap to revisit.
//!
//! # Task groups for a cluster
//!
//! A local scan has as many partitions as the machine has cores. On a cluster the partitions
//! should follow the data: [`petrel_table_provider::plan::plan_task_groups`] groups a plan's
//! tasks as Iceberg does for Spark (`read.split.target-size`, `read.split.open-file-cost`,
//! `read.split.planning-lookback`), and a shipped scan runs whatever grouping its recipe holds.
//! A data file's byte ranges may run on different executors: position deletes and deletion
//! vectors apply by absolute row position within the file (tested across two executors).
//!
//! # What the Ballista side still needs (issue #15)
//!
//! - **Executors** (`petrel executor`): `ballista_executor::executor_process::start_executor_process`
//!   with an `ExecutorProcessConfig` whose `override_physical_codec` is a composite codec:
//!   Petrel's nodes (encodings starting `petrel-scan/1`) through [`PetrelPhysicalCodec`], the
//!   rest (shuffle readers and writers) through Ballista's `BallistaPhysicalExtensionCodec`,
//!   which in 53.0 has no slot for a user codec and fails on bytes not its own. The same
//!   composite goes to the scheduler. The executor's runtime is built from Petrel's store configuration
//!   ([`ExecutorScans`] from a `StoreRegistry`: `StoreConfig::from_env` / the config file), so
//!   that credentials stay in executor configuration. Until then only the codec and the
//!   executor-side scan exist.
//! - **Scheduler**: Ballista's own, but it plans from the *logical* plan the client sends, so
//!   the Iceberg table provider needs a `LogicalExtensionCodec`: a `TableScan` of an
//!   `IcebergTableProvider` encoded as catalog name + table identifier + metadata location +
//!   snapshot selector (and the positional / only-files flags), decoded by re-opening the table
//!   from the scheduler's catalog configuration at that metadata location (not the catalog's
//!   current one: the query's snapshot stays the one the front end resolved). Its physical
//!   planning then produces `IcebergScanExec`s with recipes, which this codec ships; the
//!   scheduler's session must register Petrel's optimizer rules (`SignedZeroEquality`,
//!   `NestedValuesTypes`, `NarrowStructColumns`) for the same plans as local ones, and a rule
//!   regrouping scans by [`plan_task_groups`](petrel_table_provider::plan::plan_task_groups)
//!   instead of the scheduler's core count.
//! - **Front end**: `petrel serve --engine ballista://host:port` (a `QueryExecutor` that sends
//!   the logical plan to the scheduler and streams the job's result partitions to DoGet), the
//!   planned-bytes threshold for staying local, job cancellation on a cancelled query.
//! - **Not yet shippable**: change feeds (`TableChangesExec`), metadata tables
//!   (`MetadataScanExec`) and writes fail to encode with an error naming the node; scans built
//!   from `scan_plan` (change planning, DML) carry no recipe. The `DataSourceExec` child DataFusion
//!   encodes next to a scan is decoded on the executor only to be dropped; decoding it needs
//!   the data's object store registered in the executor's `RuntimeEnv` (local files always
//!   are), so executors for S3 tables should register Petrel's stores there, or the front end
//!   replace each `IcebergScanExec` by an unbuilt [`ShippedScanExec`] before encoding.
//! - Tests with a real scheduler and two executor processes, the executor-kill test, the
//!   benchmark, the README section and the docker-compose profile.
//!
//! Dependency rules: `petrel-table-provider` never depends on prost or tonic, so the codec
//! (`datafusion-proto`, prost) lives in this crate; the table provider only remembers each
//! scan's recipe (plain data).

pub mod codec;
pub mod shipped_scan;

pub use codec::PetrelPhysicalCodec;
pub use shipped_scan::{ExecutorScans, ShippedScanExec};

#[doc(no_inline)]
pub use petrel_table_provider::IcebergScanExec;
#[doc(no_inline)]
pub use petrel_table_provider::scan::ScanRecipe;
