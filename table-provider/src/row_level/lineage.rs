//! Row lineage (format 3) through row-level writes and rewrites: [`LineageExec`] gives every
//! row of a positional scan its `_row_id` and `_last_updated_sequence_number`, so that the
//! files an UPDATE, MERGE, copy-on-write or `rewrite_data_files` writes carry them explicitly,
//! as the spec asks and Spark does.
//!
//! A row's lineage is a function of its data file and position: the file's explicit
//! `_row_id` (field id 2147483540) / `_last_updated_sequence_number` (2147483539) at that
//! position when the file has the column and the value is not null, else what it inherits —
//! the file's `first_row_id` + position, and the file's data sequence number. The per-file
//! `first_row_id` and sequence number come from the scan planner (`plan::DataFileRef`); the
//! explicit columns are read once per file (only those two column chunks are fetched).
//!
//! What the written row keeps ([`SequenceNumbers`]): a row copied unchanged (copy-on-write,
//! compaction) keeps both; the new version of an updated row keeps its `_row_id` and leaves
//! `_last_updated_sequence_number` null, so it inherits the sequence number of the commit that
//! writes it; a row a MERGE inserts (no data file) gets neither and inherits a new row id.
//!
//! [`scan_with_lineage`] reads a table's rows with both columns, as a reader sees them.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, ArrayRef, AsArray, Int64Array, Int64Builder, RecordBatch};
use arrow::datatypes::{DataType, Field, Int64Type, Schema, SchemaRef};
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::EquivalenceProperties;
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{FormatVersion, TableMetadata};
use parquet::arrow::ProjectionMask;
use parquet::arrow::async_reader::{ParquetObjectReader, ParquetRecordBatchStreamBuilder};

use crate::error::{Error, Result};
use crate::io::TableIo;
use crate::provider::IcebergTableProvider;
use crate::spec::field_id_of;

/// The reserved field id of `_row_id`.
pub(crate) const ROW_ID_FIELD_ID: i32 = i32::MAX - 107;
/// The reserved field id of `_last_updated_sequence_number`.
pub(crate) const LAST_UPDATED_FIELD_ID: i32 = i32::MAX - 108;
/// The name of `_row_id`.
pub(crate) const ROW_ID: &str = "_row_id";
/// The name of `_last_updated_sequence_number`.
pub(crate) const LAST_UPDATED: &str = "_last_updated_sequence_number";

/// Whether rows of a table with this metadata carry lineage (format 3 and later).
pub(crate) fn tracks_lineage(metadata: &TableMetadata) -> bool {
    metadata.format_version() >= FormatVersion::V3
}

/// Whether `field_id` is one of the row lineage columns.
pub(crate) fn is_lineage_field(field_id: i32) -> bool {
    field_id == ROW_ID_FIELD_ID || field_id == LAST_UPDATED_FIELD_ID
}

/// The two lineage columns as Arrow fields with their reserved field ids.
pub(crate) fn lineage_fields() -> [Field; 2] {
    let field = |name: &str, id: i32| {
        Field::new(name, DataType::Int64, true).with_metadata(HashMap::from([(
            parquet::arrow::PARQUET_FIELD_ID_META_KEY.to_string(),
            id.to_string(),
        )]))
    };
    [
        field(ROW_ID, ROW_ID_FIELD_ID),
        field(LAST_UPDATED, LAST_UPDATED_FIELD_ID),
    ]
}

/// `schema` with the two lineage columns appended: what data files of a format-3 table written
/// by a row-level write hold.
pub(crate) fn with_lineage_fields(schema: &SchemaRef) -> SchemaRef {
    let mut fields: Vec<Field> = schema.fields().iter().map(|f| f.as_ref().clone()).collect();
    fields.extend(lineage_fields());
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// What the written rows keep of `_last_updated_sequence_number`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SequenceNumbers {
    /// Rows copied unchanged: their own.
    Keep,
    /// New versions of changed rows: null, so the commit's sequence number is inherited.
    Reset,
}

/// What lineage needs of one data file.
#[derive(Debug, Clone, Copy)]
struct FileLineage {
    first_row_id: Option<i64>,
    sequence_number: i64,
}

/// A data file's explicit lineage columns (absent when the file has none).
#[derive(Debug, Default)]
struct Explicit {
    row_ids: Option<Int64Array>,
    sequence_numbers: Option<Int64Array>,
}

/// Per data file lineage of one snapshot, shared by the partitions of a [`LineageExec`].
#[derive(Debug)]
pub(crate) struct SnapshotLineage {
    table: String,
    io: TableIo,
    files: HashMap<String, (FileLineage, u64)>,
    explicit: Mutex<HashMap<String, Arc<Explicit>>>,
}

