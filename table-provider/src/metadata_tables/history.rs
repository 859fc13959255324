//! The metadata tables read from the metadata file alone: `snapshots`, `history`, `refs` and
//! `metadata_log_entries` (Iceberg Java's `SnapshotsTable`, `HistoryTable`, `RefsTable`,
//! `MetadataLogEntriesTable`). They are small (one row per snapshot, ref or metadata file): one
//! batch each.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Int32Array, Int64Array, MapBuilder, MapFieldNames, RecordBatch,
    StringArray, StringBuilder, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use futures::StreamExt;
use futures::stream::BoxStream;

use super::{MetadataRows, MetadataTableKind, spelt_like};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};

pub(crate) fn timestamp_tz() -> DataType {
    DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
}

/// A `map<string, string>` field with Petrel's map layout (`key_value` entries).
fn string_map_type() -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "key_value",
            DataType::Struct(
                vec![
                    Field::new("key", DataType::Utf8, false),
                    Field::new("value", DataType::Utf8, false),
                ]
                .into(),
            ),
            false,
        )),
        false,
    )
}

/// The rows of one of this file's tables, computed when the scan runs.
#[derive(Debug)]
pub(crate) struct HistoryRows {
    kind: MetadataTableKind,
    table: LoadedTable,
    schema: SchemaRef,
}

