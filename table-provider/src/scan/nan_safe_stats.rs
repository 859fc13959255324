//! Float statistics that are sound bounds for DataFusion's pruning.
//!
//! DataFusion orders floats totally (NaN above every number, `NaN = NaN`), and its Parquet
//! pruning reads a column chunk's min/max (and a page's, in the page index, and the bloom
//! filter for `=`) as bounds over *every* value. Parquet writers that follow the format — pyarrow
//! and so PyIceberg, arrow-rs — leave NaN out of float min/max, so a chunk holding NaN looks
//! like it holds none, and any predicate that NaN satisfies (`f = 'NaN'`, `f > 1e300`,
//! `f <> 1`, `NOT (f < 5)`) skips rows that match. (parquet-mr, behind Spark and Iceberg Java,
//! drops the statistics of a chunk that holds NaN; writers differ, so no writer is trusted.)
//!
//! Before a footer reaches the pruner, [`nan_safe_metadata`] removes min/max, the page index and
//! the bloom filter of each float column that *might* hold NaN, keeping its null counts. What
//! it keeps comes from Iceberg: a data file's `nan_value_counts` of 0 for a column means no NaN
//! anywhere in the file, and its statistics are then bounds. Everything else (a NaN count above
//! 0, no count, a column without a field id) is treated as "might hold NaN".
//!
//! Upstream: DataFusion's `PruningPredicate` has no notion of NaN-excluding float statistics
//! (the Parquet format's rule since PARQUET-1222, and its proposed `nan_count`); until it does,
//! Petrel hides such statistics from it.

use std::collections::HashMap;
use std::sync::Arc;

use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::page_index::column_index::ColumnIndexMetaData;
use parquet::file::statistics::Statistics;

use super::footer_rewrite::{FooterRewrite, FooterRewritingReaderFactory};

/// Per data file (by object path), the float columns (Iceberg field ids) known to hold no NaN.
#[derive(Debug, Default)]
pub(crate) struct NanFreeColumns {
    by_file: HashMap<String, Vec<i32>>,
}

impl NanFreeColumns {
    /// Records that `field_ids` of the file at `object_path` hold no NaN.
    pub(crate) fn insert(&mut self, object_path: String, field_ids: Vec<i32>) {
        if !field_ids.is_empty() {
            self.by_file.insert(object_path, field_ids);
        }
    }

    /// Whether column `field_id` of the file at `object_path` is known to hold no NaN.
    pub(crate) fn is_nan_free(&self, object_path: &str, field_id: Option<i32>) -> bool {
        match (self.by_file.get(object_path), field_id) {
            (Some(ids), Some(id)) => ids.contains(&id),
            _ => false,
        }
    }
}

/// `metadata` without min/max, page index or bloom filter for each float column that might
/// hold NaN (`nan_free(field_id)` false); the same `Arc` when there is none.
pub(crate) fn nan_safe_metadata(
    metadata: Arc<ParquetMetaData>,
    nan_free: impl Fn(Option<i32>) -> bool,
) -> Arc<ParquetMetaData> {
    let schema = metadata.file_metadata().schema_descr();
    let unsafe_columns: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| {
            let column = schema.column(i);
            let float = matches!(
                column.physical_type(),
                PhysicalType::FLOAT | PhysicalType::DOUBLE
            );
            let info = column.self_type().get_basic_info();
            float && !nan_free(info.has_id().then(|| info.id()))
        })
        .collect();
    if unsafe_columns.is_empty() {
        return metadata;
    }

    let mut row_groups = Vec::with_capacity(metadata.num_row_groups());
    for group in metadata.row_groups() {
        let mut columns = group.columns().to_vec();
        for &i in &unsafe_columns {
            let chunk = columns[i].clone();
            let builder = chunk.clone().into_builder();
            let builder = match chunk.statistics().map(without_min_max) {
                Some(stats) => builder.set_statistics(stats),
                None => builder,
            };
            match builder
                .set_bloom_filter_offset(None)
                .set_bloom_filter_length(None)
                .build()
            {
                Ok(chunk) => columns[i] = chunk,
                // Cannot happen for a chunk that was valid; never keep unsafe bounds.
                Err(_) => return without_any_statistics(&metadata),
            }
        }
        match group
            .clone()
            .into_builder()
            .set_column_metadata(columns)
            .build()
        {
            Ok(group) => row_groups.push(group),
            Err(_) => return without_any_statistics(&metadata),
        }
    }
    let column_index = metadata.column_index().map(|index| {
        index
            .iter()
            .map(|per_group| {
                let mut per_group = per_group.clone();
                for &i in &unsafe_columns {
                    if let Some(entry) = per_group.get_mut(i) {
                        *entry = ColumnIndexMetaData::NONE;
                    }
                }
                per_group
            })
            .collect()
    });
    Arc::new(
        metadata
            .as_ref()
            .clone()
            .into_builder()
            .set_row_groups(row_groups)
            .set_column_index(column_index)
            .build(),
    )
}

/// The same statistics without min and max (null and distinct counts stay).
fn without_min_max(stats: &Statistics) -> Statistics {
    let (distinct, nulls) = (stats.distinct_count_opt(), stats.null_count_opt());
    match stats {
        Statistics::Float(_) => Statistics::float(None, None, distinct, nulls, false),
        Statistics::Double(_) => Statistics::double(None, None, distinct, nulls, false),
        other => other.clone(),
    }
}

