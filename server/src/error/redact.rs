//! What a client may see of the server's storage: no warehouse paths.
//!
//! Error messages travel to any authenticated client, who has no business knowing where the
//! server keeps its tables (`/data/warehouse/…`, `s3://bucket/prefix/…`, the SQL catalog's
//! database file). [`redact`] cuts every absolute path or URL in a message down to
//!
//! - the part from the table's `metadata/` or `data/` directory on (`…/metadata/v3.metadata.json`,
//!   `…/data/country=NZ/00000-0-….parquet`): with the table's name, which the message carries,
//!   enough to find the file; or else
//! - its last segment (`…/catalog.db`, `…/warehouse`).
//!
//! A path is a run of non-blank characters starting with `scheme://` or with `/` after a blank,
//! a quote, `(`, `[`, `=` or the start of the text, with at least two segments. (A path with a
//! blank in it is cut at the blank: the part after it, being relative, is shown.) The full
//! message, paths included, goes to the server's log.

/// `text` with every absolute path or URL cut down (see the module docs).
pub(crate) fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some((start, len)) = next_path(rest) {
        out.push_str(&rest[..start]);
        out.push_str(&shorten(&rest[start..start + len]));
        rest = &rest[start + len..];
    }
    out.push_str(rest);
    out
}

/// The byte offset and length of the first path in `text`.
fn next_path(text: &str) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0
            || matches!(
                bytes[i - 1],
                b' ' | b'\t' | b'\n' | b'\'' | b'"' | b'(' | b'[' | b'=' | b'`'
            );
        if boundary {
            let start = if bytes[i] == b'/' {
                Some(i)
            } else if bytes[i].is_ascii_alphabetic() {
                scheme_len(&bytes[i..]).map(|_| i)
            } else {
                None
            };
            if let Some(start) = start {
                let len = text[start..]
                    .find(|c: char| {
                        c.is_whitespace() || matches!(c, '\'' | '"' | '`' | ')' | ']' | ',')
                    })
                    .unwrap_or(text.len() - start);
                let candidate = text[start..start + len].trim_end_matches(['.', ':', ';']);
                if is_path(candidate) {
                    return Some((start, candidate.len()));
                }
                i = start + len.max(1);
                continue;
            }
        }
        i += 1;
    }
    None
}

/// Length of `scheme://` at the start of `bytes`, if there is one.
fn scheme_len(bytes: &[u8]) -> Option<usize> {
    let n = bytes
        .iter()
        .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
        .count();
    (n > 0 && bytes[n..].starts_with(b"://")).then_some(n + 3)
}

/// Whether `candidate` names a location: a URL, or an absolute path of two or more segments.
fn is_path(candidate: &str) -> bool {
    if let Some(n) = scheme_len(candidate.as_bytes()) {
        return candidate.len() > n;
    }
    candidate.starts_with('/') && candidate[1..].contains('/') && !candidate.starts_with("//")
}

/// A path cut to the table-relative part, or to its last segment.
fn shorten(path: &str) -> String {
    let body = match scheme_len(path.as_bytes()) {
        Some(n) => &path[n..],
        None => path,
    };
    let segments: Vec<&str> = body.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(at) = segments
        .iter()
        .rposition(|s| *s == "metadata" || *s == "data")
        .filter(|at| at + 1 < segments.len())
    {
        return format!("…/{}", segments[at..].join("/"));
    }
    match segments.last() {
        Some(last) => format!("…/{last}"),
        None => "…".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn paths_are_cut_to_the_table_relative_part_or_the_file_name() {
        assert_eq!(
            redact(
                "table db.t: cannot read metadata file file:///srv/wh/db/t/metadata/v3.metadata.json: \
                 Object at location /srv/wh/db/t/metadata/v3.metadata.json not found"
            ),
            "table db.t: cannot read metadata file …/metadata/v3.metadata.json: \
             Object at location …/metadata/v3.metadata.json not found"
        );
        assert_eq!(
            redact("catalog database /var/lib/petrel/catalog.db: unable to open database file"),
            "catalog database …/catalog.db: unable to open database file"
        );
        assert_eq!(
            redact("reading 's3://bucket/a/b/db/t/data/x=1/00000.parquet'."),
            "reading '…/data/x=1/00000.parquet'."
        );
        assert_eq!(
            redact(
                "table db.x does not exist in warehouse file:///srv/wh (no metadata under file:///srv/wh/db/x/metadata)"
            ),
            "table db.x does not exist in warehouse …/wh (no metadata under …/metadata)"
        );
        // Not paths: SQL, division, single segments, dates, time zones.
        for text in [
            "SELECT a / b FROM t",
            "Error during planning: table 'iceberg.db.nope' not found",
            "2024/01/01 in America/New_York",
            "cannot read /",
            "ARROW:FLIGHT:SQL:TYPE_NAME",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}
