//! [`IcebergWriteExec`]: writes each input partition's rows as data files (and, for an upsert,
//! the equality-delete files of their keys: rows hash-distributed on the key, each writer task's
//! rows reduced to each key's last row, see [`crate::write::upsert`]).
//!
//! With `write.distribution-mode` `hash` (or `range`), the node requires its input
//! hash-partitioned on the table's partition key (see [`crate::write::distribution`]): the
//! physical optimizer then puts a repartition below it and each table partition is written by
//! one writer task (a partition larger than the advisory partition size by several, see
//! [`crate::write::writer_task_expr`]).

use std::any::Any;
use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_expr::expressions::Column;
use datafusion::physical_expr::{EquivalenceProperties, PhysicalExpr};
use datafusion::physical_plan::execution_plan::{Boundedness, EmissionType};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, Partitioning, PlanProperties,
};
use futures::StreamExt;
use iceberg::spec::{FormatVersion, StructType, serialize_data_file_to_json};

use crate::error::Error;
use crate::io::TableIo;
use crate::write::data_file_writer::{KEPT_INPUT_BYTES, RollingFileWriter, WriteSettings};
use crate::write::distribution::DistributionMode;
use crate::write::equality_deletes::{EqualityDeleteSettings, write_equality_deletes};
use crate::write::partitioner::Partitioner;
use crate::write::tracker::WriteTracker;
use crate::write::writer_task_expr::WriterTaskExpr;

/// The column of the write node's output: one JSON data file description per row.
pub(crate) const DATA_FILE_COLUMN: &str = "data_file";

/// Writes each input partition's rows as data files of one table and emits their descriptions.
#[derive(Debug)]
pub struct IcebergWriteExec {
    input: Arc<dyn ExecutionPlan>,
    settings: Arc<WriteSettings>,
    io: TableIo,
    partition_type: StructType,
    format_version: FormatVersion,
    /// For an upsert: the equality deletes written with the rows.
    upsert: Option<Arc<EqualityDeleteSettings>>,
    /// The distribution mode and the writer task expression the input is to be
    /// hash-partitioned on (`None`: any distribution).
    distribution: (DistributionMode, Option<Arc<WriterTaskExpr>>),
    properties: Arc<PlanProperties>,
}

impl IcebergWriteExec {
    /// Writes `input` with `settings` through `io`.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        settings: Arc<WriteSettings>,
        io: TableIo,
        partition_type: StructType,
        format_version: FormatVersion,
    ) -> Self {
        let schema = Arc::new(Schema::new(vec![Field::new(
            DATA_FILE_COLUMN,
            DataType::Utf8,
            false,
        )]));
        let partitions = input.properties().output_partitioning().partition_count();
        let properties = Arc::new(PlanProperties::new(
            EquivalenceProperties::new(schema),
            Partitioning::UnknownPartitioning(partitions),
            EmissionType::Final,
            Boundedness::Bounded,
        ));
        Self {
            input,
            settings,
            io,
            partition_type,
            format_version,
            upsert: None,
            distribution: (DistributionMode::None, None),
            properties,
        }
    }

    /// The same write with its rows distributed over `tasks` writer tasks by `mode` (the
    /// table's `write.distribution-mode`; `properties` are the table's): for `hash` and
    /// `range`, the input is required hash-partitioned on the writer task of each row by the
    /// partition key of the spec the write writes with. An upsert keeps its distribution on the
    /// key.
    pub fn distributed(
        mut self,
        mode: DistributionMode,
        properties: &HashMap<String, String>,
        tasks: usize,
    ) -> crate::error::Result<Self> {
        let writer_task = mode.writer_task(&self.settings, properties, tasks)?;
        self.distribution = (mode, writer_task);
        Ok(self)
    }

    /// The same write as an upsert: rows distributed by key, each key's last row written, and
    /// the keys written as equality-delete files.
    pub fn with_upsert(mut self, upsert: Arc<EqualityDeleteSettings>) -> Self {
        self.upsert = Some(upsert);
        self
    }
}

