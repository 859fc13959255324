//! The real `petrel` binary over the fixture corpus, driven by arrow-rs's
//! `FlightSqlServiceClient`: queries, time travel, prepared statements, metadata commands,
//! GetSchema / PollFlightInfo, session options, and bad input interleaved with good queries.

use crate::common;

use std::sync::Arc;

use arrow::array::{Array, AsArray, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use arrow_flight::flight_service_client::FlightServiceClient;
use arrow_flight::sql::{
    CommandGetDbSchemas, CommandGetPrimaryKeys, CommandGetTables, CommandGetXdbcTypeInfo,
    CommandStatementQuery, ProstMessageExt, SqlInfo,
};
use arrow_flight::{Action, FlightDescriptor, Ticket};
use common::{Petrel, corpus_warehouse, fetch, query, rows, to_status};
use prost::Message;
use tonic::Code;

fn corpus_server() -> Petrel {
    let wh = corpus_warehouse();
    Petrel::start(&["--warehouse", wh.to_str().unwrap()])
}

fn count(batches: &[RecordBatch]) -> i64 {
    batches[0].column(0).as_primitive::<Int64Type>().value(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_time_travel_and_schema() {
    let server = corpus_server();
    let mut client = server.client().await;

    // Unqualified names resolve in the default catalog/schema (iceberg.db).
    let b = query(&mut client, "SELECT count(*) FROM pyiceberg_cow")
        .await
        .unwrap();
    assert_eq!(count(&b), 2910);
    let b = query(&mut client, "SELECT count(*) FROM iceberg.db.pyiceberg_cow")
        .await
        .unwrap();
    assert_eq!(count(&b), 2910);

    // Time travel: the first snapshot had 3000 rows.
    let expected: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(corpus_warehouse().join("../expected/pyiceberg_cow.json"))
            .unwrap(),
    )
    .unwrap();
    let first = &expected["snapshots"][0];
    let sql = format!(
        "SELECT count(*) FROM pyiceberg_cow FOR VERSION AS OF {}",
        first["snapshot_id"]
    );
    let b = query(&mut client, &sql).await.unwrap();
    assert_eq!(count(&b), first["version_as_of"]["count"].as_i64().unwrap());

    // The FlightInfo schema is the DoGet schema, with real nullability.
    let info = client
        .execute(
            "SELECT id, name FROM pyiceberg_cow ORDER BY id LIMIT 5".into(),
            None,
        )
        .await
        .unwrap();
    let schema = Schema::try_from(info.clone()).unwrap();
    let batches = fetch(&mut client, &info).await.unwrap();
    assert_eq!(rows(&batches), 5);
    assert_eq!(batches[0].schema().fields(), schema.fields());
    assert_eq!(info.endpoint.len(), 1);
    assert!(info.endpoint[0].location.is_empty());

    // A large streamed result (many batches).
    let b = query(
        &mut client,
        "SELECT * FROM pyiceberg_cow CROSS JOIN generate_series(1, 20)",
    )
    .await
    .unwrap();
    assert_eq!(rows(&b), 2910 * 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_with_parameters() {
    let server = corpus_server();
    let mut client = server.client().await;

    for sql in [
        "SELECT id, name FROM pyiceberg_cow WHERE id = ? ORDER BY id",
        "SELECT id, name FROM pyiceberg_cow WHERE id = $1 ORDER BY id",
    ] {
        let mut stmt = client.prepare(sql.into(), None).await.unwrap();
        assert_eq!(stmt.dataset_schema().unwrap().fields().len(), 2);
        let params = stmt.parameter_schema().unwrap().clone();
        assert_eq!(params.fields().len(), 1);
        assert_eq!(params.field(0).data_type(), &DataType::Int64);
        // Multi-row parameters: one execution per row, results concatenated.
        let ids = Int64Array::from(vec![110, 120, 130]);
        let batch = RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, false)])),
            vec![Arc::new(ids)],
        )
        .unwrap();
        stmt.set_parameters(batch).unwrap();
        let info = stmt.execute().await.unwrap();
        let b = fetch(&mut client, &info).await.unwrap();
        let got: Vec<i64> = b
            .iter()
            .flat_map(|b| b.column(0).as_primitive::<Int64Type>().values().to_vec())
            .collect();
        assert_eq!(got, [110, 120, 130]);
        assert_eq!(got.len(), 3, "each id exists once: {got:?}");
        stmt.close().await.unwrap();
    }

    // A string bound where a bigint is expected, but castable: accepted.
    let mut stmt = client
        .prepare(
            "SELECT count(*) FROM pyiceberg_cow WHERE id < ?".into(),
            None,
        )
        .await
        .unwrap();
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("0", DataType::Utf8, false)])),
        vec![Arc::new(StringArray::from(vec!["200"]))],
    )
    .unwrap();
    stmt.set_parameters(batch).unwrap();
    let info = stmt.execute().await.unwrap();
    assert!(count(&fetch(&mut client, &info).await.unwrap()) > 0);

    // Wrong types and wrong counts are INVALID_ARGUMENT.
    let mut stmt = client
        .prepare(
            "SELECT count(*) FROM pyiceberg_cow WHERE id < ?".into(),
            None,
        )
        .await
        .unwrap();
    stmt.set_parameters(
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![Field::new("0", DataType::Utf8, false)])),
            vec![Arc::new(StringArray::from(vec!["not a number"]))],
        )
        .unwrap(),
    )
    .unwrap();
    let err = to_status(stmt.execute().await.unwrap_err());
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("$1"), "{err}");

    let mut stmt = client
        .prepare(
            "SELECT count(*) FROM pyiceberg_cow WHERE id < ?".into(),
            None,
        )
        .await
        .unwrap();
    stmt.set_parameters(
        RecordBatch::try_new(
            Arc::new(Schema::new(vec![
                Field::new("0", DataType::Int64, false),
                Field::new("1", DataType::Int64, false),
            ])),
            vec![
                Arc::new(Int64Array::from(vec![1])),
                Arc::new(Int64Array::from(vec![2])),
            ],
        )
        .unwrap(),
    )
    .unwrap();
    let err = to_status(stmt.execute().await.unwrap_err());
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");
    assert!(err.message().contains("parameter"), "{err}");

    // No parameters bound at all.
    let mut stmt = client
        .prepare(
            "SELECT count(*) FROM pyiceberg_cow WHERE id < ?".into(),
            None,
        )
        .await
        .unwrap();
    let err = to_status(stmt.execute().await.unwrap_err());
    assert_eq!(err.code(), Code::InvalidArgument, "{err}");

    // Statements that are not queries are refused at prepare time.
    let err = to_status(
        client
            .prepare("CREATE VIEW v AS SELECT 1".into(), None)
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code(), Code::PermissionDenied, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metadata_commands() {
    let server = corpus_server();
    let mut client = server.client().await;

    let info = client.get_catalogs().await.unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(b[0].column(0).as_string::<i32>().value(0), "iceberg");

    let info = client
        .get_db_schemas(CommandGetDbSchemas {
            catalog: None,
            db_schema_filter_pattern: Some("d%".into()),
        })
        .await
        .unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(b[0].column(1).as_string::<i32>().value(0), "db");

    // GetTables with no catalog returns every catalog's tables; patterns filter.
    let info = client
        .get_tables(CommandGetTables {
            catalog: None,
            db_schema_filter_pattern: None,
            table_name_filter_pattern: Some("pyiceberg%".into()),
            table_types: vec![],
            include_schema: true,
        })
        .await
        .unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(rows(&b), 1);
    let schema_bytes = b[0].column(4).as_binary::<i32>().value(0);
    let schema = arrow::ipc::convert::try_schema_from_ipc_buffer(schema_bytes).unwrap();
    let id = schema.field_with_name("id").unwrap();
    assert_eq!(id.metadata()["ARROW:FLIGHT:SQL:TYPE_NAME"], "BIGINT");
    assert_eq!(
        id.metadata()["ARROW:FLIGHT:SQL:TABLE_NAME"],
        "pyiceberg_cow"
    );

    let info = client
        .get_tables(CommandGetTables {
            catalog: Some("iceberg".into()),
            db_schema_filter_pattern: Some("db".into()),
            table_name_filter_pattern: None,
            table_types: vec!["TABLE".into()],
            include_schema: false,
        })
        .await
        .unwrap();
    assert_eq!(rows(&fetch(&mut client, &info).await.unwrap()), 8);

    let info = client.get_table_types().await.unwrap();
    let types: Vec<String> = fetch(&mut client, &info)
        .await
        .unwrap()
        .iter()
        .flat_map(|b| {
            let column = b.column(0).as_string::<i32>();
            (0..b.num_rows())
                .map(|i| column.value(i).to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(types, ["METADATA TABLE", "TABLE", "VIEW"]);

    // GetSqlInfo: the full table, and a selection.
    let info = client.get_sql_info(vec![]).await.unwrap();
    assert!(rows(&fetch(&mut client, &info).await.unwrap()) > 80);
    let info = client
        .get_sql_info(vec![
            SqlInfo::FlightSqlServerName,
            SqlInfo::FlightSqlServerReadOnly,
        ])
        .await
        .unwrap();
    assert_eq!(rows(&fetch(&mut client, &info).await.unwrap()), 2);

    let info = client
        .get_xdbc_type_info(CommandGetXdbcTypeInfo { data_type: None })
        .await
        .unwrap();
    assert!(rows(&fetch(&mut client, &info).await.unwrap()) > 10);

    let info = client
        .get_primary_keys(CommandGetPrimaryKeys {
            catalog: Some("iceberg".into()),
            db_schema: Some("db".into()),
            table: "pyiceberg_cow".into(),
        })
        .await
        .unwrap();
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(rows(&b), 0, "the corpus table has no identifier fields");
    assert_eq!(Schema::try_from(info).unwrap().fields().len(), 6);

    for info in [
        client
            .get_exported_keys(arrow_flight::sql::CommandGetExportedKeys {
                catalog: None,
                db_schema: None,
                table: "pyiceberg_cow".into(),
            })
            .await
            .unwrap(),
        client
            .get_imported_keys(arrow_flight::sql::CommandGetImportedKeys {
                catalog: None,
                db_schema: None,
                table: "pyiceberg_cow".into(),
            })
            .await
            .unwrap(),
    ] {
        let b = fetch(&mut client, &info).await.unwrap();
        assert_eq!(rows(&b), 0);
        assert_eq!(Schema::try_from(info).unwrap().fields().len(), 13);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_schema_poll_and_session_options() {
    let server = corpus_server();
    let mut raw = FlightServiceClient::new(server.channel().await);
    let cmd = CommandStatementQuery {
        query: "SELECT id, name FROM pyiceberg_cow".into(),
        transaction_id: None,
    };
    let descriptor = FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec());
    let schema = raw
        .get_schema(descriptor.clone())
        .await
        .unwrap()
        .into_inner();
    let schema = Schema::try_from(&schema).unwrap();
    assert_eq!(schema.fields().len(), 2);

    // The query runs in the background; polls with the retry descriptor until it is complete.
    let mut poll = raw.poll_flight_info(descriptor).await.unwrap().into_inner();
    while let Some(retry) = poll.flight_descriptor.clone() {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        poll = raw.poll_flight_info(retry).await.unwrap().into_inner();
    }
    assert_eq!(poll.progress, Some(1.0));
    assert_eq!(poll.info.unwrap().endpoint.len(), 1);

    // list_actions advertises the extra actions.
    let actions: Vec<String> = raw
        .list_actions(arrow_flight::Empty {})
        .await
        .unwrap()
        .into_inner()
        .map(|a| a.unwrap().r#type)
        .collect()
        .await;
    for a in [
        "CancelFlightInfo",
        "SetSessionOptions",
        "CreatePreparedStatement",
    ] {
        assert!(actions.iter().any(|x| x == a), "{a} in {actions:?}");
    }

    // Session options: set the schema, then read it back with the session cookie.
    let cookie = common::session_cookie(&server, "schema", "information_schema").await;
    let mut req = tonic::Request::new(Action {
        r#type: "GetSessionOptions".into(),
        body: Default::default(),
    });
    req.metadata_mut().insert("cookie", cookie.parse().unwrap());
    let mut stream = raw.do_action(req).await.unwrap().into_inner();
    let body = stream.message().await.unwrap().unwrap().body;
    let got = petrel_server::proto::flight_session::GetSessionOptionsResult::decode(body).unwrap();
    assert_eq!(
        got.session_options["schema"].option_value,
        Some(
            petrel_server::proto::flight_session::session_option_value::OptionValue::StringValue(
                "information_schema".into()
            )
        )
    );
    // With that session, unqualified names resolve in information_schema.
    let mut client = arrow_flight::sql::client::FlightSqlServiceClient::new(server.channel().await);
    client.set_header("cookie", cookie);
    let b = query(&mut client, "SELECT count(*) FROM tables")
        .await
        .unwrap();
    assert!(count(&b) > 0);
}

use futures::StreamExt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_interleaved_with_good_queries() {
    let server = corpus_server();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..12 {
        let channel = server.channel().await;
        tasks.spawn(async move {
            let mut client = arrow_flight::sql::client::FlightSqlServiceClient::new(channel);
            for round in 0..3 {
                match (i + round) % 6 {
                    0 => {
                        let e = query(&mut client, "SELEC 1").await.unwrap_err();
                        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
                        assert!(e.message().to_lowercase().contains("sql"), "{e}");
                    }
                    1 => {
                        let e = query(&mut client, "SELECT * FROM no_such_table")
                            .await
                            .unwrap_err();
                        assert_eq!(e.code(), Code::NotFound, "{e}");
                        assert!(e.message().contains("no_such_table"), "{e}");
                    }
                    2 => {
                        let e = to_status(
                            client
                                .do_get(Ticket {
                                    ticket: b"garbage".to_vec().into(),
                                })
                                .await
                                .map(|_| ())
                                .expect_err("garbage ticket fails"),
                        );
                        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
                        // A well-formed Flight SQL ticket whose handle is garbage.
                        let t = arrow_flight::sql::TicketStatementQuery {
                            statement_handle: b"\xff\xfe not petrel".to_vec().into(),
                        };
                        let e = to_status(
                            client
                                .do_get(Ticket {
                                    ticket: t.as_any().encode_to_vec().into(),
                                })
                                .await
                                .map(|_| ())
                                .expect_err("garbage handle fails"),
                        );
                        assert_eq!(e.code(), Code::InvalidArgument, "{e}");
                    }
                    3 => {
                        // A client that disconnects mid-stream.
                        let info = client
                            .execute(
                                "SELECT * FROM pyiceberg_cow CROSS JOIN generate_series(1, 1000)"
                                    .into(),
                                None,
                            )
                            .await
                            .unwrap();
                        let mut s = client
                            .do_get(info.endpoint[0].ticket.clone().unwrap())
                            .await
                            .unwrap();
                        let first = s.next().await.unwrap().unwrap();
                        assert!(first.num_rows() > 0);
                        drop(s);
                    }
                    4 => {
                        let e = query(&mut client, "COPY (SELECT 1) TO '/tmp/petrel-copy.csv'")
                            .await
                            .unwrap_err();
                        assert_eq!(e.code(), Code::PermissionDenied, "{e}");
                        assert!(!std::path::Path::new("/tmp/petrel-copy.csv").exists());
                    }
                    _ => {
                        let b = query(
                            &mut client,
                            "SELECT count(*) FROM pyiceberg_cow WHERE id >= 0",
                        )
                        .await
                        .unwrap();
                        assert_eq!(count(&b), 2910);
                    }
                }
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    // Still serving.
    let mut client = server.client().await;
    let b = query(&mut client, "SELECT count(*) FROM pyiceberg_cow")
        .await
        .unwrap();
    assert_eq!(count(&b), 2910);
    // And refuses file-reading SQL.
    // (A quoted path is a table name: no file is read; the filesystem catalog refuses a name
    // with `/` in it.)
    for (sql, code) in [
        (
            "CREATE EXTERNAL TABLE t STORED AS CSV LOCATION '/etc/passwd'",
            Code::PermissionDenied,
        ),
        ("SELECT * FROM '/etc/passwd'", Code::InvalidArgument),
    ] {
        let e = query(&mut client, sql).await.unwrap_err();
        assert_eq!(e.code(), code, "{sql}: {e}");
    }
    let _ = Array::len(&Int64Array::from(vec![1]));
}

/// A client from before `DoPutPreparedStatementResult` (it keeps the original handle after
/// binding) still gets its parameters applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_client_keeps_the_original_handle() {
    use arrow_flight::encode::FlightDataEncoderBuilder;
    use arrow_flight::sql::{
        ActionCreatePreparedStatementRequest, ActionCreatePreparedStatementResult, Any,
        CommandPreparedStatementQuery,
    };
    use futures::TryStreamExt;

    let server = corpus_server();
    let mut raw = FlightServiceClient::new(server.channel().await);
    let create = ActionCreatePreparedStatementRequest {
        query: "SELECT name FROM pyiceberg_cow WHERE id = ?".into(),
        transaction_id: None,
    };
    let mut resp = raw
        .do_action(Action {
            r#type: "CreatePreparedStatement".into(),
            body: create.as_any().encode_to_vec().into(),
        })
        .await
        .unwrap()
        .into_inner();
    let body = resp.message().await.unwrap().unwrap().body;
    let created: ActionCreatePreparedStatementResult =
        Any::decode(body).unwrap().unpack().unwrap().unwrap();
    let handle = created.prepared_statement_handle;

    let cmd = CommandPreparedStatementQuery {
        prepared_statement_handle: handle.clone(),
    };
    let params = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("0", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(vec![105]))],
    )
    .unwrap();
    let data: Vec<_> = FlightDataEncoderBuilder::new()
        .with_flight_descriptor(Some(FlightDescriptor::new_cmd(
            cmd.as_any().encode_to_vec(),
        )))
        .build(futures::stream::iter([Ok(params)]))
        .try_collect()
        .await
        .unwrap();
    // Bind, and ignore the updated handle in the result.
    let _ = raw
        .do_put(futures::stream::iter(data))
        .await
        .unwrap()
        .into_inner()
        .message()
        .await
        .unwrap();

    let info = raw
        .get_flight_info(FlightDescriptor::new_cmd(cmd.as_any().encode_to_vec()))
        .await
        .unwrap()
        .into_inner();
    let mut client = server.client().await;
    let b = fetch(&mut client, &info).await.unwrap();
    assert_eq!(b[0].column(0).as_string::<i32>().value(0), "name_105");
}

/// A literal with a point is the decimal it spells: compared with a decimal column's extremes
/// it selects exactly their rows (as a double it carried its rounding error into the
/// comparison, and `d >= 9999999.99` missed the row holding 9999999.99). Exponent forms are
/// decimals too; a double is written as a cast.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal_literals_compare_exactly() {
    let server = Petrel::start(&[]);
    let mut client = server.client().await;
    for sql in [
        "CREATE TABLE petrel.demo.prices (id BIGINT, d DECIMAL(9,2), w DECIMAL(38,10))",
        "INSERT INTO petrel.demo.prices VALUES (1, 9999999.99, 300.9999999999), \
         (2, -9999999.99, 12345678901234567890.123456789), (3, 0.01, 0.0000000001)",
    ] {
        query(&mut client, sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    for (filter, want) in [
        ("d >= 9999999.99", 1),
        ("d = -9999999.99", 1),
        ("d < -9999999.98", 1),
        ("d = 0.01", 1),
        ("w = 300.9999999999", 1),
        ("w = 12345678901234567890.123456789", 1),
        ("w = 1e-10", 1),
        ("w > 300.99999999989", 2),
        ("CAST(d AS DOUBLE) = CAST(0.01 AS DOUBLE)", 1),
    ] {
        let sql = format!("SELECT count(*) FROM petrel.demo.prices WHERE {filter}");
        let b = query(&mut client, &sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(count(&b), want, "{sql}");
    }
    let b = query(
        &mut client,
        "SELECT 1.5, arrow_typeof(1.5), arrow_typeof(2.5e-10)",
    )
    .await
    .unwrap();
    let types = arrow::util::pretty::pretty_format_batches(&b)
        .unwrap()
        .to_string();
    assert!(types.contains("Decimal128(2, 1)"), "{types}");
    assert!(types.contains("Decimal128(11, 11)"), "{types}");
}
