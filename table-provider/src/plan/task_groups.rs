//! Task groups sized for a cluster, as Iceberg plans them for Spark.
//!
//! A local scan packs its tasks into as many partitions as the machine has cores
//! (`bin_pack`). On a cluster the number of partitions should follow the data instead: Iceberg's
//! `TableScanUtil.planTaskGroups` (what Spark's batch scans use) packs the split tasks into
//! groups of about `read.split.target-size` bytes, each task weighing
//! `max(length + delete bytes, (1 + delete files) × read.split.open-file-cost)`, first-fit over
//! the last `read.split.planning-lookback` open groups; when a new group would exceed the
//! lookback, the heaviest open group is closed (`largestBinFirst`), and at the end the open
//! groups are closed oldest first. [`plan_task_groups`] is that algorithm (Iceberg 1.10's
//! `BinPacking.PackingIterator`), [`SplitSettings`] the three table properties.
//!
//! Splitting a data file into byte ranges at its split offsets (`read.split.target-size`) is
//! the planner's; this only groups the resulting tasks. A data file's ranges may land in
//! different groups, and so on different executors: merge-on-read applies position deletes by
//! absolute row position within the file, so each range applies its own.

use std::collections::HashMap;

use super::planner::{DEFAULT_SPLIT_SIZE, ScanPlan};
use super::task::{DeleteKind, ScanTask};

/// Iceberg's default `read.split.open-file-cost` (4 MiB).
pub const DEFAULT_OPEN_FILE_COST: u64 = 4 * 1024 * 1024;

/// Iceberg's default `read.split.planning-lookback`.
pub const DEFAULT_PLANNING_LOOKBACK: usize = 10;

/// The `read.split.*` table properties that size task groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitSettings {
    /// `read.split.target-size`: bytes per task group.
    pub target_size: u64,
    /// `read.split.open-file-cost`: the least a file (data or delete) weighs.
    pub open_file_cost: u64,
    /// `read.split.planning-lookback`: open groups considered for each task.
    pub lookback: usize,
    /// `read.split.adaptive-size.enabled`: a scan smaller than one target size per slot of
    /// the engine gets smaller groups ([`Self::adjusted_for`]).
    pub adaptive: bool,
}

impl Default for SplitSettings {
    fn default() -> Self {
        Self {
            target_size: DEFAULT_SPLIT_SIZE,
            open_file_cost: DEFAULT_OPEN_FILE_COST,
            lookback: DEFAULT_PLANNING_LOOKBACK,
            adaptive: true,
        }
    }
}

impl SplitSettings {
    /// The settings of a table with these properties; a missing, unparsable or non-positive
    /// value keeps Iceberg's default.
    pub fn from_properties(properties: &HashMap<String, String>) -> Self {
        let positive = |key: &str| {
            properties
                .get(key)
                .and_then(|v| v.trim().parse::<u64>().ok())
                .filter(|v| *v > 0)
        };
        let defaults = Self::default();
        Self {
            target_size: positive("read.split.target-size").unwrap_or(defaults.target_size),
            open_file_cost: positive("read.split.open-file-cost")
                .unwrap_or(defaults.open_file_cost),
            lookback: positive("read.split.planning-lookback")
                .and_then(|v| usize::try_from(v).ok())
                .unwrap_or(defaults.lookback),
            adaptive: properties
                .get("read.split.adaptive-size.enabled")
                .and_then(|v| v.trim().parse::<bool>().ok())
                .unwrap_or(defaults.adaptive),
        }
    }

    /// These settings for a scan of `scan_bytes` (data and delete bytes of its tasks) on an
    /// engine running `parallelism` tasks at once, as Iceberg's Spark scans size their splits
    /// (`TableScanUtil.adjustSplitSize`): when the target size gives fewer groups than slots,
    /// the target becomes `max(scan_bytes / parallelism, min(16 MiB, target))`; a bigger scan,
    /// or `adaptive` off, keeps the target. A 176 MiB scan with a 128 MiB target on 4 slots is
    /// grouped by 44 MiB (four tasks), not into one task of 128 MiB and one of 48 MiB.
    pub fn adjusted_for(self, scan_bytes: u64, parallelism: usize) -> Self {
        let parallelism = parallelism.max(1) as u64;
        if !self.adaptive || scan_bytes.div_ceil(self.target_size) >= parallelism {
            return self;
        }
        let adjusted = (scan_bytes / parallelism).max(MIN_SPLIT_SIZE.min(self.target_size));
        Self {
            target_size: adjusted,
            ..self
        }
    }
}

