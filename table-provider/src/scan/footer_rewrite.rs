//! Parquet readers whose footers are rewritten before DataFusion's Parquet opener sees them.
//!
//! Two rewrites use this: struct columns narrowed to the leaves a query accesses
//! ([`super::LeafProjection`]) and float statistics hidden where NaN may hide
//! ([`super::NanFreeColumns`]). Bytes are read unchanged; only `get_metadata` differs.

use std::fmt::Debug;
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use datafusion::common::Result as DFResult;
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::FutureExt;
use futures::future::BoxFuture;
use parquet::arrow::arrow_reader::ArrowReaderOptions;
use parquet::arrow::async_reader::AsyncFileReader;
use parquet::file::metadata::ParquetMetaData;

/// A rewrite of a data file's footer.
pub trait FooterRewrite: Debug + Send + Sync + 'static {
    /// The footer of the file at `object_path` as the opener should see it.
    fn rewrite(&self, object_path: &str, footer: Arc<ParquetMetaData>) -> Arc<ParquetMetaData>;
}

/// Wraps a reader factory so that every footer its readers return goes through a rewrite.
#[derive(Debug)]
pub struct FooterRewritingReaderFactory<R> {
    inner: Arc<dyn ParquetFileReaderFactory>,
    rewrite: Arc<R>,
}

impl<R: FooterRewrite> FooterRewritingReaderFactory<R> {
    /// Rewrites the footers of `inner`'s readers with `rewrite`.
    pub fn new(inner: Arc<dyn ParquetFileReaderFactory>, rewrite: Arc<R>) -> Self {
        Self { inner, rewrite }
    }
}

impl<R: FooterRewrite> ParquetFileReaderFactory for FooterRewritingReaderFactory<R> {
    fn create_reader(
        &self,
        partition_index: usize,
        partitioned_file: PartitionedFile,
        metadata_size_hint: Option<usize>,
        metrics: &ExecutionPlanMetricsSet,
    ) -> DFResult<Box<dyn AsyncFileReader + Send>> {
        let path = partitioned_file.object_meta.location.to_string();
        let inner = self.inner.create_reader(
            partition_index,
            partitioned_file,
            metadata_size_hint,
            metrics,
        )?;
        Ok(Box::new(FooterRewritingReader {
            inner,
            path,
            rewrite: Arc::clone(&self.rewrite),
        }))
    }
}

struct FooterRewritingReader<R> {
    inner: Box<dyn AsyncFileReader + Send>,
    path: String,
    rewrite: Arc<R>,
}

impl<R: FooterRewrite> AsyncFileReader for FooterRewritingReader<R> {
    fn get_bytes(&mut self, range: Range<u64>) -> BoxFuture<'_, parquet::errors::Result<Bytes>> {
        self.inner.get_bytes(range)
    }

    fn get_byte_ranges(
        &mut self,
        ranges: Vec<Range<u64>>,
    ) -> BoxFuture<'_, parquet::errors::Result<Vec<Bytes>>> {
        self.inner.get_byte_ranges(ranges)
    }

    fn get_metadata<'a>(
        &'a mut self,
        options: Option<&'a ArrowReaderOptions>,
    ) -> BoxFuture<'a, parquet::errors::Result<Arc<ParquetMetaData>>> {
        let (path, rewrite) = (&self.path, &self.rewrite);
        self.inner
            .get_metadata(options)
            .map(move |footer| footer.map(|f| rewrite.rewrite(path, f)))
            .boxed()
    }
}
