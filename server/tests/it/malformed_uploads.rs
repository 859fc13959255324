//! Corrupt Arrow data in a DoPut — a parameter bind and a bulk ingest whose record batch body
//! is cut short, or whose IPC header is garbage — gets INVALID_ARGUMENT naming the problem,
//! and the same connection keeps being served. (arrow-ipc panics on a body shorter than its
//! buffers claim; before `untrusted_ipc` that panic cost the client its connection.)

use crate::common;

use std::collections::HashMap;

use arrow::array::{Int64Array, RecordBatch};
use arrow::datatypes::{DataType, Field, Schema};
use arrow_flight::encode::FlightDataEncoderBuilder;
use arrow_flight::sql::{
    ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
    CommandPreparedStatementQuery, CommandStatementIngest, ProstMessageExt, TableDefinitionOptions,
    TableExistsOption, TableNotExistOption,
};
use arrow_flight::{Action, FlightData, FlightDescriptor};
use common::{Petrel, query, rows, to_status};
use futures::{StreamExt, TryStreamExt};
use prost::Message;
use std::sync::Arc;
use tonic::Code;

/// The FlightData of one batch of `n` Int64 rows: the schema message, then the batch.
async fn flight_data(n: i64) -> Vec<FlightData> {
    let schema = Arc::new(Schema::new(vec![Field::new("v", DataType::Int64, false)]));
    let batch = RecordBatch::try_new(schema, vec![Arc::new(Int64Array::from_iter_values(0..n))])
        .expect("batch");
    FlightDataEncoderBuilder::new()
        .build(futures::stream::iter([Ok(batch)]))
        .try_collect()
        .await
        .expect("encode")
}

/// The two ways of breaking a batch message.
fn corruptions(data: &[FlightData]) -> Vec<(&'static str, Vec<FlightData>)> {
    let mut short_body = data.to_vec();
    let last = short_body.len() - 1;
    short_body[last].data_body = short_body[last].data_body.slice(0..3);
    let mut bad_header = data.to_vec();
    bad_header[last].data_header = vec![0xAB; bad_header[last].data_header.len()].into();
    vec![("short body", short_body), ("garbage header", bad_header)]
}

async fn put(
    client: &mut arrow_flight::sql::client::FlightSqlServiceClient<tonic::transport::Channel>,
    descriptor: FlightDescriptor,
    mut data: Vec<FlightData>,
) -> Result<(), tonic::Status> {
    data[0].flight_descriptor = Some(descriptor);
    let mut results = client
        .do_put(futures::stream::iter(data))
        .await
        .map_err(to_status)?;
    while let Some(r) = results.next().await {
        r?;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_uploads_are_refused_and_the_connection_survives() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    let valid = flight_data(1000).await;

    // A parameter bind.
    let request = ActionCreatePreparedStatementRequest {
        query: "SELECT CAST(? AS BIGINT) + 1".into(),
        transaction_id: None,
    };
    let mut created = client
        .do_action(Action::new(
            "CreatePreparedStatement",
            request.as_any().encode_to_vec(),
        ))
        .await
        .expect("create prepared statement");
    let body = created
        .message()
        .await
        .expect("result")
        .expect("one result")
        .body;
    let result: ActionCreatePreparedStatementResult = Any::decode(body)
        .expect("any")
        .unpack()
        .expect("unpack")
        .expect("a create result");
    let bind = FlightDescriptor::new_cmd(
        CommandPreparedStatementQuery {
            prepared_statement_handle: result.prepared_statement_handle,
        }
        .as_any()
        .encode_to_vec(),
    );
    put(&mut client, bind.clone(), valid.clone())
        .await
        .expect("a valid bind");

    // A bulk ingest into a new table.
    let ingest = |table: &str| {
        FlightDescriptor::new_cmd(
            CommandStatementIngest {
                table_definition_options: Some(TableDefinitionOptions {
                    if_not_exist: TableNotExistOption::Create as i32,
                    if_exists: TableExistsOption::Fail as i32,
                }),
                table: table.into(),
                schema: Some("demo".into()),
                catalog: Some("petrel".into()),
                temporary: false,
                transaction_id: None,
                options: HashMap::new(),
            }
            .as_any()
            .encode_to_vec(),
        )
    };

    for (what, data) in corruptions(&valid) {
        for (path, descriptor) in [("bind", bind.clone()), ("ingest", ingest("broken"))] {
            let status = put(&mut client, descriptor, data.clone())
                .await
                .expect_err(&format!("{path} with a {what} must fail"));
            assert_eq!(
                status.code(),
                Code::InvalidArgument,
                "{path}, {what}: {status}"
            );
            let message = status.message().to_lowercase();
            assert!(
                message.contains("malformed") || message.contains("decode"),
                "{path}, {what}: the error says the data is malformed: {status}"
            );
            // The same connection keeps working.
            let batches = query(&mut client, "SELECT count(*) FROM petrel.demo.seabirds")
                .await
                .unwrap_or_else(|e| panic!("after a {what} {path}: {e}"));
            assert_eq!(rows(&batches), 1);
        }
    }
    // Nothing was created by the refused ingests.
    let err = query(&mut client, "SELECT * FROM petrel.demo.broken")
        .await
        .expect_err("no table");
    assert_eq!(err.code(), Code::NotFound, "{err}");
}
