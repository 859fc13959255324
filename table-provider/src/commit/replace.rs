//! Replacing a table in one commit, as Iceberg's `REPLACE TABLE` does (Java:
//! `Catalog.newReplaceTableTransaction`, Spark's `REPLACE TABLE … AS SELECT` and
//! `CREATE OR REPLACE TABLE`): the table keeps its identity (uuid, location, properties), its
//! snapshots and its history; a new schema, partition spec and sort order become current and the
//! first snapshot of the new rows is committed in the same new metadata version.
//!
//! The new metadata is Java's `TableMetadata.buildReplacement` on the table as it is:
//!
//! - the `main` branch is removed (the new snapshot has no parent, its totals start from zero),
//!   every other ref and every snapshot stays, so time travel to an older snapshot reads it with
//!   its own schema;
//! - the new schema's field ids are assigned as `TypeUtil.assignFreshIds(schema, current,
//!   nextId)` assigns them: a field whose full name is a field of the current schema keeps that
//!   field's id, every other field gets a fresh id above `last-column-id` (struct by struct,
//!   a struct's own fields before their children);
//! - the partition spec is bound to the new schema (partition field ids reused where an
//!   existing spec has the same source and transform), the sort order is unsorted, the
//!   properties given are set over the table's.
//!
//! [`TableReplacement::stage`] builds that metadata for the writers (the data files are written
//! for the new schema and spec) without committing it. The commit
//! ([`super::SnapshotProducer::replacing`], run by [`commit_replacement`]) builds it again on
//! the table as loaded for each attempt, so a snapshot another writer committed meanwhile stays
//! in the history instead of being overwritten (Java commits the metadata staged on its first
//! base). If a concurrent schema change makes the new schema's ids differ from those the files
//! were written with, the commit fails ([`Error::ConcurrentModification`]) and nothing changes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use iceberg::spec::{
    FormatVersion, ListType, MapType, NestedField, NestedFieldRef, Schema, SortOrder, StructType,
    TableMetadataBuilder, Type, UnboundPartitionSpec,
};

use super::producer::{SnapshotChange, SnapshotProducer};
use super::retry::{CommitOutcome, RetryPolicy};
use crate::catalog::{Catalog, LoadedTable};
use crate::error::{Error, Result};

/// A table's new definition: what a replace makes current.
#[derive(Debug, Clone)]
pub struct TableReplacement {
    /// The new schema. Its field ids only tie `spec` to it: they are reassigned against the
    /// table's current schema (module docs).
    pub schema: Schema,
    /// The new partition spec over `schema`'s field ids (unpartitioned: no fields).
    pub spec: UnboundPartitionSpec,
    /// Properties set over the table's (`format-version` upgrades the table).
    pub properties: HashMap<String, String>,
}

impl TableReplacement {
    /// An unpartitioned replacement with `schema` and no new properties (bulk ingest's
    /// `replace`).
    pub fn unpartitioned(schema: Schema) -> Self {
        Self {
            schema,
            spec: UnboundPartitionSpec::builder().build(),
            properties: HashMap::new(),
        }
    }

    /// The replacement staged on `base`: `base` with the new schema, spec and sort order current
    /// and no `main` branch, still at `base`'s metadata location. Writers write the new rows for
    /// it; nothing is committed.
    pub fn stage(&self, base: &LoadedTable) -> Result<LoadedTable> {
        let metadata = self
            .apply(
                base,
                TableMetadataBuilder::new_from_metadata(base.metadata().as_ref().clone(), None),
            )?
            .build()
            .map_err(|e| self.invalid(base, e))?
            .metadata;
        Ok(LoadedTable::new(
            base.ident().clone(),
            base.metadata_location().to_string(),
            Arc::new(metadata),
            Arc::new(
                base.refs()
                    .iter()
                    .filter(|(name, _)| name.as_str() != iceberg::spec::MAIN_BRANCH)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            ),
            base.io().clone(),
        ))
    }

