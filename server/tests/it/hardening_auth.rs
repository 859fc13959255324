//! Password hashing is no longer an unauthenticated CPU burner, against the real binary: a
//! flood of 1,000 bad-password calls does not slow a signed-in client's queries by more than
//! 2×; a peer over its failure budget is refused without its password being checked at all;
//! and the session table is bounded and keeps each session to its user.

use crate::common;

use std::time::{Duration, Instant};

use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::client::FlightSqlServiceClient;
use arrow_flight::sql::{CommandStatementQuery, ProstMessageExt};
use arrow_flight::{Action, FlightDescriptor, HandshakeRequest};
use base64::Engine;
use common::{Petrel, query, rows};
use petrel_server::proto::flight_session::{
    GetSessionOptionsResult, SessionOptionValue, SetSessionOptionsRequest, session_option_value,
};
use prost::Message;
use tonic::transport::Channel;
use tonic::{Code, Request, Status};

/// The failure budget of one peer (`auth::FAILURE_BURST`) and its refill interval.
const BURST: usize = petrel_server::auth::FAILURE_BURST as usize;
const REFILL: Duration = petrel_server::auth::FAILURE_REFILL;

fn basic(user: &str, password: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {b}")
}

fn with_auth<T>(message: T, authorization: &str) -> Request<T> {
    let mut r = Request::new(message);
    r.metadata_mut()
        .insert("authorization", authorization.parse().unwrap());
    r
}

/// GetFlightInfo for `SELECT 1` with `authorization`.
async fn get_info(
    raw: &mut FlightServiceClient<Channel>,
    authorization: &str,
) -> Result<(), Status> {
    let cmd = CommandStatementQuery {
        query: "SELECT 1".into(),
        transaction_id: None,
    };
    let descriptor = FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec());
    raw.get_flight_info(with_auth(descriptor, authorization))
        .await
        .map(|_| ())
}