impl SnapshotLineage {
    /// The lineage of the data files of `table`'s snapshot, from the scan planner.
    pub(crate) async fn load(table: &IcebergTableProvider) -> Result<Arc<Self>> {
        let plan = table.plan(&[], None, 1).await?;
        let files = plan
            .tasks()
            .map(|t| {
                let lineage = FileLineage {
                    first_row_id: t.file.first_row_id,
                    sequence_number: t.file.sequence_number,
                };
                (t.file.path.clone(), (lineage, t.file.file_size))
            })
            .collect();
        Ok(Arc::new(Self {
            table: table.table().ident().to_string(),
            io: table.table().io().clone(),
            files,
            explicit: Mutex::default(),
        }))
    }

    /// The explicit lineage columns of data file `path`, read once.
    async fn explicit(&self, path: &str, file_size: u64) -> Result<Arc<Explicit>> {
        if let Some(found) = self
            .explicit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(path)
        {
            return Ok(Arc::clone(found));
        }
        let read = Arc::new(read_explicit(&self.io, &self.table, path, file_size).await?);
        self.explicit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(path.to_string(), Arc::clone(&read));
        Ok(read)
    }

    /// The lineage columns of `batch`'s rows (its last two columns: data file, position; a
    /// null file is a row with no lineage, a MERGE's inserted row).
    async fn columns(
        &self,
        batch: &RecordBatch,
        sequence_numbers: SequenceNumbers,
    ) -> DFResult<(ArrayRef, ArrayRef)> {
        let n = batch.num_columns();
        if n < 2 {
            return Err(DataFusionError::Internal(
                "row lineage needs the data file and position columns".into(),
            ));
        }
        let paths = batch.column(n - 2).as_string::<i32>();
        let positions = batch.column(n - 1).as_primitive::<Int64Type>();
        let mut explicit: HashMap<&str, Arc<Explicit>> = HashMap::new();
        for path in paths.iter().flatten() {
            if explicit.contains_key(path) {
                continue;
            }
            let (_, size) = self.file(path)?;
            explicit.insert(path, self.explicit(path, size).await?);
        }
        let mut row_ids = Int64Builder::with_capacity(batch.num_rows());
        let mut sequences = Int64Builder::with_capacity(batch.num_rows());
        for i in 0..batch.num_rows() {
            if paths.is_null(i) || positions.is_null(i) {
                row_ids.append_null();
                sequences.append_null();
                continue;
            }
            let path = paths.value(i);
            let position = positions.value(i);
            let (file, _) = self.file(path)?;
            let stored = explicit.get(path);
            let at = |column: Option<&Int64Array>| {
                let index = usize::try_from(position).ok()?;
                column
                    .filter(|c| index < c.len() && c.is_valid(index))
                    .map(|c| c.value(index))
            };
            let row_id = at(stored.and_then(|e| e.row_ids.as_ref()))
                .or_else(|| file.first_row_id.map(|first| first + position));
            row_ids.append_option(row_id);
            match sequence_numbers {
                SequenceNumbers::Reset => sequences.append_null(),
                SequenceNumbers::Keep => sequences.append_value(
                    at(stored.and_then(|e| e.sequence_numbers.as_ref()))
                        .unwrap_or(file.sequence_number),
                ),
            }
        }
        Ok((Arc::new(row_ids.finish()), Arc::new(sequences.finish())))
    }

    fn file(&self, path: &str) -> DFResult<(FileLineage, u64)> {
        self.files.get(path).copied().ok_or_else(|| {
            DataFusionError::Internal(format!(
                "table {}: data file {path} is not in the snapshot read (row lineage)",
                self.table
            ))
        })
    }
}

/// A plan of the rows of `table`'s snapshot with their lineage: the table's columns, then
/// `_row_id` and `_last_updated_sequence_number` as a reader sees them (explicit values where a
/// file stores them, inherited ones otherwise; null in a table without lineage).
pub async fn scan_with_lineage(
    state: &dyn Session,
    table: &IcebergTableProvider,
) -> Result<Arc<dyn ExecutionPlan>> {
    let lineage = SnapshotLineage::load(table).await?;
    let scan = table.positional().scan(state, None, &[], None).await?;
    Ok(Arc::new(LineageExec::new(
        scan,
        lineage,
        SequenceNumbers::Keep,
        true,
    )))
}

