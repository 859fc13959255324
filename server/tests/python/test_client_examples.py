"""Runs the runnable examples of client-examples/ against the real binary."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, petrel_bin

EXAMPLES = REPO / "client-examples"


def run_example(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(EXAMPLES / "python" / script), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout


def test_adbc_example(demo_server):
    out = run_example("adbc_example.py", demo_server.uri)
    assert "connected to Petrel" in out
    assert "petrel.demo.seabirds(id, species, wingspan_cm, weight_g, first_seen)" in out
    assert "Wandering albatross: 311.0 cm" in out
    assert "heavier than 1 kg: ['Wandering albatross', 'Great frigatebird', 'Northern gannet', 'Southern giant petrel']" in out
    assert "10 rows" in out


def test_pyarrow_flight_example(demo_server):
    out = run_example("pyarrow_flight_example.py", demo_server.uri)
    assert "schema: ['id', 'species']" in out
    assert "{'id': 1, 'species': 'Wandering albatross'}" in out
    assert "CancelFlightInfo" in out


def test_examples_with_auth(start_petrel):
    h = subprocess.run(
        [petrel_bin(), "hash-password", "--password", "pw"], check=True, capture_output=True, text=True
    ).stdout.strip()
    server = start_petrel("--user", f"carol:{h}")
    assert "Wandering albatross: 311.0 cm" in run_example("adbc_example.py", server.uri, "carol", "pw")
    assert "Wandering albatross" in run_example("pyarrow_flight_example.py", server.uri, "carol", "pw")
    with pytest.raises(subprocess.CalledProcessError) as e:
        run_example("pyarrow_flight_example.py", server.uri)
    assert "nauthenticated" in e.value.stderr


def test_java_jdbc_example(demo_server, tmp_path):
    jar = os.environ.get("PETREL_FLIGHT_SQL_JDBC_JAR")
    if not jar or not shutil.which("javac"):
        pytest.skip("set PETREL_FLIGHT_SQL_JDBC_JAR to the flight-sql-jdbc-driver jar to run the JDBC example")
    subprocess.run(
        ["javac", "-d", str(tmp_path), str(EXAMPLES / "java" / "PetrelJdbcExample.java")], check=True
    )
    out = subprocess.run(
        [
            "java",
            "--add-opens=java.base/java.nio=ALL-UNNAMED",
            "-cp",
            f"{jar}:{tmp_path}",
            "PetrelJdbcExample",
            f"jdbc:arrow-flight-sql://{demo_server.addr}/?useEncryption=false",
        ],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "connected to Petrel" in out
    assert "id 2: Storm petrel" in out
