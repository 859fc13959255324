//! Reading `*.metadata.json` files: plain or gzip-compressed, any format version.
//!
//! A metadata file is never rewritten (a commit writes a new one), so a parsed file is cached
//! by its location in a [`MetadataCache`]: a catalog resolving the same current metadata for
//! every statement parses it once. The cache is bounded by memory, not by entries: each parsed
//! file is weighed by an estimate of what it holds ([`estimated_size`]: snapshots with their
//! summaries, snapshot and metadata logs, schema fields, specs, properties, refs), so a table
//! with a long history takes its share and the whole stays under
//! [`METADATA_CACHE_BYTES`].

use std::collections::HashMap;
use std::io::Read;
use std::sync::Arc;

use iceberg::spec::TableMetadata;
use serde::Deserialize;

use super::TableRef;
use crate::error::{Error, Result};
use crate::io::{TableIo, normalize_location};

/// The parts of the metadata JSON the `iceberg` crate keeps private.
#[derive(Deserialize)]
struct ExtraMetadata {
    #[serde(default)]
    refs: Option<HashMap<String, TableRef>>,
    #[serde(rename = "current-snapshot-id", default)]
    current_snapshot_id: Option<i64>,
}

/// A parsed metadata file and its refs (cheap to clone).
#[derive(Debug, Clone)]
pub struct ParsedMetadata {
    /// The table metadata.
    pub metadata: Arc<TableMetadata>,
    /// Branches and tags by name.
    pub refs: Arc<HashMap<String, TableRef>>,
}

/// Estimated bytes of parsed metadata files one cache keeps at most.
pub(crate) const METADATA_CACHE_BYTES: u64 = 128 * 1024 * 1024;

/// An estimate of the memory a parsed metadata file holds.
pub(crate) fn estimated_size(parsed: &ParsedMetadata) -> usize {
    let m = &parsed.metadata;
    let snapshots: usize = m
        .snapshots()
        .map(|s| {
            512 + s.manifest_list().len()
                + s.summary()
                    .additional_properties
                    .iter()
                    .map(|(k, v)| 64 + k.len() + v.len())
                    .sum::<usize>()
        })
        .sum();
    let logs = (m.history().len() + m.metadata_log().len()) * 128;
    let fields: usize = m
        .schemas_iter()
        .map(|s| 256 + s.as_struct().fields().len() * 256)
        .sum();
    let specs = (m.partition_specs_iter().len() + m.sort_orders_iter().len()) * 256;
    let properties: usize = m
        .properties()
        .iter()
        .map(|(k, v)| 64 + k.len() + v.len())
        .sum();
    4096 + snapshots + logs + fields + specs + properties + parsed.refs.len() * 128
}

/// Parsed metadata files by location (bounded by their estimated memory; shared by clones).
#[derive(Debug, Clone)]
pub struct MetadataCache {
    files: moka::sync::Cache<String, ParsedMetadata>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        Self {
            files: moka::sync::Cache::builder()
                .max_capacity(METADATA_CACHE_BYTES)
                .weigher(|_, p: &ParsedMetadata| {
                    u32::try_from(estimated_size(p)).unwrap_or(u32::MAX).max(1)
                })
                .build(),
        }
    }
}

impl MetadataCache {
    /// The metadata file at `logical_path`, parsed once.
    pub async fn read(
        &self,
        io: &TableIo,
        table: &str,
        logical_path: &str,
    ) -> Result<ParsedMetadata> {
        let key = io.locations().resolve(logical_path);
        if let Some(parsed) = self.files.get(&key) {
            return Ok(parsed);
        }
        let (metadata, refs) = read_table_metadata(io, table, logical_path).await?;
        let parsed = ParsedMetadata {
            metadata: Arc::new(metadata),
            refs: Arc::new(refs),
        };
        self.files.insert(key, parsed.clone());
        Ok(parsed)
    }

    /// Whether the metadata file at `logical_path` is parsed here already (it existed when it
    /// was read; metadata files are never rewritten).
    pub(crate) fn holds(&self, io: &TableIo, logical_path: &str) -> bool {
        self.files
            .contains_key(&io.locations().resolve(logical_path))
    }

    /// Records a metadata file this process has just written at `location` (where its bytes
    /// are: catalogs read metadata files unmapped), so that the next load does not read it back.
    pub(crate) fn insert(&self, location: &str, parsed: ParsedMetadata) {
        self.files.insert(normalize_location(location), parsed);
    }
}

