"""Flight SQL commands written as protobuf by hand, for what client libraries do not send.

ADBC's Flight SQL driver sends no `CommandStatementIngest.options`, and some tests need a command
sent over a raw pyarrow.flight call. Used by the tests here and by `scripts/bench-upsert-ranges.py`
(no pytest import, so scripts can load it).
"""

_URL = "type.googleapis.com/arrow.flight.protocol.sql."


def varint(n: int) -> bytes:
    """`n` as a protobuf base-128 varint."""
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def bytes_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int_field(number: int, value: int) -> bytes:
    """A varint field."""
    return varint(number << 3) + varint(value)


def packed(message: str, body: bytes) -> bytes:
    """Flight SQL command `message` (its body encoded) packed in an Any."""
    return bytes_field(1, (_URL + message).encode()) + bytes_field(2, body)


def statement_query(sql: str) -> bytes:
    """CommandStatementQuery (field 1: query)."""
    return packed("CommandStatementQuery", bytes_field(1, sql.encode()))


def statement_ingest(table: str, schema: str, catalog: str, options: dict[str, str]) -> bytes:
    """CommandStatementIngest appending to an existing table (if_not_exist FAIL, if_exists
    APPEND), with `options` (field 1000, a map)."""
    definition = int_field(1, 2) + int_field(2, 2)
    body = (
        bytes_field(1, definition)
        + bytes_field(2, table.encode())
        + bytes_field(3, schema.encode())
        + bytes_field(4, catalog.encode())
    )
    for key, value in options.items():
        body += bytes_field(1000, bytes_field(1, key.encode()) + bytes_field(2, value.encode()))
    return packed("CommandStatementIngest", body)


def do_put_ingest(uri: str, command: bytes, data, max_chunksize: int | None = None) -> int:
    """Sends `data` (a pyarrow Table) with an ingest `command` over DoPut; returns the
    DoPutUpdateResult's record_count."""
    import pyarrow.flight as flight

    client = flight.FlightClient(uri)
    try:
        writer, reader = client.do_put(flight.FlightDescriptor.for_command(command), data.schema)
        writer.write_table(data, max_chunksize=max_chunksize)
        writer.done_writing()
        result = reader.read()
        writer.close()
    finally:
        client.close()
    payload = result.to_pybytes() if result is not None else b""
    # DoPutUpdateResult { int64 record_count = 1; }
    if payload[:1] != b"\x08":
        raise ValueError(f"not a DoPutUpdateResult: {payload!r}")
    count, shift = 0, 0
    for byte in payload[1:]:
        count |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return count