/// The fallback when a footer cannot be rebuilt: no statistics, no page index, for any column.
fn without_any_statistics(metadata: &ParquetMetaData) -> Arc<ParquetMetaData> {
    let row_groups = metadata
        .row_groups()
        .iter()
        .map(|group| {
            let columns = group
                .columns()
                .iter()
                .map(|c| {
                    c.clone()
                        .into_builder()
                        .clear_statistics()
                        .set_bloom_filter_offset(None)
                        .build()
                        .unwrap_or_else(|_| c.clone())
                })
                .collect();
            group
                .clone()
                .into_builder()
                .set_column_metadata(columns)
                .build()
                .unwrap_or_else(|_| group.clone())
        })
        .collect();
    Arc::new(
        metadata
            .clone()
            .into_builder()
            .set_row_groups(row_groups)
            .set_column_index(None)
            .build(),
    )
}

impl FooterRewrite for NanFreeColumns {
    fn rewrite(&self, object_path: &str, footer: Arc<ParquetMetaData>) -> Arc<ParquetMetaData> {
        nan_safe_metadata(footer, |id| self.is_nan_free(object_path, id))
    }
}

/// A reader factory handing the Parquet opener NaN-safe footers (see the module docs).
pub(crate) type NanSafeReaderFactory = FooterRewritingReaderFactory<NanFreeColumns>;

#[cfg(test)]
mod tests {
    use std::collections::HashMap as Map;

    use arrow::array::{Float64Array, Int64Array, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema};
    use bytes::Bytes;
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::PARQUET_FIELD_ID_META_KEY;
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    use parquet::file::metadata::PageIndexPolicy;
    use parquet::file::properties::{EnabledStatistics, WriterProperties};

    use super::*;

    /// A file whose column `f` (field id 2) holds NaN next to 1.0..=3.0, written by arrow-rs
    /// (which, like pyarrow, leaves NaN out of min/max), with page statistics and a bloom
    /// filter; `id` (field id 1) is an integer column.
    fn footer() -> Arc<ParquetMetaData> {
        let field = |name: &str, t: DataType, id: &str| {
            Field::new(name, t, true).with_metadata(Map::from([(
                PARQUET_FIELD_ID_META_KEY.to_string(),
                id.to_string(),
            )]))
        };
        let schema = Arc::new(Schema::new(vec![
            field("id", DataType::Int64, "1"),
            field("f", DataType::Float64, "2"),
        ]));
        let batch = RecordBatch::try_new(
            Arc::clone(&schema),
            vec![
                Arc::new(Int64Array::from(vec![1, 2, 3, 4, 5])),
                Arc::new(Float64Array::from(vec![
                    Some(1.0),
                    Some(f64::NAN),
                    None,
                    Some(3.0),
                    Some(2.0),
                ])),
            ],
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_bloom_filter_enabled(true)
            .build();
        let mut buffer = Vec::new();
        let mut writer = ArrowWriter::try_new(&mut buffer, schema, Some(props)).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Required);
        let metadata = ArrowReaderMetadata::load(&Bytes::from(buffer), options).unwrap();
        Arc::clone(metadata.metadata())
    }

    fn min_max(metadata: &ParquetMetaData, column: usize) -> (bool, Option<u64>) {
        let stats = metadata.row_group(0).column(column).statistics().unwrap();
        (stats.min_bytes_opt().is_some(), stats.null_count_opt())
    }

    #[test]
    fn writers_leave_nan_out_of_float_min_max() {
        // The premise of the module: max is 3.0 although NaN is there.
        let metadata = footer();
        match metadata.row_group(0).column(1).statistics().unwrap() {
            Statistics::Double(s) => {
                assert_eq!((s.min_opt(), s.max_opt()), (Some(&1.0), Some(&3.0)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn float_columns_that_may_hold_nan_lose_min_max_page_index_and_bloom_filter() {
        let original = footer();
        assert!(
            original
                .row_group(0)
                .column(1)
                .bloom_filter_offset()
                .is_some()
        );
        let safe = nan_safe_metadata(Arc::clone(&original), |_| false);
        // Float column: no min/max, null count kept, no page bounds, no bloom filter.
        assert_eq!(min_max(&safe, 1), (false, Some(1)));
        assert!(safe.row_group(0).column(1).bloom_filter_offset().is_none());
        assert!(matches!(
            safe.column_index().unwrap()[0][1],
            ColumnIndexMetaData::NONE
        ));
        // Other columns untouched.
        assert_eq!(min_max(&safe, 0), (true, Some(0)));
        assert!(matches!(
            safe.column_index().unwrap()[0][0],
            ColumnIndexMetaData::INT64(_)
        ));
        assert_eq!(
            safe.row_group(0).column(0).bloom_filter_offset(),
            original.row_group(0).column(0).bloom_filter_offset()
        );
    }

    #[test]
    fn columns_known_nan_free_keep_their_statistics() {
        let original = footer();
        let mut known = NanFreeColumns::default();
        known.insert("data/a.parquet".into(), vec![2]);
        let safe = nan_safe_metadata(Arc::clone(&original), |id| {
            known.is_nan_free("data/a.parquet", id)
        });
        assert!(Arc::ptr_eq(&safe, &original));
        // Another file, or a column without a field id, is not known.
        assert!(!known.is_nan_free("data/b.parquet", Some(2)));
        assert!(!known.is_nan_free("data/a.parquet", None));
    }
}
