//! `position_deletes`: every position deleted by the snapshot's position-delete files and
//! deletion vectors, with the delete file it comes from (Iceberg Java's `PositionDeletesTable`).
//! Delete files are read with the merge-on-read readers (`deletes::position`), one batch per
//! delete file. `row` (the deleted row's copy some writers keep) is always null: Petrel reads
//! only `file_path` and `pos`. Format-3 tables also have `content_offset` and
//! `content_size_in_bytes` (the deletion vector's blob), as in Spark.
//!
//! A position-delete file names data files in its own spelling; the delete readers normalise
//! paths (`file:///…`), so each is spelt back as the delete file's own path is spelt.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int32Array, Int64Array, RecordBatch, RecordBatchOptions, StringArray, new_null_array,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataContentType, DataFileFormat, FormatVersion, ManifestContentType, ManifestStatus,
    SnapshotRef,
};

use super::files::manifests_of;
use super::partition_type::PartitionType;
use super::{MetadataRows, spelt_like};
use crate::catalog::LoadedTable;
use crate::deletes::{read_deletion_vector, read_position_delete_file};
use crate::error::Result;
use crate::plan::ManifestCache;
use crate::spec::iceberg_schema_to_arrow;

/// The rows of `position_deletes`.
#[derive(Debug, Clone)]
pub(crate) struct PositionDeletesRows {
    table: LoadedTable,
    snapshot: Option<SnapshotRef>,
    cache: ManifestCache,
    partition: Arc<PartitionType>,
    schema: SchemaRef,
}

/// One delete file to read.
#[derive(Debug, Clone)]
struct DeleteFile {
    path: String,
    size: u64,
    spec_id: i32,
    partition: iceberg::spec::Struct,
    dv: Option<(String, i64, i64)>,
}

impl PositionDeletesRows {
    pub(crate) fn new(
        table: LoadedTable,
        snapshot: Option<SnapshotRef>,
        cache: ManifestCache,
    ) -> Result<Self> {
        let partition = Arc::new(PartitionType::of(table.metadata())?);
        let row = iceberg_schema_to_arrow(table.metadata().current_schema())?;
        let mut fields = vec![
            Field::new("file_path", DataType::Utf8, false),
            Field::new("pos", DataType::Int64, false),
            Field::new(
                "row",
                DataType::Struct(Fields::from(row.fields().to_vec())),
                true,
            ),
        ];
        if !partition.is_empty() {
            fields.push(Field::new("partition", partition.data_type(), false));
        }
        fields.push(Field::new("spec_id", DataType::Int32, false));
        fields.push(Field::new("delete_file_path", DataType::Utf8, false));
        if table.metadata().format_version() >= FormatVersion::V3 {
            fields.push(Field::new("content_offset", DataType::Int64, true));
            fields.push(Field::new("content_size_in_bytes", DataType::Int64, true));
        }
        Ok(Self {
            table,
            snapshot,
            cache,
            partition,
            schema: Arc::new(Schema::new(fields)),
        })
    }

    async fn delete_files(&self) -> Result<Vec<DeleteFile>> {
        let snapshots: Vec<SnapshotRef> = self.snapshot.iter().cloned().collect();
        let manifests = manifests_of(&self.table, &self.cache, &snapshots).await?;
        let name = self.table.ident().to_string();
        let mut out = Vec::new();
        for mf in manifests
            .iter()
            .filter(|m| m.content == ManifestContentType::Deletes)
        {
            let manifest = self
                .cache
                .manifest(self.table.io(), &name, &mf.manifest_path)
                .await?;
            let spec_id = manifest.metadata().partition_spec().spec_id();
            for entry in manifest.entries() {
                let file = entry.data_file();
                if entry.status() == ManifestStatus::Deleted
                    || file.content_type() != DataContentType::PositionDeletes
                {
                    continue;
                }
                let dv = match (
                    file.file_format(),
                    file.referenced_data_file(),
                    file.content_offset(),
                    file.content_size_in_bytes(),
                ) {
                    (DataFileFormat::Puffin, Some(data), Some(offset), Some(size)) => {
                        Some((data, offset, size))
                    }
                    _ => None,
                };
                out.push(DeleteFile {
                    path: file.file_path().to_string(),
                    size: file.file_size_in_bytes(),
                    spec_id,
                    partition: file.partition().clone(),
                    dv,
                });
            }
        }
        Ok(out)
    }

    async fn batch(&self, file: DeleteFile, projection: &[usize]) -> Result<RecordBatch> {
        let name = self.table.ident().to_string();
        let io = self.table.io();
        let mut paths: Vec<String> = Vec::new();
        let mut positions: Vec<i64> = Vec::new();
        match &file.dv {
            Some((data, offset, size)) => {
                let bitmap =
                    read_deletion_vector(io, &name, &file.path, *offset as u64, *size as u64)
                        .await?;
                for pos in bitmap.iter() {
                    paths.push(data.clone());
                    positions.push(pos as i64);
                }
            }
            None => {
                let (by_file, _) =
                    read_position_delete_file(io, &name, &file.path, file.size).await?;
                let mut by_file: Vec<_> = by_file.into_iter().collect();
                by_file.sort_by(|a, b| a.0.cmp(&b.0));
                for (data, deleted) in by_file {
                    let data = spelt_like(&data, &file.path);
                    for pos in deleted.iter() {
                        paths.push(data.clone());
                        positions.push(*pos as i64);
                    }
                }
            }
        }
        let rows = positions.len();
        let schema = Arc::new(self.schema.project(projection)?);
        let mut columns: Vec<ArrayRef> = Vec::new();
        for &i in projection {
            let field = self.schema.field(i);
            let column: ArrayRef = match field.name().as_str() {
                "file_path" => Arc::new(StringArray::from_iter_values(&paths)),
                "pos" => Arc::new(Int64Array::from(positions.clone())),
                "row" => new_null_array(field.data_type(), rows),
                "partition" => {
                    let tuple = self.partition.values(file.spec_id, &file.partition)?;
                    self.partition.array(&vec![Some(tuple); rows])?
                }
                "spec_id" => Arc::new(Int32Array::from(vec![file.spec_id; rows])),
                "delete_file_path" => Arc::new(StringArray::from(vec![file.path.as_str(); rows])),
                "content_offset" => {
                    Arc::new(Int64Array::from(vec![file.dv.as_ref().map(|d| d.1); rows]))
                }
                _ => Arc::new(Int64Array::from(vec![file.dv.as_ref().map(|d| d.2); rows])),
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows)),
        )?)
    }
}

impl MetadataRows for PositionDeletesRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        let this = Arc::new(self.clone());
        let listed = {
            let this = Arc::clone(&this);
            async move { this.delete_files().await }
        };
        futures::stream::once(listed)
            .map_ok(move |files| {
                let this = Arc::clone(&this);
                let projection = projection.clone();
                futures::stream::iter(files).then(move |file| {
                    let this = Arc::clone(&this);
                    let projection = projection.clone();
                    async move { this.batch(file, &projection).await }
                })
            })
            .try_flatten()
            .try_filter(|b| futures::future::ready(b.num_rows() > 0))
            .boxed()
    }
}