impl HistoryRows {
    pub(crate) fn new(kind: MetadataTableKind, table: LoadedTable) -> Self {
        let fields = match kind {
            MetadataTableKind::Snapshots => vec![
                Field::new("committed_at", timestamp_tz(), false),
                Field::new("snapshot_id", DataType::Int64, false),
                Field::new("parent_id", DataType::Int64, true),
                Field::new("operation", DataType::Utf8, true),
                Field::new("manifest_list", DataType::Utf8, true),
                Field::new("summary", string_map_type(), true),
            ],
            MetadataTableKind::History => vec![
                Field::new("made_current_at", timestamp_tz(), false),
                Field::new("snapshot_id", DataType::Int64, false),
                Field::new("parent_id", DataType::Int64, true),
                Field::new("is_current_ancestor", DataType::Boolean, false),
            ],
            MetadataTableKind::Refs => vec![
                Field::new("name", DataType::Utf8, false),
                Field::new("type", DataType::Utf8, false),
                Field::new("snapshot_id", DataType::Int64, false),
                Field::new("max_reference_age_in_ms", DataType::Int64, true),
                Field::new("min_snapshots_to_keep", DataType::Int32, true),
                Field::new("max_snapshot_age_in_ms", DataType::Int64, true),
            ],
            _ => vec![
                Field::new("timestamp", timestamp_tz(), false),
                Field::new("file", DataType::Utf8, false),
                Field::new("latest_snapshot_id", DataType::Int64, true),
                Field::new("latest_schema_id", DataType::Int32, true),
                Field::new("latest_sequence_number", DataType::Int64, true),
            ],
        };
        Self {
            kind,
            table,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    fn columns(&self) -> Result<Vec<ArrayRef>> {
        match self.kind {
            MetadataTableKind::Snapshots => self.snapshots(),
            MetadataTableKind::History => self.history(),
            MetadataTableKind::Refs => self.refs(),
            _ => self.metadata_log(),
        }
    }

    fn snapshots(&self) -> Result<Vec<ArrayRef>> {
        let metadata = self.table.metadata();
        let mut snapshots: Vec<_> = metadata.snapshots().collect();
        snapshots.sort_by_key(|s| (s.timestamp_ms(), s.snapshot_id()));
        let names = MapFieldNames {
            entry: "key_value".into(),
            key: "key".into(),
            value: "value".into(),
        };
        let mut summary = MapBuilder::new(Some(names), StringBuilder::new(), StringBuilder::new())
            .with_values_field(Field::new("value", DataType::Utf8, false));
        for s in &snapshots {
            let mut entries: Vec<(String, String)> = s
                .summary()
                .additional_properties
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            entries.sort();
            for (k, v) in entries {
                summary.keys().append_value(k);
                summary.values().append_value(v);
            }
            summary.append(true)?;
        }
        Ok(vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    snapshots.iter().map(|s| s.timestamp_ms() * 1000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(
                snapshots.iter().map(|s| s.snapshot_id()),
            )),
            Arc::new(Int64Array::from_iter(
                snapshots.iter().map(|s| s.parent_snapshot_id()),
            )),
            Arc::new(StringArray::from_iter(
                snapshots
                    .iter()
                    .map(|s| Some(s.summary().operation.as_str())),
            )),
            Arc::new(StringArray::from_iter(
                snapshots.iter().map(|s| Some(s.manifest_list())),
            )),
            Arc::new(summary.finish()),
        ])
    }

    /// Ids of the current snapshot and its ancestors.
    fn current_ancestors(&self) -> HashSet<i64> {
        let metadata = self.table.metadata();
        let mut out = HashSet::new();
        let mut next = metadata.current_snapshot_id();
        while let Some(id) = next {
            if !out.insert(id) {
                break;
            }
            next = metadata
                .snapshot_by_id(id)
                .and_then(|s| s.parent_snapshot_id());
        }
        out
    }

    fn history(&self) -> Result<Vec<ArrayRef>> {
        let metadata = self.table.metadata();
        let log = metadata.history();
        let ancestors = self.current_ancestors();
        Ok(vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(
                    log.iter().map(|l| l.timestamp_ms * 1000),
                )
                .with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from_iter_values(
                log.iter().map(|l| l.snapshot_id),
            )),
            Arc::new(Int64Array::from_iter(log.iter().map(|l| {
                metadata
                    .snapshot_by_id(l.snapshot_id)
                    .and_then(|s| s.parent_snapshot_id())
            }))),
            Arc::new(BooleanArray::from_iter(
                log.iter().map(|l| Some(ancestors.contains(&l.snapshot_id))),
            )),
        ])
    }

    fn refs(&self) -> Result<Vec<ArrayRef>> {
        // The iceberg crate keeps refs' retention settings private; its JSON form has them.
        let json = serde_json::to_value(self.table.metadata().as_ref()).map_err(|e| {
            Error::InvalidArgument(format!(
                "table {}: cannot read its refs: {e}",
                self.table.ident()
            ))
        })?;
        let mut refs: Vec<(String, serde_json::Value)> = json
            .get("refs")
            .and_then(|r| r.as_object())
            .map(|r| r.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        if refs.is_empty()
            && let Some(id) = self.table.metadata().current_snapshot_id()
        {
            refs.push((
                "main".into(),
                serde_json::json!({"snapshot-id": id, "type": "branch"}),
            ));
        }
        refs.sort_by(|a, b| a.0.cmp(&b.0));
        let long = |v: &serde_json::Value, key: &str| v.get(key).and_then(|x| x.as_i64());
        Ok(vec![
            Arc::new(StringArray::from_iter_values(refs.iter().map(|(n, _)| n))),
            Arc::new(StringArray::from_iter_values(refs.iter().map(|(_, r)| {
                r.get("type")
                    .and_then(|t| t.as_str())
                    .unwrap_or("branch")
                    .to_uppercase()
            }))),
            Arc::new(Int64Array::from_iter_values(
                refs.iter()
                    .map(|(_, r)| long(r, "snapshot-id").unwrap_or_default()),
            )),
            Arc::new(Int64Array::from_iter(
                refs.iter().map(|(_, r)| long(r, "max-ref-age-ms")),
            )),
            Arc::new(Int32Array::from_iter(refs.iter().map(|(_, r)| {
                long(r, "min-snapshots-to-keep").and_then(|x| i32::try_from(x).ok())
            }))),
            Arc::new(Int64Array::from_iter(
                refs.iter().map(|(_, r)| long(r, "max-snapshot-age-ms")),
            )),
        ])
    }

    fn metadata_log(&self) -> Result<Vec<ArrayRef>> {
        let metadata = self.table.metadata();
        let mut entries: Vec<(i64, String)> = metadata
            .metadata_log()
            .iter()
            .map(|l| (l.timestamp_ms, l.metadata_file.clone()))
            .collect();
        // The current file, spelt as the log's last file (else the table's location) is.
        let like = entries
            .last()
            .map_or(metadata.location().to_string(), |e| e.1.clone());
        entries.push((
            metadata.last_updated_ms(),
            spelt_like(self.table.metadata_location(), &like),
        ));
        // The snapshot current at each file's time (Java's SnapshotUtil.snapshotIdAsOfTime).
        let latest = |ms: i64| {
            metadata
                .history()
                .iter()
                .filter(|l| l.timestamp_ms <= ms)
                .max_by_key(|l| l.timestamp_ms)
                .and_then(|l| metadata.snapshot_by_id(l.snapshot_id))
        };
        Ok(vec![
            Arc::new(
                TimestampMicrosecondArray::from_iter_values(entries.iter().map(|e| e.0 * 1000))
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from_iter_values(entries.iter().map(|e| &e.1))),
            Arc::new(Int64Array::from_iter(
                entries.iter().map(|e| latest(e.0).map(|s| s.snapshot_id())),
            )),
            Arc::new(Int32Array::from_iter(
                entries
                    .iter()
                    .map(|e| latest(e.0).and_then(|s| s.schema_id())),
            )),
            Arc::new(Int64Array::from_iter(
                entries
                    .iter()
                    .map(|e| latest(e.0).map(|s| s.sequence_number())),
            )),
        ])
    }
}

impl MetadataRows for HistoryRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        let batch = self.columns().and_then(|columns| {
            let picked: Vec<ArrayRef> = projection
                .iter()
                .map(|&i| Arc::clone(&columns[i]))
                .collect();
            let schema = Arc::new(self.schema.project(&projection)?);
            Ok(RecordBatch::try_new_with_options(
                schema,
                picked,
                &arrow::array::RecordBatchOptions::new()
                    .with_row_count(Some(columns.first().map_or(0, |c| c.len()))),
            )?)
        });
        futures::stream::once(async move { batch }).boxed()
    }
}
