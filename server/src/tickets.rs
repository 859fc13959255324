//! Signed, self-contained tickets and prepared-statement handles (messages of
//! `proto/petrel.proto`).
//!
//! A DoGet ticket is Flight SQL's `TicketStatementQuery` whose `statement_handle` is a sealed
//! [`StatementTicket`]: the SQL, the session defaults, the bound parameters and a random query
//! id. Any Petrel process that shares the signing secret can execute it; nothing is kept
//! between GetFlightInfo and DoGet (`plan_cache` only keeps a shortcut).
//!
//! A write that arrives on the query path (ADBC's `cursor.execute("INSERT ...")` sends
//! GetFlightInfo, then DoGet) runs once, in GetFlightInfo; its ticket is a
//! [`WriteResultTicket`] carrying the row count, so every DoGet of it (a client that fetches
//! twice, a retry) answers the same one-row `count` result and nothing runs again. It is a
//! ticket type of its own (an `Any` with [`WRITE_RESULT_TYPE_URL`]), never a statement
//! ticket, so it cannot be mistaken for something to execute.
//!
//! # Signing
//!
//! Everything the server hands out and later executes or trusts — statement tickets,
//! write-result tickets, prepared-statement handles — is sealed by [`TicketSigner`] with
//! HMAC-SHA256 under the server's ticket secret (`ticket_secret`; random per process when not
//! configured, so tickets then work only on the server that issued them). The sealed form is
//!
//! ```text
//! 0xA7 | version 1 | kind (statement, handle, write result) | owner tag (16) | MAC (32) | body
//! ```
//!
//! where the MAC covers the first 19 bytes and the protobuf body, and the owner tag is an HMAC
//! of the authenticated user the ticket was issued to (a fixed tag for "nobody" when
//! authentication is off). Opening checks the length, the header, the kind and the MAC
//! (constant time) before the body is decoded, so a tampered, truncated or foreign ticket never
//! reaches the protobuf decoder, and the error names no SQL, path or decoder detail. A genuine
//! ticket presented by another user fails with PERMISSION_DENIED. The query id inside a ticket
//! is therefore bound to its user: only that user can run it, cancel it or touch its cached
//! plan.
//!
//! Metadata tickets (GetTables and friends) are the Flight SQL command itself and stay
//! unsigned: they carry no server state and nothing a client could not ask for directly.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::ipc::writer::StreamWriter;
use arrow_flight::Ticket;
use arrow_flight::sql::{ProstMessageExt, TicketStatementQuery};
use base64::Engine;
use bytes::Bytes;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac};
use prost::Message;
use sha2::Sha256;
use tonic::Status;

use crate::auth::Identity;
use crate::proto::petrel::{PreparedStatementHandle, SessionDefaults, StatementTicket};

type HmacSha256 = Hmac<Sha256>;

/// Current format version of tickets and handles (the protobuf bodies).
pub const FORMAT_VERSION: u32 = 1;

/// First byte of every sealed ticket or handle.
const MAGIC: u8 = 0xA7;
/// Version of the sealed envelope.
const ENVELOPE_VERSION: u8 = 1;
/// Bytes of the owner tag.
const OWNER_TAG_LEN: usize = 16;
/// Bytes of the MAC.
const MAC_LEN: usize = 32;
/// Bytes before the MAC: magic, version, kind, owner tag.
const HEADER_LEN: usize = 3 + OWNER_TAG_LEN;
/// Bytes before the body.
const PREFIX_LEN: usize = HEADER_LEN + MAC_LEN;
/// Shortest secret accepted for `ticket_secret`, in bytes.
pub const MIN_SECRET_BYTES: usize = 16;

/// What a sealed blob is; part of what the MAC covers, so one kind is never accepted as
/// another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Statement = 1,
    Handle = 2,
    WriteResult = 3,
}

impl Kind {
    fn invalid(self) -> Status {
        match self {
            Kind::Handle => Status::invalid_argument(
                "invalid prepared statement handle: it was altered or truncated, or was issued by \
                 another server (a different ticket_secret); create the prepared statement again",
            ),
            Kind::Statement | Kind::WriteResult => Status::invalid_argument(
                "invalid ticket: it was altered or truncated, or was issued by another server \
                 (a different ticket_secret); call GetFlightInfo again for a new ticket",
            ),
        }
    }

    fn other_user(self) -> Status {
        match self {
            Kind::Handle => Status::permission_denied(
                "this prepared statement handle was issued to another user",
            ),
            Kind::Statement | Kind::WriteResult => {
                Status::permission_denied("this ticket was issued to another user")
            }
        }
    }
}

