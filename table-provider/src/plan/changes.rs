//! Change planning: what one snapshot changed, as two scan plans over the data files it
//! touched — the rows before it (at its parent) and after it.
//!
//! ```text
//! snapshot S (parent P) ─► S's manifest list: manifests S added (added_snapshot_id = S)
//!   ├─ data entries ADDED by S        → after side  (deletes S added that apply to them)
//!   ├─ data entries DELETED by S      → before side (deletes live at P)
//!   └─ delete entries S added/removed → the live data files they apply to ("touched"),
//!        found in S's data manifests  → both sides  (deletes live at P, deletes live at S)
//! ```
//!
//! Only the manifests S added are read for an append (one manifest list and the new
//! manifests); the delete manifests of P and S, and S's data manifests, are read only when S
//! removed data files or added or removed delete files. Every file is pruned by the query's
//! filter (partition tuple, then column metrics), the same on both sides. The caller scans
//! both plans positionally and diffs the rows of files present on both sides by position
//! (`crate::changes`).

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use futures::{StreamExt, TryStreamExt};
use iceberg::spec::{
    DataFile, Manifest, ManifestContentType, ManifestFile, ManifestStatus, SnapshotRef,
};

use super::bin_pack::bin_pack;
use super::partition::PartitionFilter;
use super::planner::{DEFAULT_SPLIT_SIZE, PlanMetrics, ScanPlan, ScanPlanner, split_file_tasks};
use super::predicate::Predicate;
use super::task::{DataFileRef, DeleteFileRef};
use crate::catalog::LoadedTable;
use crate::deletes::DeleteFileIndex;
use crate::error::{Error, Result};

/// What one snapshot changed, as scan plans of the data files it touched.
#[derive(Debug, Clone)]
pub struct ChangePlan {
    /// The snapshot.
    pub snapshot_id: i64,
    /// Its live rows, at its parent, of the files it removed or whose deletes it changed.
    pub before: ScanPlan,
    /// Its live rows, after it, of the files it added or whose deletes it changed.
    pub after: ScanPlan,
    /// Data files on both sides (their rows are diffed by position).
    pub shared_files: HashSet<String>,
    /// Manifests read to plan this snapshot's changes.
    pub manifests_read: usize,
}

impl ChangePlan {
    /// Whether the snapshot changed no row the filter may select.
    pub fn is_empty(&self) -> bool {
        self.before.partitions.is_empty() && self.after.partitions.is_empty()
    }
}

/// One data file of a manifest, with its inherited sequence number and spec.
struct FileEntry {
    file: DataFile,
    spec_id: i32,
    sequence_number: i64,
}

