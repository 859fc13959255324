//! Logical Iceberg locations and where their bytes are now.
//!
//! Metadata spells absolute paths variously (`/a/b`, `file:/a/b`, `file:///a/b`,
//! `s3://bucket/a`). Petrel keeps those strings untouched in its plans and only maps them at
//! IO: [`normalize_location`] puts them in one canonical URL form, and a [`LocationMap`]
//! rewrites the prefix of a moved table (the metadata's `location` differs from the directory
//! the catalog found it in; DuckDB's `allow_moved_paths`).

use url::Url;

use crate::error::{Error, Result};

/// Canonical URL text for a location: `file:///abs/path` for local paths in any spelling,
/// unchanged for other schemes; never a trailing slash.
pub fn normalize_location(location: &str) -> String {
    let s = location.trim();
    let canonical = if s.starts_with('/') {
        format!("file://{s}")
    } else if let Some(rest) = s.strip_prefix("file:") {
        // file:/a, file://a (invalid but seen), file:///a
        let path = rest.trim_start_matches('/');
        format!("file:///{path}")
    } else {
        s.to_string()
    };
    canonical.trim_end_matches('/').to_string()
}

/// Parses a location (any spelling) into a URL.
pub fn location_url(location: &str) -> Result<Url> {
    let canonical = normalize_location(location);
    Url::parse(&canonical)
        .map_err(|e| Error::InvalidArgument(format!("invalid location {location:?}: {e}")))
}

/// Maps locations under a table's recorded `location` to where the table actually is.
#[derive(Debug, Clone, Default)]
pub struct LocationMap {
    /// (recorded prefix, actual prefix), both normalised.
    rewrite: Option<(String, String)>,
}

impl LocationMap {
    /// No mapping: paths are read where the metadata says.
    pub fn identity() -> Self {
        Self::default()
    }

    /// Paths under `recorded` (the metadata's `location`) are read under `actual`.
    pub fn moved(recorded: &str, actual: &str) -> Self {
        let recorded = normalize_location(recorded);
        let actual = normalize_location(actual);
        if recorded == actual {
            Self::identity()
        } else {
            Self {
                rewrite: Some((recorded, actual)),
            }
        }
    }

    /// Whether this map rewrites anything.
    pub fn is_identity(&self) -> bool {
        self.rewrite.is_none()
    }

    /// The normalised location where the bytes of `logical` are.
    pub fn resolve(&self, logical: &str) -> String {
        let normalized = normalize_location(logical);
        if let Some((from, to)) = &self.rewrite
            && let Some(rest) = normalized.strip_prefix(from.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{to}{rest}");
        }
        normalized
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spellings_normalise_to_one_form() {
        assert_eq!(normalize_location("/a/b/"), "file:///a/b");
        assert_eq!(normalize_location("file:/a/b"), "file:///a/b");
        assert_eq!(normalize_location("file:///a/b"), "file:///a/b");
        assert_eq!(normalize_location("s3://bkt/a/"), "s3://bkt/a");
    }

    #[test]
    fn moved_table_paths_resolve_under_the_new_prefix() {
        let map = LocationMap::moved("/old/wh/db/t", "file:///new/place/t");
        assert_eq!(
            map.resolve("file:///old/wh/db/t/data/x.parquet"),
            "file:///new/place/t/data/x.parquet"
        );
        assert_eq!(
            map.resolve("/old/wh/db/t/metadata/v1.metadata.json"),
            "file:///new/place/t/metadata/v1.metadata.json"
        );
        // A sibling table sharing a name prefix is not rewritten.
        assert_eq!(map.resolve("/old/wh/db/t2/x"), "file:///old/wh/db/t2/x");
        assert!(LocationMap::moved("/a", "file:///a").is_identity());
    }
}
