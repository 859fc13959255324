//! `CALL system.remove_orphan_files(table, older_than, location, dry_run, …)`: lists the files
//! under the table's location (or `location`, a directory in it) and deletes those no snapshot
//! or metadata reaches and that were last modified before `older_than` (default: now − 3 days,
//! so the files of a write still in progress are never taken). Iceberg Java's
//! `DeleteOrphanFilesSparkAction` is the reference.
//!
//! Reachable, and so never an orphan: every snapshot's manifest list, manifests and live content
//! files ([`super::reachable`]), statistics files, the current metadata file, the files of the
//! metadata log, and `version-hint.text`. As in Java, hidden paths are skipped: any segment
//! under the scanned directory starting with `.` (Hadoop's `.crc` files) or with `_` unless it
//! is a partition directory (`_name=value`).
//!
//! Listed and referenced locations are compared by their object path with percent-escapes
//! decoded, so a file that Spark's URL-encoded partition directories name one way and the store
//! lists another is still recognised as referenced (a name can only be kept wrongly, never
//! deleted wrongly).
//!
//! As Spark's procedure, a cutoff less than 24 hours ago is refused (a write in progress has
//! files no metadata references yet), except with `dry_run`, which only lists.
//!
//! Output (Spark's): one row per orphan, `orphan_file_location` (string), listed whether or
//! not `dry_run` kept it. Accepted and ignored: `max_concurrent_deletes`, `equal_schemes`,
//! `equal_authorities`, `prefix_mismatch_mode`, `prefix_listing`, `stream_results`;
//! `file_list_view` (a Spark view) is refused.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arrow::array::{RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;
use object_store::path::Path;

use super::args::{Param, ParamType, ProcedureArgs};
use super::context::ProcedureContext;
use super::reachable::ManifestReader;
use super::{Procedure, ProcedureFuture};
use crate::catalog::LoadedTable;
use crate::error::{Error, Result};
use crate::io::normalize_location;

/// The procedure.
pub const PROCEDURE: Procedure = Procedure {
    name: "remove_orphan_files",
    params: &[
        Param::required("table", ParamType::String),
        Param::optional("older_than", ParamType::Timestamp),
        Param::optional("location", ParamType::String),
        Param::optional("dry_run", ParamType::Boolean),
        Param::optional("max_concurrent_deletes", ParamType::Int),
        Param::optional("file_list_view", ParamType::String),
        Param::optional("equal_schemes", ParamType::StringMap),
        Param::optional("equal_authorities", ParamType::StringMap),
        Param::optional("prefix_mismatch_mode", ParamType::String),
        Param::optional("prefix_listing", ParamType::Boolean),
        Param::optional("stream_results", ParamType::Boolean),
    ],
    output: output_schema,
    run,
};

fn output_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "orphan_file_location",
        DataType::Utf8,
        false,
    )]))
}

/// Files younger than this are never orphans unless `older_than` says otherwise (Java's).
const DEFAULT_MIN_AGE_MS: i64 = 3 * 24 * 60 * 60 * 1000;

/// The shortest age of a file that may be deleted (Spark's procedure refuses shorter intervals).
const MIN_INTERVAL_MS: i64 = 24 * 60 * 60 * 1000;

/// The metadata directory's version hint (Hadoop layout).
const VERSION_HINT: &str = "version-hint.text";

fn run(ctx: &ProcedureContext, args: ProcedureArgs) -> ProcedureFuture<'_> {
    Box::pin(async move {
        if args.string_opt("file_list_view")?.is_some() {
            return Err(Error::InvalidArgument(
                "procedure remove_orphan_files: file_list_view (a Spark view of the actual files) \
                 is not supported: Petrel lists the table's location itself"
                    .into(),
            ));
        }
        if let Some(n) = args.int_opt("max_concurrent_deletes")?
            && n < 1
        {
            return Err(Error::InvalidArgument(format!(
                "procedure remove_orphan_files: max_concurrent_deletes should have value > 0, \
                 value: {n}"
            )));
        }
        let older_than = match args.timestamp_ms_opt("older_than")? {
            Some(ms) => ms,
            None => now_ms() - DEFAULT_MIN_AGE_MS,
        };
        let dry_run = args.bool_opt("dry_run")?.unwrap_or(false);
        if !dry_run && now_ms() - older_than < MIN_INTERVAL_MS {
            return Err(Error::InvalidArgument(
                "procedure remove_orphan_files: cannot remove orphan files with an interval less \
                 than 24 hours (older_than): files of writes still in progress could be deleted; \
                 list them with dry_run => true"
                    .into(),
            ));
        }
        let table = ctx.load_table(&args, "table").await?;
        let location = args.string_opt("location")?;
        let orphans = find_orphans(&table, location.as_deref(), older_than).await?;
        if !dry_run {
            let (store, _, _) = table.io().resolve(table.metadata().location())?;
            let name = table.ident().to_string();
            let deletes = orphans.clone().into_iter().map(|(path, location)| {
                let store = Arc::clone(&store);
                let name = name.clone();
                async move {
                    match store.delete(&path).await {
                        Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
                        Err(e) => Err(Error::WriteFailed {
                            table: name,
                            path: location,
                            message: format!("remove_orphan_files cannot delete it: {e}"),
                        }),
                    }
                }
            });
            futures::stream::iter(deletes)
                .buffer_unordered(8)
                .try_collect::<Vec<()>>()
                .await?;
        }
        let locations: Vec<&str> = orphans.iter().map(|(_, l)| l.as_str()).collect();
        Ok(RecordBatch::try_new(
            output_schema(),
            vec![Arc::new(StringArray::from(locations))],
        )?)
    })
}

