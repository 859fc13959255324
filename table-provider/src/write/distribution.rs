//! `write.distribution-mode`: how a write spreads its rows over its writer tasks.
//!
//! As in Iceberg's Spark writes:
//! - `hash` (the default when the table's current spec is partitioned): rows are
//!   hash-distributed on the partition key, the *transformed* values of the spec's fields
//!   ([`PartitionKeyExpr`]), so the rows of one table partition reach one writer task and each
//!   partition gets one file (or one run of rolling files) per write instead of one per task;
//! - `none` (the default of an unpartitioned table): each task writes the rows it receives, a
//!   file per table partition it sees;
//! - `range`: accepted and written as `hash` (Spark range-partitions on the sort order; Petrel
//!   does not sort the rows it writes, so the partition key is all there is to distribute on).
//!
//! The rows of row-level statements follow `write.delete.distribution-mode` (the rows a
//! copy-on-write DELETE keeps), `write.update.distribution-mode` and
//! `write.merge.distribution-mode`, each `hash` by default, as Spark's copy-on-write writes.
//!
//! `hash` and `range` on an unpartitioned spec (no fields, or only `void` ones) are `none`,
//! as Spark adjusts them. The distribution itself is DataFusion's: `IcebergWriteExec` requires
//! its input hash-partitioned on a [`WriterTaskExpr`] over these keys and the physical optimizer
//! inserts the repartition. A table partition larger than `write.spark.advisory-partition-size-bytes`
//! (Iceberg's property for the size Spark's adaptive execution splits a write's shuffle
//! partitions at; here Arrow bytes of the rows, 512 MiB by default) is spread over every writer
//! task past that size, as Spark splits it, so that a load of one partition still runs in
//! parallel.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::physical_plan::PhysicalExpr;
use iceberg::spec::{PartitionSpec, Transform};

use super::data_file_writer::WriteSettings;
use super::partition_key_expr::PartitionKeyExpr;
use super::writer_task_expr::WriterTaskExpr;
use crate::error::{Error, Result};

/// The table property naming a write's distribution mode.
pub const DISTRIBUTION_MODE: &str = "write.distribution-mode";
/// The distribution mode of the rows a copy-on-write DELETE keeps.
pub const DELETE_DISTRIBUTION_MODE: &str = "write.delete.distribution-mode";
/// The distribution mode of the new versions of the rows an UPDATE changes.
pub const UPDATE_DISTRIBUTION_MODE: &str = "write.update.distribution-mode";
/// The distribution mode of the rows a MERGE updates and inserts.
pub const MERGE_DISTRIBUTION_MODE: &str = "write.merge.distribution-mode";

/// The table property: how many bytes of one table partition's rows go to its first writer
/// task before its rows are spread over every task (Iceberg's name for the size Spark splits a
/// write's shuffle partitions at; Petrel counts the rows' Arrow bytes).
pub const ADVISORY_PARTITION_SIZE: &str = "write.spark.advisory-partition-size-bytes";
/// [`ADVISORY_PARTITION_SIZE`]'s default: 512 MiB of Arrow rows, about the 128 MB of Parquet
/// per task Iceberg's Spark writes aim at (128 MB times a shuffle compression ratio of 4).
pub const DEFAULT_ADVISORY_PARTITION_BYTES: u64 = 512 * 1024 * 1024;

/// How a write distributes its rows over its writer tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistributionMode {
    /// Each task writes the rows it gets.
    None,
    /// Rows hash-distributed on the partition key.
    Hash,
    /// Accepted as Spark's name; written as [`DistributionMode::Hash`].
    Range,
}

impl DistributionMode {
    /// The mode of an INSERT (or CTAS, INSERT OVERWRITE) into the table `table` with
    /// `properties`, written with `spec`: `write.distribution-mode`, by default `hash` for a
    /// partitioned spec and `none` otherwise. An unknown value is an error naming the property
    /// and the table.
    pub fn of_write(
        table: &str,
        properties: &HashMap<String, String>,
        spec: &PartitionSpec,
    ) -> Result<Self> {
        Self::of_property(table, properties, spec, DISTRIBUTION_MODE)
    }

