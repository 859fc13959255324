//! Flight session options: the current catalog and schema a client chose with
//! SetSessionOptions (ADBC's `adbc.connection.catalog` / `db_schema`, the JDBC driver's
//! `catalog=` URL parameter).
//!
//! Sessions are referenced by the `arrow_flight_session_id` cookie, as Flight's spec suggests;
//! for clients that do not keep cookies (ADBC's Go driver by default) by their credentials
//! (each handshake issues a distinct bearer token), and without auth by their TCP connection
//! (an ADBC or JDBC connection is one HTTP/2 connection). A call with none of these uses the
//! server's defaults. The options are also copied into every ticket and prepared-statement
//! handle, so a DoGet never depends on the session table.
//!
//! What the table holds, and what it does not:
//! - a session belongs to the user who created it ([`Identity`] of the call): another user
//!   presenting its cookie, or anything else that names it, does not see it (the call gets the
//!   server's defaults, and setting options creates a session of its own);
//! - credentials and addresses are kept only as an HMAC under a random per-process key, never
//!   the raw `authorization` header or token;
//! - at most `capacity` sessions ([`DEFAULT_MAX_SESSIONS`], `max_sessions` in the
//!   configuration): creating one more forgets the least recently used; each session has at
//!   most [`MAX_ALIASES_PER_SESSION`] credential / connection keys; sessions idle for
//!   [`SESSION_IDLE`] are forgotten.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use tonic::Request;
use tonic::metadata::MetadataMap;

use crate::auth::Identity;
use crate::locks::lock;
use crate::proto::petrel::SessionDefaults;

/// Cookie that names a session.
pub const SESSION_COOKIE: &str = "arrow_flight_session_id";

/// Sessions idle longer than this are forgotten.
pub const SESSION_IDLE: Duration = Duration::from_secs(8 * 3600);

/// Sessions kept at most unless configured (`max_sessions`).
pub const DEFAULT_MAX_SESSIONS: usize = 10_000;

/// Credential / connection keys remembered per session (the oldest go first).
pub const MAX_ALIASES_PER_SESSION: usize = 4;

/// An HMAC of a call's credentials or connection: what finds a session without its cookie.
type AliasKey = [u8; 32];

/// Session id → the session; alias keys → session id.
pub struct SessionStore {
    defaults: SessionDefaults,
    capacity: usize,
    /// Random per process: keys the alias HMACs.
    alias_key: [u8; 64],
    inner: Mutex<Sessions>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let inner = lock(&self.inner);
        f.debug_struct("SessionStore")
            .field("defaults", &self.defaults)
            .field("capacity", &self.capacity)
            .field("sessions", &inner.by_id.len())
            .field("aliases", &inner.aliases.len())
            .finish_non_exhaustive()
    }
}

struct Session {
    defaults: SessionDefaults,
    /// The user who created it (None: authentication off).
    owner: Option<String>,
    seen: Instant,
    aliases: VecDeque<AliasKey>,
}

#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Session>,
    /// Credential or connection key → session id, for calls without the cookie.
    aliases: HashMap<AliasKey, String>,
}

/// What one call brings to find its session.
struct Keys {
    cookie: Option<String>,
    alias: Option<AliasKey>,
    owner: Option<String>,
}

impl Sessions {
    fn resolve(&self, keys: &Keys) -> Option<String> {
        let owned = |id: &String| self.by_id.get(id).is_some_and(|s| s.owner == keys.owner);
        if let Some(id) = &keys.cookie
            && owned(id)
        {
            return Some(id.clone());
        }
        keys.alias
            .and_then(|a| self.aliases.get(&a))
            .filter(|id| owned(id))
            .cloned()
    }

    fn remove(&mut self, id: &str) {
        if let Some(session) = self.by_id.remove(id) {
            for a in session.aliases {
                if self.aliases.get(&a).is_some_and(|owner| owner == id) {
                    self.aliases.remove(&a);
                }
            }
        }
    }

    fn expire(&mut self, now: Instant) {
        let idle: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, s)| now.duration_since(s.seen) >= SESSION_IDLE)
            .map(|(id, _)| id.clone())
            .collect();
        for id in idle {
            self.remove(&id);
        }
    }

    /// Forgets the least recently used session.
    fn evict_one(&mut self) {
        let oldest = self
            .by_id
            .iter()
            .min_by_key(|(_, s)| s.seen)
            .map(|(id, _)| id.clone());
        if let Some(id) = oldest {
            self.remove(&id);
        }
    }

    /// Points `alias` at session `id` (which exists).
    fn link(&mut self, alias: AliasKey, id: &str) {
        if let Some(previous) = self.aliases.insert(alias, id.to_string())
            && previous != id
            && let Some(old) = self.by_id.get_mut(&previous)
        {
            old.aliases.retain(|a| *a != alias);
        }
        let Some(session) = self.by_id.get_mut(id) else {
            return;
        };
        if session.aliases.contains(&alias) {
            return;
        }
        session.aliases.push_back(alias);
        while session.aliases.len() > MAX_ALIASES_PER_SESSION {
            if let Some(dropped) = session.aliases.pop_front()
                && self.aliases.get(&dropped).is_some_and(|s| s == id)
            {
                self.aliases.remove(&dropped);
            }
        }
    }
}