/// A Handshake with Basic credentials; the bearer token on success.
async fn handshake(
    raw: &mut FlightServiceClient<Channel>,
    user: &str,
    password: &str,
) -> Result<String, Status> {
    let req = with_auth(
        futures::stream::iter([HandshakeRequest::default()]),
        &basic(user, password),
    );
    let mut stream = raw.handshake(req).await?.into_inner();
    let payload = stream.message().await?.expect("a response").payload;
    Ok(String::from_utf8(payload.to_vec()).unwrap())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// One signed-in query (GetFlightInfo + DoGet) and how long it took.
async fn timed_query(client: &mut FlightSqlServiceClient<Channel>) -> Duration {
    let started = Instant::now();
    let b = query(
        client,
        "SELECT species, count(*) FROM seabirds GROUP BY species ORDER BY 2 DESC",
    )
    .await
    .unwrap();
    assert!(rows(&b) > 0);
    started.elapsed()
}

/// Alice (`correct horse`) and Bob (`battery staple`).
fn alice_server() -> Petrel {
    let alice = petrel_server::auth::hash_password("correct horse").unwrap();
    let bob = petrel_server::auth::hash_password("battery staple").unwrap();
    Petrel::start(&[
        "--user",
        &format!("alice:{alice}"),
        "--user",
        &format!("bob:{bob}"),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_password_flood_does_not_slow_signed_in_clients() {
    let server = alice_server();
    let mut good = server.client().await;
    good.handshake("alice", "correct horse").await.unwrap();
    let token = good.token().cloned().expect("a token");
    // Warm up, then the baseline.
    for _ in 0..3 {
        timed_query(&mut good).await;
    }
    let mut baseline = Vec::new();
    for _ in 0..30 {
        baseline.push(timed_query(&mut good).await);
    }
    let baseline = median(baseline);

    // 1,000 bad-password calls from 50 concurrent callers on 10 connections, some as
    // Handshakes, most as GetFlightInfo with Basic credentials.
    let mut channels = Vec::new();
    for _ in 0..10 {
        channels.push(server.channel().await);
    }
    let attack_started = Instant::now();
    let mut attackers = tokio::task::JoinSet::new();
    for task in 0..50usize {
        let mut raw = FlightServiceClient::new(channels[task % channels.len()].clone());
        attackers.spawn(async move {
            let mut codes = Vec::new();
            for call in 0..20usize {
                let password = format!("guess-{task}-{call}");
                let result = if call % 5 == 0 {
                    handshake(&mut raw, "alice", &password).await.map(|_| ())
                } else {
                    get_info(&mut raw, &basic("alice", &password)).await
                };
                codes.push(result.expect_err("a wrong password is refused").code());
            }
            codes
        });
    }
    // The signed-in client keeps querying while the flood runs (and at least 30 times).
    let mut counts = std::collections::HashMap::new();
    let mut during = Vec::new();
    while !attackers.is_empty() || during.len() < 30 {
        during.push(timed_query(&mut good).await);
        while let Some(done) = attackers.try_join_next() {
            let codes = done.unwrap();
            for code in codes {
                assert!(
                    matches!(code, Code::Unauthenticated | Code::ResourceExhausted),
                    "{code:?}"
                );
                *counts.entry(code).or_insert(0usize) += 1;
            }
        }
    }
    let attack_time = attack_started.elapsed();
    let during_median = median(during);
    let unauthenticated = counts.get(&Code::Unauthenticated).copied().unwrap_or(0);
    let exhausted = counts.get(&Code::ResourceExhausted).copied().unwrap_or(0);
    assert_eq!(unauthenticated + exhausted, 1000);
    // Only the peer's budget (plus what refilled meanwhile) was ever checked.
    let refilled = (attack_time.as_secs_f64() / REFILL.as_secs_f64()).ceil() as usize;
    assert!(
        unauthenticated <= BURST + refilled,
        "{unauthenticated} passwords checked in {attack_time:?}"
    );
    assert!(
        attack_time < Duration::from_secs(60),
        "the flood was refused quickly: {attack_time:?}"
    );
    eprintln!(
        "baseline {baseline:?}, during the flood {during_median:?}; {unauthenticated} checked, \
         {exhausted} refused in {attack_time:?}"
    );
    // Generous floor for very fast baselines, so scheduling noise does not fail the test.
    let allowed = 2 * baseline.max(Duration::from_millis(10));
    assert!(
        during_median <= allowed,
        "signed-in queries slowed from {baseline:?} to {during_median:?} (allowed {allowed:?}) \
         during the flood ({unauthenticated} checked, {exhausted} refused in {attack_time:?})"
    );
    // The token still works, and neither it nor a password reached the log.
    assert!(
        get_info(
            &mut FlightServiceClient::new(server.channel().await),
            &format!("Bearer {token}")
        )
        .await
        .is_ok()
    );
    let log = server.log();
    assert!(!log.contains(&token), "{log}");
    assert!(
        !log.contains("guess-") && !log.contains("correct horse"),
        "{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_over_its_failure_budget_is_refused_without_a_password_check() {
    let server = alice_server();
    let mut raw = FlightServiceClient::new(server.channel().await);
    // A token from before the guessing.
    let token = handshake(&mut raw, "alice", "correct horse").await.unwrap();

    let started = Instant::now();
    let mut checked = 0;
    let mut first_refusal = None;
    for i in 0..BURST + 5 {
        let e = handshake(&mut raw, "alice", &format!("wrong-{i}"))
            .await
            .unwrap_err();
        match e.code() {
            Code::Unauthenticated => {
                assert_eq!(e.message(), "invalid user name or password", "{e}");
                checked += 1;
            }
            Code::ResourceExhausted => {
                assert!(
                    e.message()
                        .starts_with("too many failed sign-in attempts from this address"),
                    "{e}"
                );
                first_refusal.get_or_insert(i);
                break;
            }
            other => panic!("unexpected {other:?}: {e}"),
        }
    }
    let refilled = (started.elapsed().as_secs_f64() / REFILL.as_secs_f64()).ceil() as usize;
    assert!(first_refusal.is_some(), "the peer was throttled");
    assert!(
        (BURST..=BURST + refilled).contains(&checked),
        "{checked} checked before the first refusal"
    );
    // Over the budget even a right password is refused: it is not even checked (Bob's has
    // not been verified yet)...
    let e = handshake(&mut raw, "bob", "battery staple")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    let e = get_info(&mut raw, &basic("bob", "battery staple"))
        .await
        .unwrap_err();
    assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    // ...while Alice's, verified a moment ago, is remembered and needs no check.
    get_info(&mut raw, &basic("alice", "correct horse"))
        .await
        .unwrap();
    // And refusals cost no hashing: 200 of them in well under the time of one Argon2 check
    // per call.
    let refusals = Instant::now();
    for i in 0..200 {
        let e = get_info(&mut raw, &basic("alice", &format!("more-{i}")))
            .await
            .unwrap_err();
        assert_eq!(e.code(), Code::ResourceExhausted, "{e}");
    }
    let per_refusal = refusals.elapsed() / 200;
    assert!(
        per_refusal < Duration::from_millis(20),
        "{per_refusal:?} per refusal"
    );
    // The bearer token needs no password check and still works from the same address.
    get_info(&mut raw, &format!("Bearer {token}"))
        .await
        .unwrap();
}

fn set_schema_request(schema: &str) -> Action {
    let set = SetSessionOptionsRequest {
        session_options: [(
            "schema".to_string(),
            SessionOptionValue {
                option_value: Some(session_option_value::OptionValue::StringValue(
                    schema.into(),
                )),
            },
        )]
        .into(),
    };
    Action {
        r#type: "SetSessionOptions".into(),
        body: set.encode_to_vec().into(),
    }
}

/// Sets the session's schema; the session cookie the server set.
async fn set_schema(raw: &mut FlightServiceClient<Channel>, token: &str, schema: &str) -> String {
    let resp = raw
        .do_action(with_auth(
            set_schema_request(schema),
            &format!("Bearer {token}"),
        ))
        .await
        .unwrap();
    resp.metadata()
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .to_string()
}

/// The schema of the session `cookie` names, as `token`'s user sees it.
async fn schema_of(raw: &mut FlightServiceClient<Channel>, token: &str, cookie: &str) -> String {
    let mut req = with_auth(
        Action {
            r#type: "GetSessionOptions".into(),
            body: Default::default(),
        },
        &format!("Bearer {token}"),
    );
    req.metadata_mut().insert("cookie", cookie.parse().unwrap());
    let mut stream = raw.do_action(req).await.unwrap().into_inner();
    let body = stream.message().await.unwrap().unwrap().body;
    let got = GetSessionOptionsResult::decode(body).unwrap();
    match &got.session_options["schema"].option_value {
        Some(session_option_value::OptionValue::StringValue(s)) => s.clone(),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bounded_and_belong_to_their_user() {
    let alice = petrel_server::auth::hash_password("a").unwrap();
    let bob = petrel_server::auth::hash_password("b").unwrap();
    let server = Petrel::start(&[
        "--user",
        &format!("alice:{alice}"),
        "--user",
        &format!("bob:{bob}"),
        "--max-sessions",
        "3",
    ]);
    let mut raw = FlightServiceClient::new(server.channel().await);
    let alice = handshake(&mut raw, "alice", "a").await.unwrap();
    let bob = handshake(&mut raw, "bob", "b").await.unwrap();

    let first = set_schema(&mut raw, &alice, "information_schema").await;
    assert_eq!(
        schema_of(&mut raw, &alice, &first).await,
        "information_schema"
    );
    // Bob presenting Alice's cookie sees the server's defaults, not her session.
    assert_eq!(schema_of(&mut raw, &bob, &first).await, "demo");

    // Each new token is a new session; with --max-sessions 3 the least recently used goes.
    let mut tokens = Vec::new();
    for i in 0..5 {
        let t = handshake(&mut raw, "alice", "a").await.unwrap();
        set_schema(&mut raw, &t, &format!("s{i}")).await;
        tokens.push(t);
    }
    assert_eq!(schema_of(&mut raw, &alice, &first).await, "demo", "evicted");
    // The most recent sessions are still there, found by their token alone.
    for (i, t) in tokens.iter().enumerate().skip(2) {
        let mut req = with_auth(
            Action {
                r#type: "GetSessionOptions".into(),
                body: Default::default(),
            },
            &format!("Bearer {t}"),
        );
        req.metadata_mut().remove("cookie");
        let mut stream = raw.do_action(req).await.unwrap().into_inner();
        let body = stream.message().await.unwrap().unwrap().body;
        let got = GetSessionOptionsResult::decode(body).unwrap();
        assert_eq!(
            got.session_options["schema"].option_value,
            Some(session_option_value::OptionValue::StringValue(format!(
                "s{i}"
            )))
        );
    }
}

/// Session option values are names: one over 1 KiB, one with a NUL, or a catalog the server
/// does not serve is refused (`InvalidValue`) and the session keeps what it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_option_values_must_be_names_the_server_knows() {
    let alice = petrel_server::auth::hash_password("a").unwrap();
    let server = Petrel::start(&["--user", &format!("alice:{alice}")]);
    let mut raw = FlightServiceClient::new(server.channel().await);
    let token = handshake(&mut raw, "alice", "a").await.unwrap();
    let cookie = set_schema(&mut raw, &token, "information_schema").await;
    let set = |name: &str, value: String| {
        let mut req = with_auth(
            Action {
                r#type: "SetSessionOptions".into(),
                body: SetSessionOptionsRequest {
                    session_options: [(
                        name.to_string(),
                        SessionOptionValue {
                            option_value: Some(session_option_value::OptionValue::StringValue(
                                value,
                            )),
                        },
                    )]
                    .into(),
                }
                .encode_to_vec()
                .into(),
            },
            &format!("Bearer {token}"),
        );
        req.metadata_mut().insert("cookie", cookie.parse().unwrap());
        req
    };
    for (name, value) in [
        ("schema", "s".repeat(1025)),
        ("schema", "a\0b".to_string()),
        ("catalog", "nope".to_string()),
    ] {
        let mut stream = raw.do_action(set(name, value)).await.unwrap().into_inner();
        let body = stream.message().await.unwrap().unwrap().body;
        let result =
            petrel_server::proto::flight_session::SetSessionOptionsResult::decode(body).unwrap();
        assert_eq!(
            result.errors[name].value,
            petrel_server::proto::flight_session::set_session_options_result::ErrorValue::InvalidValue
                as i32,
            "{name}"
        );
    }
    assert_eq!(
        schema_of(&mut raw, &token, &cookie).await,
        "information_schema"
    );
    // A known catalog and a name of 1 KiB are taken.
    let mut stream = raw
        .do_action(set("schema", "s".repeat(1024)))
        .await
        .unwrap()
        .into_inner();
    let body = stream.message().await.unwrap().unwrap().body;
    let result =
        petrel_server::proto::flight_session::SetSessionOptionsResult::decode(body).unwrap();
    assert!(result.errors.is_empty(), "{:?}", result.errors);
    assert_eq!(schema_of(&mut raw, &token, &cookie).await, "s".repeat(1024));
}
