//! [`IcebergDeleteExec`]: gathers the positions of the rows to delete and commits them as
//! merge-on-read deletes in one snapshot.

use std::any::Any;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use arrow::array::{AsArray, RecordBatch, UInt64Array};
use arrow::datatypes::Int64Type;
use datafusion::common::{DataFusionError, Result as DFResult};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, Distribution, ExecutionPlan, PlanProperties,
};
use futures::StreamExt;
use iceberg::spec::{DataFile, FormatVersion};
use roaring::RoaringTreemap;

use super::copy_on_write::rewrite_without;
use super::targets::{Targets, load_targets};
use crate::catalog::{Catalog, LoadedTable};
use crate::commit::{DeleteFile, FileKey, Removal, RowDeltaCheck, SnapshotChange, commit_snapshot};
use crate::deletes::{read_deletion_vector, read_position_delete_file};
use crate::dml::count_properties;
use crate::error::{Error, Result};
use crate::io::normalize_location;
use crate::plan::Predicate;
use crate::provider::IcebergTableProvider;
use crate::write::deletion_vector::{DeletionVectorInput, write_deletion_vectors};
use crate::write::position_deletes::write_position_deletes;

/// Deletes the rows its input locates (file path, position) from the table as its provider read
/// it, in the table's `write.delete.mode`; returns `count`, the rows deleted.
#[derive(Debug)]
pub struct IcebergDeleteExec {
    input: Arc<dyn ExecutionPlan>,
    catalog: Arc<dyn Catalog>,
    /// The table at the snapshot the input read.
    provider: Arc<IcebergTableProvider>,
    properties: Arc<PlanProperties>,
}

impl IcebergDeleteExec {
    /// A DELETE of the rows `input` locates.
    pub fn new(
        input: Arc<dyn ExecutionPlan>,
        catalog: Arc<dyn Catalog>,
        provider: Arc<IcebergTableProvider>,
    ) -> Self {
        let properties = count_properties();
        Self {
            input,
            catalog,
            provider,
            properties,
        }
    }
}

impl DisplayAs for IcebergDeleteExec {
    fn fmt_as(&self, _t: DisplayFormatType, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "IcebergDeleteExec: table={} snapshot={} mode={}",
            self.provider.table().ident(),
            self.provider
                .snapshot_id()
                .map_or_else(|| "none".to_string(), |s| s.to_string()),
            row_level_mode(self.provider.table(), DELETE_MODE)
        )
    }
}

