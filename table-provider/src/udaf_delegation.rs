//! The `AggregateUDFImpl` methods a wrapper of a built-in aggregate passes through unchanged.
//!
//! Petrel wraps built-in aggregates to change one part of them (`FloatTotalOrder`: the grouped
//! accumulator of floats; `CheckedSum`: checked integer and decimal accumulators; `CheckedAvg`:
//! checked decimal accumulators; `BoundedAggregate`: window values and t-digest sizes).
//! Everything else must stay the built-in's, method by method: [`delegate_aggregate_udf!`] writes those methods for a wrapper whose built-in is
//! `self.inner: Arc<AggregateUDF>`.

/// Inside an `impl AggregateUDFImpl` of a wrapper with field `inner: Arc<AggregateUDF>`: the
/// methods every such wrapper passes to the built-in (name, types, display, state fields,
/// coercion, defaults, documentation, ordering properties, grouped-accumulator support).
macro_rules! delegate_aggregate_udf {
    () => {
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }

        fn name(&self) -> &str {
            self.inner.name()
        }

        fn aliases(&self) -> &[String] {
            self.inner.aliases()
        }

        fn schema_name(
            &self,
            params: &datafusion::logical_expr::expr::AggregateFunctionParams,
        ) -> datafusion::common::Result<String> {
            self.inner.inner().schema_name(params)
        }

        fn human_display(
            &self,
            params: &datafusion::logical_expr::expr::AggregateFunctionParams,
        ) -> datafusion::common::Result<String> {
            self.inner.inner().human_display(params)
        }

        fn display_name(
            &self,
            params: &datafusion::logical_expr::expr::AggregateFunctionParams,
        ) -> datafusion::common::Result<String> {
            self.inner.inner().display_name(params)
        }

        fn signature(&self) -> &datafusion::logical_expr::Signature {
            self.inner.signature()
        }

        fn return_type(
            &self,
            arg_types: &[arrow::datatypes::DataType],
        ) -> datafusion::common::Result<arrow::datatypes::DataType> {
            self.inner.return_type(arg_types)
        }

        fn return_field(
            &self,
            arg_fields: &[arrow::datatypes::FieldRef],
        ) -> datafusion::common::Result<arrow::datatypes::FieldRef> {
            self.inner.return_field(arg_fields)
        }

        fn is_nullable(&self) -> bool {
            self.inner.is_nullable()
        }

        fn state_fields(
            &self,
            args: datafusion::logical_expr::function::StateFieldsArgs,
        ) -> datafusion::common::Result<Vec<arrow::datatypes::FieldRef>> {
            self.inner.state_fields(args)
        }

        fn order_sensitivity(&self) -> datafusion::logical_expr::utils::AggregateOrderSensitivity {
            self.inner.inner().order_sensitivity()
        }

        // Whether the grouped accumulator is used: the built-in's choice (a wrapper changes
        // what its accumulators do, not which one runs).
        fn groups_accumulator_supported(
            &self,
            args: datafusion::logical_expr::function::AccumulatorArgs,
        ) -> bool {
            self.inner.groups_accumulator_supported(args)
        }

        fn coerce_types(
            &self,
            arg_types: &[arrow::datatypes::DataType],
        ) -> datafusion::common::Result<Vec<arrow::datatypes::DataType>> {
            self.inner.coerce_types(arg_types)
        }

        fn is_descending(&self) -> Option<bool> {
            self.inner.is_descending()
        }

        fn default_value(
            &self,
            data_type: &arrow::datatypes::DataType,
        ) -> datafusion::common::Result<datafusion::common::ScalarValue> {
            self.inner.default_value(data_type)
        }

        fn supports_null_handling_clause(&self) -> bool {
            self.inner.inner().supports_null_handling_clause()
        }

        fn documentation(&self) -> Option<&datafusion::logical_expr::Documentation> {
            self.inner.documentation()
        }

        fn set_monotonicity(
            &self,
            data_type: &arrow::datatypes::DataType,
        ) -> datafusion::logical_expr::SetMonotonicity {
            self.inner.inner().set_monotonicity(data_type)
        }
    };
}

pub(crate) use delegate_aggregate_udf;
