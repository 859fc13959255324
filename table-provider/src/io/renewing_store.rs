//! Requests refused because their credentials expired: the keys are replaced and the request
//! is sent once more.
//!
//! Short-lived keys (a REST catalog's vended STS credentials) are replaced before they expire
//! when their provider knows when that is; when it does not (a catalog vending no expiry, keys
//! living shorter than the provider's maximum age, keys revoked early), S3 refuses a request
//! with one of [`REFUSED_CREDENTIALS`] (HTTP 400 `ExpiredToken`, 403 `InvalidAccessKeyId`,
//! ...). [`RenewingStore`] wraps such a store: a request refused that way marks the keys it was
//! sent with stale ([`RenewableCredentials::refused`]; concurrent refusals of the same keys
//! lead to one fetch of new ones), and the request is sent once more, signed with the new keys.
//! Repeating is safe because the server refused the request and applied nothing, a
//! conditional create (`PUT If-None-Match: *`) included. A second refusal is the error, as
//! [`object_store::Error::PermissionDenied`] naming the store, the keys' holder (the table)
//! and the S3 codes: never a loop, and not taken for a failure in transit by callers that
//! retry those ([`super::TableIo::create`]).
//!
//! How object_store 0.13 surfaces a refusal: 400 answers as `Error::Generic`, 401 as
//! `Unauthenticated`, 403 as `PermissionDenied`, each with the answer's body (S3's XML,
//! `<Code>ExpiredToken</Code>`) in its message; the code is looked for there. A `HEAD` answer
//! has no body, so a 400 or 403 to a `HEAD` counts as a refusal of its keys too (a `HEAD` the
//! keys are really not allowed costs one fetch of new keys, then fails as before).
//!
//! Covered: single requests (GET/HEAD/ranged reads, PUT, copy, rename, listing with a
//! delimiter), a listing refused before its first entry, and each batch of a bulk delete. Not
//! repeated: a listing refused after entries were returned, and the parts of a multipart upload
//! (repeating a part would spend another part number): those fail, and the next request
//! replaces the keys.

use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::{self, BoxStream};
use futures::{StreamExt, TryStreamExt};
use object_store::path::Path;
use object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    PutMultipartOptions, PutOptions, PutPayload, PutResult, RenameOptions,
};

/// The S3 error codes that say the request's credentials expired or are not (any longer)
/// valid: new keys may be accepted.
pub const REFUSED_CREDENTIALS: [&str; 4] = [
    "ExpiredToken",
    "InvalidAccessKeyId",
    "InvalidToken",
    "TokenRefreshRequired",
];

/// Paths per request of a bulk delete (S3's `DeleteObjects` limit, as object_store batches).
const DELETE_BATCH: usize = 1_000;
/// Delete batches in flight at once (as object_store's S3 store).
const DELETE_CONCURRENCY: usize = 20;

/// Credentials that can be replaced when a store refuses them (a REST catalog table's vended
/// keys), given to a store by [`super::StoreConfig::with_renewable_s3_credentials`].
pub trait RenewableCredentials: fmt::Debug + Send + Sync {
    /// Which keys are in use now; changes whenever they are replaced.
    fn generation(&self) -> u64;
    /// The keys of `generation` were refused: fetch new ones before the next request is signed
    /// (nothing to do when they were replaced since).
    fn refused(&self, generation: u64);
    /// Whose keys these are, for errors (`table db.t of REST catalog c`).
    fn holder(&self) -> String;
}

/// The S3 code of a refusal of the request's credentials (`None` for any other error); `head`
/// for a `HEAD` request, whose refusal carries no body to read the code from.
pub fn refused_credentials(e: &object_store::Error, head: bool) -> Option<&'static str> {
    use object_store::Error as E;
    if !matches!(
        e,
        E::Generic { .. } | E::PermissionDenied { .. } | E::Unauthenticated { .. }
    ) {
        return None;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push('\n');
        text.push_str(&s.to_string());
        source = s.source();
    }
    if let Some(code) = REFUSED_CREDENTIALS
        .into_iter()
        .find(|code| text.contains(&format!("<Code>{code}</Code>")))
    {
        return Some(code);
    }
    let refused_status = matches!(e, E::PermissionDenied { .. } | E::Unauthenticated { .. })
        || text.contains("400 Bad Request");
    (head && refused_status).then_some("HTTP 400/403 to a HEAD")
}

/// A store whose requests refused for their credentials are sent once more with new ones.
pub(super) struct RenewingStore {
    shared: Arc<Shared>,
}

struct Shared {
    inner: Arc<dyn ObjectStore>,
    credentials: Arc<dyn RenewableCredentials>,
    /// The store, for errors: `s3://bucket at http://endpoint`.
    store: String,
}

