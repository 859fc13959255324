//! The files and entries tables: `files`, `data_files`, `delete_files`, `all_files`,
//! `all_data_files`, `all_delete_files`, `entries` and `all_entries` (Iceberg Java's
//! `BaseFilesTable`, `BaseEntriesTable` and their `All*` forms).
//!
//! Rows come from manifests read through the planner's [`ManifestCache`] (the same parsed
//! manifests scans use), one batch per manifest, so a table of any size streams. The files
//! tables hold each manifest's live entries (added and existing); the entries tables every
//! entry, deleted ones (status 2) included. The `all_*` tables read the manifests of every
//! snapshot, each manifest once. Snapshot ids, sequence numbers and (format 3) first row ids
//! are inherited from the manifest list as readers inherit them.
//!
//! Columns (Spark's): the data file's fields — `partition` only when some spec is partitioned;
//! the format-3 fields always, null where they do not apply — then `readable_metrics`. The
//! entries tables hold the same fields as the `data_file` struct.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::{
    ArrayRef, BinaryArray, BinaryBuilder, Int32Array, Int32Builder, Int64Array, Int64Builder,
    ListBuilder, MapBuilder, MapFieldNames, RecordBatch, RecordBatchOptions, StringArray,
    StructArray,
};
use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};
use datafusion::logical_expr::Expr;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataContentType, DataFile, Manifest, ManifestContentType, ManifestFile, ManifestStatus,
    SnapshotRef,
};

use super::partition_type::PartitionType;
use super::pushdown::{ManifestFilter, Shape};
use super::readable_metrics::ReadableMetrics;
use super::{MetadataRows, MetadataTableKind};
use crate::catalog::LoadedTable;
use crate::error::Result;
use crate::plan::ManifestCache;

/// How many manifests are fetched ahead of the one being turned into rows.
const MANIFESTS_AHEAD: usize = 4;

fn map_type(value: DataType) -> DataType {
    DataType::Map(
        Arc::new(Field::new(
            "key_value",
            DataType::Struct(Fields::from(vec![
                Field::new("key", DataType::Int32, false),
                Field::new("value", value, false),
            ])),
            false,
        )),
        false,
    )
}

fn list_type(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("element", element, false)))
}

/// The data file's fields (the files tables' columns before `readable_metrics`, and the
/// entries tables' `data_file` struct).
pub(crate) fn data_file_fields(partition: &PartitionType) -> Fields {
    let mut fields = vec![
        Field::new("content", DataType::Int32, true),
        Field::new("file_path", DataType::Utf8, false),
        Field::new("file_format", DataType::Utf8, false),
        Field::new("spec_id", DataType::Int32, true),
    ];
    if !partition.is_empty() {
        fields.push(Field::new("partition", partition.data_type(), false));
    }
    fields.extend([
        Field::new("record_count", DataType::Int64, false),
        Field::new("file_size_in_bytes", DataType::Int64, false),
        Field::new("column_sizes", map_type(DataType::Int64), true),
        Field::new("value_counts", map_type(DataType::Int64), true),
        Field::new("null_value_counts", map_type(DataType::Int64), true),
        Field::new("nan_value_counts", map_type(DataType::Int64), true),
        Field::new("lower_bounds", map_type(DataType::Binary), true),
        Field::new("upper_bounds", map_type(DataType::Binary), true),
        Field::new("key_metadata", DataType::Binary, true),
        Field::new("split_offsets", list_type(DataType::Int64), true),
        Field::new("equality_ids", list_type(DataType::Int32), true),
        Field::new("sort_order_id", DataType::Int32, true),
        Field::new("first_row_id", DataType::Int64, true),
        Field::new("referenced_data_file", DataType::Utf8, true),
        Field::new("content_offset", DataType::Int64, true),
        Field::new("content_size_in_bytes", DataType::Int64, true),
    ]);
    Fields::from(fields)
}

