"""Catalog views over Flight SQL with the real ADBC driver, on both the statement path
(CommandStatementQuery) and the prepared path (CreatePreparedStatement): `information_schema`
(tables, columns, schemata) across two catalogs, `SHOW TABLES [IN ns]`, `SHOW COLUMNS`,
`DESCRIBE [TABLE]`, `SHOW SCHEMAS`, `SHOW CREATE TABLE` (compared with what Spark 3.5 + Iceberg
1.10 prints for the same tables) and `adbc_get_objects`.

Models: the warehouses' directories (which tables exist), the tables' Iceberg metadata JSON
(columns, types, nullability) and Spark's `SHOW CREATE TABLE` output
(table-provider/tests/spark/show_create.py, one Spark run for the module).
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import adbc_driver_flightsql.dbapi as flight_sql
import pytest

from conftest import REPO

# Iceberg type → the SQL type name Petrel reports (server/src/flight_sql/xdbc.rs), for the
# types of the corpus tables.
XDBC_TYPE_NAMES = {
    "int": "INTEGER",
    "long": "BIGINT",
    "string": "VARCHAR",
    "double": "DOUBLE",
    "timestamptz": "TIMESTAMP WITH TIME ZONE",
    "timestamp": "TIMESTAMP",
}


def table_dirs(warehouse: Path) -> set:
    return {p.name for p in (warehouse / "db").iterdir() if (p / "metadata").is_dir()}


def iceberg_columns(warehouse: Path, table: str) -> list:
    """(name, iceberg type, required) of the table's current schema, from its newest metadata."""
    md = warehouse / "db" / table / "metadata"
    newest = max(md.glob("v*.metadata.json"), key=lambda p: int(p.name[1:].split(".")[0]))
    meta = json.loads(newest.read_text())
    schema = next(s for s in meta["schemas"] if s["schema-id"] == meta["current-schema-id"])
    return [(f["name"], f["type"], f["required"]) for f in schema["fields"]]


