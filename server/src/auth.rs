//! Authentication: Flight's Handshake with HTTP Basic credentials returns a bearer token;
//! every other call carries `authorization: Bearer <token>` (or Basic credentials again).
//!
//! - Users and their Argon2 password hashes (PHC strings) come from the configuration;
//!   `petrel hash-password` prints one.
//! - Tokens are stateless: `v1.<user>.<expiry>.<nonce>.<HMAC-SHA256>` signed with the server's
//!   secret, so no session table grows and replicas that share the secret accept each other's
//!   tokens.
//! - Basic credentials on a non-handshake call are verified once and then remembered (by a
//!   SHA-256 of the header) for a minute, so clients that send them on every call do not pay
//!   for Argon2 each time.
//! - With no users configured, authentication is off: every call is accepted and a handshake
//!   returns an (unchecked) token, because the JDBC driver always performs one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::config::UserConfig;

type HmacSha256 = Hmac<Sha256>;

/// Who made a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Authentication is off.
    Anonymous,
    /// A configured user.
    User(String),
}

/// Verifies credentials and issues / checks bearer tokens.
pub struct Authenticator {
    users: HashMap<String, String>,
    secret: Vec<u8>,
    ttl: Duration,
    basic_cache: Mutex<HashMap<[u8; 32], (String, Instant)>>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

const BASIC_CACHE_TTL: Duration = Duration::from_secs(60);

impl Authenticator {
    /// Users with their PHC hashes; `secret` signs tokens (random when None).
    pub fn new(users: &[UserConfig], secret: Option<&str>, ttl: Duration) -> Result<Self, String> {
        let mut map = HashMap::new();
        for u in users {
            PasswordHash::new(&u.password_hash).map_err(|e| {
                format!(
                    "user {:?}: password_hash is not an Argon2 PHC string ({e}); \
                     create one with `petrel hash-password`",
                    u.name
                )
            })?;
            map.insert(u.name.clone(), u.password_hash.clone());
        }
        let secret = match secret {
            Some(s) => s.as_bytes().to_vec(),
            None => random_bytes(32),
        };
        Ok(Self {
            users: map,
            secret,
            ttl,
            basic_cache: Mutex::new(HashMap::new()),
        })
    }

