//! Signed tickets and prepared-statement handles, against the real binary: a ticket or handle
//! whose bytes were changed (the SQL inside, a bit anywhere, a truncation) is refused and runs
//! nothing; one signed with another secret is refused, while servers sharing a configured
//! `--ticket-secret` accept each other's; a ticket or handle issued to one user is refused for
//! another, so a query id cannot be borrowed to cancel or evict someone else's query; and a
//! bounded fuzz loop over ticket and handle bytes never gets anything but a clean error.

use crate::common;

use arrow::array::{AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandPreparedStatementQuery, CommandStatementQuery, ProstMessageExt, TicketStatementQuery,
};
use arrow_flight::{
    Action, CancelFlightInfoRequest, FlightDescriptor, FlightInfo, HandshakeRequest, Ticket,
};
use bytes::Bytes;
use common::{Petrel, fetch, query, to_status};
use futures::TryStreamExt;
use petrel_server::proto::petrel::StatementTicket;
use prost::Message;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// A configured secret (hex) shared by two servers.
const SHARED_HEX: &str = "7f3c1a9e5b2d4f60718293a4b5c6d7e8f9011223344556677889aabbccddeeff";

/// The one statement ticket of `info`.
fn ticket_of(info: &FlightInfo) -> Ticket {
    info.endpoint[0].ticket.clone().expect("a ticket")
}

/// The `statement_handle` inside a Flight SQL statement ticket.
fn statement_handle(ticket: &Ticket) -> Bytes {
    Any::decode(ticket.ticket.clone())
        .unwrap()
        .unpack::<TicketStatementQuery>()
        .unwrap()
        .expect("a statement ticket")
        .statement_handle
}

/// A statement ticket around `handle`.
fn with_handle(handle: impl Into<Bytes>) -> Ticket {
    let t = TicketStatementQuery {
        statement_handle: handle.into(),
    };
    Ticket {
        ticket: t.as_any().encode_to_vec().into(),
    }
}

/// The `StatementTicket` inside a statement handle, wherever it starts (the handle may be
/// wrapped in a signature envelope, or be the bare message on an old server).
fn body_of(handle: &[u8], sql: &str) -> StatementTicket {
    (0..handle.len())
        .filter_map(|at| StatementTicket::decode(&handle[at..]).ok())
        .find(|t| t.sql == sql && !t.query_id.is_empty())
        .expect("the ticket's body")
}

/// `bytes` with the first occurrence of `from` replaced by `to` (same length).
fn replace(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len());
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .expect("the text is in the bytes");
    let mut out = bytes.to_vec();
    out[at..at + to.len()].copy_from_slice(to.as_bytes());
    out
}

async fn do_get(
    client: &mut FlightSqlServiceClient<Channel>,
    ticket: Ticket,
) -> Result<Vec<RecordBatch>, Status> {
    let stream = client.do_get(ticket).await.map_err(to_status)?;
    stream.try_collect().await.map_err(to_status)
}

fn first_string(batches: &[RecordBatch]) -> String {
    batches[0].column(0).as_string::<i32>().value(0).to_string()
}

fn first_i64(batches: &[RecordBatch]) -> i64 {
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

/// A raw request carrying `token` as its bearer credentials (None: none).
fn authed<T>(message: T, token: Option<&str>) -> Request<T> {
    let mut r = Request::new(message);
    if let Some(t) = token {
        r.metadata_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    r
}

async fn create_prepared(
    raw: &mut FlightServiceClient<Channel>,
    sql: &str,
    token: Option<&str>,
) -> Bytes {
    let create = ActionCreatePreparedStatementRequest {
        query: sql.into(),
        transaction_id: None,
    };
    let action = Action {
        r#type: "CreatePreparedStatement".into(),
        body: create.as_any().encode_to_vec().into(),
    };
    let mut resp = raw
        .do_action(authed(action, token))
        .await
        .unwrap()
        .into_inner();
    let body = resp.message().await.unwrap().unwrap().body;
    let created: ActionCreatePreparedStatementResult =
        Any::decode(body).unwrap().unpack().unwrap().unwrap();
    created.prepared_statement_handle
}

async fn prepared_info(
    raw: &mut FlightServiceClient<Channel>,
    handle: impl Into<Bytes>,
    token: Option<&str>,
) -> Result<FlightInfo, Status> {
    let cmd = CommandPreparedStatementQuery {
        prepared_statement_handle: handle.into(),
    };
    raw.get_flight_info(authed(
        FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec()),
        token,
    ))
    .await
    .map(|r| r.into_inner())
}

async fn statement_info(
    raw: &mut FlightServiceClient<Channel>,
    sql: &str,
    token: Option<&str>,
) -> FlightInfo {
    let cmd = CommandStatementQuery {
        query: sql.into(),
        transaction_id: None,
    };
    raw.get_flight_info(authed(
        FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec()),
        token,
    ))
    .await
    .unwrap()
    .into_inner()
}

