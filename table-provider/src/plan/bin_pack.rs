//! Bin-packing scan tasks into DataFusion partitions.

use super::task::ScanTask;

/// Fixed per-task cost added to its length, so that many tiny files still spread out
/// (Iceberg's `read.split.open-file-cost`).
const OPEN_FILE_COST: u64 = 4 * 1024 * 1024;

/// Packs `tasks` into at most `partitions` groups of about equal weight (longest first, each
/// into the lightest group). Groups are never empty.
pub(crate) fn bin_pack(mut tasks: Vec<ScanTask>, partitions: usize) -> Vec<Vec<ScanTask>> {
    let n = partitions.min(tasks.len());
    if n == 0 {
        return Vec::new();
    }
    tasks.sort_by(|a, b| {
        b.length
            .cmp(&a.length)
            .then_with(|| a.file.path.cmp(&b.file.path))
    });
    let mut groups: Vec<(u64, Vec<ScanTask>)> = (0..n).map(|_| (0, Vec::new())).collect();
    for task in tasks {
        if let Some(lightest) = groups.iter_mut().min_by_key(|(weight, _)| *weight) {
            lightest.0 += task.length + OPEN_FILE_COST;
            lightest.1.push(task);
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}
