//! Memory for queries: one server-wide pool that every query's memory comes from, with a limit
//! per query inside it.
//!
//! DataFusion gives each `RuntimeEnv` one `MemoryPool`. A pool per query bounds each query but
//! not their sum: sixteen queries at a 2 GiB limit each may take 32 GiB together. So the server
//! keeps one [`ServerMemory`] pool (sized by `memory_limit`) and hands each query a
//! [`QueryPool`] that counts what that query reserves, refuses growth past the query's limit,
//! and takes every byte from the shared pool as well, so the server's total stays bounded
//! whatever the number of queries. Parameter batches bound to statements are counted in the
//! same pool (`parameters`).
//!
//! Defaults come from the machine: the server pool is 60% of the memory the process may use
//! (the cgroup limit when there is one, else physical memory), and one query may use a quarter
//! of the server pool. An operator that cannot get memory fails its query with
//! RESOURCE_EXHAUSTED (spilling operators spill first); the server keeps serving.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::common::{Result, resources_datafusion_err};
use datafusion::execution::memory_pool::{
    GreedyMemoryPool, MemoryConsumer, MemoryLimit, MemoryPool, MemoryReservation,
};

/// Share of the machine's memory the server pool takes by default, in percent.
const DEFAULT_SERVER_SHARE_PERCENT: u64 = 60;
/// Share of the server pool one query may take by default: one in this many.
const DEFAULT_QUERY_FRACTION: usize = 4;
/// Server pool when the machine's memory cannot be read.
const FALLBACK_SERVER_BYTES: usize = 4 << 30;

/// The server-wide pool and the per-query limit.
#[derive(Debug, Clone)]
pub struct ServerMemory {
    shared: Arc<dyn MemoryPool>,
    server_limit: usize,
    query_limit: usize,
}

impl ServerMemory {
    /// A pool of `server_limit` bytes (default: from the machine) in which each query may use
    /// `query_limit` bytes (default: a quarter of the pool; never more than the pool).
    pub fn new(server_limit: Option<usize>, query_limit: Option<usize>) -> Self {
        let server_limit = server_limit.unwrap_or_else(default_server_limit);
        let query_limit = query_limit
            .unwrap_or(server_limit / DEFAULT_QUERY_FRACTION)
            .min(server_limit);
        Self {
            shared: Arc::new(GreedyMemoryPool::new(server_limit)),
            server_limit,
            query_limit,
        }
    }

    /// A new query's pool.
    pub fn query_pool(&self) -> Arc<dyn MemoryPool> {
        Arc::new(QueryPool {
            shared: Arc::clone(&self.shared),
            limit: self.query_limit,
            used: AtomicUsize::new(0),
        })
    }

    /// The server-wide pool (for memory that belongs to no query's plan, such as bound
    /// parameters).
    pub fn shared(&self) -> &Arc<dyn MemoryPool> {
        &self.shared
    }

    /// Reserves `bytes` for `what` in the server pool; RESOURCE_EXHAUSTED naming `what` when
    /// the pool cannot give them.
    pub fn reserve(&self, what: &str, bytes: usize) -> Result<MemoryReservation> {
        let reservation = MemoryConsumer::new(what.to_string()).register(&self.shared);
        reservation.try_grow(bytes)?;
        Ok(reservation)
    }

    /// The server pool's size in bytes.
    pub fn server_limit(&self) -> usize {
        self.server_limit
    }

    /// One query's limit in bytes.
    pub fn query_limit(&self) -> usize {
        self.query_limit
    }

    /// Bytes reserved now, all queries together.
    pub fn reserved(&self) -> usize {
        self.shared.reserved()
    }
}

/// One query's pool: its own limit, its bytes taken from the server pool.
#[derive(Debug)]
pub struct QueryPool {
    shared: Arc<dyn MemoryPool>,
    limit: usize,
    used: AtomicUsize,
}

impl MemoryPool for QueryPool {
    fn register(&self, consumer: &MemoryConsumer) {
        self.shared.register(consumer);
    }

