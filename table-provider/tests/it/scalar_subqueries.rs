//! A scalar subquery returning more than one row fails the statement (DataFusion 53 joined it
//! in, one output row per subquery row): in a query, and in a DELETE or UPDATE, which then
//! change nothing. Zero rows give NULL, one row its value; aggregated and limited subqueries
//! run as before.

use crate::common::{query, run_ddl, session, sorted_rows, warehouse_with_db, write_count};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scalar_subqueries_return_at_most_one_row() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, catalog) = warehouse_with_db(dir.path()).await;
    let ctx = session(vec![("iceberg", catalog)]);
    run_ddl(
        &ctx,
        "CREATE TABLE iceberg.db.t (id bigint, v string) \
         TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read')",
    )
    .await;
    assert_eq!(
        write_count(
            &ctx,
            "INSERT INTO iceberg.db.t VALUES (1, 'a'), (2, 'b'), (3, 'c')"
        )
        .await,
        3
    );
    let refused = [
        "SELECT (SELECT id FROM iceberg.db.t)",
        "SELECT v FROM iceberg.db.t WHERE id = (SELECT id FROM iceberg.db.t WHERE id > 1)",
        "DELETE FROM iceberg.db.t WHERE id = (SELECT id FROM iceberg.db.t WHERE id > 1)",
        "UPDATE iceberg.db.t SET v = 'x' WHERE id = (SELECT id FROM iceberg.db.t WHERE id >= 1)",
    ];
    for sql in refused {
        let e = match query(&ctx, sql).await {
            Ok(batches) => panic!("{sql}: answered {batches:?}"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("scalar subquery returned more than one row"),
            "{sql}: {e}"
        );
    }
    // Nothing was deleted or updated.
    let all = "SELECT id, v FROM iceberg.db.t";
    let rows = sorted_rows(&ctx, all).await;
    assert_eq!(rows, vec![r#"[1,"a"]"#, r#"[2,"b"]"#, r#"[3,"c"]"#]);

    for (sql, want) in [
        ("SELECT (SELECT id FROM iceberg.db.t WHERE id = 2)", "[2]"),
        (
            "SELECT (SELECT id FROM iceberg.db.t WHERE id > 5)",
            "[null]",
        ),
        ("SELECT (SELECT max(id) FROM iceberg.db.t)", "[3]"),
        (
            "SELECT (SELECT id FROM iceberg.db.t ORDER BY id LIMIT 1)",
            "[1]",
        ),
        (
            "SELECT v FROM iceberg.db.t WHERE id = (SELECT id FROM iceberg.db.t WHERE v = 'b')",
            r#"["b"]"#,
        ),
    ] {
        assert_eq!(
            sorted_rows(&ctx, sql).await,
            vec![want.to_string()],
            "{sql}"
        );
    }
    assert_eq!(
        write_count(
            &ctx,
            "DELETE FROM iceberg.db.t WHERE id = (SELECT id FROM iceberg.db.t WHERE v = 'c')"
        )
        .await,
        1
    );
    assert_eq!(
        sorted_rows(&ctx, all).await,
        vec![r#"[1,"a"]"#, r#"[2,"b"]"#]
    );
}
