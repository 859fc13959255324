//! `manifests` (the manifests of one snapshot) and `all_manifests` (of every snapshot, one
//! row per snapshot and manifest, with `reference_snapshot_id`): Iceberg Java's
//! `ManifestsTable` / `AllManifestsTable`, read from manifest lists through the planner's
//! [`ManifestCache`]. Partition summaries' bounds are shown as Iceberg's human strings of the
//! partition field's transform (`2026-01-03` for a day, `3` for a bucket). One batch per
//! manifest list.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Int32Array, Int64Array, ListBuilder, RecordBatch, RecordBatchOptions,
    StringArray, StringBuilder, StructBuilder,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    Datum, ManifestContentType, ManifestFile, PrimitiveLiteral, PrimitiveType, SnapshotRef,
    Transform, Type,
};

use super::{MetadataRows, MetadataTableKind};
use crate::catalog::LoadedTable;
use crate::error::Result;
use crate::plan::ManifestCache;
use crate::write::partition_path::base64;

fn summary_fields(all: bool) -> Fields {
    Fields::from(vec![
        Field::new("contains_null", DataType::Boolean, false),
        Field::new("contains_nan", DataType::Boolean, !all),
        Field::new("lower_bound", DataType::Utf8, true),
        Field::new("upper_bound", DataType::Utf8, true),
    ])
}

/// The rows of `manifests` or `all_manifests`.
#[derive(Debug, Clone)]
pub(crate) struct ManifestsRows {
    all: bool,
    table: LoadedTable,
    snapshot: Option<SnapshotRef>,
    cache: ManifestCache,
    schema: SchemaRef,
}

impl ManifestsRows {
    pub(crate) fn new(
        kind: MetadataTableKind,
        table: LoadedTable,
        snapshot: Option<SnapshotRef>,
        cache: ManifestCache,
    ) -> Self {
        let all = kind == MetadataTableKind::AllManifests;
        // Spark's all_manifests declares some of these columns nullable; manifests does not.
        let mut fields = vec![
            Field::new("content", DataType::Int32, false),
            Field::new("path", DataType::Utf8, false),
            Field::new("length", DataType::Int64, false),
            Field::new("partition_spec_id", DataType::Int32, all),
            Field::new("added_snapshot_id", DataType::Int64, all),
            Field::new("added_data_files_count", DataType::Int32, all),
            Field::new("existing_data_files_count", DataType::Int32, all),
            Field::new("deleted_data_files_count", DataType::Int32, all),
            Field::new("added_delete_files_count", DataType::Int32, false),
            Field::new("existing_delete_files_count", DataType::Int32, false),
            Field::new("deleted_delete_files_count", DataType::Int32, false),
            Field::new(
                "partition_summaries",
                DataType::List(Arc::new(Field::new(
                    "element",
                    DataType::Struct(summary_fields(all)),
                    false,
                ))),
                all,
            ),
        ];
        if all {
            fields.push(Field::new("reference_snapshot_id", DataType::Int64, false));
        }
        Self {
            all,
            table,
            snapshot,
            cache,
            schema: Arc::new(Schema::new(fields)),
        }
    }

    fn snapshots(&self) -> Vec<SnapshotRef> {
        if self.all {
            let mut all: Vec<SnapshotRef> = self.table.metadata().snapshots().cloned().collect();
            all.sort_by_key(|s| (s.timestamp_ms(), s.snapshot_id()));
            all
        } else {
            self.snapshot.iter().cloned().collect()
        }
    }

    /// The partition field types (transform result types) and transforms of spec `spec_id`.
    fn spec_fields(&self, spec_id: i32) -> Vec<(Option<PrimitiveType>, Transform)> {
        let metadata = self.table.metadata();
        let Some(spec) = metadata.partition_spec_by_id(spec_id) else {
            return Vec::new();
        };
        spec.fields()
            .iter()
            .map(|f| {
                let ty = metadata
                    .schemas_iter()
                    .find_map(|s| s.field_by_id(f.source_id))
                    .and_then(|source| f.transform.result_type(&source.field_type).ok());
                let primitive = match ty {
                    Some(Type::Primitive(p)) => Some(p),
                    _ => None,
                };
                (primitive, f.transform)
            })
            .collect()
    }

