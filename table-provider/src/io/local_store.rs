//! Local files, with existence checks and small whole-file reads done in place.
//!
//! object_store's `LocalFileSystem` runs every file operation on tokio's blocking pool: a
//! version-hint read is an open on one pool thread, then a read on another, and each hand-off
//! wakes a parked thread and then the worker that waits for it. For a table load (a warm one is
//! the hint and the `HEAD` of the next metadata version, which every query of a cached plan
//! makes to see other writers' commits) those wake-ups cost more than the system calls: about
//! a dozen of the server's context switches per ADBC query of a `count(*)` answered from the
//! manifests, three times what a `SELECT 1` makes (`docs/benchmarks.md`).
//!
//! [`InlineLocalStore`] therefore answers, on the calling task, the requests that are a few
//! system calls on the page cache: a `HEAD` (open and `fstat`, exactly as `LocalFileSystem`
//! does it, with the same `ETag`), and a whole-file `GET` of a file of at most
//! [`INLINE_READ_BYTES`] (version hints, small metadata files).
//!
//! Ranged reads of data files (`get_ranges`, how the Parquet reader fetches column chunks)
//! still run on the blocking pool, but each range is read into a buffer the read itself fills:
//! `LocalFileSystem` zeroes every buffer before reading into it, a `memset` of every byte a
//! scan reads (~4 ms of CPU in the first query of the bench's `eq` table, `docs/benchmarks.md`).
//!
//! Everything else — larger whole files, single ranged `GET`s, versioned reads, writes,
//! listings — goes to `LocalFileSystem` as before. Errors are the ones `LocalFileSystem` gives:
//! `NotFound` (a directory counts as not found), else `Generic` from the store
//! `LocalFileSystem`, naming the file.

use std::fmt;
use std::fs::{File, Metadata};
use std::io::{ErrorKind, Read, Seek, SeekFrom};
use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use object_store::local::LocalFileSystem;
use object_store::path::Path;
use object_store::{
    Attributes, CopyOptions, GetOptions, GetResult, GetResultPayload, ListResult, MultipartUpload,
    ObjectMeta, ObjectStore, PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// Whole-file reads up to this size are done in place; larger ones on the blocking pool.
pub(super) const INLINE_READ_BYTES: u64 = 64 * 1024;

/// `LocalFileSystem`, with `HEAD`s and small whole-file `GET`s answered in place.
pub(super) struct InlineLocalStore {
    inner: Arc<LocalFileSystem>,
}

impl InlineLocalStore {
    /// The local filesystem, paths from its root.
    pub(super) fn new() -> Self {
        Self {
            inner: Arc::new(LocalFileSystem::new()),
        }
    }

    /// The `HEAD` or whole-file `GET` `options` asks for, done in place; `None` when the
    /// request is not one of those (or the file is too large to read in place).
    fn in_place(
        &self,
        location: &Path,
        options: &GetOptions,
    ) -> Option<object_store::Result<GetResult>> {
        if options.range.is_some() || options.version.is_some() {
            return None;
        }
        let path = match self.inner.path_to_filesystem(location) {
            Ok(path) => path,
            Err(e) => return Some(Err(e)),
        };
        let opened = File::open(&path).and_then(|file| {
            let metadata = file.metadata()?;
            Ok((file, metadata))
        });
        let (mut file, metadata) = match opened {
            Ok((_, metadata)) if metadata.is_dir() => {
                return Some(Err(not_found(&path, "is directory".into())));
            }
            Ok(opened) => opened,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Some(Err(not_found(&path, e.into())));
            }
            Err(e) => return Some(Err(failed(&path, "open", e))),
        };
        if !options.head && metadata.len() > INLINE_READ_BYTES {
            return None;
        }
        let meta = object_meta(&metadata, location.clone());
        if let Err(e) = options.check_preconditions(&meta) {
            return Some(Err(e));
        }
        let size = meta.size;
        let bytes = if options.head {
            Bytes::new()
        } else {
            // At most the size the `fstat` gave, as `LocalFileSystem` reads: a file appended
            // to meanwhile is read as it was (one cut shorter is read as it is now).
            let mut buffer = Vec::with_capacity(size as usize);
            if let Err(e) = (&mut file).take(size).read_to_end(&mut buffer) {
                return Some(Err(failed(&path, "read", e)));
            }
            Bytes::from(buffer)
        };
        let range = if options.head {
            0..size
        } else {
            0..bytes.len() as u64
        };
        let payload =
            GetResultPayload::Stream(Box::pin(futures::stream::once(async move { Ok(bytes) })));
        Some(Ok(GetResult {
            payload,
            meta,
            range,
            attributes: Attributes::default(),
        }))
    }
}

