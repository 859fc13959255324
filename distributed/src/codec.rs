//! [`PetrelPhysicalCodec`]: Petrel's plan nodes in `datafusion_proto` plans.
//!
//! An [`IcebergScanExec`] (or a [`ShippedScanExec`] being passed on) is encoded as
//! `petrel-scan/1` followed by JSON: its [`ScanRecipe`] (tasks as the planner's serde types,
//! the snapshot selector, the moved-table prefixes), the pushed filters (each a DataFusion
//! logical expression in `datafusion_proto` bytes), the struct leaves read, and the output
//! schema (`datafusion_proto`'s Arrow schema message) and partition count. JSON keeps a plan
//! readable in a log; object-store settings and credentials are not part of it.
//!
//! DataFusion's serialiser also encodes an extension node's children: an `IcebergScanExec`'s
//! Parquet scan goes along as a plain `DataSourceExec` and is dropped on decoding (the
//! shipped scan builds its own, with Petrel's readers, schema mapping and deletes). Decoding
//! that child looks up its object store in the receiving `RuntimeEnv`, which for an object
//! store other than local files must know the bucket.
//!
//! Nodes this codec does not know (change feeds, metadata tables, writes) fail to encode with
//! an error naming the node.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use arrow::datatypes::{Schema, SchemaRef};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::bytes::Serializeable;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use datafusion_proto::protobuf;
use petrel_table_provider::plan::PlanMetrics;
use petrel_table_provider::scan::{ScanRecipe, TableRecipe};
use petrel_table_provider::{IcebergScanExec, LeafProjection, ScanTask, SnapshotSelector};
use prost::Message;
use serde::{Deserialize, Serialize};

use crate::shipped_scan::{ExecutorScans, ShippedScanExec};

/// The first bytes of an encoded scan (format and version).
pub(crate) const SCAN_MAGIC: &[u8] = b"petrel-scan/1\n";

/// The `PhysicalExtensionCodec` for Petrel's plan nodes; decoded scans read through `scans`.
#[derive(Debug, Clone)]
pub struct PetrelPhysicalCodec {
    scans: ExecutorScans,
}

impl PetrelPhysicalCodec {
    /// A codec whose decoded scans read through `scans` (the receiving process's stores and
    /// caches; an encoding-only process may pass any).
    pub fn new(scans: ExecutorScans) -> Self {
        Self { scans }
    }
}

impl PhysicalExtensionCodec for PetrelPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        _inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let Some(json) = buf.strip_prefix(SCAN_MAGIC) else {
            return Err(DataFusionError::Plan(
                "not a Petrel plan node (expected a petrel-scan/1 encoding)".into(),
            ));
        };
        let wire: WireScan = serde_json::from_slice(json).map_err(|e| {
            DataFusionError::Plan(format!("cannot decode a shipped Petrel scan: {e}"))
        })?;
        let (recipe, leaves, schema, partitions) = wire.into_parts(ctx)?;
        Ok(Arc::new(ShippedScanExec::new(
            Arc::new(recipe),
            leaves,
            schema,
            partitions,
            self.scans.clone(),
        )))
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> DFResult<()> {
        let partitions = node.properties().output_partitioning().partition_count();
        let schema = node.schema();
        let wire = if let Some(scan) = node.as_any().downcast_ref::<IcebergScanExec>() {
            let Some(recipe) = scan.recipe() else {
                return Err(DataFusionError::NotImplemented(format!(
                    "the scan of table {} cannot be shipped to another process: it was not \
                     planned by a table provider's scan (a change feed or a DML scan)",
                    scan.table()
                )));
            };
            WireScan::new(recipe, scan.leaf_projection(), &schema, partitions)?
        } else if let Some(scan) = node.as_any().downcast_ref::<ShippedScanExec>() {
            WireScan::new(scan.recipe(), scan.leaf_projection(), &schema, partitions)?
        } else {
            return Err(DataFusionError::NotImplemented(format!(
                "Petrel's plan codec cannot ship {} to another process",
                node.name()
            )));
        };
        buf.extend_from_slice(SCAN_MAGIC);
        serde_json::to_writer(buf, &wire)
            .map_err(|e| DataFusionError::Internal(format!("cannot encode a Petrel scan: {e}")))
    }
}

/// A snapshot selection as encoded.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum WireSelector {
    Current,
    Id(i64),
    Ref(String),
    AsOfTimestampMs(i64),
}

impl From<&SnapshotSelector> for WireSelector {
    fn from(selector: &SnapshotSelector) -> Self {
        match selector {
            SnapshotSelector::Current => Self::Current,
            SnapshotSelector::Id(id) => Self::Id(*id),
            SnapshotSelector::Ref(name) => Self::Ref(name.clone()),
            SnapshotSelector::AsOfTimestampMs(ms) => Self::AsOfTimestampMs(*ms),
        }
    }
}

impl From<WireSelector> for SnapshotSelector {
    fn from(selector: WireSelector) -> Self {
        match selector {
            WireSelector::Current => Self::Current,
            WireSelector::Id(id) => Self::Id(id),
            WireSelector::Ref(name) => Self::Ref(name),
            WireSelector::AsOfTimestampMs(ms) => Self::AsOfTimestampMs(ms),
        }
    }
}

/// Planning counts as encoded (shown by the rebuilt scan; planning time is the sender's).
#[derive(Debug, Serialize, Deserialize)]
struct WirePlanMetrics {
    manifests_total: usize,
    manifests_pruned: usize,
    manifests_read: usize,
    data_files_seen: usize,
    files_pruned_by_partition: usize,
    files_pruned_by_metrics: usize,
    files_selected: usize,
    bytes_selected: u64,
    delete_files: usize,
    #[serde(default)]
    equality_deletes_pruned: usize,
    stopped_by_limit: bool,
    planning_micros: u64,
}

