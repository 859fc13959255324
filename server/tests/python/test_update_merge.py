"""UPDATE and MERGE prepared with bound parameters through the real ADBC driver (DB-API
`execute(sql, params)`: CreatePreparedStatement, a DoPut binding the row, GetFlightInfo running
the write once, its ticket answering the count), on merge-on-read tables of format 2 and 3 and
a copy-on-write table; exact affected-row counts and exact rows afterwards, read by Petrel and
by PyIceberg. (The query path, run once, and conflicts are in `server/tests/it/
row_level_flight_sql.rs`.)"""

import glob

import adbc_driver_flightsql.dbapi as flight_sql
import adbc_driver_manager
import pytest
from pyiceberg.table import StaticTable


def current_metadata(table_dir):
    """The newest `NNNNN-<uuid>.metadata.json` (the embedded SQLite catalog's naming; nothing
    here commits concurrently, so the newest is the current one)."""
    files = glob.glob(f"{table_dir}/metadata/*.metadata.json")
    return max(files, key=lambda p: int(p.rsplit("/", 1)[1].split("-", 1)[0]))


def petrel_rows(cur, table):
    cur.execute(f"SELECT id, region, v FROM {table} ORDER BY id")
    return cur.fetchall()


def model_rows(model):
    return sorted((k, region, v) for k, (region, v) in model.items())


@pytest.mark.parametrize(
    "version,mode", [(2, "merge-on-read"), (3, "merge-on-read"), (2, "copy-on-write")]
)
def test_prepared_update_and_merge_with_parameters(tmp_path, start_petrel, version, mode):
    server = start_petrel(cwd=str(tmp_path))
    table = f"kites_v{version}_{mode.replace('-', '_')}"
    model = {i: (["n", "s"][i % 2], i * 10) for i in range(20)}
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(
            f"CREATE TABLE {table} (id BIGINT, region STRING, v BIGINT) PARTITIONED BY (region) "
            f"TBLPROPERTIES ('format-version'='{version}', 'write.update.mode'='{mode}', "
            f"'write.merge.mode'='{mode}')"
        )
        cur.fetchall()
        values = ", ".join(f"({k}, '{r}', {v})" for k, (r, v) in model.items())
        cur.execute(f"INSERT INTO {table} VALUES {values}")
        assert cur.fetchall() == [(20,)]

        # UPDATE with parameters in SET and WHERE; the same statement again with other values.
        update = f"UPDATE {table} SET v = v + ? WHERE region = ? AND id < ?"
        cur.execute(update, (1000, "n", 10))
        assert cur.fetchall() == [(5,)]
        for k in (0, 2, 4, 6, 8):
            model[k] = (model[k][0], model[k][1] + 1000)
        assert petrel_rows(cur, table) == model_rows(model)
        cur.execute(update, (-1, "s", 5))
        assert cur.fetchall() == [(2,)]
        for k in (1, 3):
            model[k] = (model[k][0], model[k][1] - 1)
        # Nothing matches: 0, nothing changed.
        cur.execute(update, (7, "nowhere", 100))
        assert cur.fetchall() == [(0,)]
        assert petrel_rows(cur, table) == model_rows(model)

        # MERGE with parameters in the source row and in a WHEN condition.
        merge = (
            f"MERGE INTO {table} t USING (SELECT ? AS id, ? AS region, ? AS v) s "
            f"ON t.id = s.id "
            f"WHEN MATCHED AND t.v < ? THEN UPDATE SET v = s.v "
            f"WHEN MATCHED THEN DELETE "
            f"WHEN NOT MATCHED THEN INSERT *"
        )
        cur.execute(merge, (3, "s", -3, 10_000))  # matched, t.v = 29 < 10000: updated
        assert cur.fetchall() == [(1,)]
        model[3] = ("s", -3)
        cur.execute(merge, (42, "n", 420, 0))  # not matched: inserted
        assert cur.fetchall() == [(1,)]
        model[42] = ("n", 420)
        cur.execute(merge, (5, "s", 0, 0))  # matched, 50 < 0 false: deleted
        assert cur.fetchall() == [(1,)]
        del model[5]
        assert petrel_rows(cur, table) == model_rows(model)

        # Several parameter rows in one execution (executemany) are for INSERT only: an
        # UPDATE, DELETE or MERGE batch is refused, and nothing changes.
        for sql, rows in [
            (update, [(1, "n", 3), (2, "s", 3)]),
            (f"DELETE FROM {table} WHERE id = ?", [(0,), (1,)]),
            (merge, [(3, "s", 0, 0), (4, "n", 0, 0)]),
        ]:
            with pytest.raises(adbc_driver_manager.NotSupportedError, match="one row at a time"):
                cur.executemany(sql, rows)
        assert petrel_rows(cur, table) == model_rows(model)

    # PyIceberg reads the same rows.
    table_dir = tmp_path / "petrel-warehouse" / "demo" / table
    static = StaticTable.from_metadata(current_metadata(table_dir))
    got = static.scan().to_arrow().to_pylist()
    assert sorted((r["id"], r["region"], r["v"]) for r in got) == model_rows(model)
