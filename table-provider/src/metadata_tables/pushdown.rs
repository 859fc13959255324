//! Filters pushed into the files and entries tables: the manifests that cannot hold a matching
//! row are not read.
//!
//! A filter prunes when it compares one of these columns with constants (`=`, `<>`, `<`, `<=`,
//! `>`, `>=`, `IN (…)`, `BETWEEN`, a constant on either side):
//!
//! | column (files tables / entries tables)      | a manifest is skipped when               |
//! |---------------------------------------------|------------------------------------------|
//! | `content` / `data_file.content`             | its content (data: 0; deletes: 1, 2) fails |
//! | `spec_id` / `data_file.spec_id`             | its partition spec id fails              |
//! | `partition.<f>` / `data_file.partition.<f>` | its partition summaries exclude every match, or its spec has no field `<f>` (the value is then null, and a comparison with null is never true) |
//! | `status` (entries tables)                   | its added / existing / deleted counts say no entry has a matching status |
//!
//! Pruning is `Inexact`: DataFusion still applies the filter to every row read, so the result
//! is that of the unfiltered table filtered; a filter that cannot be read this way (an `OR`, a
//! function, another column) prunes nothing.

use std::cmp::Ordering;

use datafusion::common::ScalarValue;
use datafusion::logical_expr::expr::InList;
use datafusion::logical_expr::{BinaryExpr, Expr, Operator};
use iceberg::spec::{ManifestContentType, ManifestFile, PrimitiveLiteral, TableMetadata, Type};

use super::partition_type::PartitionType;
use crate::plan::{CmpOp, PartitionFilter, Predicate, to_iceberg_literal};

/// A column a filter may prune by.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Column {
    Content,
    SpecId,
    Status,
    /// A field of the union partition type, by partition field id.
    Partition(i32),
}

/// What a filter asks of its column.
#[derive(Debug, Clone)]
enum Test {
    Cmp(CmpOp, ScalarValue),
    In(Vec<ScalarValue>),
    /// Every test holds (`BETWEEN`, `AND`).
    All(Vec<Test>),
    /// Some test holds (`OR` of tests of the same column, as DataFusion writes a short `IN`).
    Any(Vec<Test>),
}

impl Test {
    fn literals(&self) -> Vec<&ScalarValue> {
        match self {
            Test::Cmp(_, l) => vec![l],
            Test::In(list) => list.iter().collect(),
            Test::All(tests) | Test::Any(tests) => tests.iter().flat_map(Test::literals).collect(),
        }
    }

    /// Whether the integer `value` passes (a comparison it cannot decide passes).
    fn holds_for(&self, value: i64) -> bool {
        let cmp = |literal: &ScalarValue| -> Option<Ordering> {
            match literal.cast_to(&arrow::datatypes::DataType::Int64).ok()? {
                ScalarValue::Int64(Some(l)) => Some(value.cmp(&l)),
                _ => None,
            }
        };
        match self {
            Test::Cmp(op, literal) => cmp(literal).is_none_or(|o| op.holds(o)),
            Test::In(list) => list
                .iter()
                .any(|l| cmp(l).is_none_or(|o| o == Ordering::Equal)),
            Test::All(tests) => tests.iter().all(|t| t.holds_for(value)),
            Test::Any(tests) => tests.iter().any(|t| t.holds_for(value)),
        }
    }

    /// The test as a predicate over partition field `key` of type `ty` (`None`: a literal does
    /// not convert exactly).
    fn predicate(&self, key: i32, ty: &Type) -> Option<Predicate> {
        Some(match self {
            Test::Cmp(op, literal) => Predicate::Cmp {
                key,
                op: *op,
                value: to_iceberg_literal(literal, ty)?,
            },
            Test::In(list) => Predicate::In {
                key,
                values: list
                    .iter()
                    .map(|l| to_iceberg_literal(l, ty))
                    .collect::<Option<Vec<PrimitiveLiteral>>>()?,
                negated: false,
            },
            Test::All(tests) => Predicate::and(
                tests
                    .iter()
                    .map(|t| t.predicate(key, ty))
                    .collect::<Option<Vec<_>>>()?,
            ),
            Test::Any(tests) => Predicate::or(
                tests
                    .iter()
                    .map(|t| t.predicate(key, ty))
                    .collect::<Option<Vec<_>>>()?,
            ),
        })
    }
}

