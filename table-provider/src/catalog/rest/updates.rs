//! A commit as the REST catalog takes it: the updates that turn the base metadata into the new
//! metadata Petrel computed, and the requirements under which they apply.
//!
//! Petrel builds the whole new metadata (snapshot producer, DDL, procedures); a REST catalog
//! writes the metadata file itself from `updates` applied to *its* current metadata, after
//! checking `requirements` (a failed one is 409, which Petrel's commit loop treats as a lost
//! race: reload, revalidate, retry). The requirements are Iceberg Java's
//! `UpdateRequirements.forUpdateTable`: the table's UUID always; each ref the commit moves
//! must still point where it pointed in the base (`assert-ref-snapshot-id`, `null` for a new
//! ref); a new schema asserts the last assigned field id and a schema change the current schema
//! id; a new spec the last assigned partition id and a spec change the default spec id; a sort
//! order change the default sort order id.

use std::collections::{BTreeMap, HashMap, HashSet};

use iceberg::spec::{SnapshotReference, TableMetadata};
use iceberg::{TableRequirement, TableUpdate};

use crate::error::{Error, Result};

/// What to send for one commit.
#[derive(Debug, Default)]
pub(super) struct TableChanges {
    pub(super) requirements: Vec<TableRequirement>,
    pub(super) updates: Vec<TableUpdate>,
}

/// The refs of a metadata (kept private by the `iceberg` crate: read from its JSON). A table
/// without refs but with a current snapshot has `main` there.
fn refs_of(table: &str, metadata: &TableMetadata) -> Result<BTreeMap<String, SnapshotReference>> {
    let unreadable = |e: serde_json::Error| Error::Unsupported {
        table: table.to_string(),
        message: format!("cannot read the refs of the table metadata: {e}"),
    };
    let json = serde_json::to_value(metadata).map_err(unreadable)?;
    let mut refs: BTreeMap<String, SnapshotReference> = match json.get("refs") {
        Some(refs) if !refs.is_null() => {
            serde_json::from_value(refs.clone()).map_err(unreadable)?
        }
        _ => BTreeMap::new(),
    };
    if let Some(current) = metadata.current_snapshot_id()
        && !refs.contains_key(iceberg::spec::MAIN_BRANCH)
    {
        refs.insert(
            iceberg::spec::MAIN_BRANCH.to_string(),
            SnapshotReference::new(
                current,
                iceberg::spec::SnapshotRetention::branch(None, None, None),
            ),
        );
    }
    Ok(refs)
}