async fn raw_do_get(
    raw: &mut FlightServiceClient<Channel>,
    ticket: Ticket,
    token: Option<&str>,
) -> Result<usize, Status> {
    let mut stream = raw.do_get(authed(ticket, token)).await?.into_inner();
    let mut messages = 0;
    while stream.message().await?.is_some() {
        messages += 1;
    }
    Ok(messages)
}

async fn cancel(
    raw: &mut FlightServiceClient<Channel>,
    info: FlightInfo,
    token: Option<&str>,
) -> Result<(), Status> {
    let req = CancelFlightInfoRequest { info: Some(info) };
    let action = Action {
        r#type: "CancelFlightInfo".into(),
        body: req.encode_to_vec().into(),
    };
    raw.do_action(authed(action, token)).await.map(|_| ())
}

async fn handshake(raw: &mut FlightServiceClient<Channel>, user: &str, password: &str) -> String {
    use base64::Engine;
    let mut req = Request::new(futures::stream::iter([HandshakeRequest::default()]));
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    req.metadata_mut()
        .insert("authorization", format!("Basic {basic}").parse().unwrap());
    let resp = raw.handshake(req).await.unwrap();
    let mut stream = resp.into_inner();
    let payload = stream.message().await.unwrap().unwrap().payload;
    String::from_utf8(payload.to_vec()).unwrap()
}

