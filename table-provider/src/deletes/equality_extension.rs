//! Equality-deleted positions extended by the groups a commit added.
//!
//! An upsert commits an equality group that applies to every older data file its metrics may
//! meet. Each of those files' list of groups changes, so the positions recorded for the old
//! list (`deletes::merge_on_read`) are no longer looked up, and the first query after the
//! commit read and probed the whole table again, every projected column of every file, as a
//! table's first query does.
//!
//! But a row deleted by a list of groups is a row deleted by one of them. A file's positions
//! for its new list are the positions last recorded for it (for a list the new one contains)
//! joined with the rows the groups added since then delete. So a scan that reads whole files
//! extends them while it is planned: for each file whose positions miss, it reads only the key
//! columns of the added groups, probes only their sets, and caches the joined positions under
//! the file's new list. The scan is then laid out as one whose equality deletes are all known as
//! positions: no key column is read, no set probed, and the files' columns come from the
//! decoded-column cache, their deleted rows masked. The key columns read are kept in the
//! decoded-column cache too ([`KeyColumns`]): the next commit's extension finds them decoded.
//!
//! A file's positions are extended only when fewer than `MIN_UNION_GROUPS` groups are added
//! (a file with nothing recorded counts all its groups), and a scan extends only when at least
//! one of its files has positions recorded: otherwise (a table's first query, files behind by
//! many commits) the scan records as before, probing while it reads (against the groups'
//! union when there are many).

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use arrow::array::{ArrayRef, new_null_array};
use arrow::buffer::BooleanBuffer;
use arrow::datatypes::DataType;
use datafusion::common::DataFusionError;
use datafusion::common::runtime::SpawnedTask;
use datafusion::datasource::physical_plan::ParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::execution::cache::cache_manager::FileMetadataCache;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool};
use datafusion::physical_plan::metrics::ExecutionPlanMetricsSet;
use futures::{StreamExt, TryStreamExt};
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
use parquet::arrow::async_reader::{ParquetObjectReader, ParquetRecordBatchStreamBuilder};
use roaring::RoaringTreemap;

use super::cache::{DeleteCache, EqualityPositionsKey, GroupEntry};
use super::equality::{EqualityDeleteSet, field_roots, read_roots};
use super::equality_union::MIN_UNION_GROUPS;
use super::merge_on_read::{EqualityGroup, FileDeletes, keyed_groups, load_equality_sets};
use crate::error::{Error, Result};
use crate::io::TableIo;
use crate::scan::{ColumnCache, ColumnSource, FileColumn, partitioned_file};

/// How many data files are extended at once.
const EXTEND_CONCURRENCY: usize = 8;

/// Rows per batch when a data file's key columns are read.
const KEY_BATCH_ROWS: usize = 64 * 1024;

/// What a scan's layout says about its equality deletes: its data files, its groups, each
/// group's cache identity and key columns (canonical type, and whether the scan schema has the
/// column).
pub(crate) struct EqualityLayout<'a> {
    pub(crate) files: &'a [FileDeletes],
    pub(crate) groups: &'a [EqualityGroup],
    /// Each group's entry in the data files' positions keys (`group_entries`).
    pub(crate) entries: &'a [GroupEntry],
    pub(crate) key_columns: &'a [Vec<(Option<usize>, DataType)>],
}

/// Where the key columns read to extend positions are kept, so that the next commit's
/// extension finds them decoded: the decoded-column cache, under the table's identity.
#[derive(Debug, Clone)]
pub(crate) struct KeyColumns {
    pub(crate) cache: ColumnCache,
    pub(crate) source: Arc<ColumnSource>,
}

/// One data file whose positions are extended.
struct Extension {
    /// The data file as the manifests name it, and its size.
    path: String,
    file_size: u64,
    /// Where the extended positions go.
    key: EqualityPositionsKey,
    /// The positions recorded before (`None`: nothing recorded, every group is probed).
    base: Option<Arc<RoaringTreemap>>,
    /// The groups to probe (indexes in the scan).
    added: Vec<usize>,
}

/// One group probed over a data file's key columns: its set, and per key column its field id,
/// canonical type and whether the scan schema has it (a column it lacks reads as null).
#[derive(Clone)]
struct GroupProbe {
    set: Arc<EqualityDeleteSet>,
    columns: Vec<(i32, DataType, bool)>,
}

