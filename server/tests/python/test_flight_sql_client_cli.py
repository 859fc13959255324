"""arrow-rs's `flight_sql_client` command-line tool against `petrel`.

The binary is `$PETREL_FLIGHT_SQL_CLIENT`, else `flight_sql_client` on PATH; install it with
`cargo install arrow-flight --version 58.4.1 --features "cli flight-sql tls-ring" --bin flight_sql_client`.
"""

import os
import shutil
import subprocess

import pytest

from conftest import petrel_bin

CLIENT = os.environ.get("PETREL_FLIGHT_SQL_CLIENT") or shutil.which("flight_sql_client")

pytestmark = pytest.mark.skipif(CLIENT is None, reason="arrow-rs flight_sql_client is not installed")


def run(server, *args, auth=None):
    cmd = [CLIENT, "--host", "127.0.0.1", "--port", str(server.port)]
    if auth:
        cmd += ["--username", auth[0], "--password", auth[1]]
    out = subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_queries_metadata_and_prepared(corpus_server):
    code, out, err = run(corpus_server, "statement-query", "SELECT count(*) AS n FROM pyiceberg_cow")
    assert code == 0, err
    assert "2910" in out
    code, out, err = run(corpus_server, "catalogs")
    assert code == 0 and "iceberg" in out, err
    code, out, err = run(corpus_server, "tables", "iceberg", "--table-filter", "v2%")
    assert code == 0, err
    assert "v2_mor" in out and "v2_eq_java" in out and "pyiceberg_cow" not in out
    code, out, err = run(corpus_server, "table-types")
    assert code == 0 and "TABLE" in out, err
    code, out, err = run(
        corpus_server, "prepared-statement-query", "SELECT name FROM pyiceberg_cow WHERE id = $1", "-p", "$1=105"
    )
    assert code == 0, err
    assert "name_105" in out
    code, out, err = run(corpus_server, "statement-query", "SELECT * FROM nope")
    assert code != 0 and "not found" in (out + err)


def test_auth(start_petrel):
    h = subprocess.run(
        [petrel_bin(), "hash-password", "--password", "pw"], check=True, capture_output=True, text=True
    ).stdout.strip()
    server = start_petrel("--user", f"dave:{h}")
    code, out, err = run(server, "statement-query", "SELECT 1")
    assert code != 0 and "valid authentication credentials" in err
    code, out, err = run(server, "statement-query", "SELECT count(*) FROM seabirds", auth=("dave", "pw"))
    assert code == 0, err
    assert "10" in out