/// Iceberg's `TableScanUtil.MIN_SPLIT_SIZE`: adaptive sizing goes no lower (16 MiB).
const MIN_SPLIT_SIZE: u64 = 16 * 1024 * 1024;

/// The bytes a scan's tasks read: data ranges and their delete files (Iceberg's
/// `ScanTask.sizeBytes`), what [`SplitSettings::adjusted_for`] divides.
pub fn scan_bytes<'a>(tasks: impl IntoIterator<Item = &'a ScanTask>) -> u64 {
    tasks
        .into_iter()
        .map(|t| task_weight(t, 0))
        .fold(0, u64::saturating_add)
}

/// What a task weighs when grouping: its bytes and its delete files' (a deletion vector counts
/// its blob), and at least the open cost of each file it opens.
pub fn task_weight(task: &ScanTask, open_file_cost: u64) -> u64 {
    let delete_bytes: u64 = task
        .deletes
        .iter()
        .map(|d| match d.kind {
            DeleteKind::DeletionVector { length, .. } => length,
            _ => d.file_size,
        })
        .sum();
    let files = 1 + task.deletes.len() as u64;
    (task.length.saturating_add(delete_bytes)).max(files.saturating_mul(open_file_cost))
}

/// `tasks` in groups as Iceberg plans them (see the module docs). Groups are never empty.
pub fn plan_task_groups(
    tasks: impl IntoIterator<Item = ScanTask>,
    settings: &SplitSettings,
) -> Vec<Vec<ScanTask>> {
    let cost = settings.open_file_cost;
    pack(
        tasks,
        |t| task_weight(t, cost),
        settings.target_size,
        settings.lookback,
        true,
    )
}

/// `plan` with its tasks regrouped by [`plan_task_groups`]: one partition per group.
pub fn regroup(plan: ScanPlan, settings: &SplitSettings) -> ScanPlan {
    let tasks: Vec<ScanTask> = plan.partitions.into_iter().flatten().collect();
    ScanPlan {
        partitions: plan_task_groups(tasks, settings),
        ..plan
    }
}

/// One open group.
struct Bin<T> {
    weight: u64,
    items: Vec<T>,
}