impl RenewingStore {
    /// `inner` (signed with `credentials`), its refused requests repeated once; `store` names
    /// it in errors.
    pub(super) fn wrap(
        inner: Arc<dyn ObjectStore>,
        credentials: Arc<dyn RenewableCredentials>,
        store: String,
    ) -> Arc<dyn ObjectStore> {
        Arc::new(Self {
            shared: Arc::new(Shared {
                inner,
                credentials,
                store,
            }),
        })
    }
}

impl Shared {
    /// Sends `request`; when its credentials are refused, has them replaced and sends it once
    /// more.
    async fn once_more<T, F, Fut>(
        &self,
        what: &str,
        head: bool,
        request: F,
    ) -> object_store::Result<T>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = object_store::Result<T>>,
    {
        let generation = self.credentials.generation();
        let first = request().await;
        let code = match &first {
            Err(e) => refused_credentials(e, head),
            Ok(_) => None,
        };
        let Some(code) = code else {
            return first;
        };
        self.refused(generation, what, code);
        request()
            .await
            .map_err(|again| self.refused_again(what, code, again, head))
    }

    fn refused(&self, generation: u64, what: &str, code: &str) {
        tracing::info!(
            "{}: {what} refused ({code}): fetching new credentials of {}",
            self.store,
            self.credentials.holder()
        );
        self.credentials.refused(generation);
    }

    /// The error of a request refused once more (as it is when not for its credentials).
    fn refused_again(
        &self,
        what: &str,
        first: &str,
        again: object_store::Error,
        head: bool,
    ) -> object_store::Error {
        match refused_credentials(&again, head) {
            Some(code) => object_store::Error::PermissionDenied {
                path: what.to_string(),
                source: format!(
                    "{}: the credentials of {} were refused ({first}), and so were the new ones \
                     fetched for them ({code}): {again}",
                    self.store,
                    self.credentials.holder()
                )
                .into(),
            },
            None => again,
        }
    }

    /// A listing, sent once more when refused before its first entry.
    fn list_once_more<F>(
        self: &Arc<Self>,
        what: String,
        request: F,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>>
    where
        F: Fn() -> BoxStream<'static, object_store::Result<ObjectMeta>> + Send + 'static,
    {
        let shared = Arc::clone(self);
        let generation = shared.credentials.generation();
        let mut first = request();
        stream::once(async move {
            match first.next().await {
                Some(Err(e)) => match refused_credentials(&e, false) {
                    Some(code) => {
                        shared.refused(generation, &what, code);
                        let again = Arc::clone(&shared);
                        request()
                            .map_err(move |e| again.refused_again(&what, code, e, false))
                            .boxed()
                    }
                    None => stream::iter([Err(e)]).boxed(),
                },
                Some(Ok(entry)) => stream::iter([Ok(entry)]).chain(first).boxed(),
                None => stream::empty().boxed(),
            }
        })
        .flatten()
        .boxed()
    }

    /// One batch of a bulk delete, sent once more when a path of it was refused.
    async fn delete_batch(
        &self,
        paths: Vec<Path>,
    ) -> object_store::Result<Vec<object_store::Result<Path>>> {
        let generation = self.credentials.generation();
        let send = || {
            self.inner
                .delete_stream(stream::iter(paths.clone()).map(Ok).boxed())
                .collect::<Vec<_>>()
        };
        let first = send().await;
        let code = first
            .iter()
            .find_map(|r| r.as_ref().err().and_then(|e| refused_credentials(e, false)));
        let Some(code) = code else {
            return Ok(first);
        };
        let what = match paths.as_slice() {
            [one] => format!("deleting {one}"),
            [path, ..] => format!("deleting {path} and {} more", paths.len() - 1),
            [] => "deleting".to_string(),
        };
        self.refused(generation, &what, code);
        Ok(send()
            .await
            .into_iter()
            .map(|r| r.map_err(|e| self.refused_again(&what, code, e, false)))
            .collect())
    }
}

impl fmt::Debug for RenewingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Renewing({:?}, {:?})",
            self.shared.inner, self.shared.credentials
        )
    }
}

impl fmt::Display for RenewingStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.shared.inner, f)
    }
}