fn assert_invalid(e: &Status, what: &str) {
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert!(
        e.message().starts_with(&format!("invalid {what}")),
        "the message says the {what} is invalid: {e}"
    );
    assert!(
        e.message().contains("another server"),
        "the message names the cause: {e}"
    );
    assert!(
        !e.message().contains("petrel-") && !e.message().contains("SELECT"),
        "no SQL in the message: {e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tampered_ticket_or_handle_is_refused_and_runs_nothing() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    let info = client
        .execute("SELECT 'petrel-original' AS s".into(), None)
        .await
        .unwrap();
    let genuine = ticket_of(&info);

    // The SQL bytes inside the ticket, replaced.
    let tampered = Ticket {
        ticket: replace(&genuine.ticket, "petrel-original", "petrel-replaced").into(),
    };
    let e = do_get(&mut client, tampered).await.unwrap_err();
    assert_invalid(&e, "ticket");
    // A change to the SQL length (the protobuf re-encoded around it) is refused too.
    let mut body = body_of(&statement_handle(&genuine), "SELECT 'petrel-original' AS s");
    body.sql = "SELECT 'petrel-longer-replacement' AS s".into();
    let handle = statement_handle(&genuine);
    let prefix_len = handle.len() - body_of(&handle, "SELECT 'petrel-original' AS s").encoded_len();
    let mut rebuilt = handle[..prefix_len].to_vec();
    rebuilt.extend(body.encode_to_vec());
    let e = do_get(&mut client, with_handle(rebuilt)).await.unwrap_err();
    assert_invalid(&e, "ticket");
    // An unsigned ticket, as a client could write one.
    let e = do_get(&mut client, with_handle(body.encode_to_vec()))
        .await
        .unwrap_err();
    assert_invalid(&e, "ticket");

    // The genuine ticket still runs what it was issued for.
    let b = do_get(&mut client, genuine).await.unwrap();
    assert_eq!(first_string(&b), "petrel-original");

    // A prepared-statement handle with its SQL replaced.
    let mut raw = FlightServiceClient::new(server.channel().await);
    let handle = create_prepared(&mut raw, "SELECT 'petrel-prepared' AS s", None).await;
    let tampered = replace(&handle, "petrel-prepared", "petrel-replaced");
    let e = prepared_info(&mut raw, tampered, None).await.unwrap_err();
    assert_invalid(&e, "prepared statement handle");
    let info = prepared_info(&mut raw, handle, None).await.unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(first_string(&b), "petrel-prepared");

    // Nothing ran the replaced SQL: no log line names it.
    let log = server.log();
    assert!(!log.contains("petrel-replaced"), "{log}");
    assert!(!log.contains("petrel-longer-replacement"), "{log}");
    assert!(!log.contains("panicked"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_secret_is_accepted_and_another_secret_refused() {
    use base64::Engine;
    let a = Petrel::start(&["--ticket-secret", SHARED_HEX]);
    // The same secret as base64 is the same key.
    let shared_b64 = base64::engine::general_purpose::STANDARD.encode(
        (0..SHARED_HEX.len() / 2)
            .map(|i| u8::from_str_radix(&SHARED_HEX[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<u8>>(),
    );
    let b = Petrel::start(&["--ticket-secret", &shared_b64]);
    let other = Petrel::start(&[
        "--ticket-secret",
        "00000000000000000000000000000000000000000000000000000000000000aa",
    ]);
    let unconfigured = Petrel::start(&[]);

    let mut on_a = a.client().await;
    let info = on_a
        .execute("SELECT 'petrel-shared' AS s".into(), None)
        .await
        .unwrap();
    // Another server with the same secret runs it.
    let b_rows = do_get(&mut b.client().await, ticket_of(&info))
        .await
        .unwrap();
    assert_eq!(first_string(&b_rows), "petrel-shared");
    // Servers with another secret, or a random one, refuse it.
    for server in [&other, &unconfigured] {
        let e = do_get(&mut server.client().await, ticket_of(&info))
            .await
            .unwrap_err();
        assert_invalid(&e, "ticket");
    }
    // And the other way round: a ticket of the unconfigured server is refused by A.
    let info_u = unconfigured
        .client()
        .await
        .execute("SELECT 1".into(), None)
        .await
        .unwrap();
    let e = do_get(&mut on_a, ticket_of(&info_u)).await.unwrap_err();
    assert_invalid(&e, "ticket");

    // Prepared-statement handles travel the same way.
    let mut raw_a = FlightServiceClient::new(a.channel().await);
    let handle = create_prepared(&mut raw_a, "SELECT 'petrel-handle' AS s", None).await;
    let mut raw_b = FlightServiceClient::new(b.channel().await);
    let info = prepared_info(&mut raw_b, handle.clone(), None)
        .await
        .unwrap();
    let rows_b = fetch(&mut b.client().await, &info).await.unwrap();
    assert_eq!(first_string(&rows_b), "petrel-handle");
    let mut raw_other = FlightServiceClient::new(other.channel().await);
    let e = prepared_info(&mut raw_other, handle, None)
        .await
        .unwrap_err();
    assert_invalid(&e, "prepared statement handle");
}

#[test]
fn a_malformed_ticket_secret_stops_the_server() {
    let dir = tempfile::tempdir().unwrap();
    for (secret, expected) in [
        ("c2hvcnQ", "at least 16"),
        ("***not base64***", "hex nor base64"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_petrel"))
            .args(["serve", "--bind", "127.0.0.1:0", "--ticket-secret", secret])
            .env_remove("PETREL_TICKET_SECRET")
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{err}");
        assert!(!err.contains(secret), "the secret is not echoed: {err}");
    }
}

/// Alice and Bob on one server.
fn two_users() -> Petrel {
    let alice = petrel_server::auth::hash_password("alice-pw").unwrap();
    let bob = petrel_server::auth::hash_password("bob-pw").unwrap();
    Petrel::start(&[
        "--user",
        &format!("alice:{alice}"),
        "--user",
        &format!("bob:{bob}"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tickets_and_handles_issued_to_one_user_are_refused_for_another() {
    let server = two_users();
    let mut raw = FlightServiceClient::new(server.channel().await);
    let alice = handshake(&mut raw, "alice", "alice-pw").await;
    let bob = handshake(&mut raw, "bob", "bob-pw").await;

    let info = statement_info(&mut raw, "SELECT 'petrel-alice' AS s", Some(&alice)).await;
    let e = raw_do_get(&mut raw, ticket_of(&info), Some(&bob))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    assert_eq!(e.message(), "this ticket was issued to another user");
    assert!(
        raw_do_get(&mut raw, ticket_of(&info), Some(&alice))
            .await
            .unwrap()
            > 0
    );

    let handle = create_prepared(&mut raw, "SELECT 'petrel-alice' AS s", Some(&alice)).await;
    let e = prepared_info(&mut raw, handle.clone(), Some(&bob))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    assert_eq!(
        e.message(),
        "this prepared statement handle was issued to another user"
    );
    // A prepared-statement DoGet with Alice's handle as the ticket, by Bob.
    let cmd = CommandPreparedStatementQuery {
        prepared_statement_handle: handle.clone(),
    };
    let as_ticket = Ticket {
        ticket: cmd.as_any().encode_to_vec().into(),
    };
    let e = raw_do_get(&mut raw, as_ticket.clone(), Some(&bob))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    assert!(raw_do_get(&mut raw, as_ticket, Some(&alice)).await.unwrap() > 0);
    assert!(prepared_info(&mut raw, handle, Some(&alice)).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_query_id_cannot_cancel_or_evict_another_users_query() {
    let server = two_users();
    let mut raw = FlightServiceClient::new(server.channel().await);
    let alice = handshake(&mut raw, "alice", "alice-pw").await;
    let bob = handshake(&mut raw, "bob", "bob-pw").await;
    let sql = "SELECT count(*) AS n FROM seabirds";
    let before = {
        let info = statement_info(&mut raw, sql, Some(&alice)).await;
        let mut c = FlightSqlServiceClient::new(server.channel().await);
        c.set_token(alice.clone());
        first_i64(&fetch(&mut c, &info).await.unwrap())
    };

    // Alice plans her query: the server keeps its plan for her DoGet.
    let info = statement_info(&mut raw, sql, Some(&alice)).await;
    let handle = statement_handle(&ticket_of(&info));
    let alices_id = body_of(&handle, sql).query_id;

    // Bob presents Alice's own ticket to cancel it: refused.
    let e = cancel(&mut raw, info.clone(), Some(&bob))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::PermissionDenied, "{e}");
    // Bob forges tickets around Alice's query id: unsigned, or with Alice's envelope.
    let forged = StatementTicket {
        version: 1,
        sql: "SELECT 42 AS n".into(),
        session: body_of(&handle, sql).session,
        parameters: Bytes::new(),
        query_id: alices_id.clone(),
    };
    let prefix_len = handle.len() - body_of(&handle, sql).encoded_len();
    let mut in_envelope = handle[..prefix_len].to_vec();
    in_envelope.extend(forged.encode_to_vec());
    for forged_handle in [forged.encode_to_vec(), in_envelope] {
        let forged_ticket = with_handle(forged_handle);
        let e = raw_do_get(&mut raw, forged_ticket.clone(), Some(&bob))
            .await
            .unwrap_err();
        assert_invalid(&e, "ticket");
        let mut forged_info = info.clone();
        forged_info.endpoint[0].ticket = Some(forged_ticket);
        let e = cancel(&mut raw, forged_info, Some(&bob)).await.unwrap_err();
        assert_invalid(&e, "ticket");
    }

    // The table changes after Alice planned: her kept plan still reads the version her schema
    // came from, which shows the plan was neither evicted nor replaced by Bob's attempts.
    let mut writer = FlightSqlServiceClient::new(server.channel().await);
    writer.set_token(alice.clone());
    query(
        &mut writer,
        "INSERT INTO seabirds SELECT * FROM seabirds LIMIT 1",
    )
    .await
    .unwrap();
    let mut c = FlightSqlServiceClient::new(server.channel().await);
    c.set_token(alice.clone());
    let b = fetch(&mut c, &info).await.expect("not cancelled");
    assert_eq!(first_i64(&b), before, "Alice's kept plan served her DoGet");
    // A fresh plan sees the new row.
    let info = statement_info(&mut raw, sql, Some(&alice)).await;
    assert_eq!(first_i64(&fetch(&mut c, &info).await.unwrap()), before + 1);
    // Alice can cancel her own.
    assert!(cancel(&mut raw, info, Some(&alice)).await.is_ok());
}

/// splitmix64: a fixed-seed generator, so a failing case can be replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// `genuine` randomly altered: replaced, truncated, bit-flipped or extended.
    fn mutate(&mut self, genuine: &[u8]) -> Vec<u8> {
        let mut bytes = genuine.to_vec();
        match self.below(4) {
            0 => {
                let n = self.below(300);
                bytes = (0..n).map(|_| self.next() as u8).collect();
                if n > 0 && self.below(2) == 0 {
                    // Looks like an envelope's start.
                    bytes[0] = genuine[0];
                }
            }
            1 => bytes.truncate(self.below(genuine.len())),
            2 => {
                let first = self.below(bytes.len());
                bytes[first] ^= 1 << self.below(8);
                for _ in 0..self.below(4) {
                    let i = self.below(bytes.len());
                    if i != first {
                        bytes[i] ^= 1 << self.below(8);
                    }
                }
            }
            _ => {
                let extra = 1 + self.below(16);
                bytes.extend((0..extra).map(|_| self.next() as u8));
            }
        }
        bytes
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzed_tickets_and_handles_get_clean_errors() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    let mut raw = FlightServiceClient::new(server.channel().await);
    let info = client
        .execute("SELECT 'petrel-fuzz' AS s".into(), None)
        .await
        .unwrap();
    let genuine_ticket = ticket_of(&info);
    let genuine_handle = statement_handle(&genuine_ticket);
    let prepared = create_prepared(&mut raw, "SELECT 'petrel-fuzz' AS s", None).await;
    let mut rng = Rng(0x05EE_D0F7_E7E1);

    // Statement handles inside well-formed Flight SQL tickets.
    for case in 0..2000 {
        let bytes = rng.mutate(&genuine_handle);
        let e = do_get(&mut client, with_handle(bytes.clone()))
            .await
            .expect_err("altered handles are refused");
        assert_eq!(
            e.code(),
            Code::InvalidArgument,
            "case {case} ({bytes:?}): {e}"
        );
    }
    // Prepared-statement handles.
    for case in 0..1000 {
        let bytes = rng.mutate(&prepared);
        let e = prepared_info(&mut raw, bytes.clone(), None)
            .await
            .expect_err("altered handles are refused");
        assert_eq!(
            e.code(),
            Code::InvalidArgument,
            "case {case} ({bytes:?}): {e}"
        );
    }
    // Whole Flight tickets: whatever they decode to, never an internal error.
    for case in 0..1000 {
        let bytes = rng.mutate(&genuine_ticket.ticket);
        if let Err(e) = do_get(
            &mut client,
            Ticket {
                ticket: bytes.clone().into(),
            },
        )
        .await
        {
            assert!(
                !matches!(e.code(), Code::Internal | Code::Unknown | Code::Unavailable),
                "case {case} ({bytes:?}): {e}"
            );
        }
    }

    // Still serving, and the genuine ticket still works.
    let b = do_get(&mut client, genuine_ticket).await.unwrap();
    assert_eq!(first_string(&b), "petrel-fuzz");
    let log = server.log();
    assert!(!log.contains("panicked"), "{log}");
}