/// Seals and opens tickets and handles with the server's ticket secret (see the module
/// documentation).
pub struct TicketSigner {
    /// HMAC key derived from the secret (32 bytes, zero-padded to SHA-256's block, which is
    /// how HMAC pads a short key anyway).
    key: [u8; 64],
}

impl std::fmt::Debug for TicketSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TicketSigner").finish_non_exhaustive()
    }
}

impl TicketSigner {
    /// A signer for `secret` (raw bytes, at least [`MIN_SECRET_BYTES`]).
    pub fn new(secret: &[u8]) -> Result<Self, String> {
        if secret.len() < MIN_SECRET_BYTES {
            return Err(format!(
                "ticket_secret is {} bytes; use at least {MIN_SECRET_BYTES} random bytes \
                 (e.g. `openssl rand -hex 32`)",
                secret.len()
            ));
        }
        // The key is derived, so the same value reused as token_secret signs nothing alike.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(secret)
            .map_err(|_| "ticket_secret: not a usable HMAC key".to_string())?;
        mac.update(b"petrel ticket signing key v1");
        let mut key = [0u8; 64];
        key[..32].copy_from_slice(&mac.finalize().into_bytes());
        Ok(Self { key })
    }

    /// A signer with a random secret: tickets work only on this process.
    pub fn random() -> Result<Self, String> {
        let secret = crate::auth::try_random_bytes(32)?;
        Self::new(&secret)
    }

    /// The signer of the configuration: `ticket_secret` in hex or base64, else random.
    pub fn from_config(secret: Option<&str>) -> Result<Self, String> {
        match secret {
            Some(text) => Self::new(&parse_secret(text)?),
            None => Self::random(),
        }
    }

    fn mac(&self) -> HmacSha256 {
        <HmacSha256 as KeyInit>::new((&self.key).into())
    }

    fn owner_tag(&self, owner: &Identity) -> [u8; OWNER_TAG_LEN] {
        let mut mac = self.mac();
        mac.update(b"owner:");
        match owner {
            Identity::Anonymous => mac.update(&[0]),
            Identity::User(name) => {
                mac.update(&[1]);
                mac.update(name.as_bytes());
            }
        }
        let full = mac.finalize().into_bytes();
        let mut tag = [0u8; OWNER_TAG_LEN];
        tag.copy_from_slice(&full[..OWNER_TAG_LEN]);
        tag
    }

    fn seal(&self, kind: Kind, owner: &Identity, body: &[u8]) -> Bytes {
        let mut out = Vec::with_capacity(PREFIX_LEN + body.len());
        out.extend_from_slice(&[MAGIC, ENVELOPE_VERSION, kind as u8]);
        out.extend_from_slice(&self.owner_tag(owner));
        let mut mac = self.mac();
        mac.update(&out);
        mac.update(body);
        out.extend_from_slice(&mac.finalize().into_bytes());
        out.extend_from_slice(body);
        out.into()
    }

    /// The body of a sealed blob of `kind` issued to `owner`, or the error for the client.
    fn open<'a>(&self, kind: Kind, owner: &Identity, sealed: &'a [u8]) -> Result<&'a [u8], Status> {
        if sealed.len() < PREFIX_LEN
            || sealed[0] != MAGIC
            || sealed[1] != ENVELOPE_VERSION
            || sealed[2] != kind as u8
        {
            return Err(kind.invalid());
        }
        let (header, rest) = sealed.split_at(HEADER_LEN);
        let (tag, body) = rest.split_at(MAC_LEN);
        let mut mac = self.mac();
        mac.update(header);
        mac.update(body);
        mac.verify_slice(tag).map_err(|_| kind.invalid())?;
        if header[3..] != self.owner_tag(owner) {
            return Err(kind.other_user());
        }
        Ok(body)
    }
}

/// Parses a configured secret: hex (an even number of hex digits, e.g. `openssl rand -hex 32`)
/// or else base64 (standard or URL-safe alphabet, padded or not: `openssl rand -base64 32`).
pub fn parse_secret(text: &str) -> Result<Vec<u8>, String> {
    let text = text.trim();
    let bytes = if !text.is_empty()
        && text.len().is_multiple_of(2)
        && text.bytes().all(|b| b.is_ascii_hexdigit())
    {
        decode_hex(text)
    } else {
        let lenient = |alphabet: &base64::alphabet::Alphabet| {
            base64::engine::GeneralPurpose::new(
                alphabet,
                base64::engine::GeneralPurposeConfig::new()
                    .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
            )
        };
        lenient(&base64::alphabet::STANDARD)
            .decode(text)
            .or_else(|_| lenient(&base64::alphabet::URL_SAFE).decode(text))
            .map_err(|_| {
                "ticket_secret is neither hex nor base64 (generate one with \
                 `openssl rand -hex 32`)"
                    .to_string()
            })?
    };
    if bytes.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "ticket_secret decodes to {} bytes; use at least {MIN_SECRET_BYTES} random bytes \
             (e.g. `openssl rand -hex 32`)",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// Hex digits to bytes (the caller checked: an even number of hex digits).
fn decode_hex(text: &str) -> Vec<u8> {
    let digit = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
    text.as_bytes()
        .chunks_exact(2)
        .map(|pair| (digit(pair[0]) << 4) | digit(pair[1]))
        .collect()
}

/// The tickets of one call: the server's signer and the caller they are bound to.
#[derive(Debug, Clone, Copy)]
pub struct Tickets<'a> {
    signer: &'a TicketSigner,
    owner: &'a Identity,
}

