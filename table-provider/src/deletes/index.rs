//! Matching delete files to data files, following the Iceberg spec (v2 and v3):
//!
//! - a position delete file applies when the data file's data sequence number ≤ its own and
//!   both share spec and partition, or when it names the data file (`referenced_data_file`,
//!   or equal lower/upper bounds of its `file_path` column); a file whose `file_path` bounds
//!   exclude the data file's path is skipped;
//! - a deletion vector applies to its one referenced data file (same sequence rule), and
//!   supersedes position delete files for that file;
//! - an equality delete file applies when the data file's data sequence number < its own, in
//!   the same partition, or everywhere when its spec is unpartitioned (global) — unless the
//!   column metrics of both files show that no row of the data file can match one of its
//!   keys (`equality_bounds`, as Iceberg Java's `DeleteFileIndex` decides). Equality delete
//!   files committed together (same field ids and sequence number) are kept or skipped
//!   together, so that one set still serves them all.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    DataContentType, DataFile, Manifest, ManifestEntryRef, ManifestStatus, PartitionSpec,
    PrimitiveLiteral, Struct,
};

use super::equality_bounds::{DataMetrics, DeleteMetrics};
use crate::io::normalize_location;
use crate::plan::{DeleteFileRef, DeleteKind};

/// Field id of the `file_path` column of position delete files.
const POS_FILE_PATH_FIELD_ID: i32 = 2_147_483_546;

#[derive(Debug, Clone)]
struct Indexed {
    /// Shared: a table upserted by many commits has each equality delete file apply to
    /// thousands of data files, and every match hands out a reference, not a copy.
    delete: Arc<DeleteFileRef>,
    sequence_number: i64,
    /// Lower and upper bounds of a position delete file's `file_path` column.
    path_bounds: Option<(String, String)>,
    /// An equality delete file's metrics on its equality columns, which decide whether it can
    /// match a data file.
    equality_metrics: Option<DeleteMetrics>,
}

impl Indexed {
    /// The equality group it belongs to: files committed together (same data sequence number)
    /// over the same field ids apply as one set. The order equality lists are kept in.
    fn group(&self) -> (i64, &[i32]) {
        match &self.delete.kind {
            DeleteKind::Equality { field_ids } => (self.sequence_number, field_ids),
            _ => (self.sequence_number, &[]),
        }
    }

    /// Whether a position delete file may name `path` (by its `file_path` bounds).
    fn may_reference(&self, path: &str) -> bool {
        match &self.path_bounds {
            Some((lower, upper)) => lower.as_str() <= path && path <= upper.as_str(),
            None => true,
        }
    }
}

/// The delete files of a snapshot, indexed for matching against data files.
#[derive(Debug, Default)]
pub struct DeleteFileIndex {
    by_partition_pos: HashMap<(i32, Struct), Vec<Indexed>>,
    by_data_file_pos: HashMap<String, Vec<Indexed>>,
    deletion_vectors: HashMap<String, Vec<Indexed>>,
    global_eq: Vec<Indexed>,
    by_partition_eq: HashMap<(i32, Struct), Vec<Indexed>>,
    count: usize,
}

