//! Flight session options: the current catalog and schema a client chose with
//! SetSessionOptions (ADBC's `adbc.connection.catalog` / `db_schema`, the JDBC driver's
//! `catalog=` URL parameter).
//!
//! Sessions are referenced by the `arrow_flight_session_id` cookie, as Flight's spec suggests;
//! for clients that do not keep cookies (ADBC's Go driver by default) by their bearer token,
//! and without auth by their TCP connection (an ADBC or JDBC connection is one HTTP/2
//! connection). A call with none of these uses the server's defaults. The options are also copied into
//! every ticket and prepared-statement handle, so a DoGet never depends on the session table.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use std::net::SocketAddr;

use tonic::Request;
use tonic::metadata::MetadataMap;

use crate::proto::petrel::SessionDefaults;

/// Cookie that names a session.
pub const SESSION_COOKIE: &str = "arrow_flight_session_id";

/// Sessions idle longer than this are forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(8 * 3600);

/// Session id → the session's defaults; connection / credential keys → session id.
#[derive(Debug)]
pub struct SessionStore {
    defaults: SessionDefaults,
    inner: Mutex<Sessions>,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<String, (SessionDefaults, Instant)>,
    /// `auth:<authorization header>` or `peer:<address>` → session id, for calls without the
    /// cookie.
    aliases: HashMap<String, String>,
}

impl Sessions {
    fn resolve(&self, cookie: Option<&str>, alias: Option<&str>) -> Option<String> {
        if let Some(id) = cookie
            && self.by_id.contains_key(id)
        {
            return Some(id.to_string());
        }
        alias
            .and_then(|a| self.aliases.get(a))
            .filter(|id| self.by_id.contains_key(*id))
            .cloned()
    }

    fn expire(&mut self) {
        self.by_id
            .retain(|_, (_, seen)| seen.elapsed() < SESSION_IDLE);
        let live = &self.by_id;
        self.aliases.retain(|_, id| live.contains_key(id));
    }
}

impl SessionStore {
    /// A store whose sessions start from `defaults`.
    pub fn new(defaults: SessionDefaults) -> Self {
        Self {
            defaults,
            inner: Mutex::new(Sessions::default()),
        }
    }

    /// The server-wide defaults.
    pub fn server_defaults(&self) -> &SessionDefaults {
        &self.defaults
    }

    /// The defaults for this call's session (the server's when it has none).
    pub fn current<T>(&self, request: &Request<T>) -> SessionDefaults {
        let (cookie, alias) = keys(request);
        let mut inner = crate::locks::lock(&self.inner);
        let resolved = inner.resolve(cookie.as_deref(), alias.as_deref());
        match resolved.and_then(|id| inner.by_id.get_mut(&id)) {
            Some((d, seen)) => {
                *seen = Instant::now();
                d.clone()
            }
            None => self.defaults.clone(),
        }
    }

    /// Whether the call belongs to a session this store knows.
    pub fn exists<T>(&self, request: &Request<T>) -> bool {
        let (cookie, alias) = keys(request);
        let inner = crate::locks::lock(&self.inner);
        inner.resolve(cookie.as_deref(), alias.as_deref()).is_some()
    }

    /// Applies `update` to the call's session (creating one if needed). Returns the session
    /// id to send as a cookie when the call did not carry it.
    pub fn update<T>(
        &self,
        request: &Request<T>,
        update: impl FnOnce(&mut SessionDefaults),
    ) -> Option<String> {
        let (cookie, alias) = keys(request);
        let mut inner = crate::locks::lock(&self.inner);
        inner.expire();
        let id = inner
            .resolve(cookie.as_deref(), alias.as_deref())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        if let Some(a) = alias {
            inner.aliases.insert(a, id.clone());
        }
        let entry = inner
            .by_id
            .entry(id.clone())
            .or_insert_with(|| (self.defaults.clone(), Instant::now()));
        update(&mut entry.0);
        entry.1 = Instant::now();
        (cookie.as_deref() != Some(id.as_str())).then_some(id)
    }

    /// Forgets the call's session; false when there was none.
    pub fn close<T>(&self, request: &Request<T>) -> bool {
        let (cookie, alias) = keys(request);
        let mut inner = crate::locks::lock(&self.inner);
        match inner.resolve(cookie.as_deref(), alias.as_deref()) {
            Some(id) => {
                inner.by_id.remove(&id);
                inner.aliases.retain(|_, v| *v != id);
                true
            }
            None => false,
        }
    }
}

/// The call's session cookie, and its fallback key: credentials (each handshake issues a
/// distinct token) or, without auth, the TCP connection.
fn keys<T>(request: &Request<T>) -> (Option<String>, Option<String>) {
    let metadata = request.metadata();
    let alias = metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|a| format!("auth:{a}"))
        .or_else(|| {
            request
                .remote_addr()
                .map(|p: SocketAddr| format!("peer:{p}"))
        });
    (cookie(metadata), alias)
}

fn cookie(metadata: &MetadataMap) -> Option<String> {
    for value in metadata.get_all("cookie") {
        let Ok(text) = value.to_str() else { continue };
        for pair in text.split(';') {
            if let Some((k, v)) = pair.trim().split_once('=')
                && k.trim() == SESSION_COOKIE
            {
                return Some(v.trim().to_string());
            }
        }
    }
    None
}