/// One row: a manifest entry with what it inherits.
struct EntryRow<'a> {
    status: ManifestStatus,
    snapshot_id: Option<i64>,
    sequence_number: Option<i64>,
    file_sequence_number: Option<i64>,
    file: &'a DataFile,
    spec_id: i32,
    first_row_id: Option<i64>,
}

/// The manifests a table's files or entries come from.
#[derive(Debug, Clone)]
enum Source {
    /// The manifests of one snapshot (`None`: a table without snapshots).
    Snapshot(Option<SnapshotRef>),
    /// The manifests of every snapshot, each once.
    AllSnapshots,
}

/// The rows of a files or entries table.
#[derive(Debug)]
pub(crate) struct FilesRows {
    kind: MetadataTableKind,
    table: LoadedTable,
    source: Source,
    cache: ManifestCache,
    partition: Arc<PartitionType>,
    metrics: Arc<ReadableMetrics>,
    schema: SchemaRef,
}

impl FilesRows {
    pub(crate) fn new(
        kind: MetadataTableKind,
        table: LoadedTable,
        snapshot: Option<SnapshotRef>,
        cache: ManifestCache,
    ) -> Result<Self> {
        let partition = Arc::new(PartitionType::of(table.metadata())?);
        let metrics = Arc::new(ReadableMetrics::of(table.metadata().current_schema())?);
        let file_fields = data_file_fields(&partition);
        let readable = Field::new("readable_metrics", metrics.data_type(), true);
        let fields: Vec<Field> = if is_entries(kind) {
            vec![
                Field::new("status", DataType::Int32, false),
                Field::new("snapshot_id", DataType::Int64, true),
                Field::new("sequence_number", DataType::Int64, true),
                Field::new("file_sequence_number", DataType::Int64, true),
                Field::new("data_file", DataType::Struct(file_fields), false),
                readable,
            ]
        } else {
            let mut fields: Vec<Field> = file_fields.iter().map(|f| f.as_ref().clone()).collect();
            fields.push(readable);
            fields
        };
        let source = match kind {
            MetadataTableKind::AllFiles
            | MetadataTableKind::AllDataFiles
            | MetadataTableKind::AllDeleteFiles
            | MetadataTableKind::AllEntries => Source::AllSnapshots,
            _ => Source::Snapshot(snapshot),
        };
        Ok(Self {
            kind,
            table,
            source,
            cache,
            partition,
            metrics,
            schema: Arc::new(Schema::new(fields)),
        })
    }
}

impl FilesRows {
    /// How the pushed filters name the data file's fields.
    fn shape(&self) -> Shape {
        if is_entries(self.kind) {
            Shape::Entries
        } else {
            Shape::Files
        }
    }
}

fn is_entries(kind: MetadataTableKind) -> bool {
    matches!(
        kind,
        MetadataTableKind::Entries | MetadataTableKind::AllEntries
    )
}

/// The manifests of `source`, each once, in manifest-list order.
pub(crate) async fn manifests_of(
    table: &LoadedTable,
    cache: &ManifestCache,
    snapshots: &[SnapshotRef],
) -> Result<Vec<ManifestFile>> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for snapshot in snapshots {
        let list = cache
            .manifest_list(
                table.io(),
                &table.ident().to_string(),
                snapshot.manifest_list(),
                table.metadata().format_version(),
            )
            .await?;
        for mf in list.entries() {
            if seen.insert(mf.manifest_path.clone()) {
                out.push(mf.clone());
            }
        }
    }
    Ok(out)
}

impl FilesRows {
    fn snapshots(&self) -> Vec<SnapshotRef> {
        match &self.source {
            Source::Snapshot(s) => s.iter().cloned().collect(),
            Source::AllSnapshots => {
                let mut all: Vec<SnapshotRef> =
                    self.table.metadata().snapshots().cloned().collect();
                all.sort_by_key(|s| (s.timestamp_ms(), s.snapshot_id()));
                all
            }
        }
    }

