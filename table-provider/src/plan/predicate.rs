//! The planner's predicate: what DataFusion's pushed filters say about Iceberg field ids.
//!
//! [`Predicate`] is a small, negation-free tree over field ids (or partition-field positions,
//! after projection) with typed Iceberg literals. [`Predicate::from_filters`] converts the
//! conjunction of DataFusion filters; whatever it cannot express becomes `True` (it never makes
//! a predicate stricter than the filter, so pruning stays correct), and it reports whether the
//! conversion was complete.

use std::cmp::Ordering;
use std::sync::Arc;

use datafusion::common::{Column, ScalarValue};
use datafusion::logical_expr::{BinaryExpr, Expr, Operator, expr::InList, expr::Like};
use iceberg::spec::{NestedFieldRef, PrimitiveLiteral, PrimitiveType, Schema, Type};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `=`
    Eq,
    /// `<>`
    NotEq,
    /// `<`
    Lt,
    /// `<=`
    LtEq,
    /// `>`
    Gt,
    /// `>=`
    GtEq,
}

impl CmpOp {
    fn negate(self) -> Self {
        match self {
            CmpOp::Eq => CmpOp::NotEq,
            CmpOp::NotEq => CmpOp::Eq,
            CmpOp::Lt => CmpOp::GtEq,
            CmpOp::LtEq => CmpOp::Gt,
            CmpOp::Gt => CmpOp::LtEq,
            CmpOp::GtEq => CmpOp::Lt,
        }
    }

    fn flip(self) -> Self {
        match self {
            CmpOp::Lt => CmpOp::Gt,
            CmpOp::LtEq => CmpOp::GtEq,
            CmpOp::Gt => CmpOp::Lt,
            CmpOp::GtEq => CmpOp::LtEq,
            other => other,
        }
    }

    /// Whether `ordering` (value compared with the literal) satisfies this operator.
    pub fn holds(self, ordering: Ordering) -> bool {
        match self {
            CmpOp::Eq => ordering == Ordering::Equal,
            CmpOp::NotEq => ordering != Ordering::Equal,
            CmpOp::Lt => ordering == Ordering::Less,
            CmpOp::LtEq => ordering != Ordering::Greater,
            CmpOp::Gt => ordering == Ordering::Greater,
            CmpOp::GtEq => ordering != Ordering::Less,
        }
    }
}

/// A predicate over keys `K`: Iceberg field ids for data, partition positions after projection.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// Always true: nothing known.
    True,
    /// Always false.
    False,
    /// Every child holds.
    And(Vec<Predicate>),
    /// Some child holds.
    Or(Vec<Predicate>),
    /// `key op literal` (SQL semantics: false when the value is null).
    Cmp {
        /// The field id (or partition position).
        key: i32,
        /// The operator.
        op: CmpOp,
        /// The literal, of the key's type.
        value: PrimitiveLiteral,
    },
    /// `key [NOT] IN (literals)`.
    In {
        /// The field id (or partition position).
        key: i32,
        /// The literals.
        values: Vec<PrimitiveLiteral>,
        /// `NOT IN`.
        negated: bool,
    },
    /// `key IS [NOT] NULL`.
    IsNull {
        /// The field id (or partition position).
        key: i32,
        /// `IS NOT NULL`.
        negated: bool,
    },
    /// `key [NOT] LIKE 'prefix%'`.
    StartsWith {
        /// The field id (or partition position).
        key: i32,
        /// The prefix.
        prefix: String,
        /// `NOT LIKE`.
        negated: bool,
    },
}

