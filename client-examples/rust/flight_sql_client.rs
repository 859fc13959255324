//! Query Petrel from Rust with arrow-rs's `FlightSqlServiceClient`.
//!
//! ```text
//! cargo run -p petrel-server --example flight_sql_client -- [URI] [USER PASSWORD]
//! ```
//!
//! A standalone project needs only `arrow-flight = { version = "58", features = ["flight-sql"] }`,
//! `tonic`, `tokio` and `futures`. URI defaults to `$PETREL_URI` or `http://127.0.0.1:50051`.

use arrow::util::pretty::pretty_format_batches;
use arrow_flight::sql::CommandGetTables;
use arrow_flight::sql::client::FlightSqlServiceClient;
use futures::TryStreamExt;
use tonic::transport::Endpoint;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Connects, lists tables, runs a query and a prepared statement; returns what it printed.
pub(crate) async fn run(uri: &str, credentials: Option<(&str, &str)>) -> Result<String, BoxError> {
    let uri = uri
        .replacen("grpc://", "http://", 1)
        .replacen("grpc+tls://", "https://", 1);
    let channel = Endpoint::from_shared(uri)?.connect().await?;
    let mut client = FlightSqlServiceClient::new(channel);
    if let Some((user, password)) = credentials {
        client.handshake(user, password).await?; // keeps the bearer token for later calls
    }
    let mut out = String::new();

    // Metadata: every table of every catalog.
    let info = client
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: None,
            table_name_filter_pattern: None,
            table_types: vec![],
            include_schema: false,
        })
        .await?;
    for ep in &info.endpoint {
        let batches: Vec<_> = client
            .do_get(ep.ticket.clone().ok_or("no ticket")?)
            .await?
            .try_collect()
            .await?;
        out.push_str(&format!("{}\n", pretty_format_batches(&batches)?));
    }

    // A query: GetFlightInfo plans it, DoGet streams the batches.
    let info = client
        .execute(
            "SELECT species, wingspan_cm FROM seabirds ORDER BY wingspan_cm DESC LIMIT 3".into(),
            None,
        )
        .await?;
    for ep in &info.endpoint {
        let batches: Vec<_> = client
            .do_get(ep.ticket.clone().ok_or("no ticket")?)
            .await?
            .try_collect()
            .await?;
        out.push_str(&format!("{}\n", pretty_format_batches(&batches)?));
    }

    // A prepared statement with a bound parameter.
    let mut stmt = client
        .prepare("SELECT species FROM seabirds WHERE id = $1".into(), None)
        .await?;
    let param = arrow::array::RecordBatch::try_from_iter([(
        "0",
        std::sync::Arc::new(arrow::array::Int64Array::from(vec![2])) as arrow::array::ArrayRef,
    )])?;
    stmt.set_parameters(param)?;
    let info = stmt.execute().await?;
    for ep in &info.endpoint {
        let batches: Vec<_> = client
            .do_get(ep.ticket.clone().ok_or("no ticket")?)
            .await?
            .try_collect()
            .await?;
        out.push_str(&format!("{}\n", pretty_format_batches(&batches)?));
    }
    stmt.close().await?;
    Ok(out)
}

#[allow(dead_code)]
#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let args: Vec<String> = std::env::args().collect();
    let uri = args
        .get(1)
        .cloned()
        .or_else(|| std::env::var("PETREL_URI").ok())
        .unwrap_or_else(|| "http://127.0.0.1:50051".into());
    let credentials = match (args.get(2), args.get(3)) {
        (Some(u), Some(p)) => Some((u.as_str(), p.as_str())),
        _ => None,
    };
    print!("{}", run(&uri, credentials).await?);
    Ok(())
}
