//! The commit loop: optimistic concurrency with Iceberg's retry settings.
//!
//! Each attempt builds new metadata on the table as last loaded and asks the catalog to swap it
//! in atomically. A lost race (`Error::CommitConflict`) reloads the table, waits (exponential
//! backoff between `commit.retry.min-wait-ms` and `max-wait-ms`) and tries again, up to
//! `commit.retry.num-retries` times within `commit.retry.total-timeout-ms` (Java's defaults:
//! 4, 100 ms, 60 s, 30 min). An outcome the catalog cannot know (`Error::CommitStateUnknown`) is
//! never retried and nothing is cleaned up: the new metadata may be live. Any other failure, or
//! running out of retries, deletes what the commit wrote.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use iceberg::spec::MAIN_BRANCH;

use super::producer::{SnapshotChange, SnapshotProducer};
use crate::catalog::{Catalog, LoadedTable};
use crate::error::{Error, Result};

/// Iceberg's `commit.retry.*` table properties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt.
    pub num_retries: u32,
    /// First wait.
    pub min_wait: Duration,
    /// Longest wait.
    pub max_wait: Duration,
    /// No new attempt starts after this long.
    pub total_timeout: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            num_retries: 4,
            min_wait: Duration::from_millis(100),
            max_wait: Duration::from_secs(60),
            total_timeout: Duration::from_secs(30 * 60),
        }
    }
}

impl RetryPolicy {
    /// The policy a table's properties ask for (invalid values keep the default).
    pub fn from_properties(props: &HashMap<String, String>) -> Self {
        let default = Self::default();
        let number = |key: &str| props.get(key).and_then(|v| v.trim().parse::<u64>().ok());
        Self {
            num_retries: number("commit.retry.num-retries")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(default.num_retries),
            min_wait: number("commit.retry.min-wait-ms")
                .map_or(default.min_wait, Duration::from_millis),
            max_wait: number("commit.retry.max-wait-ms")
                .map_or(default.max_wait, Duration::from_millis),
            total_timeout: number("commit.retry.total-timeout-ms")
                .map_or(default.total_timeout, Duration::from_millis),
        }
    }

    /// Whether a lost race on attempt `attempt` (1-based) of a commit begun at `started` may
    /// be retried.
    pub(crate) fn may_retry(&self, attempt: u32, started: Instant) -> bool {
        attempt <= self.num_retries && started.elapsed() < self.total_timeout
    }

    /// The wait before retry number `retry` (1-based), with jitter so racing writers spread.
    pub(crate) fn wait(&self, retry: u32) -> Duration {
        let exp = self
            .min_wait
            .saturating_mul(2u32.saturating_pow(retry.saturating_sub(1)))
            .min(self.max_wait);
        let jitter = exp.mul_f64(0.1 * f64::from(uuid::Uuid::new_v4().as_u128() as u8) / 255.0);
        exp + jitter
    }
}

/// What a commit did.
#[derive(Debug)]
pub struct CommitOutcome {
    /// The table as committed.
    pub table: LoadedTable,
    /// The new snapshot.
    pub snapshot_id: i64,
    /// Attempts it took (1 when no other writer raced it).
    pub attempts: u32,
}

/// Commits `change` (new files written for `base`'s default spec) as one snapshot on `main`.
pub async fn commit_snapshot(
    catalog: &dyn Catalog,
    base: LoadedTable,
    change: SnapshotChange,
) -> Result<CommitOutcome> {
    commit_snapshot_to_branch(catalog, base, change, MAIN_BRANCH).await
}

/// Commits `change` as one snapshot on `branch` (`main` or another branch of the table).
pub async fn commit_snapshot_to_branch(
    catalog: &dyn Catalog,
    base: LoadedTable,
    change: SnapshotChange,
    branch: &str,
) -> Result<CommitOutcome> {
    let producer = SnapshotProducer::new(&base, change)
        .await?
        .on_branch(branch);
    commit_produced(catalog, base, producer).await
}

/// The commit loop: builds `producer`'s snapshot on the table as it is at each attempt and
/// swaps it in through `catalog`. A conflict reloads and retries within the table's
/// `commit.retry.*` budget; a commit whose outcome is unknown is returned at once, never
/// retried and never cleaned up; any other failure deletes what the attempts wrote.
pub(crate) async fn commit_produced(
    catalog: &dyn Catalog,
    base: LoadedTable,
    producer: SnapshotProducer,
) -> Result<CommitOutcome> {
    let policy = RetryPolicy::from_properties(base.metadata().properties());
    let started = Instant::now();
    let mut table = base;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let error = match producer.attempt(&table, attempt).await {
            Ok(built) => match catalog.commit_table(&table, built.metadata).await {
                Ok(committed) => {
                    return Ok(CommitOutcome {
                        table: committed,
                        snapshot_id: producer.snapshot_id(),
                        attempts: attempt,
                    });
                }
                Err(e) => {
                    if !matches!(e, Error::CommitStateUnknown { .. }) {
                        for location in &built.written {
                            let _ = table.io().delete(location).await;
                        }
                    }
                    e
                }
            },
            Err(e) => e,
        };
        if matches!(error, Error::CommitStateUnknown { .. }) {
            return Err(error);
        }
        let retry =
            matches!(error, Error::CommitConflict { .. }) && policy.may_retry(attempt, started);
        if !retry {
            for manifest in producer.manifest_paths() {
                let _ = table.io().delete(manifest).await;
            }
            return Err(error);
        }
        tokio::time::sleep(policy.wait(attempt)).await;
        table = catalog.load_table(table.ident()).await?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_settings_come_from_table_properties() {
        assert_eq!(
            RetryPolicy::from_properties(&HashMap::new()),
            RetryPolicy::default()
        );
        let props = HashMap::from([
            ("commit.retry.num-retries".to_string(), "10".to_string()),
            ("commit.retry.min-wait-ms".to_string(), "5".to_string()),
            ("commit.retry.max-wait-ms".to_string(), "nope".to_string()),
        ]);
        let policy = RetryPolicy::from_properties(&props);
        assert_eq!(policy.num_retries, 10);
        assert_eq!(policy.min_wait, Duration::from_millis(5));
        assert_eq!(policy.max_wait, Duration::from_secs(60));
        // Exponential, capped, with at most 10% jitter.
        let w = policy.wait(3);
        assert!(
            w >= Duration::from_millis(20) && w <= Duration::from_millis(22),
            "{w:?}"
        );
    }
}