/// `ranges` of the file at `path`, each read into a buffer of its length that the read fills
/// (no zeroing first). A range past the end of the file is an error naming the file, as in
/// `LocalFileSystem`.
fn read_ranges(path: &std::path::Path, ranges: &[Range<u64>]) -> object_store::Result<Vec<Bytes>> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == ErrorKind::NotFound => return Err(not_found(path, e.into())),
        Err(e) => return Err(failed(path, "open", e)),
    };
    ranges
        .iter()
        .map(|range| {
            let Some(wanted) = range.end.checked_sub(range.start) else {
                return Err(short(path, range, "the range ends before it starts"));
            };
            let mut buffer = Vec::with_capacity(wanted as usize);
            file.seek(SeekFrom::Start(range.start))
                .map_err(|e| failed(path, "seek in", e))?;
            (&mut file)
                .take(wanted)
                .read_to_end(&mut buffer)
                .map_err(|e| failed(path, "read", e))?;
            if (buffer.len() as u64) < wanted {
                let size = range.start + buffer.len() as u64;
                return Err(short(path, range, &format!("the file ends at byte {size}")));
            }
            Ok(Bytes::from(buffer))
        })
        .collect()
}

/// The error for a range of `path` that cannot be read whole.
fn short(path: &std::path::Path, range: &Range<u64>, why: &str) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!(
            "cannot read bytes {}..{} of {}: {why}",
            range.start,
            range.end,
            path.display()
        )
        .into(),
    }
}

/// `LocalFileSystem`'s description of a file (its `ETag` scheme: inode, modification time in
/// microseconds and size, in hexadecimal), so that a conditional request compares alike
/// whichever path answered.
fn object_meta(metadata: &Metadata, location: Path) -> ObjectMeta {
    let modified = metadata.modified().unwrap_or(SystemTime::UNIX_EPOCH);
    let inode = std::os::unix::fs::MetadataExt::ino(metadata);
    let micros = modified
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    let size = metadata.len();
    ObjectMeta {
        location,
        last_modified: modified.into(),
        size,
        e_tag: Some(format!("{inode:x}-{micros:x}-{size:x}")),
        version: None,
    }
}

/// `LocalFileSystem`'s error for a missing file (or a directory), naming the file.
fn not_found(
    path: &std::path::Path,
    source: Box<dyn std::error::Error + Send + Sync>,
) -> object_store::Error {
    object_store::Error::NotFound {
        path: path.to_string_lossy().to_string(),
        source,
    }
}

/// Any other failure, as `LocalFileSystem` reports it: a `Generic` error of that store naming
/// the file and the operation.
fn failed(path: &std::path::Path, operation: &str, e: std::io::Error) -> object_store::Error {
    object_store::Error::Generic {
        store: "LocalFileSystem",
        source: format!("cannot {operation} {}: {e}", path.display()).into(),
    }
}

impl fmt::Debug for InlineLocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl fmt::Display for InlineLocalStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.inner, f)
    }
}

