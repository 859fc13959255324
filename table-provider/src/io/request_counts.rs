//! Counts the requests Petrel sends to its object stores: a wrapper [`ObjectStore`] around
//! every store the [`super::StoreRegistry`] hands out, adding to process-wide counters by
//! operation (GET, HEAD, LIST, PUT, DELETE, COPY).
//!
//! On an object store each request costs a round trip (tens of milliseconds), so the counts
//! say what a query costs there; the server exports them
//! (`petrel_object_store_requests_total{store,operation}`), and a benchmark takes the
//! difference around one query. A ranged read of several byte ranges counts the requests the
//! store makes after coalescing nearby ranges (object_store's rule: gaps under 1 MiB merge).

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, OBJECT_STORE_COALESCE_DEFAULT,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// Which store kind a count is for: local files or a remote object store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountedStore {
    /// `file://`: system calls, not network requests.
    Local,
    /// S3, GCS, Azure.
    Remote,
}

/// Requests by operation, at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestCounts {
    /// Object reads, whole or ranged (each coalesced range one request).
    pub get: u64,
    /// Metadata reads (existence checks).
    pub head: u64,
    /// Listings (one per call; a store may page a long listing in several requests).
    pub list: u64,
    /// Object writes (single puts, and each multipart upload once).
    pub put: u64,
    /// Deletes.
    pub delete: u64,
    /// Server-side copies and renames.
    pub copy: u64,
}

impl RequestCounts {
    /// All requests.
    pub fn total(&self) -> u64 {
        self.get + self.head + self.list + self.put + self.delete + self.copy
    }

    /// `(operation name, count)` pairs, for exposition.
    pub fn by_operation(&self) -> [(&'static str, u64); 6] {
        [
            ("get", self.get),
            ("head", self.head),
            ("list", self.list),
            ("put", self.put),
            ("delete", self.delete),
            ("copy", self.copy),
        ]
    }

    /// The requests made between `earlier` and `self`.
    pub fn since(&self, earlier: &RequestCounts) -> RequestCounts {
        RequestCounts {
            get: self.get.saturating_sub(earlier.get),
            head: self.head.saturating_sub(earlier.head),
            list: self.list.saturating_sub(earlier.list),
            put: self.put.saturating_sub(earlier.put),
            delete: self.delete.saturating_sub(earlier.delete),
            copy: self.copy.saturating_sub(earlier.copy),
        }
    }
}

#[derive(Default)]
struct Counters([AtomicU64; 6]);

const GET: usize = 0;
const HEAD: usize = 1;
const LIST: usize = 2;
const PUT: usize = 3;
const DELETE: usize = 4;
const COPY: usize = 5;

impl Counters {
    fn add(&self, op: usize, n: u64) {
        self.0[op].fetch_add(n, Ordering::Relaxed);
    }

    fn snapshot(&self) -> RequestCounts {
        let at = |i: usize| self.0[i].load(Ordering::Relaxed);
        RequestCounts {
            get: at(GET),
            head: at(HEAD),
            list: at(LIST),
            put: at(PUT),
            delete: at(DELETE),
            copy: at(COPY),
        }
    }
}

static LOCAL: Counters = Counters([const { AtomicU64::new(0) }; 6]);
static REMOTE: Counters = Counters([const { AtomicU64::new(0) }; 6]);

/// The requests sent to stores of `kind` by this process so far.
pub fn object_store_requests(kind: CountedStore) -> RequestCounts {
    match kind {
        CountedStore::Local => LOCAL.snapshot(),
        CountedStore::Remote => REMOTE.snapshot(),
    }
}

/// A store whose requests are counted.
pub(super) struct CountingStore {
    inner: Arc<dyn ObjectStore>,
    counters: &'static Counters,
}

impl CountingStore {
    /// Counts the requests sent to `inner` as requests to a store of `kind`.
    pub(super) fn wrap(inner: Arc<dyn ObjectStore>, kind: CountedStore) -> Arc<dyn ObjectStore> {
        let counters = match kind {
            CountedStore::Local => &LOCAL,
            CountedStore::Remote => &REMOTE,
        };
        Arc::new(Self { inner, counters })
    }
}

impl fmt::Debug for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Counting({:?})", self.inner)
    }
}

impl fmt::Display for CountingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

/// How many requests object_store's range coalescing makes of `ranges`.
fn coalesced_requests(ranges: &[Range<u64>]) -> u64 {
    let mut sorted: Vec<&Range<u64>> = ranges.iter().collect();
    sorted.sort_by_key(|r| r.start);
    let mut requests = 0;
    let mut end: Option<u64> = None;
    for range in sorted {
        match end {
            Some(e) if range.start <= e.saturating_add(OBJECT_STORE_COALESCE_DEFAULT) => {
                end = Some(e.max(range.end));
            }
            _ => {
                requests += 1;
                end = Some(range.end);
            }
        }
    }
    requests
}

#[async_trait]
impl ObjectStore for CountingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.counters.add(PUT, 1);
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.counters.add(PUT, 1);
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        self.counters.add(if options.head { HEAD } else { GET }, 1);
        self.inner.get_opts(location, options).await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        self.counters.add(GET, coalesced_requests(ranges));
        self.inner.get_ranges(location, ranges).await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let counters = self.counters;
        let counted = locations.inspect(move |_| counters.add(DELETE, 1)).boxed();
        self.inner.delete_stream(counted)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counters.add(LIST, 1);
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.counters.add(LIST, 1);
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.counters.add(LIST, 1);
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.counters.add(COPY, 1);
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.counters.add(COPY, 1);
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearby_ranges_count_as_one_request() {
        let mib = 1024 * 1024;
        assert_eq!(coalesced_requests(&[]), 0);
        assert_eq!(coalesced_requests(&[0..10, 20..30, 100..200]), 1);
        assert_eq!(coalesced_requests(&[0..10, 3 * mib..3 * mib + 1]), 2);
        assert_eq!(
            coalesced_requests(&[3 * mib..3 * mib + 1, 0..10, 5..2 * mib]),
            1
        );
    }
}
