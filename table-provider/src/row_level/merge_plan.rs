//! Planning `MERGE INTO`: the statement (read by `merge_parse`) becomes a [`MergeNode`] over
//! a query that DataFusion plans and optimises like any other:
//!
//! ```text
//! IcebergMerge (MergeNode)
//!   └─ Projection [action, the table's columns (new values, cast to the column types),
//!        │         file path, position]
//!        └─ Filter clause IS NOT NULL
//!             └─ Projection [*, clause: the index of the first WHEN clause that holds]
//!                  └─ Join (inner | left | right | full, by the clause kinds) ON <condition>
//!                       ├─ Projection [source columns, true AS source row marker]
//!                       │    └─ the source (a table or subquery, as any query's)
//!                       └─ TableScan: the target's positional scan (its alias)
//! ```
//!
//! The source is the join's left (build) side: usually the smaller one. A row is matched when
//! both sides are present (the target's file path is never NULL, the source's marker never),
//! not matched (by target) when only the source is, not matched by source when only the
//! target is. Each row takes the first clause of its kind whose condition holds (NULL does
//! not hold); a matched row no clause takes stays (and, for the cardinality check, is kept
//! as [`MergeAction::MatchedKeep`] unless the only matched clause is an unconditional
//! DELETE, as in Spark); other rows no clause takes are dropped. Conditions and values are
//! planned with DataFusion's SQL planner against the columns they may see: both sides for
//! WHEN MATCHED and the ON condition, the source only for WHEN NOT MATCHED, the target only
//! for WHEN NOT MATCHED BY SOURCE. `*` forms take the source's columns by name.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::catalog::TableProvider;
use datafusion::catalog::default_table_source::provider_as_source;
use datafusion::common::{Column, DFSchema, JoinType, ScalarValue, TableReference};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::expr::Case;
use datafusion::logical_expr::{Cast, Expr, Extension, LogicalPlan, LogicalPlanBuilder, col, lit};
use datafusion::sql::planner::object_name_to_table_reference;
use datafusion::sql::sqlparser::ast::{Expr as SqlExpr, ExprWithAlias};

use super::merge_node::MergeNode;
use super::merge_parse::{Clause, ClauseAction, ClauseKind, MergeStatement, parse_merge};
use super::merge_rows::MergeAction;
use crate::error::{Error, Result};
use crate::provider::IcebergTableProvider;
use crate::scan::{FILE_PATH_COLUMN, POSITION_COLUMN};

/// The source side's marker column (`true` on every source row, NULL where the join found
/// none).
const SOURCE_ROW: &str = "__petrel_merge_source_row";
/// The index of the WHEN clause a joined row takes (-1: matched, no clause).
const CLAUSE: &str = "__petrel_merge_clause";
/// The [`MergeAction`] code of a row.
const ACTION: &str = "__petrel_merge_action";

/// The plan of `sql` if it is a `MERGE INTO` (or an `EXPLAIN` of one), planned against
/// `state`'s catalogs; `None` for any other statement.
pub async fn merge_plan(state: &SessionState, sql: &str) -> Result<Option<LogicalPlan>> {
    let Some(parsed) = parse_merge(state, sql)? else {
        return Ok(None);
    };
    let plan = plan_merge(state, parsed.statement).await?;
    Ok(Some(match parsed.explain {
        None => plan,
        Some(options) => LogicalPlanBuilder::from(plan)
            .explain_option_format(options)?
            .build()?,
    }))
}

/// A WHEN clause with its condition and values planned.
struct PlannedClause {
    kind: ClauseKind,
    condition: Option<Expr>,
    action: PlannedAction,
}

enum PlannedAction {
    /// New values by column index (the other columns keep theirs).
    Update(HashMap<usize, Expr>),
    Delete,
    /// A value per column.
    Insert(Vec<Expr>),
}

impl PlannedClause {
    fn code(&self) -> MergeAction {
        match (&self.action, self.kind) {
            (PlannedAction::Insert(_), _) => MergeAction::Insert,
            (PlannedAction::Update(_), ClauseKind::Matched) => MergeAction::MatchedUpdate,
            (PlannedAction::Delete, ClauseKind::Matched) => MergeAction::MatchedDelete,
            (PlannedAction::Update(_), _) => MergeAction::UnmatchedUpdate,
            (PlannedAction::Delete, _) => MergeAction::UnmatchedDelete,
        }
    }
}