    /// `builder` (started from `base`'s metadata) with the replacement applied, as Java's
    /// `buildReplacement`.
    pub(crate) fn apply(
        &self,
        base: &LoadedTable,
        builder: TableMetadataBuilder,
    ) -> Result<TableMetadataBuilder> {
        let current = base.metadata();
        let (schema, ids) = assign_fresh_ids(
            &self.schema,
            current.current_schema(),
            current.last_column_id(),
        )
        .map_err(|e| self.invalid(base, e))?;
        let mut spec = UnboundPartitionSpec::builder();
        for field in self.spec.fields() {
            let source_id = ids.get(&field.source_id).copied().ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "table {}: partition field {} has source id {}, which is not a column of \
                     the new schema",
                    base.ident(),
                    field.name,
                    field.source_id
                ))
            })?;
            spec = spec
                .add_partition_field(source_id, field.name.clone(), field.transform)
                .map_err(|e| self.invalid(base, e))?;
        }
        let mut builder = builder;
        if let Some(version) = self.properties.get("format-version") {
            let version = match version.trim() {
                "1" => FormatVersion::V1,
                "2" => FormatVersion::V2,
                "3" => FormatVersion::V3,
                other => {
                    return Err(Error::InvalidArgument(format!(
                        "format-version {other}: use 1, 2 or 3"
                    )));
                }
            };
            if version < current.format_version() {
                return Err(Error::InvalidArgument(format!(
                    "table {}: cannot downgrade format-version {} to {version} by replacing it",
                    base.ident(),
                    current.format_version()
                )));
            }
            builder = builder
                .upgrade_format_version(version)
                .map_err(|e| self.invalid(base, e))?;
        }
        let properties: HashMap<String, String> = self
            .properties
            .iter()
            .filter(|(k, _)| k.as_str() != "format-version")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let builder = builder
            .remove_ref(iceberg::spec::MAIN_BRANCH)
            .add_current_schema(schema)
            .and_then(|b| b.add_default_partition_spec(spec.build()))
            .and_then(|b| b.add_sort_order(SortOrder::unsorted_order()))
            .and_then(|b| b.set_default_sort_order(TableMetadataBuilder::LAST_ADDED as i64))
            .map_err(|e| self.invalid(base, e))?;
        if properties.is_empty() {
            Ok(builder)
        } else {
            builder
                .set_properties(properties)
                .map_err(|e| self.invalid(base, e))
        }
    }

    fn invalid(&self, base: &LoadedTable, e: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("cannot replace table {}: {e}", base.ident()))
    }
}

/// Commits `files` (data files written for `staged`, the replacement staged on `base` by
/// [`TableReplacement::stage`]) as the first snapshot of the replaced table, in the same
/// metadata version as the replacement: the commit loop of
/// [`super::retry::commit_produced`], rebuilding the replacement on the table as it is at each
/// attempt.
pub async fn commit_replacement(
    catalog: &dyn Catalog,
    base: LoadedTable,
    staged: &LoadedTable,
    replacement: Arc<TableReplacement>,
    files: Vec<iceberg::spec::DataFile>,
) -> Result<CommitOutcome> {
    let producer = SnapshotProducer::new(staged, SnapshotChange::append(files))
        .await?
        .replacing(replacement, staged);
    super::retry::commit_produced(catalog, base, producer).await
}

/// Commits `replacement` on `base` with no rows: the table is left without a current snapshot
/// (`REPLACE TABLE` without `AS query`, as Java's replace transaction with no append). Retried
/// on conflict as [`commit_replacement`] is.
pub async fn commit_replacement_without_rows(
    catalog: &dyn Catalog,
    base: LoadedTable,
    replacement: &TableReplacement,
) -> Result<LoadedTable> {
    let policy = RetryPolicy::from_properties(base.metadata().properties());
    let started = Instant::now();
    let mut table = base;
    let mut attempt = 0;
    loop {
        attempt += 1;
        let builder = TableMetadataBuilder::new_from_metadata(
            table.metadata().as_ref().clone(),
            Some(table.metadata_location().to_string()),
        );
        let metadata = replacement
            .apply(&table, builder)?
            .build()
            .map_err(|e| replacement.invalid(&table, e))?
            .metadata;
        let error = match catalog.commit_table(&table, metadata).await {
            Ok(committed) => return Ok(committed),
            Err(e) => e,
        };
        if !(matches!(error, Error::CommitConflict { .. }) && policy.may_retry(attempt, started)) {
            return Err(error);
        }
        tokio::time::sleep(policy.wait(attempt)).await;
        table = catalog.load_table(table.ident()).await?;
    }
}

/// `schema` with field ids assigned as Java's `TypeUtil.assignFreshIds(schema, base, nextId)`
/// does: a field whose full name is a field of `base` takes its id, every other field the next
/// id after `last_column_id`. Returns the new schema and the map from `schema`'s ids to the new
/// ones.
pub fn assign_fresh_ids(
    schema: &Schema,
    base: &Schema,
    last_column_id: i32,
) -> std::result::Result<(Schema, HashMap<i32, i32>), iceberg::Error> {
    let mut assigner = IdAssigner {
        visiting: schema,
        base,
        last_id: last_column_id,
        ids: HashMap::new(),
    };
    let fields = assigner.fields(schema.as_struct().fields());
    let identifiers: Vec<i32> = schema
        .identifier_field_ids()
        .filter_map(|id| assigner.ids.get(&id).copied())
        .collect();
    let schema = Schema::builder()
        .with_fields(fields)
        .with_identifier_field_ids(identifiers)
        .build()?;
    Ok((schema, assigner.ids))
}

