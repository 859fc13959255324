//! The REST catalog's JSON bodies that Petrel reads (Iceberg's REST OpenAPI spec).

use std::collections::HashMap;

use serde::Deserialize;

/// `LoadTableResult` (load, create, register) and `CommitTableResponse` (commit).
#[derive(Debug, Deserialize)]
pub(super) struct LoadTableResult {
    #[serde(rename = "metadata-location", default)]
    pub(super) metadata_location: Option<String>,
    pub(super) metadata: serde_json::Value,
    #[serde(default)]
    pub(super) config: Option<HashMap<String, String>>,
    #[serde(rename = "storage-credentials", default)]
    pub(super) storage_credentials: Option<Vec<StorageCredential>>,
}

/// One vended credential: the config for locations under `prefix`.
#[derive(Debug, Deserialize)]
pub(super) struct StorageCredential {
    pub(super) prefix: String,
    #[serde(default)]
    pub(super) config: HashMap<String, String>,
}

/// `ListNamespacesResponse`.
#[derive(Debug, Deserialize)]
pub(super) struct ListNamespacesResponse {
    #[serde(default)]
    pub(super) namespaces: Vec<Vec<String>>,
    #[serde(rename = "next-page-token", default)]
    pub(super) next_page_token: Option<String>,
}

/// `TableIdentifier`.
#[derive(Debug, Deserialize)]
pub(super) struct TableIdentifier {
    pub(super) namespace: Vec<String>,
    pub(super) name: String,
}

/// `ListTablesResponse`.
#[derive(Debug, Deserialize)]
pub(super) struct ListTablesResponse {
    #[serde(default)]
    pub(super) identifiers: Vec<TableIdentifier>,
    #[serde(rename = "next-page-token", default)]
    pub(super) next_page_token: Option<String>,
}

/// `GetNamespaceResponse`.
#[derive(Debug, Deserialize)]
pub(super) struct GetNamespaceResponse {
    #[serde(default)]
    pub(super) properties: Option<HashMap<String, String>>,
}

impl LoadTableResult {
    /// The storage properties of the table: the table `config`, then the vended credential
    /// whose prefix is the longest that `location` starts with (as a directory: the prefix
    /// `s3://b/t/` covers the table at `s3://b/t`).
    pub(super) fn storage_properties(&self, location: &str) -> HashMap<String, String> {
        let mut props = self.config.clone().unwrap_or_default();
        let as_dir = format!("{}/", location.trim_end_matches('/'));
        if let Some(best) = self
            .storage_credentials
            .iter()
            .flatten()
            .filter(|c| as_dir.starts_with(c.prefix.as_str()))
            .max_by_key(|c| c.prefix.len())
        {
            props.extend(best.config.clone());
        }
        props
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_credential_prefix_wins_over_the_table_config() {
        let result: LoadTableResult = serde_json::from_value(serde_json::json!({
            "metadata-location": "s3://b/t/metadata/1.json",
            "metadata": {},
            "config": {"s3.endpoint": "http://e", "s3.access-key-id": "table"},
            "storage-credentials": [
                {"prefix": "s3://b/", "config": {"s3.access-key-id": "bucket"}},
                {"prefix": "s3://b/t", "config": {"s3.access-key-id": "tbl"}},
                {"prefix": "s3://other/", "config": {"s3.access-key-id": "no"}}
            ]
        }))
        .unwrap();
        let props = result.storage_properties("s3://b/t");
        assert_eq!(props["s3.access-key-id"], "tbl");
        assert_eq!(props["s3.endpoint"], "http://e");
        // A prefix with the directory's slash (rustberg's) covers the table location too.
        let result: LoadTableResult = serde_json::from_value(serde_json::json!({
            "metadata": {},
            "storage-credentials": [
                {"prefix": "s3://b/t/", "config": {"s3.access-key-id": "dir"}},
                {"prefix": "s3://b/tt/", "config": {"s3.access-key-id": "sibling"}}
            ]
        }))
        .unwrap();
        assert_eq!(
            result.storage_properties("s3://b/t")["s3.access-key-id"],
            "dir"
        );
        assert_eq!(
            result.storage_properties("s3://b/t/")["s3.access-key-id"],
            "dir"
        );
        assert!(result.storage_properties("s3://b/t2").is_empty());
    }
}
