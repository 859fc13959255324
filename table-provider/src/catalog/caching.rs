//! A catalog that serves recently loaded tables from memory: the `table_cache_ms` setting.
//!
//! Every query loads the tables it reads, so that it sees every commit finished before it
//! started. On object storage or behind a REST catalog that load is a round trip or two (the
//! filesystem catalog's version hint, the REST catalog's `GET …/tables/t`) on every query, even
//! when nothing changed. [`CachingCatalog`] keeps each loaded table for a set time and answers
//! [`Catalog::load_table`] from memory within it, as Iceberg Java's `CachingCatalog`
//! (`cache.expiration-interval-ms`) does for Spark — except that an entry expires a set time
//! after it was *loaded*, never later, however often it is read (Java's expire after the last
//! access, so a busy table is never refreshed).
//!
//! What a reader may then miss: commits by *other* writers (Spark, another Petrel server) for at
//! most the set time. Commits through this catalog are never missed: a commit replaces the
//! entry with the table it committed, a conflict or a commit of unknown outcome drops it (so
//! the commit loop's reload asks the catalog), and creating or dropping a table does the same.
//! A load that began before a commit and ends after it does not put its older table back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use iceberg::spec::TableMetadata;

use super::{Catalog, LoadedTable, Namespace, TableIdent};
use crate::cache_stats::{CacheCounters, CacheStats};
use crate::error::Result;

/// The cache's name in [`CacheStats`] (`petrel_cache_*{cache="table"}`).
const TABLE_CACHE: &str = "table";

/// A table as loaded, and when the load that produced it began.
#[derive(Debug, Clone)]
struct Entry {
    since: Instant,
    table: LoadedTable,
}

/// A [`Catalog`] whose loaded tables are kept for `ttl` (see the module docs).
#[derive(Debug)]
pub struct CachingCatalog {
    inner: Arc<dyn Catalog>,
    ttl: Duration,
    entries: Mutex<HashMap<TableIdent, Entry>>,
    counters: CacheCounters,
}

impl CachingCatalog {
    /// Wraps `inner`, keeping each table it loads for `ttl`.
    pub fn new(inner: Arc<dyn Catalog>, ttl: Duration) -> Self {
        Self {
            inner,
            ttl,
            entries: Mutex::new(HashMap::new()),
            counters: CacheCounters::default(),
        }
    }

    fn with_entries<T>(&self, f: impl FnOnce(&mut HashMap<TableIdent, Entry>) -> T) -> T {
        // A panic while holding the lock leaves the map consistent (every change is one
        // insert or remove), so a poisoned lock is used as is.
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut entries)
    }

    fn fresh(&self, ident: &TableIdent) -> Option<LoadedTable> {
        self.with_entries(|entries| {
            let entry = entries.get(ident)?;
            if entry.since.elapsed() < self.ttl {
                Some(entry.table.clone())
            } else {
                entries.remove(ident);
                None
            }
        })
    }

    /// Remembers `table` as of `since`, unless the entry already holds a table known from
    /// later (a commit that finished while this load was running).
    fn remember(&self, since: Instant, table: &LoadedTable) {
        self.with_entries(|entries| {
            let newer = entries
                .get(table.ident())
                .is_some_and(|entry| entry.since > since);
            if !newer {
                entries.insert(
                    table.ident().clone(),
                    Entry {
                        since,
                        table: table.clone(),
                    },
                );
            }
        });
    }

    fn forget(&self, ident: &TableIdent) {
        self.with_entries(|entries| entries.remove(ident));
    }
}

#[async_trait]
impl Catalog for CachingCatalog {
    async fn list_namespaces(&self) -> Result<Vec<Namespace>> {
        self.inner.list_namespaces().await
    }

    async fn namespace_exists(&self, namespace: &Namespace) -> Result<bool> {
        self.inner.namespace_exists(namespace).await
    }

    async fn list_tables(&self, namespace: &Namespace) -> Result<Vec<TableIdent>> {
        self.inner.list_tables(namespace).await
    }

    async fn load_table(&self, ident: &TableIdent) -> Result<LoadedTable> {
        if let Some(table) = self.counters.observe(self.fresh(ident)) {
            return Ok(table);
        }
        let since = Instant::now();
        let table = self.inner.load_table(ident).await?;
        self.remember(since, &table);
        Ok(table)
    }

    async fn create_namespace(&self, namespace: &Namespace, if_not_exists: bool) -> Result<()> {
        self.inner.create_namespace(namespace, if_not_exists).await
    }

    async fn drop_namespace(&self, namespace: &Namespace) -> Result<()> {
        self.inner.drop_namespace(namespace).await
    }

    async fn default_table_location(&self, ident: &TableIdent) -> Result<String> {
        self.inner.default_table_location(ident).await
    }

    async fn create_table(
        &self,
        ident: &TableIdent,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        // A table of this name dropped elsewhere may still be remembered.
        self.forget(ident);
        let table = self.inner.create_table(ident, metadata).await?;
        self.remember(Instant::now(), &table);
        Ok(table)
    }

    async fn drop_table(&self, ident: &TableIdent, purge: bool) -> Result<()> {
        self.forget(ident);
        let dropped = self.inner.drop_table(ident, purge).await;
        // A load that ran beside the drop may have put the table back.
        self.forget(ident);
        dropped
    }

    async fn commit_table(
        &self,
        base: &LoadedTable,
        metadata: TableMetadata,
    ) -> Result<LoadedTable> {
        match self.inner.commit_table(base, metadata).await {
            Ok(committed) => {
                self.remember(Instant::now(), &committed);
                Ok(committed)
            }
            Err(error) => {
                // The base was not current (a conflict: the retry must see the table as it
                // is) or may no longer be (an unknown outcome, any other failure).
                self.forget(base.ident());
                Err(error)
            }
        }
    }

    fn cache_stats(&self) -> Vec<CacheStats> {
        let entries = self.with_entries(|entries| {
            entries.retain(|_, entry| entry.since.elapsed() < self.ttl);
            entries.len() as u64
        });
        vec![CacheStats {
            name: TABLE_CACHE,
            entries,
            // Loaded tables share their parsed metadata with the metadata cache: not counted.
            bytes: 0,
            capacity_bytes: 0,
            hits: self.counters.hits(),
            misses: self.counters.misses(),
        }]
    }
}