impl<'a> Tickets<'a> {
    /// Tickets issued to and accepted from `owner`.
    pub fn new(signer: &'a TicketSigner, owner: &'a Identity) -> Self {
        Self { signer, owner }
    }

    /// The Flight ticket carrying `t`.
    pub fn statement(&self, t: &StatementTicket) -> Ticket {
        let inner = TicketStatementQuery {
            statement_handle: self
                .signer
                .seal(Kind::Statement, self.owner, &t.encode_to_vec()),
        };
        Ticket {
            ticket: inner.as_any().encode_to_vec().into(),
        }
    }

    /// Opens and decodes a `TicketStatementQuery.statement_handle`.
    pub fn open_statement(&self, handle: &[u8]) -> Result<StatementTicket, Status> {
        let body = self.signer.open(Kind::Statement, self.owner, handle)?;
        let t = StatementTicket::decode(body).map_err(|_| Kind::Statement.invalid())?;
        if t.version != FORMAT_VERSION || t.sql.is_empty() {
            return Err(Status::invalid_argument(
                "ticket from another Petrel version: call GetFlightInfo again",
            ));
        }
        Ok(t)
    }

    /// The Flight ticket for a finished write.
    pub fn write_result(&self, query_id: Bytes, count: u64) -> Ticket {
        let body = WriteResultTicket {
            version: FORMAT_VERSION,
            query_id,
            count,
        };
        let any = arrow_flight::sql::Any {
            type_url: WRITE_RESULT_TYPE_URL.to_string(),
            value: self
                .signer
                .seal(Kind::WriteResult, self.owner, &body.encode_to_vec()),
        };
        Ticket {
            ticket: any.encode_to_vec().into(),
        }
    }

    /// Opens and decodes the body of a write-result ticket (the `Any`'s value).
    pub fn open_write_result(&self, value: &[u8]) -> Result<WriteResultTicket, Status> {
        let body = self.signer.open(Kind::WriteResult, self.owner, value)?;
        let t = WriteResultTicket::decode(body).map_err(|_| Kind::WriteResult.invalid())?;
        if t.version != FORMAT_VERSION {
            return Err(Status::invalid_argument(
                "write-result ticket from another Petrel version",
            ));
        }
        Ok(t)
    }

    /// Seals a prepared-statement handle.
    pub fn handle(&self, h: &PreparedStatementHandle) -> Bytes {
        self.signer
            .seal(Kind::Handle, self.owner, &h.encode_to_vec())
    }

    /// Opens and decodes a prepared-statement handle.
    pub fn open_handle(&self, bytes: &[u8]) -> Result<PreparedStatementHandle, Status> {
        let body = self.signer.open(Kind::Handle, self.owner, bytes)?;
        let h = PreparedStatementHandle::decode(body).map_err(|_| Kind::Handle.invalid())?;
        if h.version != FORMAT_VERSION || h.sql.is_empty() {
            return Err(Status::invalid_argument(
                "prepared statement handle from another Petrel version: create the prepared \
                 statement again",
            ));
        }
        Ok(h)
    }
}

/// A new ticket for `sql` with a fresh random query id.
pub fn statement_ticket(sql: &str, session: SessionDefaults, parameters: Bytes) -> StatementTicket {
    StatementTicket {
        version: FORMAT_VERSION,
        sql: sql.to_string(),
        session: Some(session),
        parameters,
        query_id: Bytes::from(crate::auth::random_bytes(16)),
    }
}

/// `Any.type_url` of a [`WriteResultTicket`].
pub const WRITE_RESULT_TYPE_URL: &str = "type.googleapis.com/petrel.v1.WriteResultTicket";