    /// The mode of the rows a row-level statement writes (`property`: one of
    /// [`DELETE_DISTRIBUTION_MODE`], [`UPDATE_DISTRIBUTION_MODE`], [`MERGE_DISTRIBUTION_MODE`]),
    /// `hash` by default as in Spark's copy-on-write writes (and `none` for an unpartitioned
    /// spec).
    pub fn of_property(
        table: &str,
        properties: &HashMap<String, String>,
        spec: &PartitionSpec,
        property: &str,
    ) -> Result<Self> {
        let mode = match properties.get(property) {
            Some(value) => Self::parse(value).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "table {table}: property {property}={value:?} is invalid: \
                     expected none, hash or range"
                ))
            })?,
            None => Self::Hash,
        };
        Ok(if spec.is_unpartitioned() {
            Self::None
        } else {
            mode
        })
    }

    /// Java's `DistributionMode.fromName`: case-insensitive.
    fn parse(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "none" => Some(Self::None),
            "hash" => Some(Self::Hash),
            "range" => Some(Self::Range),
            _ => None,
        }
    }

    /// The keys the write's rows are to be hash-distributed on: the partition key of
    /// `settings`' spec (the one the write writes with) for `hash` and `range`, without its
    /// `void` fields (always null); empty for `none`.
    pub fn keys(self, settings: &WriteSettings) -> Result<Vec<Arc<dyn PhysicalExpr>>> {
        if self == Self::None {
            return Ok(Vec::new());
        }
        let spec = settings.spec();
        spec.fields()
            .iter()
            .filter(|f| f.transform != Transform::Void)
            .map(|f| {
                let key = PartitionKeyExpr::new(
                    spec.spec_id(),
                    settings.schema(),
                    f,
                    settings.arrow_schema(),
                )?;
                Ok(Arc::new(key) as Arc<dyn PhysicalExpr>)
            })
            .collect()
    }

    /// The expression the write's rows are to be hash-partitioned on over `tasks` writer
    /// tasks: the writer task of each row by its partition key ([`Self::keys`]), a table
    /// partition larger than the table's advisory partition size spread over every task;
    /// `None` for `none` (or an unpartitioned spec). An invalid advisory size is an error
    /// naming the property and the table.
    pub fn writer_task(
        self,
        settings: &WriteSettings,
        properties: &HashMap<String, String>,
        tasks: usize,
    ) -> Result<Option<Arc<WriterTaskExpr>>> {
        let keys = self.keys(settings)?;
        if keys.is_empty() {
            return Ok(None);
        }
        let split_bytes = advisory_partition_bytes(settings.table_name(), properties)?;
        Ok(Some(Arc::new(WriterTaskExpr::new(
            keys,
            tasks,
            split_bytes,
        ))))
    }

    /// The name EXPLAIN shows.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Hash => "hash",
            Self::Range => "range",
        }
    }
}

/// The table's [`ADVISORY_PARTITION_SIZE`]: a positive number of bytes.
fn advisory_partition_bytes(table: &str, properties: &HashMap<String, String>) -> Result<u64> {
    let Some(value) = properties.get(ADVISORY_PARTITION_SIZE) else {
        return Ok(DEFAULT_ADVISORY_PARTITION_BYTES);
    };
    match value.trim().parse::<u64>() {
        Ok(bytes) if bytes > 0 => Ok(bytes),
        _ => Err(Error::InvalidArgument(format!(
            "table {table}: property {ADVISORY_PARTITION_SIZE}={value:?} is invalid: \
             expected a positive number of bytes"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};

    use super::*;

    fn specs() -> (PartitionSpec, PartitionSpec, PartitionSpec) {
        let schema = Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
            ])
            .build()
            .unwrap();
        let partitioned = PartitionSpec::builder(schema.clone())
            .add_partition_field("id", "id_trunc", Transform::Truncate(10))
            .unwrap()
            .build()
            .unwrap();
        let void = PartitionSpec::builder(schema.clone())
            .add_partition_field("id", "id_void", Transform::Void)
            .unwrap()
            .build()
            .unwrap();
        let unpartitioned = PartitionSpec::builder(schema).build().unwrap();
        (partitioned, void, unpartitioned)
    }

    #[test]
    fn defaults_values_and_errors() {
        let (partitioned, void, unpartitioned) = specs();
        let props = |v: Option<&str>| -> HashMap<String, String> {
            v.map(|v| (DISTRIBUTION_MODE.to_string(), v.to_string()))
                .into_iter()
                .collect()
        };
        let mode = |v: Option<&str>, spec: &PartitionSpec| {
            DistributionMode::of_write("ns.t", &props(v), spec)
        };
        assert_eq!(mode(None, &partitioned).unwrap(), DistributionMode::Hash);
        assert_eq!(mode(None, &unpartitioned).unwrap(), DistributionMode::None);
        assert_eq!(mode(None, &void).unwrap(), DistributionMode::None);
        assert_eq!(
            mode(Some("none"), &partitioned).unwrap(),
            DistributionMode::None
        );
        assert_eq!(
            mode(Some("HASH"), &partitioned).unwrap(),
            DistributionMode::Hash
        );
        assert_eq!(
            mode(Some("range"), &partitioned).unwrap(),
            DistributionMode::Range
        );
        assert_eq!(
            mode(Some("hash"), &unpartitioned).unwrap(),
            DistributionMode::None
        );
        let error = mode(Some("round-robin"), &partitioned)
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "invalid argument: table ns.t: property write.distribution-mode=\"round-robin\" is \
             invalid: expected none, hash or range"
        );
        // Checked on unpartitioned tables too.
        assert!(mode(Some("sorted"), &unpartitioned).is_err());
    }

    #[test]
    fn advisory_partition_size() {
        let props = |v: &str| -> HashMap<String, String> {
            [(ADVISORY_PARTITION_SIZE.to_string(), v.to_string())].into()
        };
        assert_eq!(
            advisory_partition_bytes("ns.t", &HashMap::new()).unwrap(),
            512 << 20
        );
        assert_eq!(
            advisory_partition_bytes("ns.t", &props(" 1048576")).unwrap(),
            1 << 20
        );
        for bad in ["0", "-1", "1MB", ""] {
            assert_eq!(
                advisory_partition_bytes("ns.t", &props(bad))
                    .unwrap_err()
                    .to_string(),
                format!(
                    "invalid argument: table ns.t: property \
                     write.spark.advisory-partition-size-bytes={bad:?} is invalid: expected a \
                     positive number of bytes"
                )
            );
        }
    }
}