/// One pushed filter, understood.
#[derive(Debug, Clone)]
struct Leaf {
    column: Column,
    test: Test,
}

/// The pushed filters of one scan of a files or entries table, as a manifest test.
#[derive(Debug, Clone, Default)]
pub(crate) struct ManifestFilter {
    leaves: Vec<Leaf>,
}

/// Whether the filters are over the entries tables' `data_file` struct (else the files tables'
/// top-level columns).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    Files,
    Entries,
}

impl ManifestFilter {
    /// The filters of `filters` that prune (the others are left to DataFusion alone).
    pub(crate) fn new(filters: &[Expr], shape: Shape, partition: &PartitionType) -> Self {
        Self {
            leaves: filters
                .iter()
                .filter_map(|f| leaf(f, shape, partition))
                .collect(),
        }
    }

    /// Whether `filter` prunes manifests.
    pub(crate) fn prunes(filter: &Expr, shape: Shape, partition: &PartitionType) -> bool {
        leaf(filter, shape, partition).is_some()
    }

    /// Whether the manifest `mf` of `metadata` may hold a row every filter accepts.
    pub(crate) fn may_match(&self, mf: &ManifestFile, metadata: &TableMetadata) -> bool {
        self.leaves.iter().all(|leaf| leaf.may_match(mf, metadata))
    }
}

impl Leaf {
    fn may_match(&self, mf: &ManifestFile, metadata: &TableMetadata) -> bool {
        match self.column {
            Column::Content => {
                let values: &[i64] = match mf.content {
                    ManifestContentType::Data => &[0],
                    ManifestContentType::Deletes => &[1, 2],
                };
                values.iter().any(|v| self.test.holds_for(*v))
            }
            Column::SpecId => self.test.holds_for(i64::from(mf.partition_spec_id)),
            Column::Status => {
                // A count that is absent (old manifests) may be anything.
                let may_have = |count: Option<u32>| count.is_none_or(|c| c > 0);
                [
                    (0, may_have(mf.existing_files_count)),
                    (1, may_have(mf.added_files_count)),
                    (2, may_have(mf.deleted_files_count)),
                ]
                .into_iter()
                .any(|(status, present)| present && self.test.holds_for(status))
            }
            Column::Partition(field_id) => self.partition_may_match(field_id, mf, metadata),
        }
    }

    fn partition_may_match(
        &self,
        field_id: i32,
        mf: &ManifestFile,
        metadata: &TableMetadata,
    ) -> bool {
        let Some(spec) = metadata.partition_spec_by_id(mf.partition_spec_id) else {
            return true;
        };
        let Some(position) = spec.fields().iter().position(|f| f.field_id == field_id) else {
            // The spec has no such field: every file's value is null, no comparison holds.
            return false;
        };
        let Some(ty) = spec.fields().get(position).and_then(|f| {
            let source = metadata
                .schemas_iter()
                .find_map(|s| s.field_by_id(f.source_id))?;
            f.transform.result_type(&source.field_type).ok()
        }) else {
            return true;
        };
        let Some(predicate) = self.test.predicate(position as i32, &ty) else {
            return true;
        };
        PartitionFilter::on_partition_values(predicate, spec, metadata.current_schema())
            .matches_summaries(mf.partitions.as_deref())
    }
}