/// What [`extend_equality_positions`] did.
#[derive(Debug, Default)]
pub(crate) struct Extended {
    /// Data files whose positions were extended (0: none, the scan records as before).
    pub(crate) files: usize,
    /// Of those, the files whose key columns came from the decoded-column cache.
    pub(crate) keys_cached: usize,
    /// The positions of every data file of the layout with equality deletes, by path as the
    /// manifests name it (found cached or extended), when all of them are known: the scan is
    /// laid out with them (as `cached_equality_positions` gives them), without looking them up
    /// again.
    pub(crate) positions: Option<HashMap<String, Arc<RoaringTreemap>>>,
}

/// What extending one data file gave: its path, its positions, whether its key columns came
/// from the decoded-column cache (`None`: the file cannot be extended).
type FileExtended = Option<(String, Arc<RoaringTreemap>, bool)>;

/// Extends the equality-deleted positions of the data files of `layout` whose positions are
/// not cached (module docs).
pub(crate) async fn extend_equality_positions(
    cache: &DeleteCache,
    io: &TableIo,
    table: &str,
    layout: EqualityLayout<'_>,
    footers: Arc<dyn FileMetadataCache>,
    kept: Option<KeyColumns>,
    pool: &Arc<dyn MemoryPool>,
) -> Result<Extended> {
    let Some((extensions, mut known)) = plan_extensions(cache, io, table, &layout)? else {
        return Ok(Extended::default());
    };
    let added: BTreeSet<usize> = extensions.iter().flat_map(|e| &e.added).copied().collect();
    let mut sets_of = Vec::with_capacity(added.len());
    for &g in &added {
        let (Some(group), Some(key)) = (
            layout.groups.get(g),
            layout.entries.get(g).map(|(key, _)| key),
        ) else {
            return Err(Error::InvalidArgument(format!(
                "table {table}: no equality group #{g}"
            )));
        };
        sets_of.push((group, key));
    }
    let loaded = load_equality_sets(cache, io, table, sets_of).await?;
    let reservation =
        MemoryConsumer::new(format!("IcebergEqualityExtension[{table}]")).register(pool);
    let bytes: usize = loaded.sets.iter().map(|s| s.memory_size()).sum();
    reservation.try_grow(bytes).map_err(|e| {
        Error::DataFusion(DataFusionError::ResourcesExhausted(format!(
            "table {table}: equality-delete keys of {} group(s) need {bytes} bytes, over the \
             query's memory limit ({e})",
            added.len()
        )))
    })?;
    let mut probes: HashMap<usize, GroupProbe> = HashMap::new();
    for (&g, set) in added.iter().zip(loaded.sets) {
        let (Some(group), Some(columns)) = (layout.groups.get(g), layout.key_columns.get(g)) else {
            return Err(Error::InvalidArgument(format!(
                "table {table}: no key columns for equality group #{g}"
            )));
        };
        let columns = group
            .field_ids
            .iter()
            .zip(columns)
            .map(|(id, (slot, ty))| (*id, ty.clone(), slot.is_some()))
            .collect();
        probes.insert(g, GroupProbe { set, columns });
    }
    let mut tasks = Vec::with_capacity(extensions.len());
    for extension in extensions {
        // Every added group is probed: one left out would leave its rows undeleted.
        let group_probes = extension
            .added
            .iter()
            .map(|g| probes.get(g).cloned())
            .collect::<Option<Vec<GroupProbe>>>()
            .ok_or_else(|| {
                Error::InvalidArgument(format!("table {table}: an added group has no set"))
            })?;
        let (io, table, footers, cache, kept) = (
            io.clone(),
            table.to_string(),
            Arc::clone(&footers),
            cache.clone(),
            kept.clone(),
        );
        tasks.push(async move {
            // Spawned: each file's key columns decode on whichever worker is free.
            let task = SpawnedTask::spawn(async move {
                if group_probes.is_empty() {
                    // Recorded for the same groups (the entry under its list was evicted).
                    let positions = extension.base.unwrap_or_default();
                    cache.insert_equality_positions(extension.key, Arc::clone(&positions));
                    return Ok(Some((extension.path, positions, false)));
                }
                let probed = probe_file(
                    &io,
                    &table,
                    footers,
                    kept.as_ref(),
                    &extension,
                    &group_probes,
                );
                let Some((found, keys_cached)) = probed.await? else {
                    return Ok(None);
                };
                let positions = Arc::new(match &extension.base {
                    Some(base) => base.as_ref() | &found,
                    None => found,
                });
                cache.insert_equality_positions(extension.key, Arc::clone(&positions));
                Ok::<FileExtended, Error>(Some((extension.path, positions, keys_cached)))
            });
            task.join()
                .await
                .map_err(|e| Error::DataFusion(DataFusionError::ExecutionJoin(Box::new(e))))?
        });
    }
    let results: Vec<FileExtended> = futures::stream::iter(tasks)
        .buffer_unordered(EXTEND_CONCURRENCY)
        .try_collect()
        .await?;
    drop(reservation);
    let mut extended = Extended::default();
    let mut complete = true;
    for result in results {
        match result {
            Some((path, positions, keys_cached)) => {
                extended.files += 1;
                extended.keys_cached += usize::from(keys_cached);
                known.insert(path, positions);
            }
            None => complete = false,
        }
    }
    extended.positions = complete.then_some(known);
    Ok(extended)
}