@pytest.fixture(scope="module")
def two_catalogs(tmp_path_factory, corpus):
    """A copy of the corpus warehouse with Spark's extra tables as catalog `iceberg` (the
    default), the corpus itself as catalog `other`; and Spark's SHOW CREATE TABLE answers for
    the copy."""
    scratch = tmp_path_factory.mktemp("catalog-views")
    copy = scratch / "warehouse"
    shutil.copytree(corpus / "warehouse", copy)
    subprocess.run(["bash", str(REPO / "scripts" / "setup-spark.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    cache = Path(os.environ.get("PETREL_CACHE") or Path.home() / ".cache" / "petrel")
    env = dict(os.environ, TZ="UTC",
               JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={scratch} -XX:-UsePerfData")
    out = subprocess.run(
        [str(cache / "corpus-venvs" / "spark" / "bin" / "python"),
         str(REPO / "table-provider" / "tests" / "spark" / "show_create.py"), str(copy)],
        check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    spark = json.loads(out.stdout)
    config = scratch / "petrel.toml"
    config.write_text(
        f'[[catalog]]\nname = "other"\ntype = "filesystem"\nwarehouse = "{corpus / "warehouse"}"\n')
    return copy, corpus / "warehouse", config, spark


@pytest.fixture(scope="module")
def server(two_catalogs):
    from conftest import Petrel

    copy, _, config, _ = two_catalogs
    s = Petrel("--warehouse", str(copy), "--config", str(config), "--read-only")
    yield s
    s.stop()


@pytest.fixture(scope="module")
def conn(server):
    c = flight_sql.connect(server.uri)
    yield c
    c.close()


def rows(conn, sql: str, prepared: bool) -> list:
    """The rows of `sql` as tuples, through the statement or the prepared-statement path."""
    with conn.cursor() as cur:
        if prepared:
            cur.adbc_prepare(sql)
        cur.execute(sql)
        table = cur.fetch_arrow_table()
    return [tuple(r.values()) for r in table.to_pylist()]


PATHS = [pytest.param(False, id="statement"), pytest.param(True, id="prepared")]


@pytest.mark.parametrize("prepared", PATHS)
def test_information_schema_lists_every_catalog(conn, two_catalogs, prepared):
    copy, corpus_wh, _, _ = two_catalogs
    tables = rows(conn, "SELECT table_catalog, table_schema, table_name FROM "
                        "information_schema.tables WHERE table_type = 'BASE TABLE'", prepared)
    want = {("iceberg", "db", t) for t in table_dirs(copy)} | {
        ("other", "db", t) for t in table_dirs(corpus_wh)}
    assert sorted(tables) == sorted(want)
    assert len(table_dirs(copy)) == len(table_dirs(corpus_wh)) + 4  # Spark's tables

    schemata = rows(conn, "SELECT catalog_name, schema_name FROM information_schema.schemata",
                    prepared)
    assert sorted(schemata) == [("iceberg", "db"), ("other", "db")]

    for catalog, warehouse in (("iceberg", copy), ("other", corpus_wh)):
        for table in ("v2_mor", "eq_sidequery_part"):
            got = rows(conn, "SELECT column_name, is_nullable FROM information_schema.columns "
                             f"WHERE table_catalog = '{catalog}' AND table_schema = 'db' "
                             f"AND table_name = '{table}' ORDER BY ordinal_position", prepared)
            assert got == [(n, "NO" if req else "YES")
                           for n, _, req in iceberg_columns(warehouse, table)]


@pytest.mark.parametrize("prepared", PATHS)
def test_show_tables_columns_describe(conn, two_catalogs, prepared):
    copy, corpus_wh, _, _ = two_catalogs
    other = [("other", "db", t, "BASE TABLE") for t in sorted(table_dirs(corpus_wh))]
    assert rows(conn, "SHOW TABLES IN other.db", prepared) == other
    # A catalog's name alone: all its schemas, information_schema's views too (as SHOW TABLES).
    whole = rows(conn, "SHOW TABLES FROM other", prepared)
    assert [r for r in whole if r[3] == "BASE TABLE"] == other
    assert {r[1] for r in whole if r[3] != "BASE TABLE"} == {"information_schema"}
    mine = [("iceberg", "db", t, "BASE TABLE") for t in sorted(table_dirs(copy))]
    assert rows(conn, "SHOW TABLES IN db", prepared) == mine
    everything = rows(conn, "SHOW TABLES", prepared)
    assert {r[:3] for r in everything if r[3] == "BASE TABLE"} == {
        r[:3] for r in mine + other}
    assert rows(conn, "SHOW SCHEMAS", prepared) == [("iceberg", "db"), ("other", "db")]
    assert rows(conn, "SHOW NAMESPACES IN other", prepared) == [("other", "db")]

    model = iceberg_columns(corpus_wh, "eq_sidequery_part")
    nullable = [(n, "NO" if req else "YES") for n, _, req in model]
    show = rows(conn, "SHOW COLUMNS FROM other.db.eq_sidequery_part", prepared)
    assert [(r[3], r[5]) for r in show] == nullable
    for describe in ("DESCRIBE other.db.eq_sidequery_part", "DESCRIBE TABLE other.db.eq_sidequery_part"):
        assert [(r[0], r[2]) for r in rows(conn, describe, prepared)] == nullable


@pytest.mark.parametrize("prepared", PATHS)
def test_show_create_table_is_sparks(conn, two_catalogs, prepared):
    _, _, _, spark = two_catalogs
    assert {"bi_types", "bi_plain", "bi_years", "bi_months", "v2_mor"} <= set(spark)
    for table, statement in sorted(spark.items()):
        got = rows(conn, f"SHOW CREATE TABLE iceberg.db.{table}", prepared)
        assert got == [(statement,)], f"{table}:\n{got[0][0] if got else got}\n!=\n{statement}"
    # Unqualified (default catalog and schema) and through the other catalog.
    assert rows(conn, "SHOW CREATE TABLE bi_plain", prepared) == [(spark["bi_plain"],)]
    other = rows(conn, "SHOW CREATE TABLE other.db.v2_mor", prepared)[0][0]
    assert other.replace("other.db.v2_mor", "iceberg.db.v2_mor") == spark["v2_mor"]


def test_bad_names_are_clear_errors(conn):
    for sql, needle in [
        ("SHOW TABLES IN nosuch", "nosuch"),
        ("SHOW TABLES IN other.nosuch", "nosuch"),
        ("SHOW CREATE TABLE db.nosuch", "nosuch"),
        ("SHOW NAMESPACES IN nosuch", "nosuch"),
        ("SHOW TABLES IN db trailing", "end of the statement"),
    ]:
        with conn.cursor() as cur:
            with pytest.raises(flight_sql.Error) as e:
                cur.execute(sql)
                cur.fetch_arrow_table()
        assert needle in str(e.value), f"{sql}: {e.value}"


def test_adbc_get_objects(conn, two_catalogs):
    copy, corpus_wh, _, _ = two_catalogs
    objects = conn.adbc_get_objects(depth="all").read_all().to_pylist()
    by_catalog = {c["catalog_name"]: c for c in objects}
    assert set(by_catalog) == {"iceberg", "other"}
    for catalog, warehouse in (("iceberg", copy), ("other", corpus_wh)):
        schemas = {s["db_schema_name"]: s for s in by_catalog[catalog]["catalog_db_schemas"]}
        assert set(schemas) == {"db"}
        tables = {t["table_name"]: t for t in schemas["db"]["db_schema_tables"]}
        assert set(tables) == table_dirs(warehouse)
        assert {t["table_type"] for t in tables.values()} == {"TABLE"}
        for table in ("v2_mor", "pyiceberg_cow", "eq_sidequery_part"):
            columns = tables[table]["table_columns"]
            model = iceberg_columns(warehouse, table)
            # (The Go ADBC driver leaves xdbc_is_nullable / xdbc_nullable empty whatever the
            # server's schema says: nullability is checked through information_schema above.)
            assert [(c["column_name"], c["ordinal_position"], c["xdbc_type_name"],
                     c["xdbc_scope_catalog"], c["xdbc_scope_table"]) for c in columns] == [
                (n, i + 1, XDBC_TYPE_NAMES[t], catalog, table)
                for i, (n, t, _) in enumerate(model)], table