    /// Whether calls must be authenticated.
    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Handshake: verifies Basic credentials from the `authorization` header (or from a
    /// `BasicAuth`-style payload) and returns the identity and a fresh bearer token.
    pub fn handshake(
        &self,
        metadata: &MetadataMap,
        payload_credentials: Option<(String, String)>,
    ) -> Result<(Identity, String), Status> {
        if !self.enabled() {
            return Ok((Identity::Anonymous, self.issue("anonymous")));
        }
        let (user, password) = match header(metadata) {
            Some(h) if h.to_ascii_lowercase().starts_with("basic ") => decode_basic(&h[6..])?,
            Some(h) if h.to_ascii_lowercase().starts_with("bearer ") => {
                // JDBC `token=`: the client already has a token; re-validate and echo it.
                let token = h[7..].trim();
                let who = self.verify_token(token)?;
                return Ok((who, token.to_string()));
            }
            _ => payload_credentials.ok_or_else(|| {
                Status::unauthenticated(
                    "handshake needs credentials: send `authorization: Basic <base64 user:password>`",
                )
            })?,
        };
        self.verify_password(&user, &password)?;
        let token = self.issue(&user);
        Ok((Identity::User(user), token))
    }

    /// Checks the credentials of a (non-handshake) call.
    pub fn check(&self, metadata: &MetadataMap) -> Result<Identity, Status> {
        if !self.enabled() {
            return Ok(Identity::Anonymous);
        }
        let Some(h) = header(metadata) else {
            return Err(Status::unauthenticated(
                "no credentials: call Handshake with Basic credentials and send the returned \
                 `authorization: Bearer <token>` header",
            ));
        };
        let lower = h.to_ascii_lowercase();
        if lower.starts_with("bearer ") {
            self.verify_token(h[7..].trim())
        } else if lower.starts_with("basic ") {
            let key: [u8; 32] = Sha256::digest(h.as_bytes()).into();
            if let Some((user, at)) = crate::locks::lock(&self.basic_cache).get(&key)
                && at.elapsed() < BASIC_CACHE_TTL
            {
                return Ok(Identity::User(user.clone()));
            }
            let (user, password) = decode_basic(&h[6..])?;
            self.verify_password(&user, &password)?;
            let mut cache = crate::locks::lock(&self.basic_cache);
            cache.retain(|_, (_, at)| at.elapsed() < BASIC_CACHE_TTL);
            cache.insert(key, (user.clone(), Instant::now()));
            Ok(Identity::User(user))
        } else {
            Err(Status::unauthenticated(
                "unsupported authorization scheme: use Basic or Bearer",
            ))
        }
    }

    fn verify_password(&self, user: &str, password: &str) -> Result<(), Status> {
        let bad = || Status::unauthenticated("invalid user name or password");
        let Some(phc) = self.users.get(user) else {
            return Err(bad());
        };
        let hash = PasswordHash::new(phc).map_err(|_| bad())?;
        Argon2::default()
            .verify_password(password.as_bytes(), &hash)
            .map_err(|_| bad())
    }

    /// A signed token for `user`.
    pub fn issue(&self, user: &str) -> String {
        let expiry = now_secs() + self.ttl.as_secs();
        // A nonce makes every handshake's token distinct (sessions are keyed by it).
        let nonce = URL_SAFE_NO_PAD.encode(random_bytes(6));
        let body = format!("v1.{}.{expiry}.{nonce}", URL_SAFE_NO_PAD.encode(user));
        let sig = self.sign(body.as_bytes());
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    fn sign(&self, body: &[u8]) -> Vec<u8> {
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("hmac accepts any key");
        mac.update(body);
        mac.finalize().into_bytes().to_vec()
    }

    fn verify_token(&self, token: &str) -> Result<Identity, Status> {
        let invalid =
            || Status::unauthenticated("invalid bearer token: authenticate again with Handshake");
        let (body, sig) = token.rsplit_once('.').ok_or_else(invalid)?;
        let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| invalid())?;
        let mut mac = HmacSha256::new_from_slice(&self.secret).expect("hmac accepts any key");
        mac.update(body.as_bytes());
        mac.verify_slice(&sig).map_err(|_| invalid())?;
        let mut parts = body.split('.');
        let (Some("v1"), Some(user), Some(expiry), Some(_nonce), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(invalid());
        };
        let expiry: u64 = expiry.parse().map_err(|_| invalid())?;
        if expiry < now_secs() {
            return Err(Status::unauthenticated(
                "bearer token expired: authenticate again with Handshake",
            ));
        }
        let user = String::from_utf8(URL_SAFE_NO_PAD.decode(user).map_err(|_| invalid())?)
            .map_err(|_| invalid())?;
        if !self.users.contains_key(&user) {
            return Err(invalid());
        }
        Ok(Identity::User(user))
    }
}

/// Argon2id PHC string for `password` (what `[[user]] password_hash` holds).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&random_bytes(16)).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

fn header(metadata: &MetadataMap) -> Option<String> {
    metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(|s| s.trim().to_string())
}

/// Base64 that accepts padded and unpadded input (Go's ADBC driver sends it unpadded).
const LENIENT_BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

fn decode_basic(b64: &str) -> Result<(String, String), Status> {
    let bad = || Status::unauthenticated("malformed Basic credentials");
    let raw = LENIENT_BASE64.decode(b64.trim()).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (u, p) = text.split_once(':').ok_or_else(bad)?;
    Ok((u.to_string(), p.to_string()))
}

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).expect("operating system random source");
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use tonic::metadata::MetadataValue;

    fn auth() -> Authenticator {
        let users = vec![UserConfig {
            name: "alice".into(),
            password_hash: hash_password("secret").unwrap(),
        }];
        Authenticator::new(&users, None, Duration::from_secs(60)).unwrap()
    }

    fn md(value: &str) -> MetadataMap {
        let mut m = MetadataMap::new();
        m.insert("authorization", MetadataValue::try_from(value).unwrap());
        m
    }

    #[test]
    fn basic_then_bearer() {
        let a = auth();
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:secret")
        );
        let (who, token) = a.handshake(&md(&basic), None).unwrap();
        assert_eq!(who, Identity::User("alice".into()));
        assert_eq!(
            a.check(&md(&format!("Bearer {token}"))).unwrap(),
            Identity::User("alice".into())
        );
        assert_eq!(
            a.check(&md(&basic)).unwrap(),
            Identity::User("alice".into())
        );
    }

    #[test]
    fn rejects() {
        let a = auth();
        let wrong = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:nope")
        );
        assert_eq!(
            a.handshake(&md(&wrong), None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            a.check(&MetadataMap::new()).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        let token = a.issue("alice");
        let forged = format!("Bearer {}x", token);
        assert!(a.check(&md(&forged)).is_err());
        let other = Authenticator::new(&[], None, Duration::from_secs(1)).unwrap();
        assert!(
            a.check(&md(&format!("Bearer {}", other.issue("alice"))))
                .is_err()
        );
    }
}
