//! Authentication: Flight's Handshake with HTTP Basic credentials returns a bearer token;
//! every other call carries `authorization: Bearer <token>` (or Basic credentials again).
//!
//! - Users and their Argon2 password hashes (PHC strings) come from the configuration;
//!   `petrel hash-password` prints one.
//! - Tokens are stateless: `v1.<user>.<expiry>.<nonce>.<HMAC-SHA256>` signed with the server's
//!   secret, so no session table grows and replicas that share the secret accept each other's
//!   tokens. Checking one is an HMAC, never a password hash.
//! - Argon2 is deliberately expensive, so it is kept from becoming an unauthenticated CPU
//!   burner:
//!   - credentials that verified are remembered for [`VERIFIED_TTL`] (at most
//!     [`VERIFIED_CAPACITY`] entries), keyed by an HMAC of user and password under a random
//!     per-process key — never the raw header — so clients that send Basic credentials on
//!     every call (or handshake on every connection) pay for Argon2 once a minute;
//!   - every verification first takes a token from its peer's failure bucket (per IP address;
//!     per /64 for IPv6): [`FAILURE_BURST`] attempts, refilled at one per
//!     [`FAILURE_REFILL`]. A success gives the token back; an empty bucket refuses the call
//!     with RESOURCE_EXHAUSTED before any hashing, so a peer guessing passwords gets
//!     [`FAILURE_BURST`] hashes and then ten a minute, whatever it sends;
//!   - hashes run on the blocking pool, at most half the cores at once, so the async workers
//!     that stream other clients' results never run Argon2;
//!   - an unknown user name costs the same hash as a wrong password (no user enumeration by
//!     timing).
//! - Nothing here logs credentials, tokens or headers.
//! - With no users configured, authentication is off: every call is accepted and a handshake
//!   returns an (unchecked) token, because the JDBC driver always performs one.
//!
//! The authenticator also holds the server's [`TicketSigner`] (`tickets`), the other secret
//! read from the configuration.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use tokio::sync::Semaphore;
use tonic::Status;
use tonic::metadata::MetadataMap;

use crate::config::UserConfig;
use crate::locks::lock;
use crate::tickets::TicketSigner;

type HmacSha256 = Hmac<Sha256>;

/// Who made a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Identity {
    /// Authentication is off.
    Anonymous,
    /// A configured user.
    User(String),
}

/// How long verified credentials are remembered.
pub const VERIFIED_TTL: Duration = Duration::from_secs(60);
/// Verified credentials remembered at most.
pub const VERIFIED_CAPACITY: usize = 1024;
/// Password verifications a peer may fail before it is throttled.
pub const FAILURE_BURST: u32 = 10;
/// A throttled peer regains one verification attempt per this interval.
pub const FAILURE_REFILL: Duration = Duration::from_secs(6);
/// Peers whose failures are tracked at most (peers with a full bucket are not tracked).
const MAX_TRACKED_PEERS: usize = 10_000;
/// How long a verification waits for a free hashing slot.
const HASH_QUEUE_TIMEOUT: Duration = Duration::from_secs(10);

