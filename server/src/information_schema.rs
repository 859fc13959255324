//! Truthful numeric columns in `information_schema.columns`.
//!
//! DataFusion 53's `information_schema.columns` (which Petrel serves as it is) reports
//! `numeric_precision` 24 for `Float64` (a copy of `Float32`'s, though its comment says
//! "postgres `double`"), 15 for `Float16`, and nothing for `Int64` / `UInt64`; it reports no
//! `numeric_scale` for integers. PostgreSQL, whose catalog these columns follow, reports binary
//! precisions: `real` 24, `double precision` 53, `bigint` 64, `integer` 32, `smallint` 16, radix
//! 2, scale 0 for integers and NULL for floats.
//!
//! [`TruthfulNumericPrecision`] is an analyzer rule that puts a projection over every scan of
//! `information_schema.columns` correcting those values by `data_type`: `Float64` 53, `Float16`
//! 11 (IEEE half precision's significand bits), `Int64` / `UInt64` 64 with radix 2, and scale 0
//! for every integer type. Other rows and columns pass through unchanged.

use std::sync::Arc;

use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TransformedResult};
use datafusion::common::{Column, Result};
use datafusion::logical_expr::{Expr, LogicalPlan, Projection, lit, when};
use datafusion::optimizer::AnalyzerRule;

/// See the module docs.
#[derive(Debug, Default)]
pub struct TruthfulNumericPrecision;

const INTEGER_TYPES: &[&str] = &[
    "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
];

impl AnalyzerRule for TruthfulNumericPrecision {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|node| {
            let LogicalPlan::TableScan(scan) = &node else {
                return Ok(Transformed::no(node));
            };
            // `information_schema.columns`, or `columns` unqualified in a session whose schema
            // is information_schema (the scan keeps the name as written): known by its columns.
            let name = &scan.table_name;
            let schema = Arc::clone(&scan.projected_schema);
            let has = |c: &str| schema.fields().iter().any(|f| f.name() == c);
            if name.table() != "columns"
                || !matches!(name.schema(), None | Some("information_schema"))
                || !["table_catalog", "column_name", "numeric_precision_radix"]
                    .into_iter()
                    .all(has)
            {
                return Ok(Transformed::no(node));
            }
            let Some((qualifier, data_type)) = schema
                .iter()
                .find(|(_, f)| f.name() == "data_type")
                .map(|(q, f)| (q.cloned(), Expr::Column(Column::from((q, f)))))
            else {
                return Ok(Transformed::no(node));
            };
            let is = |ty: &str| data_type.clone().eq(lit(ty));
            let is_integer = INTEGER_TYPES
                .iter()
                .map(|t| is(t))
                .reduce(Expr::or)
                .unwrap_or(lit(false));
            let mut exprs = Vec::with_capacity(schema.fields().len());
            for (q, field) in schema.iter() {
                let column = Expr::Column(Column::from((q, field)));
                let fixed = match field.name().as_str() {
                    "numeric_precision" => when(is("Float64"), lit(53u64))
                        .when(is("Float16"), lit(11u64))
                        .when(is("Int64").or(is("UInt64")), lit(64u64))
                        .otherwise(column)?,
                    "numeric_precision_radix" => {
                        when(is("Int64").or(is("UInt64")), lit(2u64)).otherwise(column)?
                    }
                    "numeric_scale" => when(is_integer.clone(), lit(0u64)).otherwise(column)?,
                    _ => {
                        exprs.push(column);
                        continue;
                    }
                };
                exprs.push(fixed.alias_qualified(qualifier.clone(), field.name()));
            }
            let projection = Projection::try_new(exprs, Arc::new(node))?;
            Ok(Transformed::yes(LogicalPlan::Projection(projection)))
        })
        .data()
    }

    fn name(&self) -> &str {
        "petrel_truthful_numeric_precision"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, AsArray, RecordBatch};
    use arrow::datatypes::{DataType, Field, Schema, UInt64Type};
    use datafusion::catalog::MemorySchemaProvider;
    use datafusion::datasource::MemTable;
    use datafusion::execution::SessionStateBuilder;
    use datafusion::prelude::{SessionConfig, SessionContext};

    #[tokio::test]
    async fn precisions_follow_postgresql() {
        for (schema, from) in [
            ("public", "information_schema.columns"),
            ("information_schema", "columns"),
        ] {
            precisions(schema, from).await;
        }
    }

    async fn precisions(default_schema: &str, from: &str) {
        let config = SessionConfig::new()
            .with_information_schema(true)
            .with_default_catalog_and_schema("datafusion", default_schema);
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_default_features()
            .with_analyzer_rule(Arc::new(TruthfulNumericPrecision))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let schema = Arc::new(Schema::new(vec![
            Field::new("f64", DataType::Float64, true),
            Field::new("f32", DataType::Float32, true),
            Field::new("i64", DataType::Int64, true),
            Field::new("i32", DataType::Int32, true),
            Field::new("s", DataType::Utf8, true),
        ]));
        let table = MemTable::try_new(
            Arc::clone(&schema),
            vec![vec![RecordBatch::new_empty(schema)]],
        )
        .unwrap();
        let catalog = ctx.catalog("datafusion").unwrap();
        if catalog.schema("public").is_none() {
            catalog
                .register_schema("public", Arc::new(MemorySchemaProvider::new()))
                .unwrap();
        }
        ctx.register_table("datafusion.public.t", Arc::new(table))
            .unwrap();
        let batches = ctx
            .sql(&format!(
                "SELECT numeric_precision, numeric_precision_radix, numeric_scale \
                 FROM {from} WHERE table_name = 't' ORDER BY ordinal_position"
            ))
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let b = &batches[0];
        let column = |i: usize| -> Vec<Option<u64>> {
            let a = b.column(i).as_primitive::<UInt64Type>();
            (0..a.len())
                .map(|r| a.is_valid(r).then(|| a.value(r)))
                .collect()
        };
        assert_eq!(column(0), [Some(53), Some(24), Some(64), Some(32), None]);
        assert_eq!(column(1), [Some(2), Some(2), Some(2), Some(2), None]);
        assert_eq!(column(2), [None, None, Some(0), Some(0), None]);
    }
}