async fn plan_merge(state: &SessionState, statement: MergeStatement) -> Result<LogicalPlan> {
    let normalize = state
        .config()
        .options()
        .sql_parser
        .enable_ident_normalization;
    let name = statement.target.to_string();
    let reference = object_name_to_table_reference(statement.target.clone(), normalize)?;
    // The positional scan records the filters it is planned with: the conflict filter.
    let provider = target_table(state, &reference, &name)
        .await?
        .recording_read_filter();
    let table = provider.table().ident().to_string();
    let invalid =
        |message: String| Error::InvalidArgument(format!("MERGE INTO {table}: {message}"));

    // The target: its positional scan under its alias (or its name as written).
    let qualifier = match &statement.target_alias {
        Some(alias) => TableReference::bare(alias.as_str()),
        None => reference.clone(),
    };
    let target = LogicalPlanBuilder::scan(
        qualifier.clone(),
        provider_as_source(Arc::new(provider.positional())),
        None,
    )?
    .build()?;

    // The source, planned as the query `SELECT * FROM <source>`, with its row marker.
    let source_query = format!("SELECT * FROM {}", statement.source);
    let source = state.create_logical_plan(&source_query).await?;
    let source_schema = Arc::clone(source.schema());
    let source_columns: Vec<(Option<TableReference>, FieldRef)> = source
        .schema()
        .iter()
        .map(|(q, f)| (q.cloned(), Arc::clone(f)))
        .collect();
    let mut marked: Vec<Expr> = source
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    marked.push(lit(true).alias(SOURCE_ROW));
    let source = LogicalPlanBuilder::from(source).project(marked)?.build()?;

    let both = source.schema().join(target.schema())?;
    let on = sql_expr(state, &statement.on, &both, "the ON condition")?;

    // The clauses, planned against the columns each may see.
    let columns: Vec<FieldRef> = provider.schema().fields().iter().cloned().collect();
    let target_column = |field: &FieldRef| {
        Expr::Column(Column::new(Some(qualifier.clone()), field.name().as_str()))
    };
    let source_column = |target_name: &str| -> Result<Expr> {
        let found = source_columns
            .iter()
            .find(|(_, f)| f.name() == target_name)
            .or_else(|| {
                let mut same = source_columns
                    .iter()
                    .filter(|(_, f)| f.name().eq_ignore_ascii_case(target_name));
                match (same.next(), same.next()) {
                    (Some(one), None) => Some(one),
                    _ => None,
                }
            });
        found
            .map(|(q, f)| Expr::Column(Column::new(q.clone(), f.name().as_str())))
            .ok_or_else(|| {
                invalid(format!(
                    "the source has no column {target_name} for UPDATE SET * / INSERT *"
                ))
            })
    };
    let column_index = |name: &str| -> Result<usize> {
        columns
            .iter()
            .position(|f| f.name() == name)
            .ok_or_else(|| invalid(format!("the table has no column {name}")))
    };
    let mut clauses = Vec::with_capacity(statement.clauses.len());
    for Clause {
        kind,
        condition,
        action,
    } in statement.clauses
    {
        let scope = match kind {
            ClauseKind::Matched => &both,
            ClauseKind::NotMatched => source_schema.as_ref(),
            ClauseKind::NotMatchedBySource => target.schema().as_ref(),
        };
        let what = kind.sql();
        let condition = condition
            .map(|c| sql_expr(state, &c, scope, &format!("the {what} condition")))
            .transpose()?;
        let action = match action {
            ClauseAction::Delete => PlannedAction::Delete,
            ClauseAction::Update(assignments) => {
                let mut values = HashMap::new();
                for (column, value) in assignments {
                    let index = column_index(&column)?;
                    let what = format!("the value of {column} in {what} … UPDATE");
                    values.insert(index, sql_expr(state, &value, scope, &what)?);
                }
                PlannedAction::Update(values)
            }
            ClauseAction::UpdateStar => {
                if kind != ClauseKind::Matched {
                    return Err(invalid(format!(
                        "UPDATE SET * needs a source row: not allowed in {what}"
                    )));
                }
                let mut values = HashMap::new();
                for (index, field) in columns.iter().enumerate() {
                    values.insert(index, source_column(field.name())?);
                }
                PlannedAction::Update(values)
            }
            ClauseAction::Insert {
                columns: named,
                values,
            } => {
                let mut row: Vec<Option<Expr>> = vec![None; columns.len()];
                if named.is_empty() {
                    if values.len() != columns.len() {
                        return Err(invalid(format!(
                            "INSERT VALUES has {} values for {} columns",
                            values.len(),
                            columns.len()
                        )));
                    }
                    for (index, value) in values.iter().enumerate() {
                        let what =
                            format!("the value of {} in {what} … INSERT", columns[index].name());
                        row[index] = Some(sql_expr(state, value, scope, &what)?);
                    }
                } else {
                    for (column, value) in named.iter().zip(&values) {
                        let what = format!("the value of {column} in {what} … INSERT");
                        row[column_index(column)?] = Some(sql_expr(state, value, scope, &what)?);
                    }
                }
                PlannedAction::Insert(
                    row.into_iter()
                        .map(|v| v.unwrap_or(Expr::Literal(ScalarValue::Null, None)))
                        .collect(),
                )
            }
            ClauseAction::InsertStar => PlannedAction::Insert(
                columns
                    .iter()
                    .map(|f| source_column(f.name()))
                    .collect::<Result<_>>()?,
            ),
        };
        clauses.push(PlannedClause {
            kind,
            condition,
            action,
        });
    }

    // Spark checks the cardinality unless the only matched clause is an unconditional DELETE.
    let matched: Vec<&PlannedClause> = clauses
        .iter()
        .filter(|c| c.kind == ClauseKind::Matched)
        .collect();
    let check_cardinality = match matched.as_slice() {
        [] => false,
        [only] => !(only.condition.is_none() && matches!(only.action, PlannedAction::Delete)),
        _ => true,
    };
    let has = |kind| clauses.iter().any(|c| c.kind == kind);
    // Source on the left: NOT MATCHED needs the source rows without a target row (left
    // outer), NOT MATCHED BY SOURCE the target rows without a source row (right outer).
    let join_type = match (
        has(ClauseKind::NotMatched),
        has(ClauseKind::NotMatchedBySource),
    ) {
        (false, false) => JoinType::Inner,
        (true, false) => JoinType::Left,
        (false, true) => JoinType::Right,
        (true, true) => JoinType::Full,
    };

    let target_present =
        Expr::Column(Column::new(Some(qualifier.clone()), FILE_PATH_COLUMN)).is_not_null();
    let source_present = Expr::Column(Column::new_unqualified(SOURCE_ROW)).is_not_null();
    let matched_default = if check_cardinality {
        lit(-1i32)
    } else {
        null_i32()
    };
    let clause = Expr::Case(Case::new(
        None,
        vec![
            (
                Box::new(target_present.clone().and(source_present.clone())),
                Box::new(first_clause(&clauses, ClauseKind::Matched, matched_default)),
            ),
            (
                Box::new(source_present),
                Box::new(first_clause(&clauses, ClauseKind::NotMatched, null_i32())),
            ),
            (
                Box::new(target_present),
                Box::new(first_clause(
                    &clauses,
                    ClauseKind::NotMatchedBySource,
                    null_i32(),
                )),
            ),
        ],
        None,
    ));

    // The action and the new values, by the clause each row takes.
    let mut action_branches = vec![(
        Box::new(lit(-1i32)),
        Box::new(lit(MergeAction::MatchedKeep.code())),
    )];
    for (index, c) in clauses.iter().enumerate() {
        action_branches.push((Box::new(clause_lit(index)), Box::new(lit(c.code().code()))));
    }
    let mut rows: Vec<Expr> = vec![
        Expr::Case(Case::new(
            Some(Box::new(col(CLAUSE))),
            action_branches,
            None,
        ))
        .alias(ACTION),
    ];
    for (i, field) in columns.iter().enumerate() {
        let mut branches = Vec::new();
        for (index, c) in clauses.iter().enumerate() {
            let value = match &c.action {
                PlannedAction::Update(values) => values.get(&i),
                PlannedAction::Insert(values) => values.get(i),
                PlannedAction::Delete => None,
            };
            if let Some(value) = value {
                branches.push((
                    Box::new(clause_lit(index)),
                    Box::new(cast(value.clone(), field.data_type())),
                ));
            }
        }
        let old = target_column(field);
        let value = if branches.is_empty() {
            old
        } else {
            Expr::Case(Case::new(
                Some(Box::new(col(CLAUSE))),
                branches,
                Some(Box::new(old)),
            ))
        };
        rows.push(value.alias(field.name().as_str()));
    }
    rows.push(
        Expr::Column(Column::new(Some(qualifier.clone()), FILE_PATH_COLUMN))
            .alias(FILE_PATH_COLUMN),
    );
    rows.push(
        Expr::Column(Column::new(Some(qualifier.clone()), POSITION_COLUMN)).alias(POSITION_COLUMN),
    );

    let joined = LogicalPlanBuilder::from(source).join_on(target, join_type, [on])?;
    let mut with_clause: Vec<Expr> = joined
        .schema()
        .columns()
        .into_iter()
        .map(Expr::Column)
        .collect();
    with_clause.push(clause.alias(CLAUSE));
    let input = joined
        .project(with_clause)?
        .filter(col(CLAUSE).is_not_null())?
        .project(rows)?
        .build()?;
    let node = MergeNode::try_new(Arc::new(provider), Arc::new(input), check_cardinality)?;
    Ok(LogicalPlan::Extension(Extension {
        node: Arc::new(node),
    }))
}