/// Verifies credentials and issues / checks bearer tokens.
pub struct Authenticator {
    users: HashMap<String, String>,
    /// HMAC key of bearer tokens (the configured secret as HMAC pads or hashes it).
    token_key: [u8; 64],
    ttl: Duration,
    /// Random per process: keys the verified-credentials cache.
    credentials_key: [u8; 64],
    verified: Mutex<HashMap<[u8; 32], (String, Instant)>>,
    failures: FailureLimiter,
    hashing: Arc<Semaphore>,
    hashes: AtomicU64,
    tickets: Arc<TicketSigner>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Users with their PHC hashes; `secret` signs tokens (random when None). Tickets are
    /// signed with a random secret until [`Authenticator::with_ticket_signer`] sets one.
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
            None => try_random_bytes(32)?,
        };
        let hashers = std::thread::available_parallelism()
            .map(|n| n.get() / 2)
            .unwrap_or(1)
            .max(1);
        Ok(Self {
            users: map,
            token_key: hmac_key(&secret),
            ttl,
            credentials_key: hmac_key(&try_random_bytes(32)?),
            verified: Mutex::new(HashMap::new()),
            failures: FailureLimiter::default(),
            hashing: Arc::new(Semaphore::new(hashers)),
            hashes: AtomicU64::new(0),
            tickets: Arc::new(TicketSigner::random()?),
        })
    }

    /// Limits failed verifications per peer to `burst`, refilled at one per `refill`.
    #[cfg(test)]
    fn with_failure_limit(mut self, burst: u32, refill: Duration) -> Self {
        self.failures = FailureLimiter {
            burst: f64::from(burst),
            refill,
            buckets: Mutex::default(),
        };
        self
    }

    /// Signs tickets and handles with `signer` (the configured `ticket_secret`).
    pub fn with_ticket_signer(mut self, signer: TicketSigner) -> Self {
        self.tickets = Arc::new(signer);
        self
    }

    /// The signer of tickets and prepared-statement handles.
    pub fn tickets(&self) -> &Arc<TicketSigner> {
        &self.tickets
    }

    /// Whether calls must be authenticated.
    pub fn enabled(&self) -> bool {
        !self.users.is_empty()
    }

    /// Argon2 verifications run so far (successful or not).
    pub fn password_hashes(&self) -> u64 {
        self.hashes.load(Ordering::Relaxed)
    }

    /// Handshake: verifies Basic credentials from the `authorization` header (or from a
    /// `BasicAuth`-style payload) and returns the identity and a fresh bearer token. `peer` is
    /// the caller's address (failed attempts are limited per address).
    pub async fn handshake(
        &self,
        metadata: &MetadataMap,
        payload_credentials: Option<(String, String)>,
        peer: Option<SocketAddr>,
    ) -> Result<(Identity, String), Status> {
        if !self.enabled() {
            return Ok((Identity::Anonymous, self.issue("anonymous")));
        }
        let (user, password) = match header(metadata) {
            Some(h) if has_scheme(h, "basic") => decode_basic(&h[6..])?,
            Some(h) if has_scheme(h, "bearer") => {
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
        self.verify_password(&user, &password, peer).await?;
        let token = self.issue(&user);
        Ok((Identity::User(user), token))
    }

    /// Checks the credentials of a (non-handshake) call from `peer`.
    pub async fn check(
        &self,
        metadata: &MetadataMap,
        peer: Option<SocketAddr>,
    ) -> Result<Identity, Status> {
        if !self.enabled() {
            return Ok(Identity::Anonymous);
        }
        let Some(h) = header(metadata) else {
            return Err(Status::unauthenticated(
                "no credentials: call Handshake with Basic credentials and send the returned \
                 `authorization: Bearer <token>` header",
            ));
        };
        if has_scheme(h, "bearer") {
            self.verify_token(h[7..].trim())
        } else if has_scheme(h, "basic") {
            let (user, password) = decode_basic(&h[6..])?;
            self.verify_password(&user, &password, peer).await?;
            Ok(Identity::User(user))
        } else {
            Err(Status::unauthenticated(
                "unsupported authorization scheme: use Basic or Bearer",
            ))
        }
    }

    /// Verifies `user`'s `password`: remembered credentials first, then (within the peer's
    /// failure budget and a hashing slot) Argon2.
    async fn verify_password(
        &self,
        user: &str,
        password: &str,
        peer: Option<SocketAddr>,
    ) -> Result<(), Status> {
        let bad = || Status::unauthenticated("invalid user name or password");
        let key = self.credentials_digest(user, password);
        let now = Instant::now();
        if let Some((known, at)) = lock(&self.verified).get(&key)
            && known == user
            && now.duration_since(*at) < VERIFIED_TTL
        {
            return Ok(());
        }
        // An unknown user is checked against some configured hash, so it costs the same.
        let (phc, exists) = match self.users.get(user) {
            Some(phc) => (phc.clone(), true),
            None => match self.users.values().next() {
                Some(phc) => (phc.clone(), false),
                None => return Err(bad()),
            },
        };
        let address = peer;
        let peer = peer_key(peer);
        self.failures.take(peer)?;
        let permit = match tokio::time::timeout(
            HASH_QUEUE_TIMEOUT,
            Arc::clone(&self.hashing).acquire_owned(),
        )
        .await
        {
            Ok(Ok(permit)) => permit,
            _ => {
                self.failures.give_back(peer);
                return Err(Status::resource_exhausted(
                    "server busy verifying passwords: retry later, or send the bearer token \
                     the Handshake returned",
                ));
            }
        };
        self.hashes.fetch_add(1, Ordering::Relaxed);
        let password = password.to_string();
        // The permit moves into the blocking task: a caller that goes away does not free the
        // slot before the hash is done.
        let verified = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            PasswordHash::new(&phc).is_ok_and(|hash| {
                Argon2::default()
                    .verify_password(password.as_bytes(), &hash)
                    .is_ok()
            })
        })
        .await
        .unwrap_or(false);
        if !(verified && exists) {
            // The user name and the peer only: never the password or the header.
            tracing::warn!(user = %user, peer = ?address, "authentication failed");
            return Err(bad());
        }
        self.failures.give_back(peer);
        let mut cache = lock(&self.verified);
        if cache.len() >= VERIFIED_CAPACITY {
            cache.retain(|_, (_, at)| now.duration_since(*at) < VERIFIED_TTL);
        }
        if cache.len() >= VERIFIED_CAPACITY
            && let Some(oldest) = cache.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k)
        {
            cache.remove(&oldest);
        }
        cache.insert(key, (user.to_string(), Instant::now()));
        Ok(())
    }

    fn credentials_digest(&self, user: &str, password: &str) -> [u8; 32] {
        let mut mac = <HmacSha256 as KeyInit>::new((&self.credentials_key).into());
        mac.update(&(user.len() as u64).to_le_bytes());
        mac.update(user.as_bytes());
        mac.update(password.as_bytes());
        mac.finalize().into_bytes().into()
    }

    /// A signed token for `user`.
    pub fn issue(&self, user: &str) -> String {
        let expiry = now_secs() + self.ttl.as_secs();
        // A nonce makes every handshake's token distinct (sessions are keyed by it).
        let nonce = URL_SAFE_NO_PAD.encode(random_bytes(6));
        let body = format!("v1.{}.{expiry}.{nonce}", URL_SAFE_NO_PAD.encode(user));
        let sig = self.token_mac(body.as_bytes()).finalize().into_bytes();
        format!("{body}.{}", URL_SAFE_NO_PAD.encode(sig))
    }

    fn token_mac(&self, body: &[u8]) -> HmacSha256 {
        let mut mac = <HmacSha256 as KeyInit>::new((&self.token_key).into());
        mac.update(body);
        mac
    }

    fn verify_token(&self, token: &str) -> Result<Identity, Status> {
        let invalid =
            || Status::unauthenticated("invalid bearer token: authenticate again with Handshake");
        let (body, sig) = token.rsplit_once('.').ok_or_else(invalid)?;
        let sig = URL_SAFE_NO_PAD.decode(sig).map_err(|_| invalid())?;
        self.token_mac(body.as_bytes())
            .verify_slice(&sig)
            .map_err(|_| invalid())?;
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

/// Per-peer token buckets of password verifications (see the module documentation).
#[derive(Debug)]
struct FailureLimiter {
    burst: f64,
    refill: Duration,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

impl Default for FailureLimiter {
    fn default() -> Self {
        Self {
            burst: f64::from(FAILURE_BURST),
            refill: FAILURE_REFILL,
            buckets: Mutex::default(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl FailureLimiter {
    fn refilled(&self, bucket: Bucket, now: Instant) -> f64 {
        let gained = now.duration_since(bucket.at).as_secs_f64() / self.refill.as_secs_f64();
        (bucket.tokens + gained).min(self.burst)
    }

    /// Takes one attempt from `peer`'s bucket, or refuses the call.
    fn take(&self, peer: IpAddr) -> Result<(), Status> {
        let now = Instant::now();
        let full = self.burst;
        let mut buckets = lock(&self.buckets);
        if buckets.len() >= MAX_TRACKED_PEERS && !buckets.contains_key(&peer) {
            buckets.retain(|_, b| self.refilled(*b, now) < full);
            if buckets.len() >= MAX_TRACKED_PEERS {
                return Err(Status::resource_exhausted(
                    "too many failed sign-in attempts: retry later",
                ));
            }
        }
        let bucket = buckets.entry(peer).or_insert(Bucket {
            tokens: full,
            at: now,
        });
        let tokens = self.refilled(*bucket, now);
        if tokens < 1.0 {
            let wait = ((1.0 - tokens) * self.refill.as_secs_f64()).ceil();
            return Err(Status::resource_exhausted(format!(
                "too many failed sign-in attempts from this address: retry in {wait} s"
            )));
        }
        *bucket = Bucket {
            tokens: tokens - 1.0,
            at: now,
        };
        Ok(())
    }

    /// Returns the attempt `take` took (the verification succeeded, or never ran).
    fn give_back(&self, peer: IpAddr) {
        let now = Instant::now();
        let mut buckets = lock(&self.buckets);
        if let Some(bucket) = buckets.get_mut(&peer) {
            let tokens = self.refilled(*bucket, now) + 1.0;
            if tokens >= self.burst {
                buckets.remove(&peer);
            } else {
                *bucket = Bucket { tokens, at: now };
            }
        }
    }
}

/// The address failures are counted under: the IP (the /64 network for IPv6, where one client
/// holds many addresses); calls without a peer address share one bucket.
fn peer_key(peer: Option<SocketAddr>) -> IpAddr {
    match peer.map(|p| p.ip().to_canonical()) {
        Some(IpAddr::V6(v6)) => {
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
        Some(v4) => v4,
        None => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
    }
}

/// The HMAC-SHA256 key block for `secret`, as HMAC derives it (hashed when longer than the
/// block, zero-padded otherwise), so keying with it equals keying with `secret`.
fn hmac_key(secret: &[u8]) -> [u8; 64] {
    let mut key = [0u8; 64];
    if secret.len() > 64 {
        key[..32].copy_from_slice(&Sha256::digest(secret));
    } else {
        key[..secret.len()].copy_from_slice(secret);
    }
    key
}

/// Argon2id PHC string for `password` (what `[[user]] password_hash` holds).
pub fn hash_password(password: &str) -> Result<String, String> {
    let salt = SaltString::encode_b64(&try_random_bytes(16)?).map_err(|e| e.to_string())?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| e.to_string())
}

/// Whether the header is `<scheme> ...` (scheme case-insensitive).
fn has_scheme(header: &str, scheme: &str) -> bool {
    let (h, s) = (header.as_bytes(), scheme.as_bytes());
    h.len() > s.len() && h[..s.len()].eq_ignore_ascii_case(s) && h[s.len()] == b' '
}

fn header(metadata: &MetadataMap) -> Option<&str> {
    metadata
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
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

/// `n` bytes from the operating system's random source.
pub(crate) fn try_random_bytes(n: usize) -> Result<Vec<u8>, String> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| format!("operating system random source: {e}"))?;
    Ok(buf)
}

/// `n` random bytes for ids and nonces. Should the operating system's source fail, they are
/// derived from the clock, the process and a counter instead: unique, if not secret (ids are
/// inside signed tickets, so they need not be).
pub(crate) fn random_bytes(n: usize) -> Vec<u8> {
    try_random_bytes(n).unwrap_or_else(|_| {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let seed = Sha256::new()
            .chain_update(format!(
                "{:?} {} {}",
                SystemTime::now(),
                std::process::id(),
                COUNTER.fetch_add(1, Ordering::Relaxed)
            ))
            .finalize();
        (0..n)
            .map(|i| {
                Sha256::new()
                    .chain_update(seed)
                    .chain_update((i / 32).to_le_bytes())
                    .finalize()[i % 32]
            })
            .collect()
    })
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

    fn basic(user_password: &str) -> String {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(user_password)
        )
    }

    fn peer(n: u8) -> Option<SocketAddr> {
        Some(SocketAddr::from(([10, 0, 0, n], 40000 + u16::from(n))))
    }

    #[tokio::test]
    async fn basic_then_bearer() {
        let a = auth();
        let basic = basic("alice:secret");
        let (who, token) = a.handshake(&md(&basic), None, peer(1)).await.unwrap();
        assert_eq!(who, Identity::User("alice".into()));
        assert_eq!(
            a.check(&md(&format!("Bearer {token}")), peer(1))
                .await
                .unwrap(),
            Identity::User("alice".into())
        );
        assert_eq!(
            a.check(&md(&basic), peer(1)).await.unwrap(),
            Identity::User("alice".into())
        );
        // The handshake hashed once; the Basic call after it was remembered.
        assert_eq!(a.password_hashes(), 1);
        // Lower-case schemes are accepted too.
        assert!(
            a.check(&md(&basic.replace("Basic", "basic")), peer(1))
                .await
                .is_ok()
        );
    }

    #[tokio::test]
    async fn rejects() {
        let a = auth();
        let wrong = basic("alice:nope");
        assert_eq!(
            a.handshake(&md(&wrong), None, peer(1))
                .await
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            a.check(&MetadataMap::new(), peer(1))
                .await
                .unwrap_err()
                .code(),
            tonic::Code::Unauthenticated
        );
        let token = a.issue("alice");
        let forged = format!("Bearer {}x", token);
        assert!(a.check(&md(&forged), peer(1)).await.is_err());
        let other = Authenticator::new(&[], None, Duration::from_secs(1)).unwrap();
        assert!(
            a.check(&md(&format!("Bearer {}", other.issue("alice"))), peer(1))
                .await
                .is_err()
        );
        // Unknown users are refused like wrong passwords (and cost the same hash).
        let before = a.password_hashes();
        let e = a
            .check(&md(&basic("mallory:x")), peer(1))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        assert_eq!(e.message(), "invalid user name or password");
        assert_eq!(a.password_hashes(), before + 1);
    }

    #[tokio::test]
    async fn failed_attempts_beyond_the_burst_are_refused_without_hashing() {
        // (No refill during the test, however slow Argon2 is in a debug build.)
        let a = auth().with_failure_limit(FAILURE_BURST, Duration::from_secs(3600));
        for i in 0..FAILURE_BURST {
            let e = a
                .check(&md(&basic(&format!("alice:guess{i}"))), peer(1))
                .await
                .unwrap_err();
            assert_eq!(e.code(), tonic::Code::Unauthenticated, "{e}");
        }
        assert_eq!(a.password_hashes(), u64::from(FAILURE_BURST));
        for i in 0..100 {
            let e = a
                .check(&md(&basic(&format!("alice:more{i}"))), peer(1))
                .await
                .unwrap_err();
            assert_eq!(e.code(), tonic::Code::ResourceExhausted, "{e}");
            assert!(
                e.message().contains("too many failed sign-in attempts"),
                "{e}"
            );
        }
        // Even the right password is not checked while the peer is throttled...
        let e = a
            .handshake(&md(&basic("alice:secret")), None, peer(1))
            .await
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert_eq!(a.password_hashes(), u64::from(FAILURE_BURST));
        // ...but another peer is not affected, and tokens still work from the throttled one.
        let (_, token) = a
            .handshake(&md(&basic("alice:secret")), None, peer(2))
            .await
            .unwrap();
        assert!(
            a.check(&md(&format!("Bearer {token}")), peer(1))
                .await
                .is_ok()
        );
        // Successes do not use up the budget.
        for _ in 0..3 * FAILURE_BURST {
            assert!(a.check(&md(&basic("alice:secret")), peer(3)).await.is_ok());
        }
    }

    #[test]
    fn ipv6_peers_share_their_network_s_bucket() {
        let a: SocketAddr = "[2001:db8:1:2:3:4:5:6]:1".parse().unwrap();
        let b: SocketAddr = "[2001:db8:1:2:ffff:4:5:7]:2".parse().unwrap();
        let c: SocketAddr = "[2001:db8:1:3::1]:2".parse().unwrap();
        assert_eq!(peer_key(Some(a)), peer_key(Some(b)));
        assert_ne!(peer_key(Some(a)), peer_key(Some(c)));
        let mapped: SocketAddr = "[::ffff:10.0.0.1]:5".parse().unwrap();
        assert_eq!(peer_key(Some(mapped)), peer_key(peer(1)));
    }

    #[test]
    fn token_key_is_hmac_of_the_secret() {
        // Tokens issued before the key was precomputed stay valid: same HMAC.
        for secret in [&b"short"[..], &[7u8; 100][..]] {
            let mut plain = <HmacSha256 as KeyInit>::new_from_slice(secret).unwrap();
            plain.update(b"body");
            let mut ours = <HmacSha256 as KeyInit>::new((&hmac_key(secret)).into());
            ours.update(b"body");
            assert_eq!(plain.finalize().into_bytes(), ours.finalize().into_bytes());
        }
    }
}
