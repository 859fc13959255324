//! Runs the Rust client example (`client-examples/rust/flight_sql_client.rs`) against the real
//! binary serving its embedded default, with and without auth.

use crate::common;

#[path = "../../../client-examples/rust/flight_sql_client.rs"]
#[allow(dead_code)]
mod example;

use common::Petrel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_flight_sql_client_example() {
    let server = Petrel::start(&[]);
    let out = example::run(&format!("grpc://{}", server.addr), None)
        .await
        .unwrap();
    assert!(out.contains("seabirds"), "{out}");
    assert!(out.contains("Wandering albatross"), "{out}");
    assert!(out.contains("Storm petrel"), "{out}");

    let hash = petrel_server::auth::hash_password("pw").unwrap();
    let user = format!("bob:{hash}");
    let secured = Petrel::start(&["--user", &user]);
    let uri = format!("grpc://{}", secured.addr);
    assert!(example::run(&uri, None).await.is_err());
    let out = example::run(&uri, Some(("bob", "pw"))).await.unwrap();
    assert!(out.contains("Storm petrel"), "{out}");
}
