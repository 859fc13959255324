//! The codecs a Ballista cluster running Petrel's plans needs, each Ballista's own plus
//! Petrel's nodes:
//!
//! - [`ClusterLogicalCodec`]: the front end sends the scheduler a *logical* plan. An Iceberg
//!   table in it ([`IcebergTableProvider`]) travels as `petrel-table/1` and the JSON of its
//!   [`TableRecipe`] (metadata file, snapshot selection, positional or not) and comes back on
//!   the scheduler as a [`ClusterTable`], which opens the table through the scheduler's own
//!   stores when it is planned. Anything else goes through Ballista's logical codec.
//! - [`ClusterPhysicalCodec`]: the scheduler sends executors stage plans. Petrel's scans go
//!   through [`PetrelPhysicalCodec`] (encodings starting `petrel-scan/1`), everything else —
//!   shuffle readers and writers — through Ballista's `BallistaPhysicalExtensionCodec`, which
//!   has no slot for a user codec of its own.
//!
//! Neither carries object-store settings or credentials: each process opens files with the
//! stores of its own configuration.

use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use ballista_core::serde::{BallistaLogicalExtensionCodec, BallistaPhysicalExtensionCodec};
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result as DFResult, TableReference};
use datafusion::datasource::file_format::FileFormatFactory;
use datafusion::execution::TaskContext;
use datafusion::logical_expr::Extension;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_proto::logical_plan::LogicalExtensionCodec;
use datafusion_proto::physical_plan::PhysicalExtensionCodec;
use petrel_table_provider::{IcebergScanExec, IcebergTableProvider};

use crate::cluster_table::ClusterTable;
use crate::codec::{PetrelPhysicalCodec, SCAN_MAGIC, WireTable};
use crate::shipped_scan::{ExecutorScans, ShippedScanExec};

/// The first bytes of an encoded Iceberg table (format and version).
const TABLE_MAGIC: &[u8] = b"petrel-table/1\n";

/// Ballista's logical codec plus Petrel's Iceberg tables (see the module docs).
#[derive(Debug)]
pub struct ClusterLogicalCodec {
    ballista: BallistaLogicalExtensionCodec,
    scans: ExecutorScans,
}

impl ClusterLogicalCodec {
    /// A codec whose decoded tables open through `scans` (the scheduler's stores and caches;
    /// a process that only encodes may pass any).
    pub fn new(scans: ExecutorScans) -> Self {
        Self {
            ballista: BallistaLogicalExtensionCodec::default(),
            scans,
        }
    }
}

impl LogicalExtensionCodec for ClusterLogicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[datafusion::logical_expr::LogicalPlan],
        ctx: &TaskContext,
    ) -> DFResult<Extension> {
        self.ballista.try_decode(buf, inputs, ctx)
    }

    fn try_encode(&self, node: &Extension, buf: &mut Vec<u8>) -> DFResult<()> {
        self.ballista.try_encode(node, buf)
    }

    fn try_decode_table_provider(
        &self,
        buf: &[u8],
        table_ref: &TableReference,
        schema: SchemaRef,
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn TableProvider>> {
        let Some(json) = buf.strip_prefix(TABLE_MAGIC) else {
            return self
                .ballista
                .try_decode_table_provider(buf, table_ref, schema, ctx);
        };
        let wire: WireTable = serde_json::from_slice(json).map_err(|e| {
            DataFusionError::Plan(format!(
                "cannot decode the Iceberg table {table_ref} of a shipped plan: {e}"
            ))
        })?;
        Ok(Arc::new(ClusterTable::new(
            wire.into(),
            schema,
            self.scans.clone(),
        )))
    }

    fn try_encode_table_provider(
        &self,
        table_ref: &TableReference,
        node: Arc<dyn TableProvider>,
        buf: &mut Vec<u8>,
    ) -> DFResult<()> {
        let recipe = if let Some(table) = node.as_any().downcast_ref::<IcebergTableProvider>() {
            table.table_recipe().ok_or_else(|| {
                DataFusionError::NotImplemented(format!(
                    "table {table_ref}: a write's view of an Iceberg table cannot be shipped to \
                     a cluster"
                ))
            })?
        } else if let Some(table) = node.as_any().downcast_ref::<ClusterTable>() {
            table.recipe().clone()
        } else {
            return self
                .ballista
                .try_encode_table_provider(table_ref, node, buf);
        };
        buf.extend_from_slice(TABLE_MAGIC);
        serde_json::to_writer(buf, &WireTable::from(&recipe)).map_err(|e| {
            DataFusionError::Internal(format!("cannot encode the Iceberg table {table_ref}: {e}"))
        })
    }

    fn try_decode_file_format(
        &self,
        buf: &[u8],
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn FileFormatFactory>> {
        self.ballista.try_decode_file_format(buf, ctx)
    }

    fn try_encode_file_format(
        &self,
        buf: &mut Vec<u8>,
        node: Arc<dyn FileFormatFactory>,
    ) -> DFResult<()> {
        self.ballista.try_encode_file_format(buf, node)
    }
}

/// Ballista's physical codec plus Petrel's scans (see the module docs).
#[derive(Debug)]
pub struct ClusterPhysicalCodec {
    ballista: BallistaPhysicalExtensionCodec,
    petrel: PetrelPhysicalCodec,
}

impl ClusterPhysicalCodec {
    /// A codec whose decoded scans read through `scans` (this process's stores and caches).
    pub fn new(scans: ExecutorScans) -> Self {
        Self {
            ballista: BallistaPhysicalExtensionCodec::default(),
            petrel: PetrelPhysicalCodec::new(scans),
        }
    }
}

impl PhysicalExtensionCodec for ClusterPhysicalCodec {
    fn try_decode(
        &self,
        buf: &[u8],
        inputs: &[Arc<dyn ExecutionPlan>],
        ctx: &TaskContext,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        if buf.starts_with(SCAN_MAGIC) {
            self.petrel.try_decode(buf, inputs, ctx)
        } else {
            self.ballista.try_decode(buf, inputs, ctx)
        }
    }

    fn try_encode(&self, node: Arc<dyn ExecutionPlan>, buf: &mut Vec<u8>) -> DFResult<()> {
        let any = node.as_any();
        if any.is::<IcebergScanExec>() || any.is::<ShippedScanExec>() {
            self.petrel.try_encode(node, buf)
        } else {
            self.ballista.try_encode(node, buf)
        }
    }
}
