"""INSERT through the real ADBC Flight SQL driver into a table PyIceberg created in a SQLite SQL
catalog; every write is read back through Petrel and through PyIceberg (exact rows, snapshot
counts). Covers ADBC's DB-API `execute` (query path: GetFlightInfo, then DoGet),
`execute_update`, parameter batches, a ticket fetched twice (no second insert), refused
statements and `--read-only`."""

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import LongType, NestedField, StringType

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "name", StringType(), required=False),
)


@pytest.fixture
def lake(tmp_path, start_petrel):
    """(catalog, start(*extra_args) -> server) over a fresh SQL catalog with w.t."""
    db = tmp_path / "catalog.db"
    catalog = SqlCatalog("lake", uri=f"sqlite:///{db}", warehouse=f"file://{tmp_path}")
    catalog.create_namespace("w")
    catalog.create_table("w.t", schema=SCHEMA)
    config = tmp_path / "petrel.toml"
    config.write_text(
        'default_catalog = "lake"\ndefault_schema = "w"\n'
        f'[[catalog]]\nname = "lake"\ntype = "sql"\npath = "{db}"\n'
    )

    def start(*extra):
        return start_petrel("--config", str(config), *extra)

    return catalog, start


def iceberg_rows(catalog):
    table = catalog.load_table("w.t")
    rows = table.scan().to_arrow().to_pylist()
    return sorted((r["id"], r["name"]) for r in rows), len(table.metadata.snapshots)


def petrel_rows(cur):
    cur.execute("SELECT id, name FROM lake.w.t ORDER BY id")
    return [tuple(r) for r in cur.fetchall()]


def test_execute_insert_runs_once_and_reads_back(lake):
    catalog, start = lake
    server = start()
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("INSERT INTO t VALUES (1, 'a'), (2, NULL)")
        assert cur.fetchall() == [(2,)]
        assert petrel_rows(cur) == [(1, "a"), (2, None)]
        # execute_update: CommandStatementUpdate.
        cur.adbc_statement.set_sql_query("INSERT INTO lake.w.t SELECT id + 10, name FROM lake.w.t")
        assert cur.adbc_statement.execute_update() == 2
        # Bound parameters: one row, then a batch of rows (one commit).
        cur.execute("INSERT INTO t VALUES (?, ?)", (3, "c"))
        cur.executemany("INSERT INTO t VALUES (?, ?)", [(4, "d"), (5, None), (6, "f")])
        expected = [(1, "a"), (2, None), (3, "c"), (4, "d"), (5, None), (6, "f"), (11, "a"), (12, None)]
        assert petrel_rows(cur) == expected
    rows, snapshots = iceberg_rows(catalog)
    assert rows == expected
    assert snapshots == 4, "one snapshot per statement, the executemany batch included"


def test_a_full_parameter_batch_inserts_in_one_commit(lake):
    """`max_parameter_rows` (10,000) rows bound to one INSERT: one commit, every row. The rows'
    bound plans once nested a union 10,000 deep: 3,000 rows took 54 s, 10,000 never ended."""
    catalog, start = lake
    server = start()
    rows = [(i, f"n{i}") for i in range(10_000)]
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO t VALUES (?, ?)", rows)
        cur.execute("SELECT count(*), sum(id), count(DISTINCT name) FROM t")
        assert cur.fetchall() == [(10_000, sum(range(10_000)), 10_000)]
    got, snapshots = iceberg_rows(catalog)
    assert sorted(got) == rows
    assert snapshots == 1


def test_refetching_the_ticket_does_not_insert_again(lake):
    catalog, start = lake
    server = start()
    client = flight.FlightClient(server.uri)
    # CommandStatementQuery wrapped in google.protobuf.Any, encoded by hand.
    query = b"INSERT INTO t VALUES (7, 'g')"
    command = b"\x0a" + bytes([len(query)]) + query
    type_url = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
    any_msg = b"\x0a" + bytes([len(type_url)]) + type_url + b"\x12" + bytes([len(command)]) + command
    info = client.get_flight_info(flight.FlightDescriptor.for_command(any_msg))
    ticket = info.endpoints[0].ticket
    for _ in range(3):
        got = client.do_get(ticket).read_all()
        assert got.column_names == ["count"]
        assert got.to_pylist() == [{"count": 1}]
    rows, snapshots = iceberg_rows(catalog)
    assert rows == [(7, "g")] and snapshots == 1
    # GetSchema describes an INSERT without running it.
    schema = client.get_schema(flight.FlightDescriptor.for_command(any_msg)).schema
    assert schema.names == ["count"]
    assert iceberg_rows(catalog) == ([(7, "g")], 1)
    client.close()


@pytest.mark.parametrize(
    "sql, message",
    [
        ("COPY (SELECT 1) TO '{dir}/out.csv'", "COPY ... TO is not allowed"),
        ("CREATE EXTERNAL TABLE e STORED AS CSV LOCATION '/etc/passwd'", "CREATE EXTERNAL TABLE is not allowed"),
        ("INSERT INTO lake.information_schema.tables VALUES ('a', 'b', 'c', 'd')", "only tables of"),
        ("REPLACE INTO t VALUES (1, 'a')", "REPLACE INTO"),
    ],
)
def test_refused_statements_write_nothing(lake, tmp_path, sql, message):
    catalog, start = lake
    server = start()
    sql = sql.format(dir=tmp_path)
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match=message.replace(".", r"\.")):
            cur.execute(sql)
        cur.adbc_statement.set_sql_query(sql)
        with pytest.raises(adbc_driver_manager.Error, match=message.replace(".", r"\.")):
            cur.adbc_statement.execute_update()
        assert petrel_rows(cur) == []
    assert not (tmp_path / "out.csv").exists()
    assert iceberg_rows(catalog) == ([], 0)


def test_read_only_refuses_insert(lake):
    catalog, start = lake
    server = start("--read-only")
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="read-only"):
            cur.execute("INSERT INTO t VALUES (1, 'a')")
        cur.adbc_statement.set_sql_query("INSERT INTO t VALUES (1, 'a')")
        with pytest.raises(adbc_driver_manager.Error, match="PERMISSION_DENIED|read-only"):
            cur.adbc_statement.execute_update()
        assert petrel_rows(cur) == []
    assert iceberg_rows(catalog) == ([], 0)