impl Predicate {
    /// `a AND b`, flattened and simplified.
    pub fn and(preds: Vec<Predicate>) -> Predicate {
        let mut out = Vec::new();
        for p in preds {
            match p {
                Predicate::True => {}
                Predicate::False => return Predicate::False,
                Predicate::And(children) => out.extend(children),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Predicate::True,
            1 => out.pop().unwrap_or(Predicate::True),
            _ => Predicate::And(out),
        }
    }

    /// `a OR b`, flattened and simplified.
    pub fn or(preds: Vec<Predicate>) -> Predicate {
        let mut out = Vec::new();
        for p in preds {
            match p {
                Predicate::False => {}
                Predicate::True => return Predicate::True,
                Predicate::Or(children) => out.extend(children),
                other => out.push(other),
            }
        }
        match out.len() {
            0 => Predicate::False,
            1 => out.pop().unwrap_or(Predicate::False),
            _ => Predicate::Or(out),
        }
    }

    /// Whether the predicate is trivially true (prunes nothing).
    pub fn is_true(&self) -> bool {
        matches!(self, Predicate::True)
    }

    /// SQL `NOT`, pushed to the leaves. Only valid for predicates whose conversion was
    /// complete (a `True` standing for an unknown part cannot be negated).
    fn negate(self) -> Predicate {
        match self {
            Predicate::True => Predicate::False,
            Predicate::False => Predicate::True,
            Predicate::And(c) => Predicate::or(c.into_iter().map(Predicate::negate).collect()),
            Predicate::Or(c) => Predicate::and(c.into_iter().map(Predicate::negate).collect()),
            Predicate::Cmp { key, op, value } => Predicate::Cmp {
                key,
                op: op.negate(),
                value,
            },
            Predicate::In {
                key,
                values,
                negated,
            } => Predicate::In {
                key,
                values,
                negated: !negated,
            },
            Predicate::IsNull { key, negated } => Predicate::IsNull {
                key,
                negated: !negated,
            },
            Predicate::StartsWith {
                key,
                prefix,
                negated,
            } => Predicate::StartsWith {
                key,
                prefix,
                negated: !negated,
            },
        }
    }

    /// The field ids this predicate references.
    pub fn keys(&self, out: &mut Vec<i32>) {
        match self {
            Predicate::True | Predicate::False => {}
            Predicate::And(c) | Predicate::Or(c) => c.iter().for_each(|p| p.keys(out)),
            Predicate::Cmp { key, .. }
            | Predicate::In { key, .. }
            | Predicate::IsNull { key, .. }
            | Predicate::StartsWith { key, .. } => out.push(*key),
        }
    }

    /// Converts the conjunction of DataFusion `filters` over `schema` (the scan's schema).
    /// Returns the predicate and, per filter, whether it converted completely.
    pub fn from_filters(filters: &[Expr], schema: &Schema) -> (Predicate, Vec<bool>) {
        let mut complete = Vec::with_capacity(filters.len());
        let mut preds = Vec::with_capacity(filters.len());
        for f in filters {
            let mut converter = Converter {
                schema,
                complete: true,
            };
            preds.push(converter.convert(f));
            complete.push(converter.complete);
        }
        (Predicate::and(preds), complete)
    }
}

struct Converter<'a> {
    schema: &'a Schema,
    complete: bool,
}

