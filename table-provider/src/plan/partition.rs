//! Partition pruning: the data predicate projected onto a partition spec (Iceberg's inclusive
//! projection), evaluated on manifest partition summaries and on each file's partition tuple.
//!
//! Every transform is covered: identity, bucket, truncate, year/month/day/hour and void.
//! Projection is inclusive: a row matching the data predicate always has a partition tuple
//! matching the projected one, so pruning by it is safe for every spec of an evolved table.

use iceberg::spec::{
    Datum, FieldSummary, Literal, PartitionSpec, PrimitiveLiteral, PrimitiveType, Schema, Struct,
    Transform, Type,
};
use iceberg::transform::create_transform_function;

use super::evaluator::{FieldStats, might_match};
use super::predicate::{CmpOp, Predicate};

/// The predicate of one partition spec: keys are partition field positions.
#[derive(Debug, Clone)]
pub(crate) struct PartitionFilter {
    predicate: Predicate,
    /// The result type of each partition field (for decoding summary bounds).
    result_types: Vec<Option<PrimitiveType>>,
}

impl PartitionFilter {
    /// Projects `predicate` (over `schema`'s field ids) onto `spec`.
    pub(crate) fn project(predicate: &Predicate, spec: &PartitionSpec, schema: &Schema) -> Self {
        let result_types = spec
            .fields()
            .iter()
            .map(|f| {
                let source = schema.field_by_id(f.source_id)?;
                match f.transform.result_type(&source.field_type).ok()? {
                    Type::Primitive(p) => Some(p),
                    _ => None,
                }
            })
            .collect();
        let projected = project(predicate, spec, schema);
        Self {
            predicate: projected,
            result_types,
        }
    }

    /// A predicate already over `spec`'s partition field positions (a filter on partition
    /// values themselves, as the metadata tables' `partition` column holds them).
    pub(crate) fn on_partition_values(
        predicate: Predicate,
        spec: &PartitionSpec,
        schema: &Schema,
    ) -> Self {
        let mut filter = Self::project(&Predicate::True, spec, schema);
        filter.predicate = predicate;
        filter
    }

    /// Whether a file with partition tuple `partition` might hold matching rows.
    pub(crate) fn matches_partition(&self, partition: &Struct) -> bool {
        if self.predicate.is_true() {
            return true;
        }
        let values: Vec<Option<&PrimitiveLiteral>> = partition
            .iter()
            .map(|v| match v {
                Some(Literal::Primitive(p)) => Some(p),
                _ => None,
            })
            .collect();
        might_match(&self.predicate, &|pos| {
            let value = values.get(pos as usize).copied().flatten();
            let is_nan = match value {
                Some(PrimitiveLiteral::Float(f)) => f.is_nan(),
                Some(PrimitiveLiteral::Double(f)) => f.is_nan(),
                _ => false,
            };
            FieldStats {
                lower: value.filter(|_| !is_nan),
                upper: value.filter(|_| !is_nan),
                has_null: Some(value.is_none()),
                all_null: value.is_none(),
                has_nan: Some(is_nan),
            }
        })
    }

    /// Whether a manifest with these partition summaries might hold matching files.
    pub(crate) fn matches_summaries(&self, summaries: Option<&[FieldSummary]>) -> bool {
        let Some(summaries) = summaries else {
            return true;
        };
        if self.predicate.is_true() {
            return true;
        }
        let decode =
            |pos: usize, bytes: Option<&serde_bytes::ByteBuf>| -> Option<PrimitiveLiteral> {
                let ty = self.result_types.get(pos)?.clone()?;
                let datum = Datum::try_from_bytes(bytes?.as_ref(), ty).ok()?;
                Some(datum.literal().clone())
            };
        let bounds: Vec<(Option<PrimitiveLiteral>, Option<PrimitiveLiteral>)> = summaries
            .iter()
            .enumerate()
            .map(|(pos, s)| {
                (
                    decode(pos, s.lower_bound.as_ref()),
                    decode(pos, s.upper_bound.as_ref()),
                )
            })
            .collect();
        might_match(&self.predicate, &|pos| {
            let pos = pos as usize;
            let (Some(summary), Some((lower, upper))) = (summaries.get(pos), bounds.get(pos))
            else {
                return FieldStats::default();
            };
            FieldStats {
                lower: lower.as_ref(),
                upper: upper.as_ref(),
                has_null: Some(summary.contains_null),
                all_null: summary.contains_null && summary.lower_bound.is_none(),
                has_nan: summary.contains_nan,
            }
        })
    }
}

/// Inclusive projection of `pred` onto `spec`.
fn project(pred: &Predicate, spec: &PartitionSpec, schema: &Schema) -> Predicate {
    match pred {
        Predicate::True | Predicate::False => pred.clone(),
        Predicate::And(c) => Predicate::and(c.iter().map(|p| project(p, spec, schema)).collect()),
        Predicate::Or(c) => Predicate::or(c.iter().map(|p| project(p, spec, schema)).collect()),
        leaf => {
            let mut keys = Vec::new();
            leaf.keys(&mut keys);
            let Some(&source_id) = keys.first() else {
                return Predicate::True;
            };
            let Some(source) = schema.field_by_id(source_id) else {
                return Predicate::True;
            };
            let Type::Primitive(source_type) = source.field_type.as_ref() else {
                return Predicate::True;
            };
            let projections = spec
                .fields()
                .iter()
                .enumerate()
                .filter(|(_, f)| f.source_id == source_id)
                .map(|(pos, f)| project_leaf(leaf, pos as i32, &f.transform, source_type))
                .collect();
            Predicate::and(projections)
        }
    }
}

