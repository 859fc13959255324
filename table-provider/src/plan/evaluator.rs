//! "Might this file (or manifest, or partition) hold a matching row?" — one evaluator over
//! per-key statistics, used for column metrics, partition values and manifest summaries.
//!
//! The answer is conservative: `false` only when no row can match. Comparisons follow SQL
//! (null never matches) and DataFusion's float ordering (NaN sorts above every number and
//! equals itself; `-0.0 < 0.0`), so a float column whose NaN count is unknown or non-zero is
//! never pruned by `= NaN`, `>`, `>=` or `<>`. Float bounds never carry NaN, and a zero bound is
//! read as either zero (writers disagree on the sign they record: the Parquet format asks for
//! `-0.0` as a minimum and `+0.0` as a maximum; others write what they saw).

use std::cmp::Ordering;

use iceberg::spec::PrimitiveLiteral;

use super::predicate::{CmpOp, Predicate, compare_literals};

/// What is known about one key's values in some set of rows.
#[derive(Debug, Clone, Default)]
pub(crate) struct FieldStats<'a> {
    /// A lower bound of the non-null, non-NaN values.
    pub(crate) lower: Option<&'a PrimitiveLiteral>,
    /// An upper bound of the non-null, non-NaN values.
    pub(crate) upper: Option<&'a PrimitiveLiteral>,
    /// Whether some value is null (`None`: unknown).
    pub(crate) has_null: Option<bool>,
    /// Every value is null (or there are no values).
    pub(crate) all_null: bool,
    /// Whether some value is NaN (`None`: unknown).
    pub(crate) has_nan: Option<bool>,
}

/// Whether rows described by `stats` might satisfy `pred`.
pub(crate) fn might_match<'a>(pred: &Predicate, stats: &dyn Fn(i32) -> FieldStats<'a>) -> bool {
    match pred {
        Predicate::True => true,
        Predicate::False => false,
        Predicate::And(children) => children.iter().all(|p| might_match(p, stats)),
        Predicate::Or(children) => children.iter().any(|p| might_match(p, stats)),
        Predicate::Cmp { key, op, value } => cmp_might_match(&stats(*key), *op, value),
        Predicate::In {
            key,
            values,
            negated,
        } => {
            let s = stats(*key);
            if s.all_null {
                return false;
            }
            if *negated {
                // Only prunable when every value is one known literal that is excluded.
                match (s.lower, s.upper) {
                    (Some(l), Some(u)) if s.has_nan == Some(false) || !is_float(l) => {
                        let (l, u) = (widen_zero(l, -0.0), widen_zero(u, 0.0));
                        let single = compare_literals(&l, &u) == Some(Ordering::Equal);
                        !(single
                            && values
                                .iter()
                                .any(|v| compare_literals(&l, v) == Some(Ordering::Equal)))
                    }
                    _ => true,
                }
            } else {
                values.iter().any(|v| cmp_might_match(&s, CmpOp::Eq, v))
            }
        }
        Predicate::IsNull { key, negated } => {
            let s = stats(*key);
            if *negated {
                !s.all_null
            } else {
                s.has_null != Some(false)
            }
        }
        Predicate::StartsWith {
            key,
            prefix,
            negated,
        } => {
            let s = stats(*key);
            if s.all_null {
                return false;
            }
            let truncated = |lit: &PrimitiveLiteral| -> Option<String> {
                match lit {
                    PrimitiveLiteral::String(v) => {
                        Some(v.chars().take(prefix.chars().count()).collect())
                    }
                    _ => None,
                }
            };
            if *negated {
                let starts = |b: Option<&PrimitiveLiteral>| match b {
                    Some(PrimitiveLiteral::String(v)) => v.starts_with(prefix.as_str()),
                    _ => false,
                };
                !(starts(s.lower) && starts(s.upper))
            } else {
                if let Some(l) = s.lower.and_then(truncated)
                    && l.as_str() > prefix.as_str()
                {
                    return false;
                }
                if let Some(u) = s.upper.and_then(truncated)
                    && u.as_str() < prefix.as_str()
                {
                    return false;
                }
                true
            }
        }
    }
}

