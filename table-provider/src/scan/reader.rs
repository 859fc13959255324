//! Parquet readers for scans: DataFusion's cached reader factory (footers and page indexes
//! reused across queries through the runtime's file-metadata cache), with every read error
//! naming the data file it came from; [`partitioned_file`], how a data file's object path
//! reaches DataFusion unchanged; and [`files_only`], a scan narrowed to some of its files.

use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::Result as DFResult;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfig, ParquetFileReaderFactory};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;
use object_store::ObjectMeta;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;

/// A file for DataFusion's scan at exactly `path`.
///
/// `PartitionedFile::new` takes a string and re-encodes it as object-store path parts (a `%`
/// becomes `%25`), which would name another file than the one the metadata wrote; Iceberg
/// locations are opaque (see [`crate::io::object_location`]), so the path goes in as it is.
pub(crate) fn partitioned_file(path: Path, size: u64) -> PartitionedFile {
    PartitionedFile::new_from_meta(ObjectMeta {
        location: path,
        last_modified: chrono::DateTime::UNIX_EPOCH,
        size,
        e_tag: None,
        version: None,
    })
}

/// The scan `config` over `files` only, as its one partition (a run of a partition's files,
/// or one file read alone).
pub(crate) fn files_only(config: &FileScanConfig, files: Vec<PartitionedFile>) -> FileScanConfig {
    let mut config = config.clone();
    config.file_groups = vec![FileGroup::new(files)];
    config
}

/// Wraps a reader factory so that errors say which data file failed, by its full location
/// (store and path: `s3://bucket/key`; a local file by its absolute path).
#[derive(Debug)]
pub struct NamedFileReaderFactory {
    inner: Arc<dyn ParquetFileReaderFactory>,
    /// What goes before a file's object path to name it: `s3://bucket/`, or `/` for the local
    /// file system (whose object paths are absolute paths without their leading `/`).
    prefix: String,
}

impl NamedFileReaderFactory {
    /// Wraps `inner`, which reads from the store of `store_url`.
    pub fn new(inner: Arc<dyn ParquetFileReaderFactory>, store_url: &ObjectStoreUrl) -> Self {
        let prefix = if *store_url == ObjectStoreUrl::local_filesystem() {
            "/".to_string()
        } else {
            let url = store_url.as_str();
            if url.ends_with('/') {
                url.to_string()
            } else {
                format!("{url}/")
            }
        };
        Self { inner, prefix }
    }
}

impl ParquetFileReaderFactory for NamedFileReaderFactory {
    fn create_reader(
        &self,
        partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DFResult<Box<dyn AsyncFileReader + Send>> {
        let path = format!("{}{}", self.prefix, partitioned_file.object_meta.location);
        let inner = self.inner.create_reader(
            partition_index,
            partitioned_file,
            metadata_size_hint,
            metrics,
        )?;
        Ok(Box::new(NamedFileReader { inner, path }))
    }
}

struct NamedFileReader {
    inner: Box<dyn AsyncFileReader + Send>,
    path: String,
}

impl NamedFileReader {
    fn name(path: &str, e: ParquetError) -> ParquetError {
        ParquetError::General(format!("data file {path}: {e}"))
    }
}

impl AsyncFileReader for NamedFileReader {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        let path = &self.path;
        self.inner
            .get_bytes(range)
            .map(move |r| r.map_err(|e| Self::name(path, e)))
            .boxed()
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        let path = &self.path;
        self.inner
            .get_byte_ranges(ranges)
            .map(move |r| r.map_err(|e| Self::name(path, e)))
            .boxed()
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let path = &self.path;
        self.inner
            .get_metadata(options)
            .map(move |r| r.map_err(|e| Self::name(path, e)))
            .boxed()
    }
}