impl DeleteFileIndex {
    /// Number of delete files indexed.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether no delete file is indexed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The live delete files of delete `manifests`, each given with the data sequence number
    /// its entries inherit (the manifest's own), sorted for matching.
    pub fn of_manifests<'m>(manifests: impl IntoIterator<Item = (&'m Manifest, i64)>) -> Self {
        let mut index = Self::default();
        for (manifest, inherited) in manifests {
            let spec = manifest.metadata().partition_spec();
            for entry in manifest.entries() {
                if entry.status() == ManifestStatus::Deleted {
                    continue;
                }
                let sequence_number = entry.sequence_number().unwrap_or(inherited);
                index.add(entry, sequence_number, spec);
            }
        }
        index.sort_equality();
        index
    }

    /// Adds a live delete-manifest entry with its (inherited) data sequence number.
    pub fn add(&mut self, entry: &ManifestEntryRef, sequence_number: i64, spec: &PartitionSpec) {
        let file = entry.data_file();
        let format = format!("{:?}", file.file_format()).to_uppercase();
        let base = |kind: DeleteKind| Indexed {
            delete: Arc::new(DeleteFileRef {
                path: file.file_path().to_string(),
                format: format.clone(),
                kind,
                record_count: file.record_count(),
                file_size: file.file_size_in_bytes(),
                sequence_number,
            }),
            sequence_number,
            path_bounds: path_bounds(file),
            equality_metrics: None,
        };
        match file.content_type() {
            DataContentType::Data => return,
            DataContentType::PositionDeletes => {
                if let (Some(offset), Some(length), Some(target)) = (
                    file.content_offset(),
                    file.content_size_in_bytes(),
                    file.referenced_data_file(),
                ) {
                    let kind = DeleteKind::DeletionVector {
                        offset: offset.max(0) as u64,
                        length: length.max(0) as u64,
                    };
                    self.deletion_vectors
                        .entry(normalize_location(&target))
                        .or_default()
                        .push(base(kind));
                } else if let Some(target) = referenced_file(file) {
                    self.by_data_file_pos
                        .entry(normalize_location(&target))
                        .or_default()
                        .push(base(DeleteKind::Position));
                } else {
                    self.by_partition_pos
                        .entry((spec.spec_id(), file.partition().clone()))
                        .or_default()
                        .push(base(DeleteKind::Position));
                }
            }
            DataContentType::EqualityDeletes => {
                let field_ids = file.equality_ids().unwrap_or_default();
                let indexed = Indexed {
                    equality_metrics: Some(DeleteMetrics::of(file, &field_ids)),
                    ..base(DeleteKind::Equality { field_ids })
                };
                if spec.is_unpartitioned() {
                    self.global_eq.push(indexed);
                } else {
                    self.by_partition_eq
                        .entry((spec.spec_id(), file.partition().clone()))
                        .or_default()
                        .push(indexed);
                }
            }
        }
        self.count += 1;
    }

    /// Sorts each list of equality delete files by group (sequence number, field ids), as
    /// matching takes them: call once after the last [`Self::add`], before matching many data
    /// files (matching sorts an unsorted list itself, per data file). [`Self::of_manifests`]
    /// does.
    pub fn sort_equality(&mut self) {
        self.global_eq.sort_by(|a, b| a.group().cmp(&b.group()));
        for list in self.by_partition_eq.values_mut() {
            list.sort_by(|a, b| a.group().cmp(&b.group()));
        }
    }

    /// The delete files that apply to `data` (a data file of spec `spec_id` with data
    /// sequence number `sequence_number`).
    pub fn deletes_for(
        &self,
        data: &DataFile,
        spec_id: i32,
        sequence_number: i64,
    ) -> Vec<Arc<DeleteFileRef>> {
        self.deletes_for_counting(data, spec_id, sequence_number).0
    }

    /// [`Self::deletes_for`], and how many equality delete files were skipped because the
    /// metrics show that none of their keys can match a row of `data`.
    pub fn deletes_for_counting(
        &self,
        data: &DataFile,
        spec_id: i32,
        sequence_number: i64,
    ) -> (Vec<Arc<DeleteFileRef>>, usize) {
        if self.count == 0 {
            return (Vec::new(), 0);
        }
        let raw_path = data.file_path();
        let path = normalize_location(raw_path);
        let key = (spec_id, data.partition().clone());
        let mut out = Vec::new();
        let positional = |d: &&Indexed| sequence_number <= d.sequence_number;
        let equality = |d: &&Indexed| sequence_number < d.sequence_number;

        let dvs: Vec<&Indexed> = self
            .deletion_vectors
            .get(&path)
            .map(|v| v.iter().filter(positional).collect())
            .unwrap_or_default();
        if dvs.is_empty() {
            for list in [
                self.by_data_file_pos.get(&path),
                self.by_partition_pos.get(&key),
            ]
            .into_iter()
            .flatten()
            {
                out.extend(
                    list.iter()
                        .filter(positional)
                        .filter(|d| d.may_reference(raw_path))
                        .map(|d| Arc::clone(&d.delete)),
                );
            }
        } else {
            out.extend(dvs.into_iter().map(|d| Arc::clone(&d.delete)));
        }
        let candidates: Vec<&Indexed> = self
            .global_eq
            .iter()
            .chain(self.by_partition_eq.get(&key).into_iter().flatten())
            .filter(equality)
            .collect();
        let pruned = keep_matching_equality_groups(data, candidates, &mut out);
        (out, pruned)
    }
}

/// Appends to `out` the equality delete files of `candidates` whose group (same field ids,
/// same sequence number: committed together, applied as one set) has a file that may delete
/// rows of `data`; returns how many files were left out.
fn keep_matching_equality_groups(
    data: &DataFile,
    mut candidates: Vec<&Indexed>,
    out: &mut Vec<Arc<DeleteFileRef>>,
) -> usize {
    // Sorted by group, so that each group is one run (a table may hold thousands of equality
    // delete files, one set of them per streaming commit). The index's lists are sorted once
    // ([`DeleteFileIndex::sort_equality`]), so this is a check, not a sort per data file,
    // unless global and partitioned files both apply.
    if !candidates.is_sorted_by_key(|d| d.group()) {
        candidates.sort_by(|a, b| a.group().cmp(&b.group()));
    }
    let mut pruned = 0;
    let mut metrics = DataMetrics::new(data);
    for group in candidates.chunk_by(|a, b| a.group() == b.group()) {
        let applies = group.iter().any(|d| {
            d.equality_metrics
                .as_ref()
                .is_none_or(|delete| metrics.may_match(delete))
        });
        if applies {
            out.extend(group.iter().map(|d| Arc::clone(&d.delete)));
        } else {
            pruned += group.len();
        }
    }
    pruned
}

/// The `file_path` bounds of a position delete file, when its metrics have them.
fn path_bounds(file: &DataFile) -> Option<(String, String)> {
    let lower = file.lower_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    let upper = file.upper_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    match (lower.literal(), upper.literal()) {
        (PrimitiveLiteral::String(l), PrimitiveLiteral::String(u)) => Some((l.clone(), u.clone())),
        _ => None,
    }
}

/// The one data file a position delete file covers, when it says so.
fn referenced_file(file: &DataFile) -> Option<String> {
    if let Some(r) = file.referenced_data_file() {
        return Some(r);
    }
    let lower = file.lower_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    let upper = file.upper_bounds().get(&POS_FILE_PATH_FIELD_ID)?;
    match (lower.literal(), upper.literal()) {
        (PrimitiveLiteral::String(l), PrimitiveLiteral::String(u)) if l == u => Some(l.clone()),
        _ => None,
    }
}
