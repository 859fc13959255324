//! Thin helpers over the `iceberg` spec library: Iceberg → Arrow types, snapshot selection,
//! Iceberg values as DataFusion scalars.

mod arrow_types;
pub mod avro_names;
mod manifest_avro;
mod snapshot;
mod values;

pub use arrow_types::{
    FIELD_ID_KEY, arrow_schema_to_iceberg, field_id_of, iceberg_schema_to_arrow,
    iceberg_type_to_arrow,
};
pub use manifest_avro::{decodes_directly, parse_manifest};
pub use snapshot::{ResolvedSnapshot, SnapshotSelector};
pub use values::{datum_to_scalar, literal_to_scalar, scalar_to_literal};