impl DisplayAs for IcebergWriteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IcebergWriteExec: spec={}{}",
            self.settings.spec().spec_id(),
            if self.upsert.is_some() { " upsert" } else { "" }
        )?;
        if let (mode, Some(writer_task)) = &self.distribution
            && self.upsert.is_none()
        {
            let keys: Vec<String> = writer_task.keys().iter().map(ToString::to_string).collect();
            write!(f, " distribution={}[{}]", mode.name(), keys.join(", "))?;
        }
        Ok(())
    }
}

impl ExecutionPlan for IcebergWriteExec {
    fn name(&self) -> &str {
        "IcebergWriteExec"
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

    fn maintains_input_order(&self) -> Vec<bool> {
        vec![false]
    }

    fn required_input_distribution(&self) -> Vec<Distribution> {
        let Some(upsert) = &self.upsert else {
            let Some(writer_task) = &self.distribution.1 else {
                return vec![Distribution::UnspecifiedDistribution];
            };
            // Every row of one table partition reaches the same writer task (up to the
            // advisory partition size).
            let writer_task: Arc<dyn PhysicalExpr> = Arc::<WriterTaskExpr>::clone(writer_task);
            return vec![Distribution::HashPartitioned(vec![writer_task])];
        };
        // Every row of one key reaches the same writer task (in its input partition's order).
        let schema = self.input.schema();
        let keys: Vec<Arc<dyn PhysicalExpr>> = upsert
            .keys()
            .columns()
            .iter()
            .map(|&i| Arc::new(Column::new(schema.field(i).name(), i)) as Arc<dyn PhysicalExpr>)
            .collect();
        vec![Distribution::HashPartitioned(keys)]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergWriteExec needs an input".into()))?;
        let mut node = Self::new(
            input,
            Arc::clone(&self.settings),
            self.io.clone(),
            self.partition_type.clone(),
            self.format_version,
        );
        node.upsert = self.upsert.clone();
        node.distribution = self.distribution.clone();
        Ok(Arc::new(node))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        // An upsert holds its rows until the input ends: they count against the memory pool.
        let reservation = MemoryConsumer::new(format!("IcebergWriteExec[{partition}] upsert"))
            .register(context.memory_pool());
        let input = not_null_checked_input(
            Arc::clone(&self.input),
            Arc::clone(self.settings.arrow_schema()),
            partition,
            context,
        )?;
        let settings = Arc::clone(&self.settings);
        let io = self.io.clone();
        let partition_type = self.partition_type.clone();
        let format_version = self.format_version;
        let upsert = self.upsert.clone();
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        // The partition is written by a task of its own, which is not cancelled when this
        // stream is dropped: it stops at its next batch and aborts its open uploads, so that
        // `WriteTracker::abandon` can wait for it before deleting the started files.
        let tracker = Arc::clone(settings.tracker());
        let task = tokio::spawn(async move {
            let _running = settings.tracker().enter().await;
            let upsert = upsert.as_deref().map(|u| (u, reservation));
            write_partition(input, &settings, upsert, &io, partition).await
        });
        let stop_on_drop = StopOnDrop(Some(tracker));
        let stream = futures::stream::once(async move {
            let written = task.await;
            stop_on_drop.finished();
            let files = written.map_err(|e| {
                DataFusionError::Internal(format!("writer task {partition} failed: {e}"))
            })??;
            let json = files
                .into_iter()
                .map(|f| serialize_data_file_to_json(f, &partition_type, format_version))
                .collect::<iceberg::Result<Vec<_>>>()
                .map_err(Error::from)?;
            Ok(RecordBatch::try_new(
                out_schema,
                vec![Arc::new(StringArray::from(json))],
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Stops the write when the consumer of a partition's output goes away before the partition is
/// written (the statement failed elsewhere, or was cancelled).
struct StopOnDrop(Option<Arc<WriteTracker>>);

impl StopOnDrop {
    fn finished(mut self) {
        self.0 = None;
    }
}

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        if let Some(tracker) = self.0.take() {
            tracker.stop();
        }
    }
}

/// Writes one input partition. On failure (or when the write is stopped) the open uploads are
/// aborted; the finished files are deleted by the node that commits, which sees every
/// partition's through `WriteSettings::tracker`.
async fn write_partition(
    input: SendableRecordBatchStream,
    settings: &Arc<WriteSettings>,
    upsert: Option<(&EqualityDeleteSettings, MemoryReservation)>,
    io: &TableIo,
    task: usize,
) -> DFResult<Vec<iceberg::spec::DataFile>> {
    let mut writers: HashMap<Vec<u8>, RollingFileWriter> = HashMap::new();
    let mut files = Vec::new();
    let written = match upsert {
        None => write_batches(input, settings, io, task, &mut writers).await,
        Some((upsert, mut reservation)) => {
            let upsert = UpsertWrite {
                deletes: upsert,
                reservation: &mut reservation,
            };
            write_upsert(input, settings, upsert, io, task, &mut writers, &mut files).await
        }
    };
    match written {
        Ok(()) => {
            let mut writers = writers.into_values();
            while let Some(writer) = writers.next() {
                match writer.close().await {
                    Ok(mut written) => files.append(&mut written),
                    Err(e) => {
                        for writer in writers {
                            writer.abort().await;
                        }
                        return Err(e.into());
                    }
                }
            }
            Ok(files)
        }
        Err(e) => {
            for (_, writer) in writers {
                writer.abort().await;
            }
            Err(e)
        }
    }
}

/// Writes the partition's rows as an upsert: all of them gathered, each key's last row kept and
/// written as [`write_batches`] writes, and each table partition's keys written as one
/// equality-delete file (added to `deletes`).
async fn write_upsert(
    mut input: SendableRecordBatchStream,
    settings: &Arc<WriteSettings>,
    UpsertWrite {
        deletes: upsert,
        reservation,
    }: UpsertWrite<'_>,
    io: &TableIo,
    task: usize,
    writers: &mut HashMap<Vec<u8>, RollingFileWriter>,
    deletes: &mut Vec<iceberg::spec::DataFile>,
) -> DFResult<()> {
    let tracker = settings.tracker();
    let schema = settings.arrow_schema();
    let mut batches = Vec::new();
    while let Some(batch) = next_unless_stopped(&mut input, tracker).await? {
        let batch = conform(settings, &batch)?;
        reservation.try_grow(batch.get_array_memory_size())?;
        batches.push(batch);
    }
    let Some(rows) = upsert.keys().keep_last(schema, &batches)? else {
        return Ok(());
    };
    drop(batches);
    let partitioner = Partitioner::new(settings.schema(), settings.spec(), schema)?;
    for (count, slice) in partitioner.split(&rows)?.into_iter().enumerate() {
        if tracker.is_stopped() {
            return Err(stopped());
        }
        let writer = match writers.entry(slice.key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(RollingFileWriter::new(
                Arc::clone(settings),
                io.clone(),
                slice.values.clone(),
                task,
            )?),
        };
        writer.write_slice(&slice.batch, slice.bytes, 0).await?;
        deletes.push(
            write_equality_deletes(
                settings,
                upsert,
                io,
                &slice.values,
                &slice.batch,
                task,
                count + 1,
            )
            .await?,
        );
    }
    Ok(())
}

/// What an upsert's writer task needs beyond the data writers: the equality-delete settings and
/// the memory reservation of the rows it holds.
struct UpsertWrite<'a> {
    deletes: &'a EqualityDeleteSettings,
    reservation: &'a mut MemoryReservation,
}

/// `batch` in the writer's Arrow schema (DataFusion's casts to the table's types drop field ids
/// and may choose another physical type).
fn conform(settings: &WriteSettings, batch: &RecordBatch) -> DFResult<RecordBatch> {
    let schema = settings.arrow_schema();
    let columns = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| {
            if column.data_type() == field.data_type() {
                Ok(Arc::clone(column))
            } else {
                arrow::compute::cast(column, field.data_type())
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(Arc::clone(schema), columns)?)
}

/// The error of a write stopped from outside (INTERNAL: not the statement's own fault; the
/// failure that stopped it is reported on its own).
fn stopped() -> DataFusionError {
    DataFusionError::External(Box::new(iceberg::Error::new(
        iceberg::ErrorKind::Unexpected,
        "the write was stopped: another part of the statement failed or it was cancelled",
    )))
}

/// Writes the partition's batches through one rolling writer per table partition.
///
/// The writers gather zero-copy slices of the input batches, so the task keeps the batches
/// whose rows a writer still holds; past [`KEPT_INPUT_BYTES`] of them, the writers holding
/// rows of the oldest one write what they gathered, and that batch is let go.
/// The next input batch, or the error of a stopped write as soon as the write is stopped —
/// also while the task waits for input that may never come.
async fn next_unless_stopped(
    input: &mut SendableRecordBatchStream,
    tracker: &WriteTracker,
) -> DFResult<Option<RecordBatch>> {
    if tracker.is_stopped() {
        return Err(stopped());
    }
    tokio::select! {
        biased;
        () = tracker.stopped() => Err(stopped()),
        batch = input.next() => match batch {
            // A batch that arrives as the write stops is not written.
            Some(_) if tracker.is_stopped() => Err(stopped()),
            batch => batch.transpose(),
        },
    }
}

async fn write_batches(
    mut input: SendableRecordBatchStream,
    settings: &Arc<WriteSettings>,
    io: &TableIo,
    task: usize,
    writers: &mut HashMap<Vec<u8>, RollingFileWriter>,
) -> DFResult<()> {
    let partitioner =
        Partitioner::new(settings.schema(), settings.spec(), settings.arrow_schema())?;
    let tracker = settings.tracker();
    // The input batches the writers may still hold slices of: (number, memory).
    let mut kept: VecDeque<(u64, usize)> = VecDeque::new();
    let mut kept_bytes = 0usize;
    let mut number = 0u64;
    while let Some(batch) = next_unless_stopped(&mut input, tracker).await? {
        number += 1;
        let mut bytes = 0;
        for slice in partitioner.split(&batch)? {
            let writer = match writers.entry(slice.key) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(RollingFileWriter::new(
                    Arc::clone(settings),
                    io.clone(),
                    slice.values,
                    task,
                )?),
            };
            bytes += slice.bytes;
            writer
                .write_slice(&slice.batch, slice.bytes, number)
                .await?;
        }
        kept.push_back((number, bytes));
        kept_bytes += bytes;
        while kept_bytes > KEPT_INPUT_BYTES {
            let Some((oldest, bytes)) = kept.pop_front() else {
                break;
            };
            kept_bytes -= bytes;
            for writer in writers.values_mut() {
                writer.flush_if_kept_since(oldest).await?;
            }
        }
    }
    Ok(())
}

/// `input`'s batches for partition `partition`, each checked against the table's NOT NULL
/// columns (`sink`) where the input may hold NULL, as DataFusion's `execute_input_stream` checks
/// them, but failing with INVALID_ARGUMENT naming the column (DataFusion's error named a column
/// index and was answered INTERNAL; a column an INSERT leaves out is NULL).
fn not_null_checked_input(
    input: Arc<dyn ExecutionPlan>,
    sink: arrow::datatypes::SchemaRef,
    partition: usize,
    context: Arc<TaskContext>,
) -> DFResult<SendableRecordBatchStream> {
    let stream = input.execute(partition, context)?;
    let required: Vec<(usize, String)> = sink
        .fields()
        .iter()
        .zip(input.schema().fields().iter())
        .enumerate()
        .filter(|(_, (column, given))| !column.is_nullable() && given.is_nullable())
        .map(|(index, (column, _))| (index, column.name().clone()))
        .collect();
    if required.is_empty() {
        return Ok(stream);
    }
    Ok(Box::pin(RecordBatchStreamAdapter::new(
        sink,
        stream.map(move |batch| {
            let batch = batch?;
            for (index, name) in &required {
                let nulls = batch
                    .columns()
                    .get(*index)
                    .and_then(|c| c.logical_nulls())
                    .map_or(0, |n| n.null_count());
                if nulls > 0 {
                    return Err(DataFusionError::External(Box::new(Error::InvalidArgument(
                        format!(
                            "column {name} is NOT NULL, but {nulls} row(s) to write have no \
                             value for it (a column the INSERT leaves out is NULL)"
                        ),
                    ))));
                }
            }
            Ok(batch)
        }),
    )))
}