    fn batch(
        &self,
        manifests: &[ManifestFile],
        reference: i64,
        projection: &[usize],
    ) -> Result<RecordBatch> {
        let schema = Arc::new(self.schema.project(projection)?);
        let count = |mf: &ManifestFile, content: ManifestContentType, n: Option<u32>| {
            if mf.content == content {
                n.map_or(0, |n| n as i32)
            } else {
                0
            }
        };
        let data = ManifestContentType::Data;
        let deletes = ManifestContentType::Deletes;
        let mut columns: Vec<ArrayRef> = Vec::new();
        for &i in projection {
            let name = self.schema.field(i).name().as_str();
            let ints = |f: &dyn Fn(&ManifestFile) -> i32| -> ArrayRef {
                Arc::new(Int32Array::from_iter_values(manifests.iter().map(f)))
            };
            let column: ArrayRef = match name {
                "content" => ints(&|mf| match mf.content {
                    ManifestContentType::Data => 0,
                    ManifestContentType::Deletes => 1,
                }),
                "path" => Arc::new(StringArray::from_iter_values(
                    manifests.iter().map(|m| &m.manifest_path),
                )),
                "length" => Arc::new(Int64Array::from_iter_values(
                    manifests.iter().map(|m| m.manifest_length),
                )),
                "partition_spec_id" => ints(&|mf| mf.partition_spec_id),
                "added_snapshot_id" => Arc::new(Int64Array::from_iter_values(
                    manifests.iter().map(|m| m.added_snapshot_id),
                )),
                "added_data_files_count" => ints(&|mf| count(mf, data, mf.added_files_count)),
                "existing_data_files_count" => ints(&|mf| count(mf, data, mf.existing_files_count)),
                "deleted_data_files_count" => ints(&|mf| count(mf, data, mf.deleted_files_count)),
                "added_delete_files_count" => ints(&|mf| count(mf, deletes, mf.added_files_count)),
                "existing_delete_files_count" => {
                    ints(&|mf| count(mf, deletes, mf.existing_files_count))
                }
                "deleted_delete_files_count" => {
                    ints(&|mf| count(mf, deletes, mf.deleted_files_count))
                }
                "partition_summaries" => self.summaries(manifests)?,
                _ => Arc::new(Int64Array::from_iter_values(
                    manifests.iter().map(|_| reference),
                )),
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(manifests.len())),
        )?)
    }

    fn summaries(&self, manifests: &[ManifestFile]) -> Result<ArrayRef> {
        let fields = summary_fields(self.all);
        let element = StructBuilder::new(
            fields.clone(),
            vec![
                Box::new(BooleanBuilder::new()),
                Box::new(BooleanBuilder::new()),
                Box::new(StringBuilder::new()),
                Box::new(StringBuilder::new()),
            ],
        );
        let mut list = ListBuilder::new(element).with_field(Field::new(
            "element",
            DataType::Struct(fields),
            false,
        ));
        for mf in manifests {
            let spec = self.spec_fields(mf.partition_spec_id);
            for (i, s) in mf.partitions.iter().flatten().enumerate() {
                let (ty, transform) = spec.get(i).cloned().unwrap_or((None, Transform::Identity));
                let human = |b: &Option<serde_bytes::ByteBuf>| {
                    let (Some(bytes), Some(ty)) = (b, &ty) else {
                        return None;
                    };
                    let datum = Datum::try_from_bytes(bytes, ty.clone()).ok()?;
                    Some(human_string(&datum, transform))
                };
                let lower = human(&s.lower_bound);
                let upper = human(&s.upper_bound);
                let b = list.values();
                if let Some(x) = b.field_builder::<BooleanBuilder>(0) {
                    x.append_value(s.contains_null);
                }
                if let Some(x) = b.field_builder::<BooleanBuilder>(1) {
                    // Spark's all_manifests declares it required.
                    match (self.all, s.contains_nan) {
                        (true, nan) => x.append_value(nan.unwrap_or(false)),
                        (false, nan) => x.append_option(nan),
                    }
                }
                if let Some(x) = b.field_builder::<StringBuilder>(2) {
                    x.append_option(lower);
                }
                if let Some(x) = b.field_builder::<StringBuilder>(3) {
                    x.append_option(upper);
                }
                b.append(true);
            }
            list.append(true);
        }
        Ok(Arc::new(list.finish()))
    }
}