/// The files of `layout` to extend, and the positions of the others (found cached, by path);
/// `None` when the scan should record as before (module docs).
#[allow(clippy::type_complexity)]
fn plan_extensions(
    cache: &DeleteCache,
    io: &TableIo,
    table: &str,
    layout: &EqualityLayout<'_>,
) -> Result<Option<(Vec<Extension>, HashMap<String, Arc<RoaringTreemap>>)>> {
    let mut extensions = Vec::new();
    let mut known = HashMap::new();
    let mut any_base = false;
    for file in layout
        .files
        .iter()
        .filter(|f| !f.equality_groups.is_empty())
    {
        let (data, keyed) = keyed_groups(io, table, file, layout.entries)?;
        let key: EqualityPositionsKey = (data, keyed.iter().map(|(k, _)| k.clone()).collect());
        if let Some(positions) = cache.equality_positions(&key) {
            known.insert(file.path.clone(), positions);
            continue;
        }
        let recorded = cache
            .latest_equality_positions(&key.0)
            .and_then(|r| Some((added_groups(&r.groups, &keyed)?, Arc::clone(&r.positions))));
        let (added, base) = match recorded {
            Some((added, positions)) => (added, Some(positions)),
            None => (keyed.iter().map(|(_, g)| *g).collect(), None),
        };
        if added.len() >= MIN_UNION_GROUPS {
            return Ok(None);
        }
        any_base |= base.is_some();
        extensions.push(Extension {
            path: file.path.clone(),
            file_size: file.file_size,
            key,
            base,
            added,
        });
    }
    Ok((any_base && !extensions.is_empty()).then_some((extensions, known)))
}

/// The groups of `current` (sorted, each with its index in the scan) that `recorded` (sorted)
/// lacks, or `None` when `recorded` holds a group `current` does not (its positions may delete
/// rows the current list does not).
fn added_groups<K: PartialEq>(recorded: &[K], current: &[(K, usize)]) -> Option<Vec<usize>> {
    let mut added = Vec::new();
    let mut recorded = recorded.iter().peekable();
    for (entry, group) in current {
        match recorded.peek() {
            Some(r) if *r == entry => {
                recorded.next();
            }
            _ => added.push(*group),
        }
    }
    recorded.next().is_none().then_some(added)
}