impl Converter<'_> {
    fn unknown(&mut self) -> Predicate {
        self.complete = false;
        Predicate::True
    }

    /// A NULL truth value (`x op NULL`, or the `NULL` DataFusion folds that to). It is never
    /// true, so a file is pruned on it like on `false` wherever it is not negated (`NOT` of an
    /// incomplete conversion is unknown). It is not `false` under `NOT`, so the conversion is
    /// incomplete: the filter stays above the scan instead of being answered by partition
    /// values (`x IN ('b', NULL)` on an identity partition column reaches the scan as
    /// `x = 'b' OR NULL`; answering it exactly as `x = 'b' OR false` once kept no filter
    /// and pruned nothing).
    fn null(&mut self) -> Predicate {
        self.complete = false;
        Predicate::False
    }

    fn convert(&mut self, expr: &Expr) -> Predicate {
        match expr {
            Expr::BinaryExpr(BinaryExpr { left, op, right }) => match op {
                Operator::And => Predicate::and(vec![self.convert(left), self.convert(right)]),
                Operator::Or => {
                    let l = self.convert(left);
                    let r = self.convert(right);
                    Predicate::or(vec![l, r])
                }
                _ => self.comparison(left, *op, right),
            },
            Expr::Not(inner) => {
                let mut sub = Converter {
                    schema: self.schema,
                    complete: true,
                };
                let p = sub.convert(inner);
                if sub.complete {
                    p.negate()
                } else {
                    self.unknown()
                }
            }
            Expr::IsNull(e) | Expr::IsNotNull(e) => match self.field(e) {
                Some(field) => Predicate::IsNull {
                    key: field.id,
                    negated: matches!(expr, Expr::IsNotNull(_)),
                },
                None => self.unknown(),
            },
            Expr::InList(InList {
                expr: e,
                list,
                negated,
            }) => {
                let Some(field) = self.field(e) else {
                    return self.unknown();
                };
                let mut values = Vec::with_capacity(list.len());
                for item in list {
                    match literal_of(item).and_then(|s| to_iceberg_literal(s, &field.field_type)) {
                        Some(v) => values.push(v),
                        None => return self.unknown(),
                    }
                }
                Predicate::In {
                    key: field.id,
                    values,
                    negated: *negated,
                }
            }
            Expr::Between(between) => {
                let low = self.comparison(&between.expr, Operator::GtEq, &between.low);
                let high = self.comparison(&between.expr, Operator::LtEq, &between.high);
                let p = Predicate::and(vec![low, high]);
                if between.negated {
                    if self.complete {
                        p.negate()
                    } else {
                        self.unknown()
                    }
                } else {
                    p
                }
            }
            Expr::Like(Like {
                negated,
                expr: e,
                pattern,
                escape_char: None,
                case_insensitive: false,
            }) => {
                let Some(field) = self.field(e) else {
                    return self.unknown();
                };
                let prefix = match literal_of(pattern) {
                    Some(ScalarValue::Utf8(Some(p)))
                    | Some(ScalarValue::LargeUtf8(Some(p)))
                    | Some(ScalarValue::Utf8View(Some(p))) => p
                        .strip_suffix('%')
                        .and_then(|s| (!s.contains(['%', '_', '\\'])).then(|| s.to_string())),
                    _ => None,
                };
                match (prefix, field.field_type.as_ref()) {
                    (Some(prefix), Type::Primitive(PrimitiveType::String)) => {
                        Predicate::StartsWith {
                            key: field.id,
                            prefix,
                            negated: *negated,
                        }
                    }
                    _ => self.unknown(),
                }
            }
            Expr::Literal(ScalarValue::Boolean(Some(true)), _) => Predicate::True,
            Expr::Literal(ScalarValue::Boolean(Some(false)), _) => Predicate::False,
            Expr::Literal(value, _) if value.is_null() => self.null(),
            _ => self.unknown(),
        }
    }

    fn comparison(&mut self, left: &Expr, op: Operator, right: &Expr) -> Predicate {
        let op = match op {
            Operator::Eq => CmpOp::Eq,
            Operator::NotEq => CmpOp::NotEq,
            Operator::Lt => CmpOp::Lt,
            Operator::LtEq => CmpOp::LtEq,
            Operator::Gt => CmpOp::Gt,
            Operator::GtEq => CmpOp::GtEq,
            _ => return self.unknown(),
        };
        let (field, literal, op) = match (self.field(left), literal_of(right)) {
            (Some(f), Some(l)) => (f, l, op),
            _ => match (self.field(right), literal_of(left)) {
                (Some(f), Some(l)) => (f, l, op.flip()),
                _ => return self.unknown(),
            },
        };
        if literal.is_null() {
            return self.null();
        }
        match to_iceberg_literal(literal, &field.field_type) {
            Some(value) => Predicate::Cmp {
                key: field.id,
                op,
                value,
            },
            None => self.unknown(),
        }
    }

    fn field(&self, expr: &Expr) -> Option<NestedFieldRef> {
        match expr {
            Expr::Column(Column { name, .. }) => {
                let field = self.schema.as_struct().field_by_name(name)?;
                matches!(field.field_type.as_ref(), Type::Primitive(_)).then(|| Arc::clone(field))
            }
            _ => None,
        }
    }
}

fn literal_of(expr: &Expr) -> Option<&ScalarValue> {
    match expr {
        Expr::Literal(v, _) => Some(v),
        _ => None,
    }
}