/// Java's `LocalDateTime.toString()`: minutes always, seconds and the fraction (in groups of
/// three digits) only when not zero.
fn java_local_date_time(micros: i64) -> String {
    let Some(t) = chrono::DateTime::from_timestamp_micros(micros) else {
        return micros.to_string();
    };
    let t = t.naive_utc();
    let mut out = t.format("%Y-%m-%dT%H:%M").to_string();
    let nanos = t.and_utc().timestamp_subsec_nanos();
    let seconds = t.format("%S").to_string();
    if nanos != 0 {
        let fraction = if nanos % 1_000_000 == 0 {
            format!("{:03}", nanos / 1_000_000)
        } else if nanos % 1000 == 0 {
            format!("{:06}", nanos / 1000)
        } else {
            format!("{nanos:09}")
        };
        out.push_str(&format!(":{seconds}.{fraction}"));
    } else if seconds != "00" {
        out.push_str(&format!(":{seconds}"));
    }
    out
}

/// Iceberg's human string of a partition value (Java's `Transform.toHumanString`).
fn human_string(datum: &Datum, transform: Transform) -> String {
    let date = |days: i64| {
        chrono::DateTime::from_timestamp(days * 86_400, 0)
            .map(|d| d.format("%Y-%m-%d").to_string())
            .unwrap_or_else(|| days.to_string())
    };
    match (transform, datum.literal()) {
        (Transform::Year, PrimitiveLiteral::Int(y)) => format!("{}", 1970 + y),
        (Transform::Month, PrimitiveLiteral::Int(m)) => {
            let (y, m) = (1970 + m.div_euclid(12), m.rem_euclid(12) + 1);
            format!("{y:04}-{m:02}")
        }
        (Transform::Day, PrimitiveLiteral::Int(d)) => date(i64::from(*d)),
        (Transform::Hour, PrimitiveLiteral::Int(h)) => {
            chrono::DateTime::from_timestamp(i64::from(*h) * 3600, 0)
                .map(|d| d.format("%Y-%m-%d-%H").to_string())
                .unwrap_or_else(|| h.to_string())
        }
        (_, literal) => match (datum.data_type(), literal) {
            (PrimitiveType::Date, PrimitiveLiteral::Int(d)) => date(i64::from(*d)),
            (PrimitiveType::Timestamp, PrimitiveLiteral::Long(us)) => java_local_date_time(*us),
            (PrimitiveType::Timestamptz, PrimitiveLiteral::Long(us)) => {
                format!("{}Z", java_local_date_time(*us))
            }
            (PrimitiveType::Binary | PrimitiveType::Fixed(_), PrimitiveLiteral::Binary(b)) => {
                base64(b)
            }
            _ => datum.to_human_string(),
        },
    }
}

impl MetadataRows for ManifestsRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        let this = Arc::new(self.clone());
        futures::stream::iter(this.snapshots())
            .then(move |snapshot| {
                let this = Arc::clone(&this);
                let projection = projection.clone();
                async move {
                    let list = this
                        .cache
                        .manifest_list(
                            this.table.io(),
                            &this.table.ident().to_string(),
                            snapshot.manifest_list(),
                            this.table.metadata().format_version(),
                        )
                        .await?;
                    this.batch(list.entries(), snapshot.snapshot_id(), &projection)
                }
            })
            .try_filter(|b| futures::future::ready(b.num_rows() > 0))
            .boxed()
    }
}