/// The updates from `base` to `new`, and their requirements.
pub(super) fn table_changes(
    table: &str,
    base: &TableMetadata,
    new: &TableMetadata,
) -> Result<TableChanges> {
    let mut changes = TableChanges::default();
    let updates = &mut changes.updates;
    let requirements = &mut changes.requirements;
    requirements.push(TableRequirement::UuidMatch { uuid: base.uuid() });
    if new.uuid() != base.uuid() {
        return Err(Error::InvalidArgument(format!(
            "table {table}: a commit cannot change the table's UUID"
        )));
    }

    if new.format_version() != base.format_version() {
        updates.push(TableUpdate::UpgradeFormatVersion {
            format_version: new.format_version(),
        });
    }

    // Schemas.
    let base_schemas: HashSet<i32> = base.schemas_iter().map(|s| s.schema_id()).collect();
    let added_schemas: Vec<i32> = new
        .schemas_iter()
        .filter(|s| !base_schemas.contains(&s.schema_id()))
        .map(|s| {
            updates.push(TableUpdate::AddSchema {
                schema: s.as_ref().clone(),
            });
            s.schema_id()
        })
        .collect();
    if !added_schemas.is_empty() {
        requirements.push(TableRequirement::LastAssignedFieldIdMatch {
            last_assigned_field_id: base.last_column_id(),
        });
    }
    if new.current_schema_id() != base.current_schema_id() {
        let id = new.current_schema_id();
        updates.push(TableUpdate::SetCurrentSchema {
            schema_id: if added_schemas.last() == Some(&id) {
                -1
            } else {
                id
            },
        });
        requirements.push(TableRequirement::CurrentSchemaIdMatch {
            current_schema_id: base.current_schema_id(),
        });
    }

    // Partition specs.
    let base_specs: HashSet<i32> = base.partition_specs_iter().map(|s| s.spec_id()).collect();
    let added_specs: Vec<i32> = new
        .partition_specs_iter()
        .filter(|s| !base_specs.contains(&s.spec_id()))
        .map(|s| {
            updates.push(TableUpdate::AddSpec {
                spec: s.as_ref().clone().into_unbound(),
            });
            s.spec_id()
        })
        .collect();
    if !added_specs.is_empty() {
        requirements.push(TableRequirement::LastAssignedPartitionIdMatch {
            last_assigned_partition_id: base.last_partition_id(),
        });
    }
    if new.default_partition_spec_id() != base.default_partition_spec_id() {
        let id = new.default_partition_spec_id();
        updates.push(TableUpdate::SetDefaultSpec {
            spec_id: if added_specs.last() == Some(&id) {
                -1
            } else {
                id
            },
        });
        requirements.push(TableRequirement::DefaultSpecIdMatch {
            default_spec_id: base.default_partition_spec_id(),
        });
    }

    // Sort orders.
    let base_orders: HashSet<i64> = base.sort_orders_iter().map(|o| o.order_id).collect();
    let added_orders: Vec<i64> = new
        .sort_orders_iter()
        .filter(|o| !base_orders.contains(&o.order_id))
        .map(|o| {
            updates.push(TableUpdate::AddSortOrder {
                sort_order: o.as_ref().clone(),
            });
            o.order_id
        })
        .collect();
    if new.default_sort_order_id() != base.default_sort_order_id() {
        let id = new.default_sort_order_id();
        updates.push(TableUpdate::SetDefaultSortOrder {
            sort_order_id: if added_orders.last() == Some(&id) {
                -1
            } else {
                id
            },
        });
        requirements.push(TableRequirement::DefaultSortOrderIdMatch {
            default_sort_order_id: base.default_sort_order_id(),
        });
    }

    if new.location() != base.location() {
        updates.push(TableUpdate::SetLocation {
            location: new.location().to_string(),
        });
    }

    // Properties.
    let set: HashMap<String, String> = new
        .properties()
        .iter()
        .filter(|(k, v)| base.properties().get(*k) != Some(*v))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !set.is_empty() {
        updates.push(TableUpdate::SetProperties { updates: set });
    }
    let mut removals: Vec<String> = base
        .properties()
        .keys()
        .filter(|k| !new.properties().contains_key(*k))
        .cloned()
        .collect();
    if !removals.is_empty() {
        removals.sort();
        updates.push(TableUpdate::RemoveProperties { removals });
    }

    // Snapshots, parents first.
    let mut added_snapshots: Vec<_> = new
        .snapshots()
        .filter(|s| base.snapshot_by_id(s.snapshot_id()).is_none())
        .collect();
    added_snapshots.sort_by_key(|s| (s.sequence_number(), s.timestamp_ms()));
    for snapshot in added_snapshots {
        updates.push(TableUpdate::AddSnapshot {
            snapshot: snapshot.as_ref().clone(),
        });
    }

    // Refs: removed, then moved or new (each asserting where the base had it).
    let base_refs = refs_of(table, base)?;
    let new_refs = refs_of(table, new)?;
    for (name, reference) in &base_refs {
        if !new_refs.contains_key(name) {
            updates.push(TableUpdate::RemoveSnapshotRef {
                ref_name: name.clone(),
            });
            requirements.push(TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: Some(reference.snapshot_id),
            });
        }
    }
    for (name, reference) in &new_refs {
        let before = base_refs.get(name);
        if before != Some(reference) {
            updates.push(TableUpdate::SetSnapshotRef {
                ref_name: name.clone(),
                reference: reference.clone(),
            });
            requirements.push(TableRequirement::RefSnapshotIdMatch {
                r#ref: name.clone(),
                snapshot_id: before.map(|r| r.snapshot_id),
            });
        }
    }

    let mut removed_snapshots: Vec<i64> = base
        .snapshots()
        .filter(|s| new.snapshot_by_id(s.snapshot_id()).is_none())
        .map(|s| s.snapshot_id())
        .collect();
    if !removed_snapshots.is_empty() {
        removed_snapshots.sort_unstable();
        updates.push(TableUpdate::RemoveSnapshots {
            snapshot_ids: removed_snapshots,
        });
    }

    // Statistics files.
    for stats in new.statistics_iter() {
        if base.statistics_for_snapshot(stats.snapshot_id) != Some(stats) {
            updates.push(TableUpdate::SetStatistics {
                statistics: stats.clone(),
            });
        }
    }
    for stats in base.statistics_iter() {
        if new.statistics_for_snapshot(stats.snapshot_id).is_none() {
            updates.push(TableUpdate::RemoveStatistics {
                snapshot_id: stats.snapshot_id,
            });
        }
    }
    for stats in new.partition_statistics_iter() {
        if base.partition_statistics_for_snapshot(stats.snapshot_id) != Some(stats) {
            updates.push(TableUpdate::SetPartitionStatistics {
                partition_statistics: stats.clone(),
            });
        }
    }
    for stats in base.partition_statistics_iter() {
        if new
            .partition_statistics_for_snapshot(stats.snapshot_id)
            .is_none()
        {
            updates.push(TableUpdate::RemovePartitionStatistics {
                snapshot_id: stats.snapshot_id,
            });
        }
    }

    // What a REST commit cannot express from here.
    let removed_schemas: Vec<i32> = base
        .schemas_iter()
        .map(|s| s.schema_id())
        .filter(|id| new.schema_by_id(*id).is_none())
        .collect();
    if !removed_schemas.is_empty() {
        updates.push(TableUpdate::RemoveSchemas {
            schema_ids: removed_schemas,
        });
    }
    let removed_specs: Vec<i32> = base
        .partition_specs_iter()
        .map(|s| s.spec_id())
        .filter(|id| new.partition_spec_by_id(*id).is_none())
        .collect();
    if !removed_specs.is_empty() {
        updates.push(TableUpdate::RemovePartitionSpecs {
            spec_ids: removed_specs,
        });
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use iceberg::spec::{
        NestedField, Operation, PrimitiveType, Schema, Snapshot, SnapshotRetention, Summary, Type,
    };

    use super::*;

    fn base() -> TableMetadata {
        let schema = Schema::builder()
            .with_fields(vec![Arc::new(NestedField::required(
                1,
                "id",
                Type::Primitive(PrimitiveType::Long),
            ))])
            .build()
            .unwrap();
        crate::ddl::default_table_metadata(schema, "file:///t".into()).unwrap()
    }

    fn with_snapshot(metadata: TableMetadata, id: i64, parent: Option<i64>) -> TableMetadata {
        let snapshot = Snapshot::builder()
            .with_snapshot_id(id)
            .with_parent_snapshot_id(parent)
            .with_sequence_number(metadata.next_sequence_number())
            .with_timestamp_ms(metadata.last_updated_ms() + 1)
            .with_manifest_list(format!("file:///t/metadata/snap-{id}.avro"))
            .with_schema_id(0)
            .with_summary(Summary {
                operation: Operation::Append,
                additional_properties: HashMap::new(),
            })
            .build();
        metadata
            .into_builder(Some("file:///t/metadata/v1.metadata.json".into()))
            .set_branch_snapshot(snapshot, "main")
            .unwrap()
            .build()
            .unwrap()
            .metadata
    }

    #[test]
    fn an_append_adds_its_snapshot_and_moves_main_where_main_was() {
        let base = with_snapshot(base(), 10, None);
        let new = with_snapshot(base.clone(), 11, Some(10));
        let changes = table_changes("t", &base, &new).unwrap();
        let json = serde_json::to_value(&changes.updates).unwrap();
        let actions: Vec<&str> = json
            .as_array()
            .unwrap()
            .iter()
            .map(|u| u["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, ["add-snapshot", "set-snapshot-ref"]);
        assert_eq!(json[1]["ref-name"], "main");
        assert_eq!(json[1]["snapshot-id"], 11);
        assert_eq!(
            changes.requirements,
            vec![
                TableRequirement::UuidMatch { uuid: base.uuid() },
                TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: Some(10)
                },
            ]
        );
    }

    #[test]
    fn the_first_snapshot_asserts_main_does_not_exist_and_properties_diff() {
        let base = base();
        let mut props = base.properties().clone();
        props.insert("k".into(), "v".into());
        let new = with_snapshot(base.clone(), 7, None)
            .into_builder(None)
            .set_properties(HashMap::from([("k".to_string(), "v".to_string())]))
            .unwrap()
            .build()
            .unwrap()
            .metadata;
        let changes = table_changes("t", &base, &new).unwrap();
        assert!(
            changes
                .requirements
                .contains(&TableRequirement::RefSnapshotIdMatch {
                    r#ref: "main".into(),
                    snapshot_id: None
                })
        );
        assert!(changes.updates.contains(&TableUpdate::SetProperties {
            updates: HashMap::from([("k".to_string(), "v".to_string())])
        }));
        // Applying the updates to the base gives the new metadata's snapshots and refs.
        let mut builder = base.clone().into_builder(None);
        for update in changes.updates {
            builder = update.apply(builder).unwrap();
        }
        let applied = builder.build().unwrap().metadata;
        assert_eq!(applied.current_snapshot_id(), Some(7));
        assert_eq!(applied.properties().get("k").map(String::as_str), Some("v"));
        let _ = SnapshotRetention::branch(None, None, None);
    }

    #[test]
    fn expiring_a_snapshot_removes_it_without_asserting_main() {
        let first = with_snapshot(base(), 1, None);
        let base = with_snapshot(first, 2, Some(1));
        let new = base
            .clone()
            .into_builder(None)
            .remove_snapshots(&[1])
            .build()
            .unwrap()
            .metadata;
        let changes = table_changes("t", &base, &new).unwrap();
        assert_eq!(
            changes.updates,
            vec![TableUpdate::RemoveSnapshots {
                snapshot_ids: vec![1]
            }]
        );
        assert_eq!(changes.requirements.len(), 1);
    }
}
