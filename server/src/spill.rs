//! The disk space queries may spill to: `spill_limit`.
//!
//! Sorts, grouped aggregates and joins that run out of their memory write their state to
//! temporary files and read it back. DataFusion lets all of them together fill its temporary
//! directory up to 100 GiB, whatever the disk holds: a `DISTINCT` of 100 million strings filled
//! `/tmp`, and with it the disk the server's logs (and a local warehouse) may share. Petrel's
//! default is half the space free in the temporary directory when the server starts, at most
//! DataFusion's 100 GiB; `0` turns spilling off (a query over its memory then fails at once).
//! Over the limit a query fails with RESOURCE_EXHAUSTED and its files are removed.

use std::path::Path;

use datafusion::execution::disk_manager::{DiskManagerBuilder, DiskManagerMode};

/// DataFusion's own limit, and Petrel's when the free space cannot be read.
pub const MAX_DEFAULT_SPILL_LIMIT: u64 = 100 << 30;

/// The default limit for spill files in `dir`: half its free space, at most
/// [`MAX_DEFAULT_SPILL_LIMIT`].
pub fn default_spill_limit(dir: &Path) -> u64 {
    match rustix::fs::statvfs(dir) {
        Ok(stats) => limit_for_free_space(stats.f_bavail.saturating_mul(stats.f_frsize)),
        Err(_) => MAX_DEFAULT_SPILL_LIMIT,
    }
}

/// The default limit for a directory with `free` bytes available.
fn limit_for_free_space(free: u64) -> u64 {
    (free / 2).min(MAX_DEFAULT_SPILL_LIMIT)
}

/// The disk manager of a server whose queries may spill `limit` bytes together (0: none).
pub fn disk_manager(limit: u64) -> DiskManagerBuilder {
    if limit == 0 {
        DiskManagerBuilder::default().with_mode(DiskManagerMode::Disabled)
    } else {
        DiskManagerBuilder::default().with_max_temp_directory_size(limit)
    }
}

/// DataFusion's advice on a spill over the limit, in the server's terms.
pub fn explain_spill_error(message: String) -> String {
    message
        .replace(
            "Try increasing the `max_temp_directory_size` in the disk manager configuration.",
            "Raise the server's spill_limit (--spill-limit), or give the query more memory \
             (query_memory_limit).",
        )
        .replace(
            "(DiskManager is disabled)",
            "(spilling is off: spill_limit is 0)",
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_half_the_free_space_at_most_100_gib() {
        assert_eq!(limit_for_free_space(10 << 30), 5 << 30);
        assert_eq!(limit_for_free_space(1 << 40), MAX_DEFAULT_SPILL_LIMIT);
        assert_eq!(limit_for_free_space(0), 0);
        // The temporary directory's free space changes under a running test suite: only its
        // range is certain.
        let limit = default_spill_limit(&std::env::temp_dir());
        assert!(limit > 0 && limit <= MAX_DEFAULT_SPILL_LIMIT, "{limit}");
        assert_eq!(
            default_spill_limit(Path::new("/no/such/directory")),
            MAX_DEFAULT_SPILL_LIMIT
        );
    }

    #[test]
    fn spill_errors_name_the_servers_setting() {
        let message = "Resources exhausted: The used disk space during the spilling process has \
                       exceeded the allowable limit of 1.0 MB. Try increasing the \
                       `max_temp_directory_size` in the disk manager configuration."
            .to_string();
        let explained = explain_spill_error(message);
        assert!(
            explained.contains("spill_limit (--spill-limit)"),
            "{explained}"
        );
        assert!(
            !explained.contains("max_temp_directory_size"),
            "{explained}"
        );
        assert!(
            explain_spill_error("Memory Exhausted while x (DiskManager is disabled)".into())
                .ends_with("(spilling is off: spill_limit is 0)")
        );
    }
}
