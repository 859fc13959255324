//! `partitions`: per partition (the union partition tuple and the spec id), the live data
//! files' rows, count and bytes, the position- and equality-delete files' counts and rows, and
//! the snapshot that last added a file to it (Iceberg Java's `PartitionsTable`). An unpartitioned
//! table has one row and no `partition` / `spec_id` columns, as in Spark.
//!
//! An aggregate: every live entry of the snapshot's manifests (read through the planner's
//! [`ManifestCache`], one manifest at a time) is folded into a map of partitions, which is
//! emitted as one batch at the end; memory is proportional to the number of partitions.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, RecordBatchOptions, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::ScalarValue;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{DataContentType, ManifestStatus, SnapshotRef};

use super::MetadataRows;
use super::files::manifests_of;
use super::history::timestamp_tz;
use super::partition_type::PartitionType;
use crate::catalog::LoadedTable;
use crate::error::Result;
use crate::plan::ManifestCache;

/// What one partition holds.
#[derive(Debug, Default, Clone)]
struct PartitionStats {
    record_count: i64,
    file_count: i32,
    total_data_file_size_in_bytes: i64,
    position_delete_record_count: i64,
    position_delete_file_count: i32,
    equality_delete_record_count: i64,
    equality_delete_file_count: i32,
    last_updated_at: Option<i64>,
    last_updated_snapshot_id: Option<i64>,
}

/// The rows of `partitions`.
#[derive(Debug, Clone)]
pub(crate) struct PartitionsRows {
    table: LoadedTable,
    snapshot: Option<SnapshotRef>,
    cache: ManifestCache,
    partition: Arc<PartitionType>,
    schema: SchemaRef,
}

impl PartitionsRows {
    pub(crate) fn new(
        table: LoadedTable,
        snapshot: Option<SnapshotRef>,
        cache: ManifestCache,
    ) -> Result<Self> {
        let partition = Arc::new(PartitionType::of(table.metadata())?);
        let mut fields = Vec::new();
        if !partition.is_empty() {
            fields.push(Field::new("partition", partition.data_type(), false));
            fields.push(Field::new("spec_id", DataType::Int32, false));
        }
        fields.extend([
            Field::new("record_count", DataType::Int64, false),
            Field::new("file_count", DataType::Int32, false),
            Field::new("total_data_file_size_in_bytes", DataType::Int64, false),
            Field::new("position_delete_record_count", DataType::Int64, false),
            Field::new("position_delete_file_count", DataType::Int32, false),
            Field::new("equality_delete_record_count", DataType::Int64, false),
            Field::new("equality_delete_file_count", DataType::Int32, false),
            Field::new("last_updated_at", timestamp_tz(), true),
            Field::new("last_updated_snapshot_id", DataType::Int64, true),
        ]);
        Ok(Self {
            table,
            snapshot,
            cache,
            partition,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    async fn aggregate(&self) -> Result<Vec<((i32, Vec<ScalarValue>), PartitionStats)>> {
        let snapshots: Vec<SnapshotRef> = self.snapshot.iter().cloned().collect();
        let manifests = manifests_of(&self.table, &self.cache, &snapshots).await?;
        let name = self.table.ident().to_string();
        let metadata = self.table.metadata();
        let unpartitioned = self.partition.is_empty();
        let mut groups: HashMap<(i32, Vec<ScalarValue>), PartitionStats> = HashMap::new();
        let mut order: Vec<(i32, Vec<ScalarValue>)> = Vec::new();
        for mf in &manifests {
            let manifest = self
                .cache
                .manifest(self.table.io(), &name, &mf.manifest_path)
                .await?;
            let spec_id = manifest.metadata().partition_spec().spec_id();
            for entry in manifest.entries() {
                if entry.status() == ManifestStatus::Deleted {
                    continue;
                }
                let file = entry.data_file();
                let key = if unpartitioned {
                    (0, Vec::new())
                } else {
                    (spec_id, self.partition.values(spec_id, file.partition())?)
                };
                let stats = groups.entry(key.clone()).or_insert_with(|| {
                    order.push(key);
                    PartitionStats::default()
                });
                let records = file.record_count() as i64;
                match file.content_type() {
                    DataContentType::Data => {
                        stats.record_count += records;
                        stats.file_count += 1;
                        stats.total_data_file_size_in_bytes += file.file_size_in_bytes() as i64;
                    }
                    DataContentType::PositionDeletes => {
                        stats.position_delete_record_count += records;
                        stats.position_delete_file_count += 1;
                    }
                    DataContentType::EqualityDeletes => {
                        stats.equality_delete_record_count += records;
                        stats.equality_delete_file_count += 1;
                    }
                }
                let snapshot_id = entry.snapshot_id().unwrap_or(mf.added_snapshot_id);
                if let Some(snapshot) = metadata.snapshot_by_id(snapshot_id) {
                    let at = snapshot.timestamp_ms() * 1000;
                    if stats.last_updated_at.is_none_or(|t| t < at) {
                        stats.last_updated_at = Some(at);
                        stats.last_updated_snapshot_id = Some(snapshot_id);
                    }
                }
            }
        }
        Ok(order
            .into_iter()
            .filter_map(|k| groups.remove(&k).map(|s| (k, s)))
            .collect())
    }

    fn batch(
        &self,
        groups: &[((i32, Vec<ScalarValue>), PartitionStats)],
        projection: &[usize],
    ) -> Result<RecordBatch> {
        let schema = Arc::new(self.schema.project(projection)?);
        let stats: Vec<&PartitionStats> = groups.iter().map(|(_, s)| s).collect();
        let mut columns: Vec<ArrayRef> = Vec::new();
        for &i in projection {
            let long = |f: fn(&PartitionStats) -> i64| -> ArrayRef {
                Arc::new(Int64Array::from_iter_values(stats.iter().map(|s| f(s))))
            };
            let int = |f: fn(&PartitionStats) -> i32| -> ArrayRef {
                Arc::new(Int32Array::from_iter_values(stats.iter().map(|s| f(s))))
            };
            let column: ArrayRef = match self.schema.field(i).name().as_str() {
                "partition" => {
                    let tuples: Vec<Option<Vec<ScalarValue>>> =
                        groups.iter().map(|((_, v), _)| Some(v.clone())).collect();
                    self.partition.array(&tuples)?
                }
                "spec_id" => Arc::new(Int32Array::from_iter_values(
                    groups.iter().map(|((spec, _), _)| *spec),
                )),
                "record_count" => long(|s| s.record_count),
                "file_count" => int(|s| s.file_count),
                "total_data_file_size_in_bytes" => long(|s| s.total_data_file_size_in_bytes),
                "position_delete_record_count" => long(|s| s.position_delete_record_count),
                "position_delete_file_count" => int(|s| s.position_delete_file_count),
                "equality_delete_record_count" => long(|s| s.equality_delete_record_count),
                "equality_delete_file_count" => int(|s| s.equality_delete_file_count),
                "last_updated_at" => Arc::new(
                    TimestampMicrosecondArray::from_iter(stats.iter().map(|s| s.last_updated_at))
                        .with_timezone("UTC"),
                ),
                _ => Arc::new(Int64Array::from_iter(
                    stats.iter().map(|s| s.last_updated_snapshot_id),
                )),
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(groups.len())),
        )?)
    }
}

impl MetadataRows for PartitionsRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        let this = self.clone();
        futures::stream::once(async move {
            let groups = this.aggregate().await?;
            this.batch(&groups, &projection)
        })
        .try_filter(|b| futures::future::ready(b.num_rows() > 0))
        .boxed()
    }
}