/// The orphan files under `location` (default: the table's), older than `older_than_ms`:
/// (object path, location), sorted by location.
async fn find_orphans(
    table: &LoadedTable,
    location: Option<&str>,
    older_than_ms: i64,
) -> Result<Vec<(Path, String)>> {
    let metadata = table.metadata();
    let table_location = metadata.location().trim_end_matches('/');
    let scanned = location.map_or(table_location, |l| l.trim_end_matches('/'));
    if !normalize_location(scanned).starts_with(&normalize_location(table_location)) {
        return Err(Error::InvalidArgument(format!(
            "procedure remove_orphan_files: location {scanned} is not under the location of \
             table {} ({table_location})",
            table.ident()
        )));
    }

    // What the metadata reaches, as comparison keys.
    let mut reader = ManifestReader::new(table.ident().to_string(), table.io().clone());
    let reachable = reader.reachable(metadata).await?;
    let mut valid: HashSet<String> = HashSet::new();
    let mut add = |logical: &str| -> Result<()> {
        let (_, _, path) = table.io().resolve(logical)?;
        valid.insert(key(path.as_ref()));
        Ok(())
    };
    for (_, location) in reachable.all() {
        add(location)?;
    }
    add(table.metadata_location())?;
    for entry in metadata.metadata_log() {
        add(&entry.metadata_file)?;
    }

    let (store, _, prefix) = table.io().resolve(scanned)?;
    let listed: Vec<object_store::ObjectMeta> = match store.list(Some(&prefix)).try_collect().await
    {
        Ok(listed) => listed,
        Err(object_store::Error::NotFound { .. }) => Vec::new(),
        Err(e) => return Err(e.into()),
    };
    let prefix_parts = prefix.parts().count();
    let mut orphans = Vec::new();
    for meta in listed {
        let relative: Vec<String> = meta
            .location
            .parts()
            .skip(prefix_parts)
            .map(|p| p.as_ref().to_string())
            .collect();
        if relative.iter().any(|segment| is_hidden(segment)) {
            continue;
        }
        if relative.last().is_some_and(|name| name == VERSION_HINT) {
            continue;
        }
        if meta.last_modified.timestamp_millis() >= older_than_ms {
            continue;
        }
        if valid.contains(&key(meta.location.as_ref())) {
            continue;
        }
        let location = format!("{scanned}/{}", relative.join("/"));
        orphans.push((meta.location, location));
    }
    orphans.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(orphans)
}

/// Java's hidden-path rule: `.x`, and `_x` unless it is a partition directory `_x=value`.
fn is_hidden(segment: &str) -> bool {
    segment.starts_with('.') || (segment.starts_with('_') && !segment.contains('='))
}

/// An object path with its percent-escapes decoded (see the module docs).
fn key(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(&h), Some(&l)) = (bytes.get(i + 1), bytes.get(i + 2))
            && let (Some(h), Some(l)) = (hex(h), hex(l))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_escapes_and_hidden_paths_follow_java() {
        assert_eq!(key("a/country=a%2Fb%25/x"), "a/country=a/b%/x");
        assert_eq!(key("a/%zz"), "a/%zz");
        assert!(is_hidden(".v1.metadata.json.crc"));
        assert!(is_hidden("_SUCCESS"));
        assert!(!is_hidden("_part=1"));
        assert!(!is_hidden("data"));
    }
}