/// A DataFusion scalar as an Iceberg literal of `ty`, only when the conversion is exact.
pub(crate) fn to_iceberg_literal(value: &ScalarValue, ty: &Type) -> Option<PrimitiveLiteral> {
    use PrimitiveType as T;
    use ScalarValue as S;
    let Type::Primitive(p) = ty else {
        return None;
    };
    let int = |v: i128| -> Option<PrimitiveLiteral> {
        match p {
            T::Int => i32::try_from(v).ok().map(PrimitiveLiteral::Int),
            T::Long => i64::try_from(v).ok().map(PrimitiveLiteral::Long),
            _ => None,
        }
    };
    match (p, value) {
        (_, S::Int8(Some(v))) => int(i128::from(*v)),
        (_, S::Int16(Some(v))) => int(i128::from(*v)),
        (_, S::Int32(Some(v))) => int(i128::from(*v)),
        (_, S::Int64(Some(v))) => int(i128::from(*v)),
        (_, S::UInt8(Some(v))) => int(i128::from(*v)),
        (_, S::UInt16(Some(v))) => int(i128::from(*v)),
        (_, S::UInt32(Some(v))) => int(i128::from(*v)),
        (_, S::UInt64(Some(v))) => int(i128::from(*v)),
        (T::Boolean, S::Boolean(Some(v))) => Some(PrimitiveLiteral::Boolean(*v)),
        (T::Float, S::Float32(Some(v))) => Some(PrimitiveLiteral::Float((*v).into())),
        (T::Float, S::Float64(Some(v))) => {
            let narrowed = *v as f32;
            (f64::from(narrowed) == *v).then(|| PrimitiveLiteral::Float(narrowed.into()))
        }
        (T::Double, S::Float64(Some(v))) => Some(PrimitiveLiteral::Double((*v).into())),
        (T::Double, S::Float32(Some(v))) => Some(PrimitiveLiteral::Double(f64::from(*v).into())),
        (T::Decimal { scale, .. }, S::Decimal128(Some(v), _, s))
            if i64::from(*s) == i64::from(*scale) =>
        {
            Some(PrimitiveLiteral::Int128(*v))
        }
        (T::Date, S::Date32(Some(v))) => Some(PrimitiveLiteral::Int(*v)),
        (T::Time, S::Time64Microsecond(Some(v))) => Some(PrimitiveLiteral::Long(*v)),
        (T::Timestamp | T::Timestamptz, S::TimestampMicrosecond(Some(v), _)) => {
            Some(PrimitiveLiteral::Long(*v))
        }
        (T::Timestamp | T::Timestamptz, S::TimestampMillisecond(Some(v), _)) => {
            v.checked_mul(1_000).map(PrimitiveLiteral::Long)
        }
        (T::Timestamp | T::Timestamptz, S::TimestampSecond(Some(v), _)) => {
            v.checked_mul(1_000_000).map(PrimitiveLiteral::Long)
        }
        (T::Timestamp | T::Timestamptz, S::TimestampNanosecond(Some(v), _)) => {
            (v % 1_000 == 0).then(|| PrimitiveLiteral::Long(v / 1_000))
        }
        (T::TimestampNs | T::TimestamptzNs, S::TimestampNanosecond(Some(v), _)) => {
            Some(PrimitiveLiteral::Long(*v))
        }
        (T::String, S::Utf8(Some(v)) | S::LargeUtf8(Some(v)) | S::Utf8View(Some(v))) => {
            Some(PrimitiveLiteral::String(v.clone()))
        }
        (T::Binary | T::Fixed(_), S::Binary(Some(v)) | S::LargeBinary(Some(v))) => {
            Some(PrimitiveLiteral::Binary(v.clone()))
        }
        (T::Fixed(_), S::FixedSizeBinary(_, Some(v))) => Some(PrimitiveLiteral::Binary(v.clone())),
        (T::Uuid, S::FixedSizeBinary(16, Some(v))) => {
            let bytes: [u8; 16] = v.as_slice().try_into().ok()?;
            Some(PrimitiveLiteral::UInt128(u128::from_be_bytes(bytes)))
        }
        _ => None,
    }
}

/// Compares two literals of compatible Iceberg types (int/long and float/double mixed, as
/// type promotion produces). Floats compare in DataFusion's total order (`-0.0 < 0.0`), the
/// order of the predicates Petrel evaluates. `None` when they are not comparable or one is NaN.
pub(crate) fn compare_literals(a: &PrimitiveLiteral, b: &PrimitiveLiteral) -> Option<Ordering> {
    use PrimitiveLiteral as L;
    match (a, b) {
        (L::Boolean(x), L::Boolean(y)) => Some(x.cmp(y)),
        (L::Int(x), L::Int(y)) => Some(x.cmp(y)),
        (L::Long(x), L::Long(y)) => Some(x.cmp(y)),
        (L::Int(x), L::Long(y)) => Some(i64::from(*x).cmp(y)),
        (L::Long(x), L::Int(y)) => Some(x.cmp(&i64::from(*y))),
        (L::Float(x), L::Float(y)) => total_cmp(f64::from(x.0), f64::from(y.0)),
        (L::Double(x), L::Double(y)) => total_cmp(x.0, y.0),
        (L::Float(x), L::Double(y)) => total_cmp(f64::from(x.0), y.0),
        (L::Double(x), L::Float(y)) => total_cmp(x.0, f64::from(y.0)),
        (L::String(x), L::String(y)) => Some(x.as_str().cmp(y.as_str())),
        (L::Binary(x), L::Binary(y)) => Some(x.as_slice().cmp(y.as_slice())),
        (L::Int128(x), L::Int128(y)) => Some(x.cmp(y)),
        (L::UInt128(x), L::UInt128(y)) => Some(x.cmp(y)),
        _ => None,
    }
}

/// Total order of two non-NaN floats (`None` for NaN: it bounds nothing).
fn total_cmp(a: f64, b: f64) -> Option<Ordering> {
    (!a.is_nan() && !b.is_nan()).then(|| a.total_cmp(&b))
}