    fn unregister(&self, consumer: &MemoryConsumer) {
        self.shared.unregister(consumer);
    }

    fn grow(&self, reservation: &MemoryReservation, additional: usize) {
        self.used.fetch_add(additional, Ordering::Relaxed);
        self.shared.grow(reservation, additional);
    }

    fn shrink(&self, reservation: &MemoryReservation, shrink: usize) {
        self.used.fetch_sub(shrink, Ordering::Relaxed);
        self.shared.shrink(reservation, shrink);
    }

    fn try_grow(&self, reservation: &MemoryReservation, additional: usize) -> Result<()> {
        self.used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |used| {
                let new_used = used.checked_add(additional)?;
                (new_used <= self.limit).then_some(new_used)
            })
            .map_err(|used| {
                resources_datafusion_err!(
                    "the query's memory limit of {} bytes is reached: {} needs {additional} \
                     more bytes with {used} in use (raise query_memory_limit, or make the \
                     query smaller)",
                    self.limit,
                    reservation.consumer().name()
                )
            })?;
        if let Err(e) = self.shared.try_grow(reservation, additional) {
            self.used.fetch_sub(additional, Ordering::Relaxed);
            return Err(resources_datafusion_err!(
                "the server's memory (memory_limit) is in use by other queries: {e}"
            ));
        }
        Ok(())
    }

    fn reserved(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    fn memory_limit(&self) -> MemoryLimit {
        MemoryLimit::Finite(self.limit)
    }
}

/// The default server pool: a share of the memory this process may use.
fn default_server_limit() -> usize {
    match usable_memory() {
        Some(bytes) => usize::try_from(bytes / 100 * DEFAULT_SERVER_SHARE_PERCENT)
            .unwrap_or(FALLBACK_SERVER_BYTES),
        None => FALLBACK_SERVER_BYTES,
    }
}

/// The memory this process may use: the cgroup's limit when it sets one, else the machine's.
pub fn usable_memory() -> Option<u64> {
    let cgroup = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .filter_map(|path| std::fs::read_to_string(path).ok())
    .filter_map(|text| text.trim().parse::<u64>().ok())
    .min();
    let physical = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
                .map(|kib| kib * 1024)
        });
    match (cgroup, physical) {
        (Some(c), Some(p)) => Some(c.min(p)),
        (c, p) => c.or(p),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_is_bounded_by_its_limit_and_all_queries_by_the_server_pool() {
        let memory = ServerMemory::new(Some(1000), Some(600));
        let a = memory.query_pool();
        let b = memory.query_pool();
        let ra = MemoryConsumer::new("a").register(&a);
        let rb = MemoryConsumer::new("b").register(&b);
        ra.try_grow(600).expect("within a's limit");
        let err = ra.try_grow(1).expect_err("over a's limit");
        assert!(err.to_string().contains("query's memory limit"), "{err}");
        // b is within its own limit, but the server pool has only 400 left.
        let err = rb.try_grow(500).expect_err("over the server pool");
        assert!(err.to_string().contains("memory_limit"), "{err}");
        assert_eq!(b.reserved(), 0, "a refused growth is not counted");
        rb.try_grow(400).expect("what is left");
        assert_eq!(memory.reserved(), 1000);
        drop(ra);
        assert_eq!(
            memory.reserved(),
            400,
            "a query's memory returns to the pool"
        );
        assert_eq!(a.reserved(), 0);
    }

    #[test]
    fn defaults_follow_the_machine() {
        let memory = ServerMemory::new(None, None);
        let usable = usable_memory().expect("this machine's memory is readable");
        assert!(memory.server_limit() as u64 <= usable);
        assert!(memory.server_limit() as u64 >= usable / 2);
        assert_eq!(memory.query_limit(), memory.server_limit() / 4);
        // A query limit above the pool is capped at the pool.
        assert_eq!(ServerMemory::new(Some(10), Some(100)).query_limit(), 10);
    }
}
