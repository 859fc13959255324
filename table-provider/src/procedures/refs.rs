//! Branches and tags: `ALTER TABLE t CREATE [OR REPLACE] BRANCH | TAG …`, `REPLACE …`,
//! `DROP BRANCH | TAG …`, as Iceberg Java's `SnapshotManager` does them (`createBranch`,
//! `replaceBranch`, `removeBranch`, and the tag equivalents): a new ref points at the snapshot
//! `AS OF VERSION` names, else the current one; `main` cannot be dropped; a branch is not
//! dropped or replaced as a tag, nor a tag as a branch. Each is one metadata commit.

use std::collections::HashMap;

use datafusion::execution::context::SessionState;
use iceberg::spec::{MAIN_BRANCH, SnapshotReference, SnapshotRetention, TableMetadata};
use serde::Deserialize;

use super::commit::{Change, commit_metadata_change};
use super::context::ProcedureContext;
use super::parser::{RefAction, RefStatement};
use super::set_current_snapshot::builder;
use crate::catalog::RefKind;
use crate::error::{Error, Result};

/// Runs a branch / tag statement.
pub async fn execute_ref_statement(state: &SessionState, statement: RefStatement) -> Result<()> {
    let (ctx, ident) = ProcedureContext::for_table_name(state, &statement.table)?;
    let table = ctx.catalog.load_table(&ident).await?;
    let what = match statement.kind {
        RefKind::Branch => "branch",
        RefKind::Tag => "tag",
    };
    let name = statement.name.as_str();
    commit_metadata_change(ctx.catalog.as_ref(), table, |table| {
        let metadata = table.metadata();
        let refs = snapshot_refs(metadata)?;
        let existing = refs.get(name);
        let invalid = |message: String| {
            Error::InvalidArgument(format!("table {}: {what} {name}: {message}", table.ident()))
        };
        if let Some(existing) = existing {
            let is_branch = existing.is_branch();
            if is_branch != (statement.kind == RefKind::Branch) {
                return Err(invalid(format!(
                    "{name} is a {}, not a {what}",
                    if is_branch { "branch" } else { "tag" }
                )));
            }
        }
        match &statement.action {
            RefAction::Drop { if_exists } => {
                if name == MAIN_BRANCH {
                    return Err(invalid("the main branch cannot be dropped".into()));
                }
                if existing.is_none() {
                    if *if_exists {
                        return Ok(Change::Unchanged(()));
                    }
                    return Err(Error::NotFound(format!(
                        "table {}: {what} {name} does not exist",
                        table.ident()
                    )));
                }
                let updated = builder(table).remove_ref(name).build()?.metadata;
                Ok(Change::Commit(Box::new(updated), ()))
            }
            RefAction::Create {
                create,
                replace,
                if_not_exists,
                snapshot_id,
                max_ref_age_ms,
            } => {
                match (existing, create, replace) {
                    (Some(_), _, _) if *if_not_exists => return Ok(Change::Unchanged(())),
                    (Some(_), _, false) => {
                        return Err(Error::AlreadyExists(format!(
                            "table {}: {what} {name} already exists",
                            table.ident()
                        )));
                    }
                    (None, false, _) => {
                        return Err(Error::NotFound(format!(
                            "table {}: {what} {name} does not exist (use CREATE OR REPLACE)",
                            table.ident()
                        )));
                    }
                    _ => {}
                }
                let target = match snapshot_id {
                    Some(id) => {
                        if metadata.snapshot_by_id(*id).is_none() {
                            return Err(Error::NotFound(format!(
                                "table {} has no snapshot with id {id}",
                                table.ident()
                            )));
                        }
                        *id
                    }
                    None => metadata
                        .current_snapshot()
                        .map(|s| s.snapshot_id())
                        .ok_or_else(|| {
                            invalid("the table has no snapshot yet: give AS OF VERSION".into())
                        })?,
                };
                let retention = match (statement.kind, existing.map(|r| &r.retention)) {
                    (
                        RefKind::Branch,
                        Some(SnapshotRetention::Branch {
                            min_snapshots_to_keep,
                            max_snapshot_age_ms,
                            max_ref_age_ms: old,
                        }),
                    ) => SnapshotRetention::branch(
                        *min_snapshots_to_keep,
                        *max_snapshot_age_ms,
                        max_ref_age_ms.or(*old),
                    ),
                    (RefKind::Branch, _) => SnapshotRetention::branch(None, None, *max_ref_age_ms),
                    (
                        RefKind::Tag,
                        Some(SnapshotRetention::Tag {
                            max_ref_age_ms: old,
                        }),
                    ) => SnapshotRetention::Tag {
                        max_ref_age_ms: max_ref_age_ms.or(*old),
                    },
                    (RefKind::Tag, _) => SnapshotRetention::Tag {
                        max_ref_age_ms: *max_ref_age_ms,
                    },
                };
                let reference = SnapshotReference::new(target, retention);
                if existing == Some(&reference) {
                    return Ok(Change::Unchanged(()));
                }
                let updated = builder(table).set_ref(name, reference)?.build()?.metadata;
                Ok(Change::Commit(Box::new(updated), ()))
            }
        }
    })
    .await?;
    Ok(())
}

/// The refs of `metadata` with their retention settings (the `iceberg` crate keeps them to
/// itself; they are read back from its serialised form). A table with a current snapshot and no
/// `main` ref (format 1) gets `main`.
pub fn snapshot_refs(metadata: &TableMetadata) -> Result<HashMap<String, SnapshotReference>> {
    #[derive(Deserialize)]
    struct Refs {
        #[serde(default)]
        refs: HashMap<String, SnapshotReference>,
    }
    let value = serde_json::to_value(metadata)
        .map_err(|e| Error::InvalidArgument(format!("table metadata as JSON: {e}")))?;
    let mut refs = serde_json::from_value::<Refs>(value)
        .map_err(|e| Error::InvalidArgument(format!("table refs: {e}")))?
        .refs;
    if let Some(current) = metadata.current_snapshot() {
        refs.entry(MAIN_BRANCH.to_string()).or_insert_with(|| {
            SnapshotReference::new(
                current.snapshot_id(),
                SnapshotRetention::branch(None, None, None),
            )
        });
    }
    Ok(refs)
}