/// Reads the lineage columns data file `path` stores, if it stores them.
async fn read_explicit(io: &TableIo, table: &str, path: &str, file_size: u64) -> Result<Explicit> {
    let corrupt = |e: &dyn fmt::Display| Error::corrupt(table.to_string(), "data file", path, e);
    let (store, _, object) = io.resolve(path)?;
    let reader = ParquetObjectReader::new(store, object).with_file_size(file_size);
    let builder = ParquetRecordBatchStreamBuilder::new(reader)
        .await
        .map_err(|e| corrupt(&e))?;
    let schema = Arc::clone(builder.schema());
    let index_of = |id: i32| {
        schema
            .fields()
            .iter()
            .position(|f| field_id_of(f) == Some(id))
    };
    let (row_id, sequence) = (index_of(ROW_ID_FIELD_ID), index_of(LAST_UPDATED_FIELD_ID));
    let roots: Vec<usize> = [row_id, sequence].into_iter().flatten().collect();
    if roots.is_empty() {
        return Ok(Explicit::default());
    }
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let batches: Vec<RecordBatch> = builder
        .with_projection(mask)
        .build()
        .map_err(|e| corrupt(&e))?
        .try_collect()
        .await
        .map_err(|e| corrupt(&e))?;
    // The projection keeps the file's column order.
    let column = |root: Option<usize>| -> Result<Option<Int64Array>> {
        let Some(root) = root else {
            return Ok(None);
        };
        let at = roots.iter().filter(|r| **r < root).count();
        let parts = batches
            .iter()
            .map(|b| arrow::compute::cast(b.column(at), &DataType::Int64))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
        if refs.is_empty() {
            return Ok(Some(Int64Array::from(Vec::<i64>::new())));
        }
        let whole = arrow::compute::concat(&refs)?;
        Ok(Some(whole.as_primitive::<Int64Type>().clone()))
    };
    Ok(Explicit {
        row_ids: column(row_id)?,
        sequence_numbers: column(sequence)?,
    })
}

/// Adds `_row_id` and `_last_updated_sequence_number` to the rows of its input, whose last two
/// columns are the data file and position: they go before those two (or replace them, with
/// `strip_positions`).
#[derive(Debug)]
pub(crate) struct LineageExec {
    input: Arc<dyn ExecutionPlan>,
    lineage: Arc<SnapshotLineage>,
    sequence_numbers: SequenceNumbers,
    strip_positions: bool,
    properties: Arc<PlanProperties>,
}

impl LineageExec {
    /// Lineage for `input`'s rows, read from `lineage`.
    pub(crate) fn new(
        input: Arc<dyn ExecutionPlan>,
        lineage: Arc<SnapshotLineage>,
        sequence_numbers: SequenceNumbers,
        strip_positions: bool,
    ) -> Self {
        let schema = output_schema(&input.schema(), strip_positions);
        let partitions = input.properties().output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Incremental,
            Boundedness::Bounded,
        ));
        Self {
            input,
            lineage,
            sequence_numbers,
            strip_positions,
            properties,
        }
    }
}

/// `input` with the lineage fields before its last two (data file, position), which
/// `strip_positions` drops.
fn output_schema(input: &SchemaRef, strip_positions: bool) -> SchemaRef {
    let fields = input.fields();
    let split = fields.len().saturating_sub(2);
    let mut out: Vec<Field> = fields[..split].iter().map(|f| f.as_ref().clone()).collect();
    out.extend(lineage_fields());
    if !strip_positions {
        out.extend(fields[split..].iter().map(|f| f.as_ref().clone()));
    }
    Arc::new(Schema::new_with_metadata(out, input.metadata().clone()))
}

impl DisplayAs for LineageExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "LineageExec: table={} sequence_numbers={:?}",
            self.lineage.table, self.sequence_numbers
        )
    }
}

impl ExecutionPlan for LineageExec {
    fn name(&self) -> &str {
        "LineageExec"
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        &self.properties
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.input]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("LineageExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.lineage),
            self.sequence_numbers,
            self.strip_positions,
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        let input = self.input.execute(partition, context)?;
        let lineage = Arc::clone(&self.lineage);
        let sequence_numbers = self.sequence_numbers;
        let strip = self.strip_positions;
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = input.then(move |batch| {
            let lineage = Arc::clone(&lineage);
            let out_schema = Arc::clone(&out_schema);
            async move {
                let batch = batch?;
                let (row_ids, sequences) = lineage.columns(&batch, sequence_numbers).await?;
                let split = batch.num_columns() - 2;
                let mut columns = batch.columns()[..split].to_vec();
                columns.push(row_ids);
                columns.push(sequences);
                if !strip {
                    columns.extend_from_slice(&batch.columns()[split..]);
                }
                Ok(RecordBatch::try_new(out_schema, columns)?)
            }
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}
