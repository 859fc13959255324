//! A loaded table: its current metadata, its refs, and the IO that reads its files.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::datatypes::SchemaRef;
use iceberg::spec::TableMetadata;
use serde::Deserialize;

use super::TableIdent;
use crate::error::Result;
use crate::io::TableIo;
use crate::spec::iceberg_schema_to_arrow;

/// Whether a ref is a branch or a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RefKind {
    /// A branch: read with the table's current schema.
    Branch,
    /// A tag: read with its snapshot's schema.
    Tag,
}

/// A named ref (`refs` in the metadata JSON).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TableRef {
    /// The snapshot the ref points at.
    #[serde(rename = "snapshot-id")]
    pub snapshot_id: i64,
    /// Branch or tag.
    #[serde(rename = "type")]
    pub kind: RefKind,
}

/// A table as its catalog resolved it.
#[derive(Debug, Clone)]
pub struct LoadedTable {
    ident: TableIdent,
    metadata_location: String,
    metadata: Arc<TableMetadata>,
    refs: Arc<HashMap<String, TableRef>>,
    io: TableIo,
}

impl LoadedTable {
    /// Assembles a loaded table.
    pub fn new(
        ident: TableIdent,
        metadata_location: String,
        metadata: Arc<TableMetadata>,
        refs: Arc<HashMap<String, TableRef>>,
        io: TableIo,
    ) -> Self {
        Self {
            ident,
            metadata_location,
            metadata,
            refs,
            io,
        }
    }

    /// The table's identifier in its catalog.
    pub fn ident(&self) -> &TableIdent {
        &self.ident
    }

    /// The current metadata file (as the catalog records it).
    pub fn metadata_location(&self) -> &str {
        &self.metadata_location
    }

    /// The table metadata.
    pub fn metadata(&self) -> &Arc<TableMetadata> {
        &self.metadata
    }

    /// Branches and tags by name (`main` included when the table has a snapshot).
    pub fn refs(&self) -> &HashMap<String, TableRef> {
        &self.refs
    }

    /// IO for this table's files (moved-table mapping included).
    pub fn io(&self) -> &TableIo {
        &self.io
    }

    /// The current schema as Arrow, with `PARQUET:field_id` metadata and real nullability.
    pub fn arrow_schema(&self) -> Result<SchemaRef> {
        Ok(Arc::new(iceberg_schema_to_arrow(
            self.metadata.current_schema(),
        )?))
    }
}