impl SessionStore {
    /// A store whose sessions start from `defaults`, keeping at most
    /// [`DEFAULT_MAX_SESSIONS`].
    pub fn new(defaults: SessionDefaults) -> Self {
        let mut alias_key = [0u8; 64];
        alias_key[..32].copy_from_slice(&crate::auth::random_bytes(32));
        Self {
            defaults,
            capacity: DEFAULT_MAX_SESSIONS,
            alias_key,
            inner: Mutex::new(Sessions::default()),
        }
    }

    /// Keeps at most `capacity` sessions (at least one).
    pub fn with_capacity(mut self, capacity: usize) -> Self {
        self.capacity = capacity.max(1);
        self
    }

    /// The server-wide defaults.
    pub fn server_defaults(&self) -> &SessionDefaults {
        &self.defaults
    }

    /// Sessions held now.
    pub fn len(&self) -> usize {
        lock(&self.inner).by_id.len()
    }

    /// Whether no session is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The defaults for this call's session (the server's when it has none).
    pub fn current<T>(&self, request: &Request<T>) -> SessionDefaults {
        let keys = self.keys(request);
        let mut inner = lock(&self.inner);
        let resolved = inner.resolve(&keys);
        match resolved.and_then(|id| inner.by_id.get_mut(&id)) {
            Some(session) => {
                session.seen = Instant::now();
                session.defaults.clone()
            }
            None => self.defaults.clone(),
        }
    }

    /// Whether the call belongs to a session this store knows.
    pub fn exists<T>(&self, request: &Request<T>) -> bool {
        let keys = self.keys(request);
        lock(&self.inner).resolve(&keys).is_some()
    }

    /// Applies `update` to the call's session (creating one if needed). Returns the session
    /// id to send as a cookie when the call did not carry it.
    pub fn update<T>(
        &self,
        request: &Request<T>,
        update: impl FnOnce(&mut SessionDefaults),
    ) -> Option<String> {
        let keys = self.keys(request);
        let now = Instant::now();
        let mut inner = lock(&self.inner);
        inner.expire(now);
        let id = match inner.resolve(&keys) {
            Some(id) => id,
            None => {
                while inner.by_id.len() >= self.capacity {
                    inner.evict_one();
                }
                let id = uuid::Uuid::new_v4().simple().to_string();
                inner.by_id.insert(
                    id.clone(),
                    Session {
                        defaults: self.defaults.clone(),
                        owner: keys.owner.clone(),
                        seen: now,
                        aliases: VecDeque::new(),
                    },
                );
                id
            }
        };
        if let Some(alias) = keys.alias {
            inner.link(alias, &id);
        }
        if let Some(session) = inner.by_id.get_mut(&id) {
            update(&mut session.defaults);
            session.seen = now;
        }
        (keys.cookie.as_deref() != Some(id.as_str())).then_some(id)
    }

    /// Forgets the call's session; false when there was none.
    pub fn close<T>(&self, request: &Request<T>) -> bool {
        let keys = self.keys(request);
        let mut inner = lock(&self.inner);
        match inner.resolve(&keys) {
            Some(id) => {
                inner.remove(&id);
                true
            }
            None => false,
        }
    }

    /// The call's session cookie, its fallback key (credentials, each handshake issuing a
    /// distinct token, or without them the TCP connection) as an HMAC, and its user.
    fn keys<T>(&self, request: &Request<T>) -> Keys {
        let metadata = request.metadata();
        let alias = match metadata.get("authorization").and_then(|v| v.to_str().ok()) {
            Some(credentials) => Some(self.alias(b"auth", credentials.trim().as_bytes())),
            None => request
                .remote_addr()
                .map(|p: SocketAddr| self.alias(b"peer", p.to_string().as_bytes())),
        };
        let owner = match request.extensions().get::<Identity>() {
            Some(Identity::User(name)) => Some(name.clone()),
            _ => None,
        };
        Keys {
            cookie: cookie(metadata),
            alias,
            owner,
        }
    }