impl From<&PlanMetrics> for WirePlanMetrics {
    fn from(m: &PlanMetrics) -> Self {
        Self {
            manifests_total: m.manifests_total,
            manifests_pruned: m.manifests_pruned,
            manifests_read: m.manifests_read,
            data_files_seen: m.data_files_seen,
            files_pruned_by_partition: m.files_pruned_by_partition,
            files_pruned_by_metrics: m.files_pruned_by_metrics,
            files_selected: m.files_selected,
            bytes_selected: m.bytes_selected,
            delete_files: m.delete_files,
            equality_deletes_pruned: m.equality_deletes_pruned,
            stopped_by_limit: m.stopped_by_limit,
            planning_micros: u64::try_from(m.planning_time.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

impl From<WirePlanMetrics> for PlanMetrics {
    fn from(m: WirePlanMetrics) -> Self {
        Self {
            manifests_total: m.manifests_total,
            manifests_pruned: m.manifests_pruned,
            manifests_read: m.manifests_read,
            data_files_seen: m.data_files_seen,
            files_pruned_by_partition: m.files_pruned_by_partition,
            files_pruned_by_metrics: m.files_pruned_by_metrics,
            files_selected: m.files_selected,
            bytes_selected: m.bytes_selected,
            delete_files: m.delete_files,
            equality_deletes_pruned: m.equality_deletes_pruned,
            stopped_by_limit: m.stopped_by_limit,
            planning_time: std::time::Duration::from_micros(m.planning_micros),
        }
    }
}

/// A table recipe as encoded.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct WireTable {
    namespace: Vec<String>,
    name: String,
    metadata_location: String,
    moved: Option<(String, String)>,
    selector: WireSelector,
    positional: bool,
}

impl From<&TableRecipe> for WireTable {
    fn from(recipe: &TableRecipe) -> Self {
        Self {
            namespace: recipe.namespace.clone(),
            name: recipe.name.clone(),
            metadata_location: recipe.metadata_location.clone(),
            moved: recipe.moved.clone(),
            selector: (&recipe.selector).into(),
            positional: recipe.positional,
        }
    }
}

impl From<WireTable> for TableRecipe {
    fn from(wire: WireTable) -> Self {
        Self {
            namespace: wire.namespace,
            name: wire.name,
            metadata_location: wire.metadata_location,
            moved: wire.moved,
            selector: wire.selector.into(),
            positional: wire.positional,
        }
    }
}

/// An encoded scan (see the module docs).
#[derive(Debug, Serialize, Deserialize)]
struct WireScan {
    /// The table read (its fields inline in the JSON).
    #[serde(flatten)]
    table: WireTable,
    snapshot_id: Option<i64>,
    partitions: Vec<Vec<ScanTask>>,
    plan_metrics: WirePlanMetrics,
    projection: Option<Vec<usize>>,
    /// Each filter as `datafusion_proto` bytes of a logical expression.
    filters: Vec<Vec<u8>>,
    limit: Option<usize>,
    /// Struct column field id → the field ids read.
    leaves: Option<BTreeMap<i32, BTreeSet<i32>>>,
    /// The output schema as `datafusion_proto`'s Arrow schema message.
    schema: Vec<u8>,
    output_partitions: usize,
}

impl WireScan {
    fn new(
        recipe: &ScanRecipe,
        leaves: Option<&LeafProjection>,
        schema: &SchemaRef,
        output_partitions: usize,
    ) -> DFResult<Self> {
        let filters = recipe
            .filters
            .iter()
            .map(|f| f.to_bytes().map(|b| b.to_vec()))
            .collect::<DFResult<Vec<_>>>()?;
        let schema = protobuf::Schema::try_from(schema.as_ref())
            .map_err(|e| DataFusionError::Internal(format!("cannot encode a scan schema: {e}")))?
            .encode_to_vec();
        Ok(Self {
            table: WireTable::from(&recipe.table),
            snapshot_id: recipe.snapshot_id,
            partitions: recipe.partitions.clone(),
            plan_metrics: (&recipe.plan_metrics).into(),
            projection: recipe.projection.clone(),
            filters,
            limit: recipe.limit,
            leaves: leaves.map(|l| l.fields().clone()),
            schema,
            output_partitions,
        })
    }

    /// The recipe, leaves, schema and partition count (filters' functions from `registry`).
    #[allow(clippy::type_complexity)]
    fn into_parts(
        self,
        registry: &TaskContext,
    ) -> DFResult<(ScanRecipe, Option<LeafProjection>, SchemaRef, usize)> {
        let filters = self
            .filters
            .iter()
            .map(|bytes| Expr::from_bytes_with_registry(bytes, registry))
            .collect::<DFResult<Vec<_>>>()?;
        let schema = protobuf::Schema::decode(self.schema.as_slice()).map_err(|e| {
            DataFusionError::Plan(format!("cannot decode a shipped scan's schema: {e}"))
        })?;
        let schema = Schema::try_from(&schema).map_err(|e| {
            DataFusionError::Plan(format!("cannot decode a shipped scan's schema: {e}"))
        })?;
        let recipe = ScanRecipe {
            table: self.table.into(),
            snapshot_id: self.snapshot_id,
            partitions: self.partitions,
            plan_metrics: self.plan_metrics.into(),
            projection: self.projection,
            filters,
            limit: self.limit,
        };
        Ok((
            recipe,
            self.leaves.map(LeafProjection::from_fields),
            Arc::new(schema),
            self.output_partitions,
        ))
    }
}
