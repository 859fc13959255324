//! Logical Iceberg locations, where their bytes are now, and how they become object-store paths.
//!
//! A location in Iceberg metadata (a manifest's `file_path`, a position-delete file's
//! `file_path` column, a deletion vector's `referenced_data_file`, the table `location`) is an
//! **opaque string**: writers put literal file names there. Spark/Iceberg Java write identity
//! partition values URL-encoded into directory names (`a/b=c d%` becomes `a%2Fb%3Dc+d%25`), and
//! those characters are the real names on disk and in object keys. So nothing here ever
//! percent-decodes, URL-parses or re-encodes a location:
//!
//! - [`normalize_location`] only unifies the *scheme prefix* of local paths (`/a/b`, `file:/a/b`,
//!   `file:///a/b` → `file:///a/b`), so that two spellings of one file compare equal;
//! - a [`LocationMap`] rewrites the prefix of a moved table (the metadata's `location` differs
//!   from the directory the catalog found it in; DuckDB's `allow_moved_paths`);
//! - [`object_location`] is the one place that turns a location into an object store's address
//!   (scheme, authority, and an object [`Path`] whose segments are the location's literal
//!   segments); [`child_path`] appends one literal name to such a path.

use object_store::path::{Path, PathPart};

use crate::error::{Error, Result};

/// Canonical text of a location: `file:///abs/path` for local paths in any spelling, other
/// schemes unchanged; never a trailing slash. Only the prefix changes, never a character of the
/// path itself.
pub fn normalize_location(location: &str) -> String {
    let canonical = if location.starts_with('/') {
        format!("file://{location}")
    } else if let Some(rest) = location.strip_prefix("file:") {
        // file:/a, file://a (invalid but seen), file:///a
        let path = rest.trim_start_matches('/');
        format!("file:///{path}")
    } else {
        location.to_string()
    };
    canonical.trim_end_matches('/').to_string()
}

/// Where a location's bytes are, in an object store's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectLocation {
    /// `file`, `s3`, ...
    pub scheme: String,
    /// The bucket or container (empty for local files).
    pub authority: String,
    /// The object path: the location's literal segments, nothing decoded.
    pub path: Path,
}

/// Splits a location (any spelling) into scheme, authority and object path, keeping every
/// character of the path as written.
///
/// Local paths collapse repeated slashes (the file system does too); object keys must not hold
/// empty, `.` or `..` segments or control characters, which object stores cannot address
/// safely: those locations are refused with an error naming them.
pub fn object_location(location: &str) -> Result<ObjectLocation> {
    let canonical = normalize_location(location);
    let invalid =
        |why: &str| Error::InvalidArgument(format!("invalid location {location:?}: {why}"));
    let Some((scheme, rest)) = canonical.split_once("://") else {
        return Err(invalid(
            "no scheme (expected an absolute path or scheme://...)",
        ));
    };
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return Err(invalid("bad scheme"));
    }
    let scheme = scheme.to_ascii_lowercase();
    let (authority, key) = if scheme == "file" {
        // normalize_location gives file:///abs: no authority.
        let key = rest.strip_prefix('/').unwrap_or(rest);
        let collapsed: Vec<&str> = key.split('/').filter(|s| !s.is_empty()).collect();
        (String::new(), collapsed.join("/"))
    } else {
        let (authority, key) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(invalid("no bucket"));
        }
        (authority.to_string(), key.to_string())
    };
    let path = Path::parse(&key).map_err(|e| invalid(&e.to_string()))?;
    Ok(ObjectLocation {
        scheme,
        authority,
        path,
    })
}

/// `dir` with one more segment, `name` taken literally (a file or directory name as it is on
/// disk, a namespace or table name): names holding `/`, control characters, or being `.` or
/// `..` are refused rather than escaped, so no name reaches outside `dir`.
pub fn child_path(dir: &Path, name: &str) -> Result<Path> {
    let invalid =
        |why: String| Error::InvalidArgument(format!("invalid name {name:?} under {dir}: {why}"));
    if name.is_empty() {
        return Err(invalid("empty".into()));
    }
    let part = PathPart::parse(name).map_err(|e| invalid(e.to_string()))?;
    Ok(dir.clone().join(part))
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

    /// The (recorded prefix, actual prefix) this map rewrites, if any.
    pub fn rewrite(&self) -> Option<(&str, &str)> {
        self.rewrite
            .as_ref()
            .map(|(from, to)| (from.as_str(), to.as_str()))
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

    /// Every character Spark's partition-path encoding produces, and the ones it leaves alone,
    /// stays as written: the object path's segments are the location's segments.
    #[test]
    fn object_paths_keep_every_character() {
        let names = [
            "country=a%2Fb%3Dc+d%25",
            "country=%E6%97%A5%E6%9C%AC",
            "country=日本",
            "v=a b",
            "v=a+b",
            "v=50%",
            "v=%",
            "v=a#1",
            "v=what?",
            "v=x=y",
            "v=é",
            "v=%25%2525",
        ];
        for name in names {
            for spelling in [
                format!("/wh 50%/db/t/data/{name}/f.parquet"),
                format!("file:/wh 50%/db/t/data/{name}/f.parquet"),
                format!("file:///wh 50%/db/t/data/{name}/f.parquet"),
            ] {
                let loc = object_location(&spelling).unwrap();
                assert_eq!(loc.scheme, "file");
                assert_eq!(loc.authority, "");
                assert_eq!(
                    loc.path.as_ref(),
                    format!("wh 50%/db/t/data/{name}/f.parquet"),
                    "{spelling}"
                );
                let parts: Vec<String> = loc.path.parts().map(|p| p.as_ref().to_string()).collect();
                assert_eq!(parts, ["wh 50%", "db", "t", "data", name, "f.parquet"]);
            }
        }
    }

    #[test]
    fn object_stores_get_bucket_and_literal_key() {
        let loc = object_location("s3://bkt/wh/t/data/c=a%2Fb+c/x.parquet").unwrap();
        assert_eq!(loc.scheme, "s3");
        assert_eq!(loc.authority, "bkt");
        assert_eq!(loc.path.as_ref(), "wh/t/data/c=a%2Fb+c/x.parquet");
        assert!(object_location("s3:///key").is_err());
    }

    #[test]
    fn unaddressable_locations_are_refused_by_name() {
        for bad in [
            "relative/path",
            "/a/../etc/passwd",
            "/a/./b",
            "s3://b/a//b",
            "/a/\u{1}b",
        ] {
            let err = object_location(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        // Repeated slashes in a local path are the same file.
        assert_eq!(
            object_location("file:////a//b").unwrap().path.as_ref(),
            "a/b"
        );
    }

    #[test]
    fn child_paths_are_literal_and_contained() {
        let dir = Path::parse("wh/db").unwrap();
        assert_eq!(
            child_path(&dir, "a%2Fb c").unwrap().as_ref(),
            "wh/db/a%2Fb c"
        );
        for bad in ["..", ".", "a/b", ""] {
            assert!(child_path(&dir, bad).is_err(), "{bad:?}");
        }
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
        // Encoded characters in either prefix stay as written.
        let map = LocationMap::moved("/old 50%/t", "/new%20place/t");
        assert_eq!(
            map.resolve("file:/old 50%/t/data/c=%E6%97%A5/x.parquet"),
            "file:///new%20place/t/data/c=%E6%97%A5/x.parquet"
        );
    }
}
