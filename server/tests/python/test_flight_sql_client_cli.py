"""arrow-rs's `flight_sql_client` command-line tool against `petrel`.

The binary is `$PETREL_FLIGHT_SQL_CLIENT`, else `flight_sql_client` on PATH; install it with
`cargo install arrow-flight --version 58.4.1 --features "cli flight-sql tls-ring" --bin flight_sql_client`.
"""

import os
import re
import shutil
import subprocess

import pytest

from conftest import corpus_dir, petrel_bin

CLIENT = os.environ.get("PETREL_FLIGHT_SQL_CLIENT") or shutil.which("flight_sql_client")

pytestmark = pytest.mark.skipif(CLIENT is None, reason="arrow-rs flight_sql_client is not installed")


def run(server, *args, auth=None):
    cmd = [CLIENT, "--host", "127.0.0.1", "--port", str(server.port)]
    if auth:
        cmd += ["--username", auth[0], "--password", auth[1]]
    out = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def table(out: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of the tool's pretty-printed result (`| a | b |` lines)."""
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    assert cells, out
    return cells[0], cells[1:]


def column(out: str, name: str) -> list[str]:
    header, rows = table(out)
    i = header.index(name)
    return [r[i] for r in rows]


def test_queries_metadata_and_prepared(corpus_server):
    code, out, err = run(corpus_server, "statement-query", "SELECT count(*) AS n FROM pyiceberg_cow")
    assert code == 0, err
    assert table(out) == (["n"], [["2910"]]), out
    code, out, err = run(corpus_server, "catalogs")
    assert code == 0, err
    assert column(out, "catalog_name") == ["iceberg"], out
    code, out, err = run(corpus_server, "tables", "iceberg", "--table-filter", "v2%")
    assert code == 0, err
    on_disk = sorted(p.name for p in (corpus_dir() / "warehouse" / "db").iterdir() if p.name.startswith("v2"))
    assert sorted(column(out, "table_name")) == on_disk, out
    assert set(column(out, "db_schema_name")) == {"db"}, out
    code, out, err = run(corpus_server, "table-types")
    assert code == 0, err
    assert column(out, "table_type") == ["METADATA TABLE", "TABLE", "VIEW"], out
    code, out, err = run(
        corpus_server, "prepared-statement-query", "SELECT name FROM pyiceberg_cow WHERE id = $1", "-p", "$1=105"
    )
    assert code == 0, err
    assert table(out) == (["name"], [["name_105"]]), out
    code, out, err = run(corpus_server, "statement-query", "SELECT * FROM nope")
    assert code != 0
    # The status the server sent: NOT_FOUND (as tonic prints it: the code's name in Debug, its
    # description in Display), and the table named.
    assert re.search(r"\bNotFound\b|Some requested entity was not found", err), err
    assert "nope" in err, err


def test_auth(start_petrel):
    h = subprocess.run(
        [petrel_bin(), "hash-password", "--password", "pw"], check=True, capture_output=True, text=True
    ).stdout.strip()
    server = start_petrel("--user", f"dave:{h}")
    code, out, err = run(server, "statement-query", "SELECT 1")
    assert code != 0 and "valid authentication credentials" in err
    code, out, err = run(server, "statement-query", "SELECT count(*) AS n FROM seabirds", auth=("dave", "pw"))
    assert code == 0, err
    assert table(out) == (["n"], [["10"]]), out