fn project_leaf(
    leaf: &Predicate,
    pos: i32,
    transform: &Transform,
    source_type: &PrimitiveType,
) -> Predicate {
    let apply = |v: &PrimitiveLiteral| -> Option<PrimitiveLiteral> {
        let datum = make_datum(source_type, v)?;
        let f = create_transform_function(transform).ok()?;
        Some(f.transform_literal(&datum).ok()??.literal().clone())
    };
    let order_preserving = matches!(
        transform,
        Transform::Truncate(_)
            | Transform::Year
            | Transform::Month
            | Transform::Day
            | Transform::Hour
    );
    match (transform, leaf) {
        (Transform::Void | Transform::Unknown, _) => Predicate::True,
        (_, Predicate::IsNull { negated, .. }) => Predicate::IsNull {
            key: pos,
            negated: *negated,
        },
        (Transform::Identity, Predicate::Cmp { op, value, .. }) => Predicate::Cmp {
            key: pos,
            op: *op,
            value: value.clone(),
        },
        (
            Transform::Identity,
            Predicate::In {
                values, negated, ..
            },
        ) => Predicate::In {
            key: pos,
            values: values.clone(),
            negated: *negated,
        },
        (
            Transform::Identity,
            Predicate::StartsWith {
                prefix, negated, ..
            },
        ) => Predicate::StartsWith {
            key: pos,
            prefix: prefix.clone(),
            negated: *negated,
        },
        (_, Predicate::Cmp { op, value, .. }) => {
            let projected = |op: CmpOp, v: &PrimitiveLiteral| match apply(v) {
                Some(value) => Predicate::Cmp {
                    key: pos,
                    op,
                    value,
                },
                None => Predicate::True,
            };
            match op {
                CmpOp::Eq => projected(CmpOp::Eq, value),
                _ if !order_preserving => Predicate::True,
                CmpOp::LtEq => projected(CmpOp::LtEq, value),
                CmpOp::GtEq => projected(CmpOp::GtEq, value),
                CmpOp::Lt => match step(value, -1) {
                    Some(prev) => projected(CmpOp::LtEq, &prev),
                    None => projected(CmpOp::LtEq, value),
                },
                CmpOp::Gt => match step(value, 1) {
                    Some(next) => projected(CmpOp::GtEq, &next),
                    None => projected(CmpOp::GtEq, value),
                },
                CmpOp::NotEq => Predicate::True,
            }
        }
        (
            _,
            Predicate::In {
                values,
                negated: false,
                ..
            },
        ) => {
            let mut out = Vec::with_capacity(values.len());
            for v in values {
                match apply(v) {
                    Some(t) => out.push(t),
                    None => return Predicate::True,
                }
            }
            out.dedup();
            Predicate::In {
                key: pos,
                values: out,
                negated: false,
            }
        }
        (
            Transform::Truncate(width),
            Predicate::StartsWith {
                prefix,
                negated: false,
                ..
            },
        ) => {
            if prefix.chars().count() >= *width as usize {
                match apply(&PrimitiveLiteral::String(prefix.clone())) {
                    Some(value) => Predicate::Cmp {
                        key: pos,
                        op: CmpOp::Eq,
                        value,
                    },
                    None => Predicate::True,
                }
            } else {
                Predicate::StartsWith {
                    key: pos,
                    prefix: prefix.clone(),
                    negated: false,
                }
            }
        }
        _ => Predicate::True,
    }
}

/// The integral neighbour of a literal (for tight `<` / `>` projection), if integral.
fn step(v: &PrimitiveLiteral, delta: i64) -> Option<PrimitiveLiteral> {
    match v {
        PrimitiveLiteral::Int(x) => x.checked_add(delta as i32).map(PrimitiveLiteral::Int),
        PrimitiveLiteral::Long(x) => x.checked_add(delta).map(PrimitiveLiteral::Long),
        _ => None,
    }
}

/// A typed datum from a literal (the `iceberg` crate keeps `Datum::new` private).
pub(crate) fn make_datum(ty: &PrimitiveType, v: &PrimitiveLiteral) -> Option<Datum> {
    use PrimitiveLiteral as L;
    use PrimitiveType as T;
    Some(match (ty, v) {
        (T::Boolean, L::Boolean(b)) => Datum::bool(*b),
        (T::Int, L::Int(x)) => Datum::int(*x),
        (T::Long, L::Long(x)) => Datum::long(*x),
        (T::Long, L::Int(x)) => Datum::long(*x),
        (T::Float, L::Float(x)) => Datum::float(x.0),
        (T::Double, L::Double(x)) => Datum::double(x.0),
        (T::Date, L::Int(x)) => Datum::date(*x),
        (T::Time, L::Long(x)) => Datum::time_micros(*x).ok()?,
        (T::Timestamp, L::Long(x)) => Datum::timestamp_micros(*x),
        (T::Timestamptz, L::Long(x)) => Datum::timestamptz_micros(*x),
        (T::TimestampNs, L::Long(x)) => Datum::timestamp_nanos(*x),
        (T::TimestamptzNs, L::Long(x)) => Datum::timestamptz_nanos(*x),
        (T::String, L::String(s)) => Datum::string(s),
        (T::Binary, L::Binary(b)) => Datum::binary(b.iter().copied()),
        (T::Fixed(_), L::Binary(b)) => Datum::fixed(b.iter().copied()),
        (T::Uuid, L::UInt128(x)) => Datum::uuid(uuid::Uuid::from_u128(*x)),
        (T::Decimal { .. }, L::Int128(x)) => {
            Datum::try_from_bytes(&x.to_be_bytes(), ty.clone()).ok()?
        }
        _ => return None,
    })
}
