//! A parsed `CREATE TABLE` as a new table's Iceberg metadata: schema (field ids assigned in
//! order, nested fields included), partition spec with Spark's field names, and properties.
//!
//! Properties Petrel sets unless the statement does: `write.delete.mode`, `write.update.mode`
//! and `write.merge.mode` = `merge-on-read`, and `write.parquet.compression-codec` = `zstd`
//! (Iceberg Java records its default on every new table). `format-version` (2 unless given; 3
//! for row lineage and deletion vectors) is the metadata's version, not a property. `PRIMARY
//! KEY` columns become the schema's identifier fields and are NOT NULL.

use std::collections::HashMap;
use std::sync::Arc;

use iceberg::spec::{
    FormatVersion, ListType, MapType, NestedField, PartitionSpec, Schema, SortOrder, StructType,
    TableMetadata, TableMetadataBuilder, Transform, Type,
};

use super::parser::{ColumnDef, CreateTable};
use super::types::ParsedType;
use crate::error::{Error, Result};

impl CreateTable {
    /// The table's Iceberg schema (ids from 1, depth first).
    pub fn schema(&self) -> Result<Schema> {
        let mut next_id = 0;
        let mut fields = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            let pk = self
                .primary_key
                .iter()
                .any(|k| k.eq_ignore_ascii_case(&column.name));
            fields.push(nested_field(column, pk, &mut next_id)?);
        }
        let mut identifiers = Vec::new();
        for key in &self.primary_key {
            let field = fields
                .iter()
                .find(|f| f.name.eq_ignore_ascii_case(key))
                .ok_or_else(|| {
                    Error::InvalidArgument(format!("PRIMARY KEY column {key} is not a column"))
                })?;
            identifiers.push(field.id);
        }
        Schema::builder()
            .with_fields(fields)
            .with_identifier_field_ids(identifiers)
            .build()
            .map_err(|e| Error::InvalidArgument(format!("table {}: {e}", self.name.join("."))))
    }

    /// The partition spec over `schema`.
    pub fn partition_spec(&self, schema: &Schema) -> Result<PartitionSpec> {
        let mut spec = PartitionSpec::builder(schema.clone());
        for term in &self.partitioning {
            let column = schema.field_by_name(&term.column).ok_or_else(|| {
                Error::InvalidArgument(format!("PARTITIONED BY: {} is not a column", term.column))
            })?;
            let name = partition_field_name(&column.name, &term.transform);
            spec = spec
                .add_partition_field(&column.name, name, term.transform)
                .map_err(|e| {
                    Error::InvalidArgument(format!(
                        "PARTITIONED BY {}({}) on column of type {}: {e}",
                        term.transform, term.column, column.field_type
                    ))
                })?;
        }
        spec.build()
            .map_err(|e| Error::InvalidArgument(format!("PARTITIONED BY: {e}")))
    }

    /// The new table's first metadata at `location`, over `schema` (the columns' schema, or a
    /// query's for `AS query` without columns).
    pub fn table_metadata(&self, schema: Schema, location: String) -> Result<TableMetadata> {
        let mut properties: HashMap<String, String> = HashMap::new();
        let mut version = FormatVersion::V2;
        for (key, value) in &self.properties {
            if key == "format-version" {
                version = match value.trim() {
                    "1" => FormatVersion::V1,
                    "2" => FormatVersion::V2,
                    "3" => FormatVersion::V3,
                    other => {
                        return Err(Error::InvalidArgument(format!(
                            "format-version {other}: use 1, 2 or 3"
                        )));
                    }
                };
            } else {
                properties.insert(key.clone(), value.clone());
            }
        }
        if let Some(comment) = &self.comment {
            properties.insert("comment".to_string(), comment.clone());
        }
        let spec = self.partition_spec(&schema)?;
        new_table_metadata(schema, spec, location, version, properties)
    }
}

/// A new table's first metadata, as `CREATE TABLE` makes it: `schema` and `spec`, unsorted, at
/// `location`, format `version`, with Petrel's default properties (module docs) added to
/// `properties` where it does not set them.
pub fn new_table_metadata(
    schema: Schema,
    spec: PartitionSpec,
    location: String,
    version: FormatVersion,
    mut properties: HashMap<String, String>,
) -> Result<TableMetadata> {
    for key in ["write.delete.mode", "write.update.mode", "write.merge.mode"] {
        properties
            .entry(key.to_string())
            .or_insert_with(|| "merge-on-read".to_string());
    }
    properties
        .entry("write.parquet.compression-codec".to_string())
        .or_insert_with(|| "zstd".to_string());
    Ok(TableMetadataBuilder::new(
        schema,
        spec,
        SortOrder::unsorted_order(),
        location,
        version,
        properties,
    )?
    .build()?
    .metadata)
}

/// The first metadata of an unpartitioned format-2 table over `schema` at `location`, with the
/// defaults of a `CREATE TABLE` that names no properties (what bulk ingest creates).
pub fn default_table_metadata(schema: Schema, location: String) -> Result<TableMetadata> {
    let spec = PartitionSpec::builder(schema.clone())
        .build()
        .map_err(|e| Error::InvalidArgument(format!("partition spec: {e}")))?;
    new_table_metadata(schema, spec, location, FormatVersion::V2, HashMap::new())
}

/// Spark's partition field names: `c`, `c_bucket`, `c_trunc`, `c_year`, `c_month`, `c_day`,
/// `c_hour`, `c_null`.
fn partition_field_name(column: &str, transform: &Transform) -> String {
    match transform {
        Transform::Identity => column.to_string(),
        Transform::Bucket(_) => format!("{column}_bucket"),
        Transform::Truncate(_) => format!("{column}_trunc"),
        Transform::Year => format!("{column}_year"),
        Transform::Month => format!("{column}_month"),
        Transform::Day => format!("{column}_day"),
        Transform::Hour => format!("{column}_hour"),
        Transform::Void => format!("{column}_null"),
        Transform::Unknown => format!("{column}_unknown"),
    }
}

fn nested_field(column: &ColumnDef, required: bool, next_id: &mut i32) -> Result<Arc<NestedField>> {
    *next_id += 1;
    let id = *next_id;
    let ty = iceberg_type(&column.ty, next_id)?;
    let field = if column.required || required {
        NestedField::required(id, &column.name, ty)
    } else {
        NestedField::optional(id, &column.name, ty)
    };
    Ok(Arc::new(match &column.comment {
        Some(doc) => field.with_doc(doc),
        None => field,
    }))
}

fn iceberg_type(ty: &ParsedType, next_id: &mut i32) -> Result<Type> {
    Ok(match ty {
        ParsedType::Primitive(p) => Type::Primitive(p.clone()),
        ParsedType::List(element) => {
            *next_id += 1;
            let id = *next_id;
            Type::List(ListType::new(Arc::new(NestedField::list_element(
                id,
                iceberg_type(element, next_id)?,
                false,
            ))))
        }
        ParsedType::Map(key, value) => {
            *next_id += 2;
            let (key_id, value_id) = (*next_id - 1, *next_id);
            let key = Arc::new(NestedField::map_key_element(
                key_id,
                iceberg_type(key, next_id)?,
            ));
            let value = Arc::new(NestedField::map_value_element(
                value_id,
                iceberg_type(value, next_id)?,
                false,
            ));
            Type::Map(MapType::new(key, value))
        }
        ParsedType::Struct(fields) => {
            let fields = fields
                .iter()
                .map(|f| nested_field(f, false, next_id))
                .collect::<Result<Vec<_>>>()?;
            Type::Struct(StructType::new(fields))
        }
    })
}
