//! Flight session options: the current catalog and schema a client chose with
//! SetSessionOptions (ADBC's `adbc.connection.catalog` / `db_schema`, the JDBC driver's
//! `catalog=` URL parameter).
//!
//! Sessions are referenced by the `arrow_flight_session_id` cookie, as Flight's spec suggests,
//! or, for clients that do not keep cookies, by their bearer token. A call with neither uses
//! the server's defaults. The options are also copied into
//! every ticket and prepared-statement handle, so a DoGet never depends on the session table.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tonic::metadata::MetadataMap;

use crate::proto::petrel::SessionDefaults;

/// Cookie that names a session.
pub const SESSION_COOKIE: &str = "arrow_flight_session_id";

/// Sessions idle longer than this are forgotten.
const SESSION_IDLE: Duration = Duration::from_secs(24 * 3600);

/// Session id → the session's defaults.
#[derive(Debug)]
pub struct SessionStore {
    defaults: SessionDefaults,
    sessions: Mutex<HashMap<String, (SessionDefaults, Instant)>>,
}

impl SessionStore {
    /// A store whose sessions start from `defaults`.
    pub fn new(defaults: SessionDefaults) -> Self {
        Self {
            defaults,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// The server-wide defaults.
    pub fn server_defaults(&self) -> &SessionDefaults {
        &self.defaults
    }

    /// The defaults for the call carrying `metadata`.
    pub fn current(&self, metadata: &MetadataMap) -> SessionDefaults {
        match session_id(metadata) {
            Some(id) => {
                let mut sessions = self.sessions.lock().expect("lock");
                match sessions.get_mut(&id) {
                    Some((d, seen)) => {
                        *seen = Instant::now();
                        d.clone()
                    }
                    None => self.defaults.clone(),
                }
            }
            None => self.defaults.clone(),
        }
    }

    /// Whether the call names a session this store knows.
    pub fn exists(&self, metadata: &MetadataMap) -> bool {
        session_id(metadata).is_some_and(|id| self.sessions.lock().expect("lock").contains_key(&id))
    }

    /// Applies `update` to the call's session (creating one if needed) and returns the
    /// session id to set as a cookie when a new one was created.
    pub fn update(
        &self,
        metadata: &MetadataMap,
        update: impl FnOnce(&mut SessionDefaults),
    ) -> Option<String> {
        let mut sessions = self.sessions.lock().expect("lock");
        sessions.retain(|_, (_, seen)| seen.elapsed() < SESSION_IDLE);
        let (id, new) = match (cookie(metadata), session_id(metadata)) {
            (Some(id), _) if sessions.contains_key(&id) => (id, false),
            (None, Some(key)) => (key, false),
            _ => (uuid::Uuid::new_v4().simple().to_string(), true),
        };
        let entry = sessions
            .entry(id.clone())
            .or_insert_with(|| (self.defaults.clone(), Instant::now()));
        update(&mut entry.0);
        entry.1 = Instant::now();
        new.then_some(id)
    }

    /// Forgets the call's session; false when there was none.
    pub fn close(&self, metadata: &MetadataMap) -> bool {
        match session_id(metadata) {
            Some(id) => self.sessions.lock().expect("lock").remove(&id).is_some(),
            None => false,
        }
    }
}

/// The session key of a call: its `arrow_flight_session_id` cookie, else its credentials
/// (each handshake issues a distinct token, so a client without cookie support still keeps
/// its own session).
fn session_id(metadata: &MetadataMap) -> Option<String> {
    if let Some(id) = cookie(metadata) {
        return Some(id);
    }
    metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|a| format!("auth:{a}"))
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