/// The Iceberg table `reference` names, writable.
async fn target_table(
    state: &SessionState,
    reference: &TableReference,
    name: &str,
) -> Result<IcebergTableProvider> {
    let schema = state.schema_for_ref(reference.clone())?;
    let Some(table) = schema.table(reference.table()).await? else {
        return Err(Error::NotFound(format!("MERGE INTO {name}: no such table")));
    };
    let Some(provider) = table.as_any().downcast_ref::<IcebergTableProvider>() else {
        return Err(Error::InvalidArgument(format!(
            "MERGE INTO {name}: only Iceberg tables can be merged into"
        )));
    };
    if provider.catalog().is_none() {
        return Err(Error::Unsupported {
            table: provider.table().ident().to_string(),
            message: "this table is read-only here".into(),
        });
    }
    if !provider.reads_current() {
        return Err(Error::Unsupported {
            table: provider.table().ident().to_string(),
            message: "MERGE INTO a snapshot, branch or tag is not supported: merge into the \
                      table (its main branch)"
                .into(),
        });
    }
    Ok(provider.clone())
}

/// `expr` planned by DataFusion's SQL planner against `schema`.
fn sql_expr(state: &SessionState, expr: &SqlExpr, schema: &DFSchema, what: &str) -> Result<Expr> {
    state
        .create_logical_expr_from_sql_expr(
            ExprWithAlias {
                expr: expr.clone(),
                alias: None,
            },
            schema,
        )
        .map_err(|e| Error::InvalidArgument(format!("MERGE: {what} ({expr}): {e}")))
}