impl ExecutionPlan for IcebergDeleteExec {
    fn name(&self) -> &str {
        "IcebergDeleteExec"
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

    fn required_input_distribution(&self) -> Vec<Distribution> {
        vec![Distribution::SinglePartition]
    }

    fn benefits_from_input_partitioning(&self) -> Vec<bool> {
        vec![false]
    }

    fn with_new_children(
        self: Arc<Self>,
        mut children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> DFResult<Arc<dyn ExecutionPlan>> {
        let input = children
            .pop()
            .ok_or_else(|| DataFusionError::Internal("IcebergDeleteExec needs an input".into()))?;
        Ok(Arc::new(Self::new(
            input,
            Arc::clone(&self.catalog),
            Arc::clone(&self.provider),
        )))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> DFResult<SendableRecordBatchStream> {
        if partition != 0 {
            return Err(DataFusionError::Internal(format!(
                "IcebergDeleteExec has one partition, not {partition}"
            )));
        }
        let mut input = self.input.execute(0, Arc::clone(&context))?;
        let catalog = Arc::clone(&self.catalog);
        let provider = Arc::clone(&self.provider);
        let schema = self.schema();
        let out_schema = Arc::clone(&schema);
        let stream = futures::stream::once(async move {
            let mut positions: BTreeMap<String, RoaringTreemap> = BTreeMap::new();
            while let Some(batch) = input.next().await {
                collect_positions(&batch?, &mut positions)?;
            }
            let deleted: u64 = positions.values().map(RoaringTreemap::len).sum();
            if deleted > 0 {
                delete_positions(
                    catalog.as_ref(),
                    &provider,
                    &context,
                    positions,
                    DELETE_MODE,
                    vec![],
                )
                .await?;
            }
            Ok(RecordBatch::try_new(
                out_schema,
                vec![Arc::new(UInt64Array::from(vec![deleted]))],
            )?)
        });
        Ok(Box::pin(RecordBatchStreamAdapter::new(schema, stream)))
    }
}

/// Adds the (file path, position) of each row of `batch` (its last two columns) to
/// `positions`.
pub(super) fn collect_positions(
    batch: &RecordBatch,
    positions: &mut BTreeMap<String, RoaringTreemap>,
) -> DFResult<()> {
    let columns = batch.num_columns();
    if columns < 2 {
        return Err(DataFusionError::Internal(format!(
            "row-level writes expect (…, file, position) rows, got {columns} columns"
        )));
    }
    let files = batch.column(columns - 2).as_string::<i32>();
    let rows = batch.column(columns - 1).as_primitive::<Int64Type>();
    for i in 0..batch.num_rows() {
        let position = u64::try_from(rows.value(i))
            .map_err(|_| DataFusionError::Internal("a negative row position".into()))?;
        let file = files.value(i);
        match positions.get_mut(file) {
            Some(set) => {
                set.insert(position);
            }
            None => {
                positions.insert(file.to_string(), RoaringTreemap::from_iter([position]));
            }
        }
    }
    Ok(())
}

/// The table's row-level mode `property` (`write.delete.mode`, `write.update.mode`,
/// `write.merge.mode`; Iceberg's default: copy-on-write).
pub(super) fn row_level_mode(table: &LoadedTable, property: &str) -> String {
    table
        .metadata()
        .properties()
        .get(property)
        .map(|m| m.trim().to_ascii_lowercase())
        .unwrap_or_else(|| "copy-on-write".into())
}

/// The table property naming DELETE's mode.
pub(super) const DELETE_MODE: &str = "write.delete.mode";

/// Deletes `positions` (by data file) of the table as `provider` read it, in the table's
/// `mode_property` (`write.delete.mode`, `write.update.mode`), adds the data files `new_rows`
/// (an UPDATE's new versions of the rows; deleted if the commit fails) and commits one
/// snapshot.
pub(super) async fn delete_positions(
    catalog: &dyn Catalog,
    provider: &IcebergTableProvider,
    context: &Arc<TaskContext>,
    positions: BTreeMap<String, RoaringTreemap>,
    mode_property: &str,
    new_rows: Vec<DataFile>,
) -> Result<()> {
    let table = provider.table();
    let name = table.ident().to_string();
    let Some(snapshot_id) = provider.snapshot_id() else {
        return Err(Error::InvalidArgument(format!(
            "table {name}: rows to delete from a table without snapshots"
        )));
    };
    let paths: HashSet<String> = positions.keys().cloned().collect();
    let targets = load_targets(table, provider.manifest_cache(), snapshot_id, &paths).await?;
    let check = RowDeltaCheck {
        from_snapshot_id: snapshot_id,
        data_files: paths.clone(),
        conflict_filter: conflict_filter(provider, mode_property)?,
    };
    let new_row_files: Vec<String> = new_rows.iter().map(|f| f.file_path().to_string()).collect();
    let mode = row_level_mode(table, mode_property);
    match mode.as_str() {
        "merge-on-read" => {}
        "copy-on-write" => {
            let positions = Arc::new(positions);
            let mut added = match rewrite_without(provider, context, &positions).await {
                Ok(added) => added,
                Err(e) => {
                    for path in &new_row_files {
                        let _ = table.io().delete(path).await;
                    }
                    return Err(e);
                }
            };
            added.extend(new_rows);
            let mut removed: HashSet<FileKey> = paths.iter().map(FileKey::path).collect();
            for deletes in targets.deletes.values() {
                removed.extend(deletes.iter().map(|d| FileKey::of(&d.file)));
            }
            let written: Vec<String> = added.iter().map(|f| f.file_path().to_string()).collect();
            let change = SnapshotChange {
                added,
                added_deletes: vec![],
                removal: Removal::Files(removed),
                row_delta_check: Some(check),
                rewrite: None,
            };
            return commit_or_clean_up(catalog, table, change, &written).await;
        }
        other => {
            return Err(Error::InvalidArgument(format!(
                "table {name}: {mode_property} is '{other}'; Iceberg knows merge-on-read and \
                 copy-on-write"
            )));
        }
    }
    let deletes = match table.metadata().format_version() {
        FormatVersion::V3 => deletion_vectors(table, &targets, positions).await,
        FormatVersion::V2 => position_delete_files(table, &targets, positions).await,
        FormatVersion::V1 => Err(Error::Unsupported {
            table: name,
            message: "DELETE and UPDATE need format-version 2 or 3".into(),
        }),
    };
    let (added, removed) = match deletes {
        Ok(deletes) => deletes,
        Err(e) => {
            for path in &new_row_files {
                let _ = table.io().delete(path).await;
            }
            return Err(e);
        }
    };
    let mut written: Vec<String> = added
        .iter()
        .map(|d| d.file.file_path().to_string())
        .collect();
    written.extend(new_row_files);
    let change = SnapshotChange {
        added: new_rows,
        added_deletes: added,
        removal: if removed.is_empty() {
            Removal::Nothing
        } else {
            Removal::Files(removed)
        },
        row_delta_check: Some(check),
        rewrite: None,
    };
    commit_or_clean_up(catalog, table, change, &written).await
}

/// The conflict-detection filter of a row-level write whose mode is `mode_property`: under the
/// table's `write.{delete,update,merge}.isolation-level` `serializable` (the default), the
/// filters its positional scan of the target was planned with (any row when none was
/// recorded), so that a concurrent commit adding data files that may hold matching rows fails
/// the statement; under `snapshot`, none.
fn conflict_filter(
    provider: &IcebergTableProvider,
    mode_property: &str,
) -> Result<Option<Predicate>> {
    let table = provider.table();
    let property = mode_property.replace(".mode", ".isolation-level");
    let level = table
        .metadata()
        .properties()
        .get(&property)
        .map(|l| l.trim().to_ascii_lowercase());
    match level.as_deref() {
        None | Some("serializable") => Ok(Some(provider.read_filter().unwrap_or(Predicate::True))),
        Some("snapshot") => Ok(None),
        Some(other) => Err(Error::InvalidArgument(format!(
            "table {}: {property} is '{other}'; Iceberg knows serializable and snapshot",
            table.ident()
        ))),
    }
}

/// Commits `change`; on a failure whose outcome is known, deletes the files it `written`.
pub(super) async fn commit_or_clean_up(
    catalog: &dyn Catalog,
    table: &LoadedTable,
    change: SnapshotChange,
    written: &[String],
) -> Result<()> {
    let result = commit_snapshot(catalog, table.clone(), change).await;
    if let Err(e) = &result
        && !matches!(e, Error::CommitStateUnknown { .. })
    {
        for path in written {
            let _ = table.io().delete(path).await;
        }
    }
    result.map(|_| ())
}

/// Format 2: one position-delete file per data file, holding the file's earlier file-scoped
/// position deletes too (which the commit removes, as Iceberg Java 1.10 does with
/// `write.delete.granularity=file`); partition-scoped delete files keep applying.
async fn position_delete_files(
    table: &LoadedTable,
    targets: &Targets,
    positions: BTreeMap<String, RoaringTreemap>,
) -> Result<(Vec<DeleteFile>, HashSet<FileKey>)> {
    // Everything that can fail without writing comes first.
    let (merged, removed) = with_earlier_deletes(table, targets, positions).await?;
    let mut added = Vec::with_capacity(merged.len());
    for (path, spec_id, partition, set) in merged {
        let sorted: Vec<u64> = set.iter().collect();
        let written =
            write_position_deletes(table, spec_id, &partition, &[(path.as_str(), &sorted)]).await;
        match written {
            Ok(file) => added.push(DeleteFile { spec_id, file }),
            Err(e) => {
                // The files written for the other data files go too.
                for done in &added {
                    let _ = table.io().delete(done.file.file_path()).await;
                }
                return Err(e);
            }
        }
    }
    Ok((added, removed))
}

/// Format 3: one deletion vector per data file, holding its earlier file-scoped deletes too
/// (which the commit removes), all in one Puffin file.
async fn deletion_vectors(
    table: &LoadedTable,
    targets: &Targets,
    positions: BTreeMap<String, RoaringTreemap>,
) -> Result<(Vec<DeleteFile>, HashSet<FileKey>)> {
    let (vectors, removed) = with_earlier_deletes(table, targets, positions).await?;
    let added = write_deletion_vectors(table, &vectors).await?;
    Ok((added, removed))
}

/// Each data file's new `positions` united with its earlier file-scoped deletes (position-delete
/// files naming only it, its deletion vector), as (path, spec id, partition, positions), and
/// the keys of those earlier deletes, for the commit to remove.
async fn with_earlier_deletes(
    table: &LoadedTable,
    targets: &Targets,
    positions: BTreeMap<String, RoaringTreemap>,
) -> Result<(Vec<DeletionVectorInput>, HashSet<FileKey>)> {
    let name = table.ident().to_string();
    let mut removed = HashSet::new();
    let mut merged = Vec::with_capacity(positions.len());
    for (path, mut set) in positions {
        let target = target(table, targets, &path)?;
        let key = normalize_location(&path);
        for earlier in targets.deletes.get(&key).into_iter().flatten() {
            let file = &earlier.file;
            if earlier.deletion_vector {
                let (Some(offset), Some(length)) =
                    (file.content_offset(), file.content_size_in_bytes())
                else {
                    return Err(Error::corrupt(
                        &name,
                        "deletion vector",
                        file.file_path(),
                        "no content offset / size",
                    ));
                };
                set |= read_deletion_vector(
                    table.io(),
                    &name,
                    file.file_path(),
                    offset as u64,
                    length as u64,
                )
                .await?;
            } else {
                let (by_file, _) = read_position_delete_file(
                    table.io(),
                    &name,
                    file.file_path(),
                    file.file_size_in_bytes(),
                )
                .await?;
                if let Some(old) = by_file.get(&key) {
                    set.extend(old.iter().copied());
                }
            }
            removed.insert(FileKey::of(file));
        }
        merged.push((path, target.spec_id, target.partition.clone(), set));
    }
    Ok((merged, removed))
}

fn target<'a>(
    table: &LoadedTable,
    targets: &'a Targets,
    path: &str,
) -> Result<&'a super::targets::TargetFile> {
    targets.files.get(path).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "table {}: data file {path} is not in the snapshot read",
            table.ident()
        ))
    })
}