#[async_trait]
impl ObjectStore for InlineLocalStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        self.inner.put_opts(location, payload, opts).await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        match self.in_place(location, &options) {
            Some(answer) => answer,
            None => self.inner.get_opts(location, options).await,
        }
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let path = self.inner.path_to_filesystem(location)?;
        let ranges = ranges.to_vec();
        tokio::task::spawn_blocking(move || read_ranges(&path, &ranges)).await?
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        self.inner.delete_stream(locations)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list(prefix)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        self.inner.list_with_offset(prefix, offset)
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        self.inner.rename_opts(from, to, options).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::ObjectStoreExt;

    fn location(path: &std::path::Path) -> Path {
        Path::from(path.to_str().expect("utf-8 path"))
    }

    /// Every answer in place equals `LocalFileSystem`'s: metadata (with the `ETag`), bytes,
    /// and the kind of error for a missing file and a directory; conditional reads compare
    /// the same `ETag`s; large files and ranges go to `LocalFileSystem`.
    #[tokio::test]
    async fn answers_in_place_as_the_local_file_system_does() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let small = dir.path().join("version-hint.text");
        let large = dir.path().join("large.bin");
        std::fs::write(&small, b"7\n").expect("write");
        let large_bytes: Vec<u8> = (0..INLINE_READ_BYTES as usize + 10)
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&large, &large_bytes).expect("write");
        let ours = InlineLocalStore::new();
        let theirs = LocalFileSystem::new();

        for (file, bytes) in [(&small, &b"7\n"[..]), (&large, &large_bytes[..])] {
            let at = location(file);
            let (a, b) = (ours.head(&at).await, theirs.head(&at).await);
            assert_eq!(a.expect("head"), b.expect("head"));
            let got = ours.get(&at).await.expect("get");
            let meta = got.meta.clone();
            assert_eq!(meta, theirs.head(&at).await.expect("head"));
            assert_eq!(got.bytes().await.expect("bytes"), bytes);
            let ranged = ours.get_range(&at, 1..2).await.expect("range");
            assert_eq!(ranged, bytes[1..2]);

            let matching = GetOptions::new().with_if_match(meta.e_tag.clone());
            let read = ours.get_opts(&at, matching).await.expect("if-match");
            assert_eq!(read.bytes().await.expect("bytes"), bytes);
            let other = GetOptions::new().with_if_match(Some("0-0-0"));
            let refused = ours.get_opts(&at, other).await.map(|_| ());
            assert!(
                matches!(refused, Err(object_store::Error::Precondition { .. })),
                "{refused:?}"
            );
        }

        for missing in [dir.path().join("absent.json"), dir.path().to_path_buf()] {
            let at = location(&missing);
            let (a, b) = (ours.head(&at).await, theirs.head(&at).await);
            assert!(
                matches!(a, Err(object_store::Error::NotFound { .. })),
                "{a:?}"
            );
            assert!(
                matches!(b, Err(object_store::Error::NotFound { .. })),
                "{b:?}"
            );
            let got = ours.get(&at).await.map(|_| ());
            assert!(
                matches!(got, Err(object_store::Error::NotFound { .. })),
                "{got:?}"
            );
        }
    }

    /// `HEAD`s and small reads need no blocking-pool thread: with the pool's only thread held,
    /// they still answer (`LocalFileSystem` would wait for the thread), and a large file is
    /// read by the pool once its thread is free.
    #[test]
    fn small_requests_do_not_wait_for_the_blocking_pool() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .max_blocking_threads(1)
            .enable_time()
            .build()
            .expect("runtime");
        let dir = tempfile::TempDir::new().expect("tempdir");
        let (small, large) = (dir.path().join("hint"), dir.path().join("large"));
        std::fs::write(&small, b"3").expect("write");
        std::fs::write(&large, vec![1u8; INLINE_READ_BYTES as usize + 1]).expect("write");
        let (release, held) = std::sync::mpsc::channel::<()>();
        runtime.block_on(async {
            let holder = tokio::task::spawn_blocking(move || held.recv());
            let ours = InlineLocalStore::new();
            let soon = std::time::Duration::from_secs(2);
            let head = tokio::time::timeout(soon, ours.head(&location(&small))).await;
            assert_eq!(head.expect("in place").expect("head").size, 1);
            let read = tokio::time::timeout(soon, async {
                ours.get(&location(&small)).await?.bytes().await
            })
            .await;
            assert_eq!(read.expect("in place").expect("get"), &b"3"[..]);
            let pooled = tokio::time::timeout(
                std::time::Duration::from_millis(200),
                ours.get(&location(&large)),
            )
            .await;
            assert!(pooled.is_err(), "a large file is read on the blocking pool");
            release.send(()).expect("release");
            holder.await.expect("holder").expect("released");
            let read = ours.get(&location(&large)).await.expect("get");
            assert_eq!(
                read.bytes().await.expect("bytes").len() as u64,
                INLINE_READ_BYTES + 1
            );
        });
    }

    /// Ranged reads give `LocalFileSystem`'s bytes for every range (empty ones, the last byte,
    /// a whole file), and a clear error naming the file for a range past its end, a reversed
    /// range and a missing file.
    #[tokio::test]
    async fn ranges_are_read_as_the_local_file_system_reads_them() {
        let dir = tempfile::TempDir::new().expect("tempdir");
        let file = dir.path().join("data.parquet");
        let bytes: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&file, &bytes).expect("write");
        let (ours, theirs) = (InlineLocalStore::new(), LocalFileSystem::new());
        let at = location(&file);
        let ranges = [0..0, 0..1, 7..70_007, 299_999..300_000, 0..300_000, 5..5];
        let got = ours.get_ranges(&at, &ranges).await.expect("ranges");
        assert_eq!(got, theirs.get_ranges(&at, &ranges).await.expect("ranges"));
        for (range, read) in ranges.iter().zip(&got) {
            assert_eq!(read, &bytes[range.start as usize..range.end as usize]);
        }

        let past = ours.get_ranges(&at, &[10..20, 299_990..300_010]).await;
        let message = past.expect_err("past the end").to_string();
        assert!(
            message.contains("299990..300010") && message.contains("data.parquet"),
            "{message}"
        );
        #[allow(clippy::reversed_empty_ranges)]
        let reversed = ours.get_ranges(&at, &[0..1, 20..10]).await;
        assert!(reversed.is_err(), "{reversed:?}");
        let missing = ours
            .get_ranges(&location(&dir.path().join("gone.parquet")), &[0..1, 1..2])
            .await;
        assert!(
            matches!(missing, Err(object_store::Error::NotFound { .. })),
            "{missing:?}"
        );
    }
}