/// The index of the first clause of `kind` whose condition holds, else `default`.
fn first_clause(clauses: &[PlannedClause], kind: ClauseKind, default: Expr) -> Expr {
    let mut branches = Vec::new();
    for (index, c) in clauses.iter().enumerate().filter(|(_, c)| c.kind == kind) {
        match &c.condition {
            Some(condition) => {
                branches.push((Box::new(condition.clone()), Box::new(clause_lit(index))));
            }
            // Unconditional: it takes every row the earlier clauses left.
            None => {
                return if branches.is_empty() {
                    clause_lit(index)
                } else {
                    Expr::Case(Case::new(None, branches, Some(Box::new(clause_lit(index)))))
                };
            }
        }
    }
    if branches.is_empty() {
        default
    } else {
        Expr::Case(Case::new(None, branches, Some(Box::new(default))))
    }
}

fn clause_lit(index: usize) -> Expr {
    lit(i32::try_from(index).unwrap_or(i32::MAX))
}

fn null_i32() -> Expr {
    Expr::Literal(ScalarValue::Int32(None), None)
}

/// `expr` cast to the column type `to` (a no-op when it has that type already).
fn cast(expr: Expr, to: &DataType) -> Expr {
    Expr::Cast(Cast::new(Box::new(expr), to.clone()))
}