/// Iceberg's `BinPacking.PackingIterator`: each item goes into the first of the open bins it
/// fits (`weight + item <= target`), else into a new bin; when more than `lookback` bins are
/// open, the heaviest (`largest_bin_first`, the first of equals) or the oldest is closed. At
/// the end the open bins close oldest first.
pub(crate) fn pack<T>(
    items: impl IntoIterator<Item = T>,
    weight: impl Fn(&T) -> u64,
    target: u64,
    lookback: usize,
    largest_bin_first: bool,
) -> Vec<Vec<T>> {
    let mut open: Vec<Bin<T>> = Vec::new();
    let mut closed = Vec::new();
    for item in items {
        let w = weight(&item);
        if let Some(bin) = open
            .iter_mut()
            .find(|b| b.weight.saturating_add(w) <= target)
        {
            bin.weight = bin.weight.saturating_add(w);
            bin.items.push(item);
            continue;
        }
        open.push(Bin {
            weight: w,
            items: vec![item],
        });
        if open.len() > lookback {
            let at = if largest_bin_first {
                // The first of the heaviest, as Java's `Collections.max`.
                let mut at = 0;
                for (i, bin) in open.iter().enumerate() {
                    if bin.weight > open[at].weight {
                        at = i;
                    }
                }
                at
            } else {
                0
            };
            closed.push(open.remove(at).items);
        }
    }
    closed.extend(open.into_iter().map(|b| b.items));
    closed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::task::{DataFileRef, DeleteFileRef};

    /// Items, target weight, lookback, largest bin first, and the groups Iceberg makes.
    type Case<'a> = (&'a [u64], u64, usize, bool, Vec<Vec<u64>>);

    fn packed(items: &[u64], target: u64, lookback: usize, largest: bool) -> Vec<Vec<u64>> {
        pack(items.iter().copied(), |w| *w, target, lookback, largest)
    }

    /// Expected groups computed by Iceberg 1.10.2's own `BinPacking.ListPacker(target,
    /// lookback, largestBinFirst).pack(items, Integer::longValue)` (jshell over
    /// iceberg-spark-runtime-3.5_2.12-1.10.2.jar); the first cases are Iceberg's
    /// `TestBinPacking`.
    #[test]
    fn packs_as_iceberg_does() {
        let unlimited = i32::MAX as usize;
        let one_to_five = [1, 2, 3, 4, 5];
        let cases: Vec<Case> = vec![
            (
                &one_to_five,
                3,
                unlimited,
                false,
                vec![vec![1, 2], vec![3], vec![4], vec![5]],
            ),
            (
                &one_to_five,
                5,
                unlimited,
                false,
                vec![vec![1, 2], vec![3], vec![4], vec![5]],
            ),
            (
                &one_to_five,
                6,
                unlimited,
                false,
                vec![vec![1, 2, 3], vec![4], vec![5]],
            ),
            (
                &one_to_five,
                9,
                unlimited,
                false,
                vec![vec![1, 2, 3], vec![4, 5]],
            ),
            (
                &one_to_five,
                10,
                unlimited,
                false,
                vec![vec![1, 2, 3, 4], vec![5]],
            ),
            (
                &one_to_five,
                15,
                unlimited,
                false,
                vec![vec![1, 2, 3, 4, 5]],
            ),
            (
                &[5, 1, 5, 1, 5, 1],
                8,
                unlimited,
                true,
                vec![vec![5, 1, 1, 1], vec![5], vec![5]],
            ),
            (
                &[5, 1, 5, 1, 5, 1],
                8,
                2,
                false,
                vec![vec![5, 1, 1], vec![5, 1], vec![5]],
            ),
            (
                &[5, 1, 5, 1, 5, 1],
                8,
                2,
                true,
                vec![vec![5, 1, 1], vec![5, 1], vec![5]],
            ),
            (
                &[5, 1, 5, 1, 5, 1],
                8,
                1,
                true,
                vec![vec![5, 1], vec![5, 1], vec![5, 1]],
            ),
            (
                &[32, 32, 32, 32, 64, 64, 128],
                128,
                1,
                true,
                vec![vec![32, 32, 32, 32], vec![64, 64], vec![128]],
            ),
            (
                &[128, 64, 64, 32, 32, 32, 32],
                128,
                1,
                true,
                vec![vec![128], vec![64, 64], vec![32, 32, 32, 32]],
            ),
            (
                &[10, 60, 30, 90, 20, 50, 70, 40, 80, 100],
                100,
                2,
                true,
                vec![
                    vec![10, 60, 30],
                    vec![90],
                    vec![20, 50],
                    vec![80],
                    vec![100],
                    vec![70],
                    vec![40],
                ],
            ),
            (
                &[10, 60, 30, 90, 20, 50, 70, 40, 80, 100],
                100,
                2,
                false,
                vec![
                    vec![10, 60, 30],
                    vec![90],
                    vec![20, 50],
                    vec![70],
                    vec![40],
                    vec![80],
                    vec![100],
                ],
            ),
            (
                &[10, 60, 30, 90, 20, 50, 70, 40, 80, 100],
                120,
                3,
                true,
                vec![
                    vec![10, 60, 30, 20],
                    vec![50, 70],
                    vec![90],
                    vec![40, 80],
                    vec![100],
                ],
            ),
            (
                &[7, 7, 7, 120, 3, 3, 50, 50, 50, 9],
                64,
                10,
                true,
                vec![
                    vec![7, 7, 7, 3, 3, 9],
                    vec![120],
                    vec![50],
                    vec![50],
                    vec![50],
                ],
            ),
        ];
        for (items, target, lookback, largest, want) in cases {
            assert_eq!(
                packed(items, target, lookback, largest),
                want,
                "{items:?} target {target} lookback {lookback} largest first {largest}"
            );
        }
    }

    fn task(path: &str, start: u64, length: u64, deletes: Vec<DeleteFileRef>) -> ScanTask {
        ScanTask {
            file: DataFileRef {
                path: path.into(),
                format: "PARQUET".into(),
                file_size: 1 << 30,
                record_count: 1000,
                spec_id: 0,
                sequence_number: 1,
                first_row_id: None,
                nan_free_field_ids: vec![],
            },
            start,
            length,
            whole_file: false,
            deletes: deletes.into_iter().map(std::sync::Arc::new).collect(),
        }
    }

    fn delete(kind: DeleteKind, file_size: u64) -> DeleteFileRef {
        DeleteFileRef {
            path: "d".into(),
            format: "PARQUET".into(),
            kind,
            record_count: 1,
            file_size,
            sequence_number: 2,
        }
    }

    #[test]
    fn a_task_weighs_its_bytes_and_its_deletes_at_least_the_open_cost_of_each_file() {
        let mb = 1 << 20;
        assert_eq!(
            task_weight(&task("a", 0, 100 * mb, vec![]), 4 * mb),
            100 * mb
        );
        assert_eq!(task_weight(&task("a", 0, mb, vec![]), 4 * mb), 4 * mb);
        let pos = delete(DeleteKind::Position, 3 * mb);
        assert_eq!(
            task_weight(&task("a", 0, 100 * mb, vec![pos.clone()]), 4 * mb),
            103 * mb
        );
        // Two files opened: at least twice the open cost.
        assert_eq!(task_weight(&task("a", 0, mb, vec![pos]), 4 * mb), 8 * mb);
        // A deletion vector counts its blob, not its Puffin file.
        let dv = delete(
            DeleteKind::DeletionVector {
                offset: 4,
                length: 2 * mb,
            },
            50 * mb,
        );
        assert_eq!(
            task_weight(&task("a", 0, 100 * mb, vec![dv]), 4 * mb),
            102 * mb
        );
    }

    #[test]
    fn settings_come_from_the_read_split_properties() {
        let props = |pairs: &[(&str, &str)]| -> HashMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert_eq!(
            SplitSettings::from_properties(&props(&[])),
            SplitSettings {
                target_size: 128 * 1024 * 1024,
                open_file_cost: 4 * 1024 * 1024,
                lookback: 10,
                adaptive: true,
            }
        );
        assert_eq!(
            SplitSettings::from_properties(&props(&[
                ("read.split.target-size", "1000"),
                ("read.split.open-file-cost", "10"),
                ("read.split.planning-lookback", "3"),
                ("read.split.adaptive-size.enabled", "false"),
            ])),
            SplitSettings {
                target_size: 1000,
                open_file_cost: 10,
                lookback: 3,
                adaptive: false,
            }
        );
        // Nonsense keeps the defaults.
        assert_eq!(
            SplitSettings::from_properties(&props(&[
                ("read.split.target-size", "0"),
                ("read.split.open-file-cost", "-5"),
                ("read.split.planning-lookback", "many"),
            ])),
            SplitSettings::default()
        );
    }

    /// Iceberg 1.10's `TableScanUtil.adjustSplitSize(scanSize, parallelism, splitSize)`.
    #[test]
    fn adaptive_size_follows_iceberg() {
        const MIB: u64 = 1024 * 1024;
        let target = |scan: u64, parallelism: usize, settings: SplitSettings| {
            settings.adjusted_for(scan, parallelism).target_size
        };
        let default = SplitSettings::default();
        // One 128 MiB split per slot or more: the target stays.
        assert_eq!(target(256 * MIB, 2, default), 128 * MIB);
        assert_eq!(target(10_000 * MIB, 16, default), 128 * MIB);
        // Fewer splits than slots: the scan divided by the slots...
        assert_eq!(target(176 * MIB, 4, default), 44 * MIB);
        assert_eq!(target(176 * MIB, 2, default), 128 * MIB);
        assert_eq!(target(100 * MIB, 4, default), 25 * MIB);
        // ...but never under 16 MiB, or under a smaller target.
        assert_eq!(target(20 * MIB, 8, default), 16 * MIB);
        let small = SplitSettings {
            target_size: 8 * MIB,
            ..default
        };
        assert_eq!(target(20 * MIB, 8, small), 8 * MIB);
        // Off: the target stays.
        let fixed = SplitSettings {
            adaptive: false,
            ..default
        };
        assert_eq!(target(176 * MIB, 4, fixed), 128 * MIB);
    }

    /// Byte ranges of 64 MiB files (128 MiB target, 4 MiB open cost, lookback 10) group two by
    /// two; small files fill groups up to the target; groups follow the data, not the cores.
    #[test]
    fn task_groups_follow_the_target_size() {
        let mb = 1 << 20;
        let settings = SplitSettings::default();
        let mut tasks: Vec<ScanTask> = (0..4)
            .map(|i| task("big", i * 64 * mb, 64 * mb, vec![]))
            .collect();
        tasks.extend((0..40).map(|i| task(&format!("small{i}"), 0, mb, vec![])));
        let groups = plan_task_groups(tasks, &settings);
        let sizes: Vec<(usize, u64)> = groups
            .iter()
            .map(|g| (g.len(), g.iter().map(|t| task_weight(t, 4 * mb)).sum()))
            .collect();
        // 4 × 64 MiB: two groups of two ranges; 40 files of 1 MiB weigh 4 MiB each: 32 per
        // 128 MiB group, then 8.
        assert_eq!(
            sizes,
            vec![(2, 128 * mb), (2, 128 * mb), (32, 128 * mb), (8, 32 * mb)]
        );
        for group in &groups {
            assert!(!group.is_empty());
        }
    }
}
