"""Every Iceberg type through the wire: a table written by PyIceberg into a SQLite SQL
catalog, served by `petrel` (catalog from a TOML config file), read back with ADBC."""

import datetime
import decimal
import uuid

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FixedType,
    FloatType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    TimeType,
    UUIDType,
)

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "b", BooleanType()),
    NestedField(3, "i", IntegerType()),
    NestedField(4, "l", LongType()),
    NestedField(5, "f", FloatType()),
    NestedField(6, "d", DoubleType()),
    NestedField(7, "dec", DecimalType(20, 4)),
    NestedField(8, "dt", DateType()),
    NestedField(9, "t", TimeType()),
    NestedField(10, "ts", TimestampType()),
    NestedField(11, "tstz", TimestamptzType()),
    NestedField(12, "s", StringType()),
    NestedField(13, "u", UUIDType()),
    NestedField(14, "fx", FixedType(4)),
    NestedField(15, "bin", BinaryType()),
    NestedField(16, "st", StructType(NestedField(17, "x", IntegerType()), NestedField(18, "y", StringType()))),
    NestedField(19, "lst", ListType(20, LongType(), element_required=False)),
    NestedField(21, "m", MapType(22, StringType(), 23, DoubleType(), value_required=False)),
    identifier_field_ids=[1],
)

U = uuid.UUID("12345678-1234-5678-1234-567812345678")
ROWS = [
    {
        "id": 1,
        "b": True,
        "i": -7,
        "l": 2**40,
        "f": 1.5,
        "d": 2.25,
        "dec": decimal.Decimal("1234567890123456.7890"),
        "dt": datetime.date(2024, 2, 29),
        "t": datetime.time(12, 34, 56, 789012),
        "ts": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901),
        "tstz": datetime.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=datetime.timezone.utc),
        "s": "héllo ☃",
        "u": U.bytes,
        "fx": b"\x00\x01\x02\x03",
        "bin": b"\xff\x00binary",
        "st": {"x": 5, "y": "why"},
        "lst": [1, None, 3],
        "m": [("a", 1.0), ("b", None)],
    },
    {k: (1 + 1 if k == "id" else None) for k in [f.name for f in SCHEMA.fields]},
]


@pytest.fixture(scope="module")
def typed_server(tmp_path_factory):
    from conftest import Petrel

    root = tmp_path_factory.mktemp("types")
    db = root / "catalog.db"
    catalog = SqlCatalog("rt", uri=f"sqlite:///{db}", warehouse=f"file://{root}")
    catalog.create_namespace("types")
    table = catalog.create_table("types.all_types", schema=SCHEMA)
    arrow_schema = table.schema().as_arrow()
    data = pa.Table.from_pylist(ROWS, schema=arrow_schema)
    table.append(data)
    config = root / "petrel.toml"
    config.write_text(
        f'default_catalog = "rt"\ndefault_schema = "types"\n'
        f'[[catalog]]\nname = "rt"\ntype = "sql"\npath = "{db}"\n'
    )
    server = Petrel("--config", str(config))
    yield server, data
    server.stop()


def test_every_type_round_trips(typed_server):
    server, written = typed_server
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT * FROM all_types ORDER BY id")
        got = cur.fetch_arrow_table()
    assert got.num_rows == 2
    assert got.column_names == written.column_names
    types = {f.name: f.type for f in got.schema}
    assert pa.types.is_decimal(types["dec"]) and types["dec"].precision == 20 and types["dec"].scale == 4
    assert types["dt"] == pa.date32()
    assert types["t"] == pa.time64("us")
    assert types["ts"] == pa.timestamp("us")
    assert pa.types.is_timestamp(types["tstz"]) and types["tstz"].tz is not None
    assert pa.types.is_struct(types["st"]) and pa.types.is_list(types["lst"]) and pa.types.is_map(types["m"])
    row, empty = got.to_pylist()
    for name, value in ROWS[0].items():
        value_got = row[name]
        if name == "u":
            value_got = value_got if isinstance(value_got, bytes) else uuid.UUID(str(value_got)).bytes
        if name == "m":
            value_got = list(value_got)
        assert value_got == value, name
    assert all(v is None for k, v in empty.items() if k != "id")
    assert not got.schema.field("id").nullable


def test_types_in_metadata(typed_server):
    server, _ = typed_server
    with flight_sql.connect(server.uri, autocommit=True) as conn:
        schema = conn.adbc_get_table_schema("all_types", catalog_filter="rt", db_schema_filter="types")
        assert schema.field("dec").metadata[b"ARROW:FLIGHT:SQL:TYPE_NAME"] == b"DECIMAL(20, 4)"
        assert schema.field("tstz").metadata[b"ARROW:FLIGHT:SQL:TYPE_NAME"] == b"TIMESTAMP WITH TIME ZONE"
        assert not schema.field("id").nullable
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM all_types WHERE dec > ?", (decimal.Decimal("1.5"),))
            assert cur.fetchone() == (1,)


def test_struct_fields_over_flight_sql(typed_server):
    """Struct field access (read leaf by leaf on the server) through the ADBC driver: with a
    filter between the projection and the scan, and under an aggregate."""
    server, _ = typed_server
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, st.y, st['x'] AS x FROM all_types ORDER BY id")
        assert cur.fetchall() == [(1, "why", 5), (2, None, None)]
        cur.execute("SELECT st.y FROM all_types WHERE st.x = 5")
        assert cur.fetchall() == [("why",)]
        cur.execute("SELECT sum(st.x), count(st.y) FROM all_types")
        assert cur.fetchall() == [(5, 1)]