/// The result of a write that already ran (see the module documentation). Defined here with
/// prost's derive rather than in `proto/petrel.proto`; its wire form is that of
/// `message WriteResultTicket { uint32 version = 1; bytes query_id = 2; uint64 count = 3; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteResultTicket {
    /// [`FORMAT_VERSION`].
    #[prost(uint32, tag = "1")]
    pub version: u32,
    /// The query id the write ran (and was logged) under.
    #[prost(bytes = "bytes", tag = "2")]
    pub query_id: Bytes,
    /// Rows written.
    #[prost(uint64, tag = "3")]
    pub count: u64,
}

/// Serialises parameter rows as an Arrow IPC stream.
pub fn batches_to_ipc(schema: &SchemaRef, batches: &[RecordBatch]) -> Result<Bytes, Status> {
    let mut buf = Vec::new();
    {
        let mut w = StreamWriter::try_new(&mut buf, schema)
            .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
        for b in batches {
            w.write(b)
                .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
        }
        w.finish()
            .map_err(|e| Status::invalid_argument(format!("parameters: {e}")))?;
    }
    Ok(buf.into())
}

/// Reads parameter rows back from an Arrow IPC stream (empty bytes: no parameters).
pub fn ipc_to_batches(bytes: &[u8]) -> Result<Vec<RecordBatch>, Status> {
    if bytes.is_empty() {
        return Ok(vec![]);
    }
    crate::untrusted_ipc::read_ipc_stream(bytes)
        .map_err(|e| Status::invalid_argument(format!("malformed bound parameters: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer(byte: u8) -> TicketSigner {
        TicketSigner::new(&[byte; 32]).unwrap()
    }

    fn alice() -> Identity {
        Identity::User("alice".into())
    }

    fn sample() -> StatementTicket {
        statement_ticket(
            "SELECT 'secret-sql'",
            SessionDefaults {
                catalog: "c".into(),
                schema: "s".into(),
            },
            Bytes::new(),
        )
    }

    fn handle_of(ticket: &Ticket) -> Bytes {
        let any = arrow_flight::sql::Any::decode(ticket.ticket.clone()).unwrap();
        any.unpack::<TicketStatementQuery>()
            .unwrap()
            .unwrap()
            .statement_handle
    }

    #[test]
    fn write_result_tickets_round_trip_and_are_not_statements() {
        let s = signer(1);
        let who = Identity::Anonymous;
        let tickets = Tickets::new(&s, &who);
        let t = tickets.write_result(Bytes::from_static(b"id"), 7);
        let any = arrow_flight::sql::Any::decode(t.ticket).unwrap();
        assert_eq!(any.type_url, WRITE_RESULT_TYPE_URL);
        assert!(any.unpack::<TicketStatementQuery>().unwrap().is_none());
        let body = tickets.open_write_result(&any.value).unwrap();
        assert_eq!((body.count, &body.query_id[..]), (7, &b"id"[..]));
        // Not a statement either.
        assert_eq!(
            tickets.open_statement(&any.value).unwrap_err().code(),
            tonic::Code::InvalidArgument
        );
    }

    #[test]
    fn statements_round_trip_and_any_change_is_refused() {
        let s = signer(1);
        let who = alice();
        let tickets = Tickets::new(&s, &who);
        let t = sample();
        let sealed = handle_of(&tickets.statement(&t));
        assert_eq!(tickets.open_statement(&sealed).unwrap(), t);
        for i in 0..sealed.len() {
            let mut bad = sealed.to_vec();
            bad[i] ^= 0x01;
            let e = tickets.open_statement(&bad).unwrap_err();
            assert_eq!(e.code(), tonic::Code::InvalidArgument, "byte {i}");
            assert!(!e.message().contains("secret-sql"), "{e}");
        }
        for n in 0..sealed.len() {
            assert!(tickets.open_statement(&sealed[..n]).is_err(), "prefix {n}");
        }
    }

    #[test]
    fn other_secrets_users_and_kinds_are_refused() {
        let (a, b) = (signer(1), signer(2));
        let (alice, bob, nobody) = (alice(), Identity::User("bob".into()), Identity::Anonymous);
        let sealed = handle_of(&Tickets::new(&a, &alice).statement(&sample()));
        let e = Tickets::new(&b, &alice)
            .open_statement(&sealed)
            .unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("another server"), "{e}");
        for other in [&bob, &nobody] {
            let e = Tickets::new(&a, other).open_statement(&sealed).unwrap_err();
            assert_eq!(e.code(), tonic::Code::PermissionDenied, "{e}");
            assert!(e.message().contains("another user"), "{e}");
        }
        // A statement ticket is not a handle.
        let e = Tickets::new(&a, &alice).open_handle(&sealed).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        // The same configured secret on another process opens it.
        let again = TicketSigner::new(&[1; 32]).unwrap();
        assert!(Tickets::new(&again, &alice).open_statement(&sealed).is_ok());
    }

    #[test]
    fn handles_round_trip() {
        let s = signer(3);
        let who = alice();
        let tickets = Tickets::new(&s, &who);
        let h = PreparedStatementHandle {
            version: FORMAT_VERSION,
            sql: "SELECT $1".into(),
            session: None,
            parameters: Bytes::from_static(b"params"),
            nonce: Bytes::from_static(b"n"),
        };
        let sealed = tickets.handle(&h);
        assert_eq!(tickets.open_handle(&sealed).unwrap(), h);
        let mut bad = sealed.to_vec();
        let last = bad.len() - 1;
        bad[last] ^= 0x80;
        let e = tickets.open_handle(&bad).unwrap_err();
        assert_eq!(e.code(), tonic::Code::InvalidArgument);
        assert!(e.message().contains("prepared statement handle"), "{e}");
    }

    /// A bounded property test: random, truncated, extended and bit-flipped bytes never
    /// panic and are always refused with INVALID_ARGUMENT (fixed seed: reproducible).
    #[test]
    fn random_bytes_never_panic_and_are_refused() {
        let s = signer(4);
        let who = alice();
        let tickets = Tickets::new(&s, &who);
        let genuine = handle_of(&tickets.statement(&sample()));
        let handle = tickets.handle(&PreparedStatementHandle {
            version: FORMAT_VERSION,
            sql: "SELECT 1".into(),
            ..Default::default()
        });
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            // splitmix64
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        for case in 0..20_000 {
            let base: &[u8] = if case % 2 == 0 { &genuine } else { &handle };
            let mut bytes = base.to_vec();
            match next() % 4 {
                0 => {
                    let n = (next() % 200) as usize;
                    bytes = (0..n).map(|_| next() as u8).collect();
                    if n > 0 && next() % 2 == 0 {
                        bytes[0] = MAGIC;
                    }
                    if n > 2 && next() % 2 == 0 {
                        bytes[1] = ENVELOPE_VERSION;
                        bytes[2] = (next() % 4) as u8;
                    }
                }
                1 => bytes.truncate((next() as usize) % bytes.len()),
                2 => {
                    // One flipped bit at `first`, maybe more elsewhere (never undoing it).
                    let first = (next() as usize) % bytes.len();
                    bytes[first] ^= 1 << (next() % 8);
                    for _ in 0..(next() % 4) {
                        let i = (next() as usize) % bytes.len();
                        if i != first {
                            bytes[i] ^= 1 << (next() % 8);
                        }
                    }
                }
                _ => bytes.extend((0..=(next() % 8)).map(|_| next() as u8)),
            }
            for result in [
                tickets.open_statement(&bytes).map(|_| ()),
                tickets.open_handle(&bytes).map(|_| ()),
                tickets.open_write_result(&bytes).map(|_| ()),
            ] {
                let e = result.expect_err("altered bytes are refused");
                assert_eq!(e.code(), tonic::Code::InvalidArgument, "case {case}: {e}");
            }
        }
    }

    #[test]
    fn secrets_parse_as_hex_or_base64() {
        let hex = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        assert_eq!(parse_secret(hex).unwrap().len(), 32);
        assert_eq!(parse_secret(hex).unwrap()[..2], [0x00, 0x11]);
        let b64 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        assert_eq!(parse_secret(&b64).unwrap(), vec![7u8; 32]);
        assert_eq!(
            parse_secret(b64.trim_end_matches('=')).unwrap(),
            vec![7u8; 32]
        );
        let url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode([0xfbu8; 24]);
        assert_eq!(parse_secret(&url).unwrap(), vec![0xfb; 24]);
        assert!(
            parse_secret("c2hvcnQ=")
                .unwrap_err()
                .contains("at least 16")
        );
        assert!(parse_secret("abcd").unwrap_err().contains("at least 16"));
        assert!(parse_secret("not base64 !!").is_err());
        assert!(parse_secret("").is_err());
        // Same secret, same signer; a hex and a base64 spelling of it are the same key.
        let a = TicketSigner::from_config(Some(hex)).unwrap();
        let b64_of_hex =
            base64::engine::general_purpose::STANDARD.encode(parse_secret(hex).unwrap());
        let b = TicketSigner::from_config(Some(&b64_of_hex)).unwrap();
        let who = Identity::Anonymous;
        let sealed = handle_of(&Tickets::new(&a, &who).statement(&sample()));
        assert!(Tickets::new(&b, &who).open_statement(&sealed).is_ok());
    }
}