/// A float bound of zero (either sign) as the zero `widest` (`-0.0` for a lower bound, `0.0`
/// for an upper one); other bounds unchanged.
fn widen_zero(bound: &PrimitiveLiteral, widest: f64) -> PrimitiveLiteral {
    match bound {
        PrimitiveLiteral::Float(v) if v.0 == 0.0 => PrimitiveLiteral::Float((widest as f32).into()),
        PrimitiveLiteral::Double(v) if v.0 == 0.0 => PrimitiveLiteral::Double(widest.into()),
        other => other.clone(),
    }
}

fn is_float(v: &PrimitiveLiteral) -> bool {
    matches!(v, PrimitiveLiteral::Float(_) | PrimitiveLiteral::Double(_))
}

fn cmp_might_match(s: &FieldStats<'_>, op: CmpOp, value: &PrimitiveLiteral) -> bool {
    if s.all_null {
        return false;
    }
    let float = is_float(value);
    if float {
        let nan = match value {
            PrimitiveLiteral::Float(v) => v.is_nan(),
            PrimitiveLiteral::Double(v) => v.is_nan(),
            _ => false,
        };
        if nan {
            // Every non-NaN value is below NaN and differs from it.
            return match op {
                CmpOp::Eq | CmpOp::GtEq => s.has_nan != Some(false),
                CmpOp::Gt => false,
                CmpOp::Lt | CmpOp::LtEq | CmpOp::NotEq => true,
            };
        }
        if matches!(op, CmpOp::Gt | CmpOp::GtEq | CmpOp::NotEq) && s.has_nan != Some(false) {
            return true;
        }
    }
    let lower = s.lower.map(|l| widen_zero(l, -0.0));
    let upper = s.upper.map(|u| widen_zero(u, 0.0));
    let lower = lower.as_ref().and_then(|l| compare_literals(l, value));
    let upper = upper.as_ref().and_then(|u| compare_literals(u, value));
    match op {
        CmpOp::Eq => !(lower == Some(Ordering::Greater) || upper == Some(Ordering::Less)),
        CmpOp::NotEq => !(lower == Some(Ordering::Equal) && upper == Some(Ordering::Equal)),
        CmpOp::Lt => lower != Some(Ordering::Greater) && lower != Some(Ordering::Equal),
        CmpOp::LtEq => lower != Some(Ordering::Greater),
        CmpOp::Gt => upper != Some(Ordering::Less) && upper != Some(Ordering::Equal),
        CmpOp::GtEq => upper != Some(Ordering::Less),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(v: i64) -> PrimitiveLiteral {
        PrimitiveLiteral::Long(v)
    }

    #[test]
    fn ranges_prune_by_bounds() {
        let (lo, hi) = (long(10), long(20));
        let stats = |_| FieldStats {
            lower: Some(&lo),
            upper: Some(&hi),
            has_null: Some(false),
            all_null: false,
            has_nan: None,
        };
        let cmp = |op, v| Predicate::Cmp {
            key: 1,
            op,
            value: long(v),
        };
        assert!(!might_match(&cmp(CmpOp::Lt, 10), &stats));
        assert!(might_match(&cmp(CmpOp::LtEq, 10), &stats));
        assert!(!might_match(&cmp(CmpOp::Gt, 20), &stats));
        assert!(might_match(&cmp(CmpOp::GtEq, 20), &stats));
        assert!(!might_match(&cmp(CmpOp::Eq, 21), &stats));
        assert!(might_match(&cmp(CmpOp::Eq, 15), &stats));
        assert!(!might_match(
            &Predicate::IsNull {
                key: 1,
                negated: false
            },
            &stats
        ));
        let in_list = Predicate::In {
            key: 1,
            values: vec![long(1), long(25)],
            negated: false,
        };
        assert!(!might_match(&in_list, &stats));
    }

    #[test]
    fn nan_blocks_greater_than_pruning() {
        let (lo, hi) = (
            PrimitiveLiteral::Double(1.0.into()),
            PrimitiveLiteral::Double(2.0.into()),
        );
        let gt = Predicate::Cmp {
            key: 1,
            op: CmpOp::Gt,
            value: PrimitiveLiteral::Double(5.0.into()),
        };
        let unknown_nan = |_| FieldStats {
            lower: Some(&lo),
            upper: Some(&hi),
            has_nan: None,
            ..Default::default()
        };
        assert!(might_match(&gt, &unknown_nan));
        let no_nan = |_| FieldStats {
            lower: Some(&lo),
            upper: Some(&hi),
            has_nan: Some(false),
            ..Default::default()
        };
        assert!(!might_match(&gt, &no_nan));
    }

    fn double(v: f64) -> PrimitiveLiteral {
        PrimitiveLiteral::Double(v.into())
    }

    fn cmp(op: CmpOp, v: f64) -> Predicate {
        Predicate::Cmp {
            key: 1,
            op,
            value: double(v),
        }
    }

    /// `might_match` over a column with bounds 1.0..=2.0 and the given NaN knowledge.
    fn over_one_two(pred: &Predicate, has_nan: Option<bool>) -> bool {
        let (lo, hi) = (double(1.0), double(2.0));
        might_match(pred, &|_| FieldStats {
            lower: Some(&lo),
            upper: Some(&hi),
            has_nan,
            ..Default::default()
        })
    }

    #[test]
    fn nan_literals_prune_only_by_nan_counts() {
        for has_nan in [None, Some(true)] {
            assert!(over_one_two(&cmp(CmpOp::Eq, f64::NAN), has_nan));
            assert!(over_one_two(&cmp(CmpOp::GtEq, f64::NAN), has_nan));
        }
        assert!(!over_one_two(&cmp(CmpOp::Eq, f64::NAN), Some(false)));
        // Nothing is above NaN; every number is below it and differs from it.
        assert!(!over_one_two(&cmp(CmpOp::Gt, f64::NAN), None));
        assert!(over_one_two(&cmp(CmpOp::Lt, f64::NAN), Some(false)));
        assert!(over_one_two(&cmp(CmpOp::NotEq, f64::NAN), Some(false)));
        // A column of only NaN has no bounds: `= NaN` may match, `= 1.0` may not be pruned by
        // bounds it does not have.
        let only_nan = |_| FieldStats {
            has_nan: Some(true),
            ..Default::default()
        };
        assert!(might_match(&cmp(CmpOp::Eq, f64::NAN), &only_nan));
        assert!(might_match(&cmp(CmpOp::Gt, 1e300), &only_nan));
    }

    /// Writers record the zero they saw, or the one the Parquet format asks for: a zero bound
    /// may stand for either zero.
    #[test]
    fn zero_bounds_stand_for_both_zeros() {
        let (pos, neg) = (double(0.0), double(-0.0));
        for (lower, upper) in [(&pos, &pos), (&neg, &neg), (&neg, &pos), (&pos, &neg)] {
            let stats = |_| FieldStats {
                lower: Some(lower),
                upper: Some(upper),
                has_nan: Some(false),
                ..Default::default()
            };
            for (pred, expected) in [
                (cmp(CmpOp::Eq, -0.0), true),
                (cmp(CmpOp::Eq, 0.0), true),
                (cmp(CmpOp::GtEq, 0.0), true),
                (cmp(CmpOp::LtEq, -0.0), true),
                (cmp(CmpOp::NotEq, 0.0), true),
                (cmp(CmpOp::NotEq, -0.0), true),
                (cmp(CmpOp::Lt, -0.0), false),
                (cmp(CmpOp::Gt, 0.0), false),
                (cmp(CmpOp::Eq, 1.0), false),
            ] {
                assert_eq!(
                    might_match(&pred, &stats),
                    expected,
                    "{pred:?} over [{lower:?}, {upper:?}]"
                );
            }
            let not_in_zero = Predicate::In {
                key: 1,
                values: vec![double(0.0)],
                negated: true,
            };
            assert!(might_match(&not_in_zero, &stats));
        }
        // Total order between different values still prunes.
        let (one, two) = (double(1.0), double(2.0));
        let positive = |_| FieldStats {
            lower: Some(&one),
            upper: Some(&two),
            has_nan: Some(false),
            ..Default::default()
        };
        assert!(!might_match(&cmp(CmpOp::LtEq, 0.0), &positive));
    }
}
