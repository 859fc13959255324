//! Reading `*.metadata.json` files: plain or gzip-compressed, any format version.
//!
//! A metadata file is never rewritten (a commit writes a new one), so a parsed file is cached
//! by its location in a [`MetadataCache`]: a catalog resolving the same current metadata for
//! every statement parses it once.

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

/// Parsed metadata files by location (bounded; shared by clones).
#[derive(Debug, Clone)]
pub struct MetadataCache {
    files: moka::sync::Cache<String, ParsedMetadata>,
}

impl Default for MetadataCache {
    fn default() -> Self {
        Self {
            files: moka::sync::Cache::new(64),
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
    use super::metadata_file_version;

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