/// The positions of `extension`'s data file that `probes` delete, read from its key columns
/// alone (from `kept`, or read and kept there), and whether those came from `kept`; `None`
/// when the file lacks one of them (the scan then reads it as before, where the schema mapping
/// decides what the missing column holds).
async fn probe_file(
    io: &TableIo,
    table: &str,
    footers: Arc<dyn FileMetadataCache>,
    kept: Option<&KeyColumns>,
    extension: &Extension,
    probes: &[GroupProbe],
) -> Result<Option<(RoaringTreemap, bool)>> {
    let path = extension.path.as_str();
    let corrupt = |e: &dyn std::fmt::Display| Error::corrupt(table, "data file", path, e);
    let (store, _, object) = io.resolve(path)?;
    // The footer through DataFusion's file-metadata cache (the scan reads it there too).
    let footer = CachedParquetFileReaderFactory::new(Arc::clone(&store), footers)
        .create_reader(
            0,
            partitioned_file(object.clone(), extension.file_size),
            None,
            &ExecutionPlanMetricsSet::new(),
        )
        .map_err(|e| corrupt(&e))?
        .get_metadata(None)
        .await
        .map_err(|e| corrupt(&e))?;
    let file_rows = u64::try_from(footer.file_metadata().num_rows()).unwrap_or(0);
    let footer =
        ArrowReaderMetadata::try_new(footer, ArrowReaderOptions::new()).map_err(|e| corrupt(&e))?;
    let schema = Arc::clone(footer.schema());
    // The file's root column of each key field the probes read.
    let mut ids: Vec<i32> = Vec::new();
    for (id, _, present) in probes.iter().flat_map(|p| &p.columns) {
        if *present && !ids.contains(id) {
            ids.push(*id);
        }
    }
    let Ok(found_roots) = field_roots(&schema, &ids) else {
        return Ok(None);
    };
    let roots: Vec<(i32, usize)> = ids.into_iter().zip(found_roots).collect();
    // The key columns as kept, and per key column (in `roots` order) its arrays when they are.
    let wanted: Option<(&KeyColumns, Vec<FileColumn>)> = kept.map(|kept| {
        let file: Arc<str> = extension.key.0.0.as_str().into();
        let columns = roots
            .iter()
            .map(|(id, root)| FileColumn {
                source: Arc::clone(&kept.source),
                file: Arc::clone(&file),
                size: extension.file_size,
                batch_rows: KEY_BATCH_ROWS,
                field_id: *id,
                data_type: schema.field(*root).data_type().clone(),
            })
            .collect();
        (kept, columns)
    });
    let cached = wanted
        .as_ref()
        .filter(|_| !roots.is_empty())
        .and_then(|(kept, wanted)| kept.cache.file_columns(wanted));
    let from_cache = cached.is_some();
    let columns = match cached {
        Some(columns) => columns,
        // No key column in the scan schema: every key is null, nothing to read.
        None if roots.is_empty() => Vec::new(),
        None => {
            let reader =
                ParquetObjectReader::new(store, object).with_file_size(extension.file_size);
            let builder = ParquetRecordBatchStreamBuilder::new_with_metadata(reader, footer)
                .with_batch_size(KEY_BATCH_ROWS);
            let roots: Vec<usize> = roots.iter().map(|(_, root)| *root).collect();
            let columns = read_roots(builder, &roots).await.map_err(|e| corrupt(&e))?;
            if let Some((kept, wanted)) = &wanted {
                for (column, chunks) in wanted.iter().zip(&columns) {
                    kept.cache.keep_file_column(column, chunks.clone());
                }
            }
            columns
        }
    };
    // Each batch's rows (the whole file in one when no key column is read).
    let batch_rows: Vec<usize> = match columns.first() {
        Some(chunks) => chunks.iter().map(|c| c.len()).collect(),
        None => vec![usize::try_from(file_rows).unwrap_or(0)],
    };
    let mut found = RoaringTreemap::new();
    let mut offset = 0u64;
    for (b, &rows) in batch_rows.iter().enumerate() {
        let mut deleted: Option<BooleanBuffer> = None;
        for probe in probes {
            let keys = probe
                .columns
                .iter()
                .map(|(id, ty, present)| -> Result<ArrayRef> {
                    let column = present
                        .then(|| roots.iter().position(|(known, _)| known == id))
                        .flatten()
                        .and_then(|c| columns.get(c)?.get(b));
                    Ok(match column {
                        Some(a) if a.data_type() == ty => Arc::clone(a),
                        Some(a) => arrow::compute::cast(a, ty)?,
                        None => new_null_array(ty, rows),
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let mask = probe.set.deleted(&keys)?;
            deleted = Some(match deleted.take() {
                Some(previous) => &previous | &mask,
                None => mask,
            });
        }
        if let Some(deleted) = deleted {
            let positions: Vec<u64> = deleted.set_indices().map(|i| offset + i as u64).collect();
            // Ascending, and past the batches before: appended in order.
            if let Err(unsorted) = found.append(positions.iter().copied()) {
                found.extend(positions[unsorted.valid_until() as usize..].iter().copied());
            }
        }
        offset += rows as u64;
    }
    Ok(Some((found, from_cache)))
}

#[cfg(test)]
mod tests {
    use super::added_groups;

    #[test]
    fn added_groups_are_those_the_recorded_list_lacks() {
        // Current list (sorted), each with its index in the scan.
        let current = [("a", 4), ("b", 0), ("d", 2), ("e", 1)];
        assert_eq!(added_groups(&["b", "d"], &current), Some(vec![4, 1]));
        assert_eq!(added_groups(&[], &current), Some(vec![4, 0, 2, 1]));
        assert_eq!(
            added_groups(&["a", "b", "d", "e"], &current),
            Some(Vec::new())
        );
        // A recorded group no longer in the list: its positions cannot be a base.
        assert_eq!(added_groups(&["b", "c"], &current), None);
        assert_eq!(added_groups(&["f"], &current), None);
        assert_eq!(added_groups(&["a", "b", "d", "e", "f"], &current), None);
    }
}