    fn alias(&self, kind: &[u8], value: &[u8]) -> AliasKey {
        let mut mac = <Hmac<Sha256> as KeyInit>::new((&self.alias_key).into());
        mac.update(kind);
        mac.update(b":");
        mac.update(value);
        mac.finalize().into_bytes().into()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn store() -> SessionStore {
        SessionStore::new(SessionDefaults {
            catalog: "petrel".into(),
            schema: "demo".into(),
        })
    }

    fn call(authorization: Option<&str>, cookie: Option<&str>, user: Option<&str>) -> Request<()> {
        let mut r = Request::new(());
        if let Some(a) = authorization {
            r.metadata_mut()
                .insert("authorization", MetadataValue::try_from(a).unwrap());
        }
        if let Some(c) = cookie {
            r.metadata_mut().insert(
                "cookie",
                MetadataValue::try_from(format!("{SESSION_COOKIE}={c}")).unwrap(),
            );
        }
        r.extensions_mut().insert(match user {
            Some(u) => Identity::User(u.into()),
            None => Identity::Anonymous,
        });
        r
    }

    fn set_schema(s: &SessionStore, r: &Request<()>, schema: &str) -> Option<String> {
        s.update(r, |d| d.schema = schema.to_string())
    }

    #[test]
    fn sessions_hold_no_raw_credentials() {
        let s = store();
        let header = "Bearer v1.YWxpY2U.99999999999.nonce.SIGNATURE-OF-A-SECRET-TOKEN";
        let basic = "Basic YWxpY2U6aHVudGVyMg==";
        set_schema(&s, &call(Some(header), None, Some("alice")), "x");
        set_schema(&s, &call(Some(basic), None, Some("alice")), "y");
        assert_eq!(
            s.current(&call(Some(header), None, Some("alice"))).schema,
            "x"
        );
        assert_eq!(
            s.current(&call(Some(basic), None, Some("alice"))).schema,
            "y"
        );
        let inner = lock(&s.inner);
        for (alias, _) in inner.aliases.iter() {
            let text = String::from_utf8_lossy(alias);
            assert!(!text.contains("SIGNATURE") && !text.contains("YWxpY2U"));
            assert_eq!(alias.len(), 32);
        }
        assert!(inner.aliases.keys().all(|a| {
            !a.windows(8)
                .any(|w| header.as_bytes().windows(8).any(|h| h == w))
        }));
        drop(inner);
        let debug = format!("{s:?}");
        assert!(
            !debug.contains("SIGNATURE") && !debug.contains("YWxpY2U"),
            "{debug}"
        );
    }

    #[test]
    fn sessions_belong_to_their_user() {
        let s = store();
        let id = set_schema(&s, &call(None, None, Some("alice")), "alice_schema")
            .expect("a new session id");
        assert_eq!(
            s.current(&call(None, Some(&id), Some("alice"))).schema,
            "alice_schema"
        );
        // Bob presenting Alice's cookie gets the server's defaults...
        let bob = call(None, Some(&id), Some("bob"));
        assert_eq!(s.current(&bob).schema, "demo");
        assert!(!s.exists(&bob));
        assert!(!s.close(&bob));
        // ...and setting options gives him a session of his own.
        let bobs = set_schema(&s, &bob, "bob_schema").expect("bob's own session");
        assert_ne!(bobs, id);
        assert_eq!(
            s.current(&call(None, Some(&id), Some("alice"))).schema,
            "alice_schema"
        );
        // The same holds for a token alias shared by accident.
        set_schema(&s, &call(Some("Bearer t"), None, Some("alice")), "by_token");
        assert_eq!(
            s.current(&call(Some("Bearer t"), None, Some("bob"))).schema,
            "demo"
        );
    }

    #[test]
    fn the_table_is_bounded_and_forgets_the_least_recently_used() {
        let s = store().with_capacity(3);
        let ids: Vec<String> = (0..3)
            .map(|i| {
                std::thread::sleep(Duration::from_millis(2));
                set_schema(&s, &call(None, None, None), &format!("s{i}")).unwrap()
            })
            .collect();
        // Touch the first: the second is now the least recently used.
        std::thread::sleep(Duration::from_millis(2));
        assert_eq!(s.current(&call(None, Some(&ids[0]), None)).schema, "s0");
        std::thread::sleep(Duration::from_millis(2));
        set_schema(&s, &call(None, None, None), "s3").unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s.current(&call(None, Some(&ids[0]), None)).schema, "s0");
        assert_eq!(s.current(&call(None, Some(&ids[1]), None)).schema, "demo");
        assert_eq!(s.current(&call(None, Some(&ids[2]), None)).schema, "s2");
        for i in 0..1000 {
            set_schema(&s, &call(Some(&format!("Bearer {i}")), None, None), "many");
        }
        assert_eq!(s.len(), 3);
        let inner = lock(&s.inner);
        assert!(inner.aliases.len() <= 3 * MAX_ALIASES_PER_SESSION);
    }

    #[test]
    fn aliases_per_session_are_bounded() {
        let s = store();
        let id = set_schema(&s, &call(None, None, None), "mine").unwrap();
        for i in 0..100 {
            set_schema(
                &s,
                &call(Some(&format!("Bearer {i}")), Some(&id), None),
                "mine",
            );
        }
        let inner = lock(&s.inner);
        assert_eq!(inner.by_id.len(), 1);
        assert_eq!(inner.aliases.len(), MAX_ALIASES_PER_SESSION);
        drop(inner);
        // The most recent keys still find it without the cookie.
        assert_eq!(
            s.current(&call(Some("Bearer 99"), None, None)).schema,
            "mine"
        );
        assert_eq!(
            s.current(&call(Some("Bearer 0"), None, None)).schema,
            "demo"
        );
    }
}
