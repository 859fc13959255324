"""DELETE over Flight SQL with the real ADBC driver: on the query path (DB-API `execute`, run
once, its ticket answering the count), as a prepared statement with a bound parameter, and as
an update command; exact rows afterwards, read by Petrel and by PyIceberg; `--read-only`
refuses it."""

import glob

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pyarrow.flight as flight
import pytest
from pyiceberg.table import StaticTable

from flight_sql_commands import statement_query


def current_metadata(table_dir):
    files = glob.glob(f"{table_dir}/metadata/*.metadata.json")
    return max(files, key=lambda p: p.rsplit("/", 1)[1])


def ids(cur, table):
    cur.execute(f"SELECT id FROM {table} ORDER BY id")
    return [r[0] for r in cur.fetchall()]


@pytest.mark.parametrize("version", [2, 3])
def test_delete_over_flight_sql(tmp_path, start_petrel, version):
    server = start_petrel(cwd=str(tmp_path))
    table = f"birds_v{version}"
    model = set(range(20))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id BIGINT, region STRING) PARTITIONED BY (region) "
            f"TBLPROPERTIES ('format-version'='{version}')"
        )
        cur.fetchall()
        values = ", ".join(f"({i}, '{['n', 's'][i % 2]}')" for i in range(20))
        cur.execute(f"INSERT INTO {table} VALUES {values}")
        assert cur.fetchall() == [(20,)]

        # The query path: runs once, answers the count.
        cur.execute(f"DELETE FROM {table} WHERE id % 3 = 0")
        assert cur.fetchall() == [(7,)]
        model -= {i for i in range(20) if i % 3 == 0}
        assert ids(cur, table) == sorted(model)

        # A prepared DELETE with a bound parameter.
        cur.execute(f"DELETE FROM {table} WHERE id = ?", (4,))
        assert cur.fetchall() == [(1,)]
        model.discard(4)

        # An update command, with a subquery.
        cur.adbc_statement.set_sql_query(
            f"DELETE FROM {table} WHERE id IN (SELECT id + 1 FROM {table} WHERE region = 'n' AND id > 10)"
        )
        deleted = cur.adbc_statement.execute_update()
        gone = {i + 1 for i in model if i % 2 == 0 and i > 10} & model
        assert deleted == len(gone)
        model -= gone

        # Nothing to delete: 0, and the rows stay.
        cur.execute(f"DELETE FROM {table} WHERE id > 1000")
        assert cur.fetchall() == [(0,)]
        assert ids(cur, table) == sorted(model)

    # The query path's ticket does not delete again when fetched twice.
    client = flight.FlightClient(server.uri)
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(f"INSERT INTO {table} VALUES (100, 'n'), (101, 'n')")
        cur.fetchall()
    model |= {100, 101}
    descriptor = flight.FlightDescriptor.for_command(
        statement_query(f"DELETE FROM {table} WHERE id = 100")
    )
    info = client.get_flight_info(descriptor)
    for _ in range(2):
        got = client.do_get(info.endpoints[0].ticket).read_all()
        assert got.to_pylist() == [{"count": 1}]
    model.discard(100)
    client.close()

    # PyIceberg reads the same rows.
    table_dir = tmp_path / "petrel-warehouse" / "demo" / table
    static = StaticTable.from_metadata(current_metadata(table_dir))
    assert sorted(static.scan().to_arrow().column("id").to_pylist()) == sorted(model)
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        assert ids(cur, table) == sorted(model)


def test_read_only_refuses_delete(tmp_path, start_petrel):
    server = start_petrel("--read-only", cwd=str(tmp_path))
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(adbc_driver_manager.Error, match="read-only"):
            cur.execute("DELETE FROM seabirds WHERE species = 'puffin'")
            cur.fetchall()
        cur.execute("SELECT count(*) FROM seabirds")
        assert cur.fetchall() == [(10,)]