#[async_trait]
impl ObjectStore for RenewingStore {
    async fn put_opts(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> object_store::Result<PutResult> {
        let s = &self.shared;
        s.once_more(location.as_ref(), false, || {
            s.inner.put_opts(location, payload.clone(), opts.clone())
        })
        .await
    }

    async fn put_multipart_opts(
        &self,
        location: &Path,
        opts: PutMultipartOptions,
    ) -> object_store::Result<Box<dyn MultipartUpload>> {
        let s = &self.shared;
        s.once_more(location.as_ref(), false, || {
            s.inner.put_multipart_opts(location, opts.clone())
        })
        .await
    }

    async fn get_opts(
        &self,
        location: &Path,
        options: GetOptions,
    ) -> object_store::Result<GetResult> {
        let s = &self.shared;
        let head = options.head;
        s.once_more(location.as_ref(), head, || {
            s.inner.get_opts(location, options.clone())
        })
        .await
    }

    async fn get_ranges(
        &self,
        location: &Path,
        ranges: &[Range<u64>],
    ) -> object_store::Result<Vec<Bytes>> {
        let s = &self.shared;
        s.once_more(location.as_ref(), false, || {
            s.inner.get_ranges(location, ranges)
        })
        .await
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, object_store::Result<Path>>,
    ) -> BoxStream<'static, object_store::Result<Path>> {
        let shared = Arc::clone(&self.shared);
        locations
            .try_chunks(DELETE_BATCH)
            .map(move |batch| {
                let shared = Arc::clone(&shared);
                async move {
                    let paths = batch.map_err(|e| e.1)?;
                    shared.delete_batch(paths).await
                }
            })
            .buffered(DELETE_CONCURRENCY)
            .map_ok(stream::iter)
            .try_flatten()
            .boxed()
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let inner = Arc::clone(&self.shared.inner);
        let prefix = prefix.cloned();
        let what = format!(
            "listing {}",
            prefix.as_ref().map(Path::as_ref).unwrap_or("/")
        );
        self.shared
            .list_once_more(what, move || inner.list(prefix.as_ref()))
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
        let inner = Arc::clone(&self.shared.inner);
        let prefix = prefix.cloned();
        let offset = offset.clone();
        let what = format!(
            "listing {} after {offset}",
            prefix.as_ref().map(Path::as_ref).unwrap_or("/")
        );
        self.shared.list_once_more(what, move || {
            inner.list_with_offset(prefix.as_ref(), &offset)
        })
    }

    async fn list_with_delimiter(&self, prefix: Option<&Path>) -> object_store::Result<ListResult> {
        let s = &self.shared;
        let what = format!("listing {}", prefix.map(Path::as_ref).unwrap_or("/"));
        s.once_more(&what, false, || s.inner.list_with_delimiter(prefix))
            .await
    }

    async fn copy_opts(
        &self,
        from: &Path,
        to: &Path,
        options: CopyOptions,
    ) -> object_store::Result<()> {
        let s = &self.shared;
        s.once_more(&format!("copying {from} to {to}"), false, || {
            s.inner.copy_opts(from, to, options.clone())
        })
        .await
    }

    async fn rename_opts(
        &self,
        from: &Path,
        to: &Path,
        options: RenameOptions,
    ) -> object_store::Result<()> {
        let s = &self.shared;
        s.once_more(&format!("renaming {from} to {to}"), false, || {
            s.inner.rename_opts(from, to, options.clone())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn generic(body: &str) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source: format!(
                "Error performing GET http://127.0.0.1/b/k in 2ms - Server returned non-2xx \
                 status code: 400 Bad Request: {body}"
            )
            .into(),
        }
    }

    #[test]
    fn the_codes_of_refused_credentials_are_found_in_the_answer() {
        let expired = generic(
            "<?xml version=\"1.0\"?><Error><Code>ExpiredToken</Code>\
             <Message>The provided token has expired.</Message></Error>",
        );
        assert_eq!(refused_credentials(&expired, false), Some("ExpiredToken"));
        let invalid = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "403 Forbidden: <Error><Code>InvalidAccessKeyId</Code></Error>".into(),
        };
        assert_eq!(
            refused_credentials(&invalid, false),
            Some("InvalidAccessKeyId")
        );
        // Other refusals are not about the keys.
        let denied = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "403 Forbidden: <Error><Code>AccessDenied</Code></Error>".into(),
        };
        assert_eq!(refused_credentials(&denied, false), None);
        assert_eq!(
            refused_credentials(&generic("<Code>InvalidArgument</Code>"), false),
            None
        );
        let missing = object_store::Error::NotFound {
            path: "k".into(),
            source: "<Code>ExpiredToken</Code>".into(),
        };
        assert_eq!(refused_credentials(&missing, false), None);
    }

    #[test]
    fn a_refused_head_has_no_code_and_counts_as_refused_keys() {
        assert_eq!(
            refused_credentials(&generic(""), true),
            Some("HTTP 400/403 to a HEAD")
        );
        assert_eq!(refused_credentials(&generic(""), false), None);
        let forbidden = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "403 Forbidden: ".into(),
        };
        assert_eq!(
            refused_credentials(&forbidden, true),
            Some("HTTP 400/403 to a HEAD")
        );
    }
}