/// The metadata JSON of `metadata` (Iceberg's JSON, as the `iceberg` crate serialises it).
pub(crate) fn encode_table_metadata(table: &str, metadata: &TableMetadata) -> Result<Vec<u8>> {
    serde_json::to_vec(metadata).map_err(|e| Error::Unsupported {
        table: table.to_string(),
        message: format!("cannot serialise the table metadata: {e}"),
    })
}

/// Reads and parses a table metadata file at `logical_path`. Errors name `table` and the file.
pub async fn read_table_metadata(
    io: &TableIo,
    table: &str,
    logical_path: &str,
) -> Result<(TableMetadata, HashMap<String, TableRef>)> {
    let bytes = io.read(logical_path).await.map_err(|e| match e {
        Error::ObjectStore(object_store::Error::NotFound { .. }) => Error::NotFound(format!(
            "table {table}: metadata file {logical_path} does not exist"
        )),
        other => Error::corrupt(table, "metadata file", logical_path, other),
    })?;
    parse_table_metadata(table, logical_path, &bytes)
}

/// Parses the bytes of a metadata file (plain or gzip JSON) at `logical_path`.
pub(crate) fn parse_table_metadata(
    table: &str,
    logical_path: &str,
    bytes: &[u8],
) -> Result<(TableMetadata, HashMap<String, TableRef>)> {
    let json = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(bytes.len() * 4);
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .map_err(|e| Error::corrupt(table, "metadata file", logical_path, e))?;
        out
    } else {
        bytes.to_vec()
    };
    let metadata: TableMetadata = serde_json::from_slice(&json)
        .map_err(|e| Error::corrupt(table, "metadata file", logical_path, e))?;
    let extra: ExtraMetadata = serde_json::from_slice(&json)
        .map_err(|e| Error::corrupt(table, "metadata file", logical_path, e))?;
    let mut refs = extra.refs.unwrap_or_default();
    // v1 tables (and some writers) have no refs: main is the current snapshot.
    if let Some(current) = extra.current_snapshot_id.filter(|id| *id >= 0) {
        refs.entry("main".to_string()).or_insert(TableRef {
            snapshot_id: current,
            kind: super::RefKind::Branch,
        });
    }
    Ok((metadata, refs))
}

/// The version number in a metadata file name: `v12.metadata.json` → 12,
/// `00012-<uuid>.metadata.json` → 12, gzip variants (`.gz.metadata.json`,
/// `.metadata.json.gz`) included. `None` for anything else.
pub fn metadata_file_version(file_name: &str) -> Option<i64> {
    let stem = file_name
        .strip_suffix(".metadata.json")
        .or_else(|| file_name.strip_suffix(".metadata.json.gz"))?;
    let stem = stem.strip_suffix(".gz").unwrap_or(stem);
    if let Some(digits) = stem.strip_prefix('v')
        && !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
    {
        return digits.parse().ok();
    }
    let (digits, uuid) = stem.split_once('-')?;
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && uuid.len() >= 32 {
        return digits.parse().ok();
    }
    None
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::{ParsedMetadata, estimated_size, metadata_file_version};

    #[test]
    fn a_wider_table_weighs_more() {
        let parsed = |columns: i32| {
            let fields = (1..=columns)
                .map(|i| {
                    Arc::new(NestedField::optional(
                        i,
                        format!("c{i}"),
                        Type::Primitive(PrimitiveType::Long),
                    ))
                })
                .collect::<Vec<_>>();
            let schema = Schema::builder().with_fields(fields).build().unwrap();
            let metadata = crate::ddl::default_table_metadata(schema, "file:///t".into()).unwrap();
            ParsedMetadata {
                metadata: Arc::new(metadata),
                refs: Arc::new(HashMap::new()),
            }
        };
        let (narrow, wide) = (estimated_size(&parsed(2)), estimated_size(&parsed(1000)));
        assert!(narrow < 16 * 1024, "{narrow}");
        assert!(wide > narrow + 200_000, "{wide} vs {narrow}");
    }

    #[test]
    fn metadata_file_names() {
        assert_eq!(metadata_file_version("v3.metadata.json"), Some(3));
        assert_eq!(metadata_file_version("v13.gz.metadata.json"), Some(13));
        assert_eq!(metadata_file_version("v2.metadata.json.gz"), Some(2));
        assert_eq!(
            metadata_file_version("00007-8f1c2a3e-1111-4222-8333-944455556666.metadata.json"),
            Some(7)
        );
        assert_eq!(metadata_file_version("version-hint.text"), None);
        assert_eq!(metadata_file_version("snap-1-abc.avro"), None);
        assert_eq!(metadata_file_version("vx.metadata.json"), None);
    }
}