    /// Whether manifests of `content` hold rows of this table.
    fn wants_manifest(&self, content: ManifestContentType) -> bool {
        match self.kind {
            MetadataTableKind::DataFiles | MetadataTableKind::AllDataFiles => {
                content == ManifestContentType::Data
            }
            MetadataTableKind::DeleteFiles | MetadataTableKind::AllDeleteFiles => {
                content == ManifestContentType::Deletes
            }
            _ => true,
        }
    }

    fn wants_entry(&self, status: ManifestStatus, content: DataContentType) -> bool {
        if is_entries(self.kind) {
            return true;
        }
        if status == ManifestStatus::Deleted {
            return false;
        }
        match self.kind {
            MetadataTableKind::DataFiles | MetadataTableKind::AllDataFiles => {
                content == DataContentType::Data
            }
            MetadataTableKind::DeleteFiles | MetadataTableKind::AllDeleteFiles => {
                content != DataContentType::Data
            }
            _ => true,
        }
    }

    /// The rows of one manifest.
    fn rows<'a>(&self, mf: &ManifestFile, manifest: &'a Manifest) -> Vec<EntryRow<'a>> {
        let spec_id = manifest.metadata().partition_spec().spec_id();
        let mut next_row_id = mf.first_row_id.map(|id| id as i64);
        let mut rows = Vec::new();
        for entry in manifest.entries() {
            let file = entry.data_file();
            let status = entry.status();
            // Row ids (format 3): the manifest's first, then per live data file in order.
            let first_row_id = if file.content_type() == DataContentType::Data {
                file.first_row_id().or_else(|| {
                    if status == ManifestStatus::Deleted {
                        return None;
                    }
                    let first = next_row_id?;
                    next_row_id = Some(first + file.record_count() as i64);
                    Some(first)
                })
            } else {
                None
            };
            if !self.wants_entry(status, file.content_type()) {
                continue;
            }
            let inherits = status == ManifestStatus::Added || mf.sequence_number == 0;
            rows.push(EntryRow {
                status,
                snapshot_id: entry.snapshot_id().or(Some(mf.added_snapshot_id)),
                sequence_number: entry
                    .sequence_number()
                    .or_else(|| inherits.then_some(mf.sequence_number)),
                file_sequence_number: entry
                    .file_sequence_number
                    .or_else(|| inherits.then_some(mf.sequence_number)),
                file,
                spec_id,
                first_row_id,
            });
        }
        rows
    }

    fn batch(&self, rows: &[EntryRow<'_>], projection: &[usize]) -> Result<RecordBatch> {
        let schema = Arc::new(self.schema.project(projection)?);
        let mut columns = Vec::with_capacity(projection.len());
        let file_fields = data_file_fields(&self.partition);
        for &i in projection {
            let field = self.schema.field(i);
            let column: ArrayRef = match field.name().as_str() {
                "readable_metrics" => {
                    let files: Vec<&DataFile> = rows.iter().map(|r| r.file).collect();
                    self.metrics.array(&files)?
                }
                "status" if is_entries(self.kind) => Arc::new(Int32Array::from_iter_values(
                    rows.iter().map(|r| r.status as i32),
                )),
                "snapshot_id" if is_entries(self.kind) => {
                    Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.snapshot_id)))
                }
                "sequence_number" => Arc::new(Int64Array::from_iter(
                    rows.iter().map(|r| r.sequence_number),
                )),
                "file_sequence_number" => Arc::new(Int64Array::from_iter(
                    rows.iter().map(|r| r.file_sequence_number),
                )),
                "data_file" => {
                    let children = file_fields
                        .iter()
                        .map(|f| self.file_column(f.name(), rows))
                        .collect::<Result<Vec<_>>>()?;
                    Arc::new(StructArray::try_new(file_fields.clone(), children, None)?)
                }
                name => self.file_column(name, rows)?,
            };
            columns.push(column);
        }
        Ok(RecordBatch::try_new_with_options(
            schema,
            columns,
            &RecordBatchOptions::new().with_row_count(Some(rows.len())),
        )?)
    }

    /// One data-file field over `rows`.
    fn file_column(&self, name: &str, rows: &[EntryRow<'_>]) -> Result<ArrayRef> {
        let files = rows.iter().map(|r| r.file);
        Ok(match name {
            "content" => Arc::new(Int32Array::from_iter_values(
                files.map(|f| f.content_type() as i32),
            )),
            "file_path" => Arc::new(StringArray::from_iter_values(files.map(|f| f.file_path()))),
            "file_format" => Arc::new(StringArray::from_iter_values(
                files.map(|f| format!("{:?}", f.file_format()).to_uppercase()),
            )),
            "spec_id" => Arc::new(Int32Array::from_iter_values(rows.iter().map(|r| r.spec_id))),
            "partition" => {
                let tuples = rows
                    .iter()
                    .map(|r| {
                        self.partition
                            .values(r.spec_id, r.file.partition())
                            .map(Some)
                    })
                    .collect::<Result<Vec<_>>>()?;
                self.partition.array(&tuples)?
            }
            "record_count" => Arc::new(Int64Array::from_iter_values(
                files.map(|f| f.record_count() as i64),
            )),
            "file_size_in_bytes" => Arc::new(Int64Array::from_iter_values(
                files.map(|f| f.file_size_in_bytes() as i64),
            )),
            "column_sizes" => count_map(rows, DataFile::column_sizes)?,
            "value_counts" => count_map(rows, DataFile::value_counts)?,
            "null_value_counts" => count_map(rows, DataFile::null_value_counts)?,
            "nan_value_counts" => count_map(rows, DataFile::nan_value_counts)?,
            "lower_bounds" => bound_map(rows, DataFile::lower_bounds)?,
            "upper_bounds" => bound_map(rows, DataFile::upper_bounds)?,
            "key_metadata" => Arc::new(BinaryArray::from_iter(files.map(|f| f.key_metadata()))),
            "split_offsets" => {
                let mut b = ListBuilder::new(Int64Builder::new()).with_field(Field::new(
                    "element",
                    DataType::Int64,
                    false,
                ));
                for f in files {
                    match f.split_offsets() {
                        Some(offsets) => {
                            b.values().append_slice(offsets);
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            "equality_ids" => {
                let mut b = ListBuilder::new(Int32Builder::new()).with_field(Field::new(
                    "element",
                    DataType::Int32,
                    false,
                ));
                for f in files {
                    match f.equality_ids().filter(|ids| !ids.is_empty()) {
                        Some(ids) => {
                            b.values().append_slice(&ids);
                            b.append(true);
                        }
                        None => b.append(false),
                    }
                }
                Arc::new(b.finish())
            }
            "sort_order_id" => Arc::new(Int32Array::from_iter(files.map(|f| f.sort_order_id()))),
            "first_row_id" => Arc::new(Int64Array::from_iter(rows.iter().map(|r| r.first_row_id))),
            "referenced_data_file" => Arc::new(StringArray::from_iter(
                files.map(|f| f.referenced_data_file()),
            )),
            "content_offset" => Arc::new(Int64Array::from_iter(files.map(|f| f.content_offset()))),
            "content_size_in_bytes" => Arc::new(Int64Array::from_iter(
                files.map(|f| f.content_size_in_bytes()),
            )),
            other => {
                return Err(crate::error::Error::InvalidArgument(format!(
                    "metadata table has no column {other}"
                )));
            }
        })
    }
}

fn map_names() -> MapFieldNames {
    MapFieldNames {
        entry: "key_value".into(),
        key: "key".into(),
        value: "value".into(),
    }
}

/// Whether an empty metrics map of `file` reads as null (position-delete files and deletion
/// vectors, whose maps Java's writers leave out) or as an empty map (data and equality-delete
/// files: their writers record the maps, empty ones included), as Spark shows them. The
/// `iceberg` crate parses both as empty.
fn empty_map_is_null(file: &DataFile) -> bool {
    file.content_type() == DataContentType::PositionDeletes
}

/// A `map<int, long>` column.
fn count_map(
    rows: &[EntryRow<'_>],
    get: fn(&DataFile) -> &std::collections::HashMap<i32, u64>,
) -> Result<ArrayRef> {
    let mut b = MapBuilder::new(Some(map_names()), Int32Builder::new(), Int64Builder::new())
        .with_values_field(Field::new("value", DataType::Int64, false));
    for r in rows {
        let map = get(r.file);
        if map.is_empty() && empty_map_is_null(r.file) {
            b.append(false)?;
            continue;
        }
        let mut entries: Vec<(&i32, &u64)> = map.iter().collect();
        entries.sort();
        for (k, v) in entries {
            b.keys().append_value(*k);
            b.values().append_value(*v as i64);
        }
        b.append(true)?;
    }
    Ok(Arc::new(b.finish()))
}

/// A `map<int, binary>` column of bounds in their single-value serialisation.
fn bound_map(
    rows: &[EntryRow<'_>],
    get: fn(&DataFile) -> &std::collections::HashMap<i32, iceberg::spec::Datum>,
) -> Result<ArrayRef> {
    let mut b = MapBuilder::new(Some(map_names()), Int32Builder::new(), BinaryBuilder::new())
        .with_values_field(Field::new("value", DataType::Binary, false));
    for r in rows {
        let map = get(r.file);
        if map.is_empty() && empty_map_is_null(r.file) {
            b.append(false)?;
            continue;
        }
        let mut entries: Vec<(&i32, &iceberg::spec::Datum)> = map.iter().collect();
        entries.sort_by_key(|(k, _)| **k);
        for (k, v) in entries {
            b.keys().append_value(*k);
            b.values().append_value(v.to_bytes()?);
        }
        b.append(true)?;
    }
    Ok(Arc::new(b.finish()))
}

impl MetadataRows for FilesRows {
    fn schema(&self) -> SchemaRef {
        Arc::clone(&self.schema)
    }

    fn batches(&self, projection: Vec<usize>) -> BoxStream<'static, Result<RecordBatch>> {
        self.pruned_batches(projection, &[])
    }

    fn prunes(&self, filter: &Expr) -> bool {
        ManifestFilter::prunes(filter, self.shape(), &self.partition)
    }

    fn pruned_batches(
        &self,
        projection: Vec<usize>,
        filters: &[Expr],
    ) -> BoxStream<'static, Result<RecordBatch>> {
        let filter = ManifestFilter::new(filters, self.shape(), &self.partition);
        let this = Arc::new(FilesRows {
            kind: self.kind,
            table: self.table.clone(),
            source: self.source.clone(),
            cache: self.cache.clone(),
            partition: Arc::clone(&self.partition),
            metrics: Arc::clone(&self.metrics),
            schema: Arc::clone(&self.schema),
        });
        let listed = {
            let this = Arc::clone(&this);
            async move { manifests_of(&this.table, &this.cache, &this.snapshots()).await }
        };
        futures::stream::once(listed)
            .map_ok(move |manifests| {
                let this = Arc::clone(&this);
                let wanted: Vec<ManifestFile> = manifests
                    .into_iter()
                    .filter(|mf| {
                        this.wants_manifest(mf.content)
                            && filter.may_match(mf, this.table.metadata())
                    })
                    .collect();
                let projection = projection.clone();
                futures::stream::iter(wanted)
                    .map(move |mf| {
                        let this = Arc::clone(&this);
                        async move {
                            let manifest = this
                                .cache
                                .manifest(
                                    this.table.io(),
                                    &this.table.ident().to_string(),
                                    &mf.manifest_path,
                                )
                                .await?;
                            Ok::<_, crate::error::Error>((this, mf, manifest))
                        }
                    })
                    .buffered(MANIFESTS_AHEAD)
                    .map(move |loaded| {
                        let (this, mf, manifest) = loaded?;
                        let rows = this.rows(&mf, &manifest);
                        this.batch(&rows, &projection)
                    })
            })
            .try_flatten()
            .try_filter(|b| futures::future::ready(b.num_rows() > 0))
            .boxed()
    }
}
