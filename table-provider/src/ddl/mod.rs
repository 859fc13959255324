//! Spark-style DDL for Iceberg tables: `CREATE/DROP SCHEMA`, `CREATE TABLE` (columns, `PRIMARY
//! KEY`, `PARTITIONED BY` transforms, `TBLPROPERTIES`, `AS query`), `CREATE OR REPLACE TABLE` /
//! `REPLACE TABLE` (one commit that keeps the table's history), `DROP TABLE [PURGE]`.
//!
//! - [`parser`]: the statements from SQL tokens (DataFusion's parser cannot read them).
//! - [`types`]: column type names as Iceberg types.
//! - [`create`]: a parsed `CREATE TABLE` as the new table's Iceberg metadata.
//! - [`execute`]: running them against a DataFusion session's Iceberg catalogs.
//! - [`plan`]: DDL as a DataFusion plan (an extension node and its exec), so it runs when the
//!   plan is executed, like any statement.

pub mod create;
pub mod execute;
pub mod parser;
pub mod plan;
pub mod types;

pub use create::{default_table_metadata, new_table_metadata};
pub use execute::execute_ddl;
pub use parser::{ColumnDef, CreateTable, DdlStatement, PartitionTerm, ReplaceMode, parse_ddl};
pub use plan::{DdlNode, DdlPlanner, as_ddl, ddl_plan};
pub use types::ParsedType;