/// `filter` as a [`Leaf`], if it prunes.
fn leaf(filter: &Expr, shape: Shape, partition: &PartitionType) -> Option<Leaf> {
    let (path, test) = test_of(filter)?;
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    let column = match (shape, names.as_slice()) {
        (Shape::Entries, ["status"]) => Column::Status,
        (Shape::Entries, ["data_file", rest @ ..]) | (Shape::Files, rest) => match rest {
            ["content"] => Column::Content,
            ["spec_id"] => Column::SpecId,
            ["partition", field] => Column::Partition(partition.field_named(field)?.1),
            _ => return None,
        },
        _ => return None,
    };
    let literals = test.literals();
    let converts = match column {
        // Only literals that convert exactly to the field's type.
        Column::Partition(id) => {
            let ty = partition.field_type(id)?;
            literals.iter().all(|l| to_iceberg_literal(l, ty).is_some())
        }
        _ => literals.iter().all(|l| l.data_type().is_integer()),
    };
    converts.then_some(Leaf { column, test })
}

/// The column path `filter` tests and the test, if it tests one column against constants.
fn test_of(filter: &Expr) -> Option<(Vec<String>, Test)> {
    match filter {
        Expr::BinaryExpr(BinaryExpr { left, op, right })
            if matches!(op, Operator::And | Operator::Or) =>
        {
            let (l_path, l_test) = test_of(left)?;
            let (r_path, r_test) = test_of(right)?;
            if l_path != r_path {
                return None;
            }
            let test = if *op == Operator::And {
                Test::All(vec![l_test, r_test])
            } else {
                Test::Any(vec![l_test, r_test])
            };
            Some((l_path, test))
        }
        Expr::BinaryExpr(BinaryExpr { left, op, right }) => {
            let op = cmp_op(*op)?;
            match (path(left), literal(right)) {
                (Some(p), Some(l)) => Some((p, Test::Cmp(op, l))),
                _ => Some((path(right)?, Test::Cmp(flip(op), literal(left)?))),
            }
        }
        Expr::InList(InList {
            expr,
            list,
            negated: false,
        }) => {
            let values = list.iter().map(literal).collect::<Option<Vec<_>>>()?;
            Some((path(expr)?, Test::In(values)))
        }
        Expr::Between(between) if !between.negated => Some((
            path(&between.expr)?,
            Test::All(vec![
                Test::Cmp(CmpOp::GtEq, literal(&between.low)?),
                Test::Cmp(CmpOp::LtEq, literal(&between.high)?),
            ]),
        )),
        _ => None,
    }
}

fn cmp_op(op: Operator) -> Option<CmpOp> {
    Some(match op {
        Operator::Eq => CmpOp::Eq,
        Operator::NotEq => CmpOp::NotEq,
        Operator::Lt => CmpOp::Lt,
        Operator::LtEq => CmpOp::LtEq,
        Operator::Gt => CmpOp::Gt,
        Operator::GtEq => CmpOp::GtEq,
        _ => return None,
    })
}

/// `a op b` as `b op' a`.
fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::LtEq => CmpOp::GtEq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::GtEq => CmpOp::LtEq,
        other => other,
    }
}

/// A non-null constant.
fn literal(expr: &Expr) -> Option<ScalarValue> {
    match expr {
        Expr::Literal(value, _) if !value.is_null() => Some(value.clone()),
        _ => None,
    }
}

/// The column path of `expr`: a column, or fields of a struct column (`partition.part`).
fn path(expr: &Expr) -> Option<Vec<String>> {
    match expr {
        Expr::Column(c) => Some(vec![c.name.clone()]),
        Expr::ScalarFunction(f) if f.func.name() == "get_field" => {
            let (base, names) = f.args.split_first()?;
            let mut out = path(base)?;
            for name in names {
                match name {
                    Expr::Literal(
                        ScalarValue::Utf8(Some(n))
                        | ScalarValue::LargeUtf8(Some(n))
                        | ScalarValue::Utf8View(Some(n)),
                        _,
                    ) => out.push(n.clone()),
                    _ => return None,
                }
            }
            Some(out)
        }
        _ => None,
    }
}
