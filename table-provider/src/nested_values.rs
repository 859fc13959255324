//! `INSERT … VALUES` of struct, list and map values: keeping the Iceberg field ids of nested
//! types through DataFusion's constant folding.
//!
//! An Iceberg table's Arrow schema carries each field's id as `PARQUET:field_id` metadata, on
//! nested fields too (a list's `element`, a struct's children, a map's `key` and `value`), and
//! Arrow counts a child field's metadata as part of the parent's data type. For
//! `INSERT INTO t VALUES (['a', 'b'])` DataFusion casts each value to the column's type, and its
//! expression simplifier then folds `CAST(make_array('a', 'b') AS List(element {field_id: 5}))`
//! into a constant whose type has lost the child's metadata (the cast looks like a no-op to
//! it). The `VALUES` node still declares the column's type, so building its batch fails with
//! "column types must match schema types".
//!
//! [`NestedValuesTypes`] runs after the simplifier and gives each `VALUES` constant exactly
//! the type its column declares when the two differ only in nested field names or metadata
//! (a cheap re-labelling of the same arrays). Other differences are left alone, for DataFusion
//! to report. Register it with `SessionStateBuilder::with_optimizer_rule` (the default rules
//! run first).

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray};
use arrow::datatypes::DataType;
use datafusion::common::tree_node::Transformed;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{Expr, LogicalPlan, Values};
use datafusion::optimizer::optimizer::ApplyOrder;
use datafusion::optimizer::{OptimizerConfig, OptimizerRule};

/// The optimizer rule (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct NestedValuesTypes;

impl NestedValuesTypes {
    /// The rule.
    pub fn new() -> Self {
        Self
    }
}

impl OptimizerRule for NestedValuesTypes {
    fn name(&self) -> &str {
        "nested_values_types"
    }

    fn apply_order(&self) -> Option<ApplyOrder> {
        Some(ApplyOrder::BottomUp)
    }

    fn supports_rewrite(&self) -> bool {
        true
    }

    fn rewrite(
        &self,
        plan: LogicalPlan,
        _config: &dyn OptimizerConfig,
    ) -> Result<Transformed<LogicalPlan>> {
        let LogicalPlan::Values(Values { schema, values }) = plan else {
            return Ok(Transformed::no(plan));
        };
        let mut changed = false;
        let mut rows = Vec::with_capacity(values.len());
        for row in values {
            let mut out = Vec::with_capacity(row.len());
            for (expr, field) in row.into_iter().zip(schema.fields().iter()) {
                let relabelled = relabel(&expr, field.data_type())?;
                changed |= relabelled.is_some();
                out.push(relabelled.unwrap_or(expr));
            }
            rows.push(out);
        }
        let plan = LogicalPlan::Values(Values {
            schema,
            values: rows,
        });
        Ok(if changed {
            Transformed::yes(plan)
        } else {
            Transformed::no(plan)
        })
    }
}

/// `expr` as a constant of type `target`, when it is a constant whose type differs from
/// `target` only in nested field names or metadata.
fn relabel(expr: &Expr, target: &DataType) -> Result<Option<Expr>> {
    let (value, metadata, alias) = match expr {
        Expr::Literal(value, metadata) => (value, metadata, None),
        Expr::Alias(alias) => match alias.expr.as_ref() {
            Expr::Literal(value, metadata) => (value, metadata, Some(alias)),
            _ => return Ok(None),
        },
        _ => return Ok(None),
    };
    let current = value.data_type();
    if &current == target || !current.equals_datatype(target) {
        return Ok(None);
    }
    let array = arrow::compute::cast(&value.to_array()?, target)?;
    let literal = Expr::Literal(one_row_scalar(&array)?, metadata.clone());
    Ok(Some(match alias {
        Some(alias) => literal.alias_qualified(alias.relation.clone(), alias.name.clone()),
        None => literal,
    }))
}

/// The constant of a one-row nested array, keeping its exact type
/// (`ScalarValue::try_from_array` rebuilds a list's field and drops the metadata).
fn one_row_scalar(array: &ArrayRef) -> Result<ScalarValue> {
    Ok(match array.data_type() {
        DataType::List(_) => ScalarValue::List(Arc::new(array.as_list::<i32>().clone())),
        DataType::LargeList(_) => ScalarValue::LargeList(Arc::new(array.as_list::<i64>().clone())),
        DataType::FixedSizeList(..) => {
            ScalarValue::FixedSizeList(Arc::new(array.as_fixed_size_list().clone()))
        }
        DataType::Struct(_) => ScalarValue::Struct(Arc::new(array.as_struct().clone())),
        DataType::Map(..) => ScalarValue::Map(Arc::new(array.as_map().clone())),
        _ => ScalarValue::try_from_array(array, 0)?,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::datatypes::Field;

    use super::*;

    /// An Iceberg table's `list<string>` column type: element field id 5.
    fn iceberg_list() -> DataType {
        let element = Field::new("element", DataType::Utf8, true).with_metadata(HashMap::from([(
            "PARQUET:field_id".to_string(),
            "5".to_string(),
        )]));
        DataType::List(Arc::new(element))
    }

    #[test]
    fn relabels_constants_that_lost_nested_metadata() {
        let value = ScalarValue::List(ScalarValue::new_list_nullable(
            &[ScalarValue::from("a")],
            &DataType::Utf8,
        ));
        // DataFusion's constants name the element `item`, without metadata.
        assert_ne!(value.data_type(), iceberg_list());
        let plain = value.data_type();
        let expr = Expr::Literal(value, None).alias("tags");
        let out = relabel(&expr, &iceberg_list())
            .expect("relabel")
            .expect("changed");
        let Expr::Alias(alias) = out else {
            panic!("alias kept: {out}")
        };
        let Expr::Literal(value, _) = alias.expr.as_ref() else {
            panic!("a constant")
        };
        assert_eq!(value.data_type(), iceberg_list());
        assert_eq!(alias.name, "tags");
        // Already the declared type, or another type: untouched.
        assert!(relabel(&expr, &plain).expect("same").is_none());
        assert!(relabel(&expr, &DataType::Utf8).expect("other").is_none());
    }
}
