"""Query Petrel with plain pyarrow.flight (no Flight SQL library): Flight SQL commands are
protobuf `Any` messages, small enough to encode by hand.

    pip install pyarrow
    python pyarrow_flight_example.py [URI] [USER PASSWORD]
"""

import os
import sys

import pyarrow.flight as flight


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def statement_query(sql: str) -> bytes:
    """`Any(CommandStatementQuery{query: sql})`, the Flight SQL command for a query."""
    command = _field(1, sql.encode())
    type_url = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"
    return _field(1, type_url) + _field(2, command)


def query(client: flight.FlightClient, sql: str, options: flight.FlightCallOptions):
    info = client.get_flight_info(flight.FlightDescriptor.for_command(statement_query(sql)), options)
    # Endpoints carry no location: read them over the same connection.
    tables = [client.do_get(ep.ticket, options).read_all() for ep in info.endpoints]
    return info.schema, tables


def main(argv: list[str]) -> None:
    uri = argv[1] if len(argv) > 1 else os.environ.get("PETREL_URI", "grpc://127.0.0.1:50051")
    client = flight.FlightClient(uri)
    headers = []
    if len(argv) > 3:
        # Basic credentials in Handshake → a bearer token header for later calls.
        headers = [client.authenticate_basic_token(argv[2], argv[3])]
    options = flight.FlightCallOptions(headers=headers)
    schema, tables = query(client, "SELECT id, species FROM seabirds ORDER BY id LIMIT 3", options)
    print("schema:", schema.names)
    for t in tables:
        for row in t.to_pylist():
            print(row)
    print("actions:", sorted(a.type for a in client.list_actions(options)))


if __name__ == "__main__":
    main(sys.argv)
