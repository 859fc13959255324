//! Every integration test of this crate, in one test binary.
//!
//! Each file here was once a binary of its own. Each binary statically links DataFusion (about
//! 250 MB unoptimised), so forty of them filled CI's disk and spent minutes linking. nextest
//! still runs every test in a process of its own, so the tests stay as isolated as before.
//! Add a new test file as a module below; `common` holds the shared helpers.

mod common;

mod assert_result;
mod bad_input;
mod bad_writes;
mod catalog_commits;
mod catalogs;
mod checked_arithmetic;
mod checked_sums;
mod column_cache;
mod commit_faults;
mod corpus;
mod ddl;
mod delete;
mod delete_writers;
mod equality_positions;
mod float_min_max;
mod footer_cache;
mod identity_filters;
mod insert;
mod manifest_decoding;
mod merge;
mod merge_on_read;
mod metadata_answers;
mod metadata_table_filters;
mod metadata_tables;
mod nested_insert;
mod object_store_faults;
mod object_store_s3;
mod output_limits;
mod overwrite;
mod page_pruning;
mod positional_scan;
mod postgres_catalog;
mod procedures;
mod pyiceberg_tables;
mod rest_catalog;
mod rest_corpus;
mod rest_corpus_s3;
mod rest_vended_credentials;
mod rewrite;
mod row_copies;
mod row_level_concurrency;
mod row_lineage;
mod run_prefetch;
mod scalar_subqueries;
mod spark_on_s3;
mod spark_tables;
mod table_changes;
mod update;
mod upsert;
mod write_distribution;