impl ScanPlanner {
    /// Plans the changes of `snapshot` of `table` (read with `schema`), pruned by `filter`,
    /// bin-packed into `target_partitions` (see the module docs).
    pub async fn plan_changes(
        &self,
        table: &LoadedTable,
        snapshot: &SnapshotRef,
        schema: &iceberg::spec::SchemaRef,
        filter: &Predicate,
        target_partitions: usize,
    ) -> Result<ChangePlan> {
        let started = Instant::now();
        let metadata = table.metadata();
        let name = table.ident().to_string();
        let io = table.io();
        let version = metadata.format_version();
        let id = snapshot.snapshot_id();
        let mut manifests_read = 0usize;
        let list = self
            .cache()
            .manifest_list(io, &name, snapshot.manifest_list(), version)
            .await?;
        let partition_filter = |spec_id: i32| -> Result<PartitionFilter> {
            let spec = metadata.partition_spec_by_id(spec_id).ok_or_else(|| {
                Error::corrupt(
                    name.clone(),
                    "metadata file",
                    table.metadata_location(),
                    format!("snapshot {id} uses unknown partition spec {spec_id}"),
                )
            })?;
            Ok(PartitionFilter::project(filter, spec, schema))
        };
        let selected = |entry: &FileEntry| -> Result<bool> {
            Ok(
                partition_filter(entry.spec_id)?.matches_partition(entry.file.partition())
                    && super::planner::data_file_metrics_might_match(filter, &entry.file),
            )
        };

        // What S itself added and removed.
        let own: Vec<ManifestFile> = list
            .entries()
            .iter()
            .filter(|mf| mf.added_snapshot_id == id)
            .cloned()
            .collect();
        let own = self.load(table, &name, own).await?;
        manifests_read += own.len();
        let mut added_data = Vec::new();
        let mut removed_data = Vec::new();
        let mut new_deletes = DeleteFileIndex::default();
        let mut removed_deletes = DeleteFileIndex::default();
        for (mf, manifest) in &own {
            let spec = manifest.metadata().partition_spec();
            for entry in manifest.entries() {
                if entry.snapshot_id().unwrap_or(mf.added_snapshot_id) != id {
                    continue;
                }
                let sequence_number = entry.sequence_number().unwrap_or(mf.sequence_number);
                let status = entry.status();
                match (mf.content, status) {
                    (_, ManifestStatus::Existing) => {}
                    (ManifestContentType::Data, status) => {
                        let file = FileEntry {
                            file: entry.data_file().clone(),
                            spec_id: spec.spec_id(),
                            sequence_number,
                        };
                        if !selected(&file)? {
                            continue;
                        }
                        if status == ManifestStatus::Added {
                            added_data.push(file);
                        } else {
                            removed_data.push(file);
                        }
                    }
                    (ManifestContentType::Deletes, ManifestStatus::Added) => {
                        new_deletes.add(entry, sequence_number, spec)
                    }
                    (ManifestContentType::Deletes, _) => {
                        removed_deletes.add(entry, sequence_number, spec)
                    }
                }
            }
        }

        new_deletes.sort_equality();
        removed_deletes.sort_equality();
        let deletes_changed = !new_deletes.is_empty() || !removed_deletes.is_empty();
        // The deletes live at P (for the before side) and at S (the after side).
        let parent = match snapshot.parent_snapshot_id() {
            Some(parent) if deletes_changed || !removed_data.is_empty() => {
                Some(metadata.snapshot_by_id(parent).cloned().ok_or_else(|| {
                    Error::NotFound(format!(
                        "table {name}: the parent {parent} of snapshot {id} has expired; its \
                         changes cannot be computed"
                    ))
                })?)
            }
            _ => None,
        };
        let before_index = match &parent {
            Some(parent) => {
                let (index, read) = self
                    .delete_index(table, &name, parent, filter, schema)
                    .await?;
                manifests_read += read;
                index
            }
            None => DeleteFileIndex::default(),
        };
        let mut touched = Vec::new();
        let after_index = if deletes_changed {
            let (index, read) = self
                .delete_index(table, &name, snapshot, filter, schema)
                .await?;
            manifests_read += read;
            // The live data files S did not add whose deletes S changed.
            let data: Vec<ManifestFile> = list
                .entries()
                .iter()
                .filter(|mf| mf.content == ManifestContentType::Data)
                .filter(|mf| {
                    partition_filter(mf.partition_spec_id)
                        .map(|f| f.matches_summaries(mf.partitions.as_deref()))
                        .unwrap_or(true)
                })
                .cloned()
                .collect();
            let data = self.load(table, &name, data).await?;
            manifests_read += data.len();
            for (mf, manifest) in &data {
                let spec_id = manifest.metadata().partition_spec().spec_id();
                for entry in manifest.entries() {
                    let added_here = entry.snapshot_id().unwrap_or(mf.added_snapshot_id) == id
                        && entry.status() == ManifestStatus::Added;
                    if entry.status() == ManifestStatus::Deleted || added_here {
                        continue;
                    }
                    let sequence_number = entry.sequence_number().unwrap_or(mf.sequence_number);
                    let file = entry.data_file();
                    let changed = !new_deletes
                        .deletes_for(file, spec_id, sequence_number)
                        .is_empty()
                        || !removed_deletes
                            .deletes_for(file, spec_id, sequence_number)
                            .is_empty();
                    if !changed {
                        continue;
                    }
                    let file = FileEntry {
                        file: file.clone(),
                        spec_id,
                        sequence_number,
                    };
                    if selected(&file)? {
                        touched.push(file);
                    }
                }
            }
            index
        } else {
            DeleteFileIndex::default()
        };

        let split_size = metadata
            .properties()
            .get("read.split.target-size")
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| *v > 0)
            .unwrap_or(DEFAULT_SPLIT_SIZE);
        let mut before_tasks = Vec::new();
        let mut after_tasks = Vec::new();
        let mut shared_files = HashSet::new();
        for entry in &added_data {
            // Only deletes of S itself can apply to S's own files (sequence numbers).
            let deletes =
                new_deletes.deletes_for(&entry.file, entry.spec_id, entry.sequence_number);
            split_file_tasks(
                file_ref(entry),
                &entry.file,
                split_size,
                deletes,
                &mut after_tasks,
            );
        }
        for entry in &removed_data {
            let deletes =
                before_index.deletes_for(&entry.file, entry.spec_id, entry.sequence_number);
            split_file_tasks(
                file_ref(entry),
                &entry.file,
                split_size,
                deletes,
                &mut before_tasks,
            );
        }
        let mut seen = BTreeSet::new();
        for entry in &touched {
            if !seen.insert(entry.file.file_path().to_string()) {
                continue;
            }
            let before: Vec<std::sync::Arc<DeleteFileRef>> =
                before_index.deletes_for(&entry.file, entry.spec_id, entry.sequence_number);
            let after = after_index.deletes_for(&entry.file, entry.spec_id, entry.sequence_number);
            shared_files.insert(entry.file.file_path().to_string());
            split_file_tasks(
                file_ref(entry),
                &entry.file,
                split_size,
                before,
                &mut before_tasks,
            );
            split_file_tasks(
                file_ref(entry),
                &entry.file,
                split_size,
                after,
                &mut after_tasks,
            );
        }
        let plan_of = |snapshot_id: Option<i64>, tasks| {
            let mut metrics = PlanMetrics {
                manifests_total: list.entries().len(),
                manifests_read,
                ..PlanMetrics::default()
            };
            let partitions = bin_pack(tasks, target_partitions.max(1));
            metrics.files_selected = partitions.iter().flatten().count();
            metrics.planning_time = started.elapsed();
            ScanPlan {
                snapshot_id,
                schema: Arc::clone(schema),
                partitions,
                metrics,
            }
        };
        Ok(ChangePlan {
            snapshot_id: id,
            before: plan_of(snapshot.parent_snapshot_id(), before_tasks),
            after: plan_of(Some(id), after_tasks),
            shared_files,
            manifests_read,
        })
    }

    /// Reads `manifests` (cached, concurrently), each with its manifest-list entry.
    async fn load(
        &self,
        table: &LoadedTable,
        name: &str,
        manifests: Vec<ManifestFile>,
    ) -> Result<Vec<(ManifestFile, Arc<Manifest>)>> {
        let io = table.io();
        let fetches = manifests.into_iter().map(|mf| {
            let (cache, io, name) = (self.cache().clone(), io.clone(), name.to_string());
            async move {
                let manifest = cache.manifest(&io, &name, &mf.manifest_path).await?;
                Ok::<_, Error>((mf, manifest))
            }
        });
        futures::stream::iter(fetches)
            .buffered(16)
            .try_collect()
            .await
    }

    /// The live delete files of `snapshot` whose manifests `filter` may select, and how many
    /// manifests were read.
    async fn delete_index(
        &self,
        table: &LoadedTable,
        name: &str,
        snapshot: &SnapshotRef,
        filter: &Predicate,
        schema: &iceberg::spec::SchemaRef,
    ) -> Result<(DeleteFileIndex, usize)> {
        let metadata = table.metadata();
        let list = self
            .cache()
            .manifest_list(
                table.io(),
                name,
                snapshot.manifest_list(),
                metadata.format_version(),
            )
            .await?;
        let manifests: Vec<ManifestFile> = list
            .entries()
            .iter()
            .filter(|mf| mf.content == ManifestContentType::Deletes)
            .filter(|mf| {
                metadata
                    .partition_spec_by_id(mf.partition_spec_id)
                    .map(|spec| {
                        PartitionFilter::project(filter, spec, schema)
                            .matches_summaries(mf.partitions.as_deref())
                    })
                    .unwrap_or(true)
            })
            .cloned()
            .collect();
        let loaded = self.load(table, name, manifests).await?;
        let index = DeleteFileIndex::of_manifests(
            loaded
                .iter()
                .map(|(mf, manifest)| (manifest.as_ref(), mf.sequence_number)),
        );
        Ok((index, loaded.len()))
    }
}

fn file_ref(entry: &FileEntry) -> DataFileRef {
    let file = &entry.file;
    DataFileRef {
        path: file.file_path().to_string(),
        format: format!("{:?}", file.file_format()).to_uppercase(),
        file_size: file.file_size_in_bytes(),
        record_count: file.record_count(),
        spec_id: entry.spec_id,
        sequence_number: entry.sequence_number,
        // Row lineage is not part of a change row.
        first_row_id: file.first_row_id(),
        nan_free_field_ids: file
            .nan_value_counts()
            .iter()
            .filter(|(_, count)| **count == 0)
            .map(|(id, _)| *id)
            .collect(),
    }
}