struct IdAssigner<'a> {
    visiting: &'a Schema,
    base: &'a Schema,
    last_id: i32,
    ids: HashMap<i32, i32>,
}

impl IdAssigner<'_> {
    /// The id of the field `old_id` of the visited schema.
    fn id_for(&mut self, old_id: i32) -> i32 {
        let reused = self
            .visiting
            .name_by_field_id(old_id)
            .and_then(|name| self.base.field_by_name(name))
            .map(|f| f.id);
        let id = reused.unwrap_or_else(|| {
            self.last_id += 1;
            self.last_id
        });
        self.ids.insert(old_id, id);
        id
    }

    /// A struct's fields: their own ids first, then their types.
    fn fields(&mut self, fields: &[NestedFieldRef]) -> Vec<NestedFieldRef> {
        let ids: Vec<i32> = fields.iter().map(|f| self.id_for(f.id)).collect();
        fields
            .iter()
            .zip(ids)
            .map(|(field, id)| {
                let mut field = field.as_ref().clone();
                field.id = id;
                field.field_type = Box::new(self.ty(&field.field_type));
                Arc::new(field)
            })
            .collect()
    }

    fn ty(&mut self, ty: &Type) -> Type {
        match ty {
            Type::Primitive(_) => ty.clone(),
            Type::Struct(s) => Type::Struct(StructType::new(self.fields(s.fields()))),
            Type::List(list) => {
                let element = &list.element_field;
                let id = self.id_for(element.id);
                let element_type = self.ty(&element.field_type);
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    id,
                    element_type,
                    element.required,
                ))))
            }
            Type::Map(map) => {
                let key_id = self.id_for(map.key_field.id);
                let value_id = self.id_for(map.value_field.id);
                let key_type = self.ty(&map.key_field.field_type);
                let value_type = self.ty(&map.value_field.field_type);
                Type::Map(MapType::new(
                    Arc::new(NestedField::map_key_element(key_id, key_type)),
                    Arc::new(NestedField::map_value_element(
                        value_id,
                        value_type,
                        map.value_field.required,
                    )),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{PrimitiveType, Type};

    use super::*;

    fn schema(fields: Vec<NestedField>) -> Schema {
        Schema::builder()
            .with_fields(fields.into_iter().map(Arc::new))
            .build()
            .unwrap()
    }

    #[test]
    fn names_of_the_current_schema_keep_their_ids_others_get_fresh_ones() {
        let long = || Type::Primitive(PrimitiveType::Long);
        let string = || Type::Primitive(PrimitiveType::String);
        // The table: id(1), name(2), tags list<string>(3, element 4); last column id 6 (a
        // dropped column had 5 and 6).
        let base = schema(vec![
            NestedField::required(1, "id", long()),
            NestedField::optional(2, "name", string()),
            NestedField::optional(
                3,
                "tags",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    4,
                    string(),
                    false,
                )))),
            ),
        ]);
        // The new schema as a fresh table would number it.
        let new = schema(vec![
            NestedField::optional(1, "name", long()),
            NestedField::optional(
                2,
                "point",
                Type::Struct(StructType::new(vec![
                    Arc::new(NestedField::optional(4, "x", long())),
                    Arc::new(NestedField::optional(5, "y", long())),
                ])),
            ),
            NestedField::optional(
                3,
                "tags",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    6,
                    long(),
                    true,
                )))),
            ),
        ]);
        let (fresh, ids) = assign_fresh_ids(&new, &base, 6).unwrap();
        // Java: name keeps 2 (whatever its type), point is 7, tags keeps 3 and its element 4;
        // point's children come after the top-level fields: x 8, y 9.
        let expected = schema(vec![
            NestedField::optional(2, "name", long()),
            NestedField::optional(
                7,
                "point",
                Type::Struct(StructType::new(vec![
                    Arc::new(NestedField::optional(8, "x", long())),
                    Arc::new(NestedField::optional(9, "y", long())),
                ])),
            ),
            NestedField::optional(
                3,
                "tags",
                Type::List(ListType::new(Arc::new(NestedField::list_element(
                    4,
                    long(),
                    true,
                )))),
            ),
        ]);
        assert_eq!(fresh.as_struct(), expected.as_struct());
        assert_eq!(ids[&1], 2);
        assert_eq!(ids[&2], 7);
        assert_eq!(ids[&5], 9);
    }
}
