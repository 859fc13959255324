"""SIGKILL in the middle of writes, on the catalogs and storage that test_crash.py does not cover:
the SQL catalog on PostgreSQL 15, the filesystem catalog on S3 (moto's server), and the Iceberg
REST catalog (rustberg). The same loop as test_crash.py: single-row INSERTs over ADBC while the
real `petrel` binary is killed with SIGKILL at random moments and restarted, KILLS times; then the
table holds exactly the acknowledged rows plus, at most, the statements in flight at a kill, each
row once, and independent readers agree:

- PostgreSQL and REST (local files): Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB read the
  table's current metadata file (read_back.py), found through the catalog's own answer (the
  `iceberg_tables` row, the REST loadTable response), not through Petrel;
- S3: PyIceberg reads the table from the bucket through pyarrow's S3 file system (Spark would
  need hadoop-aws from Maven, which this machine cannot reach).

The seed of each run is printed (pytest -s) and `PETREL_CRASH_SEED` replays one.
"""

import json
import os
import random
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, read_back
from test_crash import crash_and_check

KILLS = 20
# A commit takes several round trips to the catalog or the bucket: kill later than on a local
# warehouse, so that INSERTs complete between kills too.
DELAY_MS = (50, 1500)
RUSTBERG_KEY = "rb_petrel-tests-0123456789abcdef"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str):
    deadline = time.time() + 60
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 1).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on {port} within 60 s")


# --- PostgreSQL -------------------------------------------------------------------------------

@pytest.fixture
def postgres_uri(tmp_path):
    """A database of its own on the run's PostgreSQL (PETREL_TEST_POSTGRES_URI, from
    scripts/test.sh), else on a server started here by scripts/start-postgres.sh."""
    import psycopg2

    uri, started = os.environ.get("PETREL_TEST_POSTGRES_URI"), None
    if not uri:
        # Under /tmp itself: the server runs as `postgres`, which cannot enter pytest's
        # per-user temp directories.
        started = Path(tempfile.mkdtemp(prefix="petrel-pg.", dir="/tmp"))
        out = subprocess.run(["bash", str(REPO / "scripts" / "start-postgres.sh"), str(started),
                              str(free_port())], check=True, stdout=subprocess.PIPE, text=True)
        uri = out.stdout.strip().splitlines()[-1]
    name = f"crash_{random.randrange(1 << 40):x}"
    admin = psycopg2.connect(uri)
    admin.autocommit = True
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    admin.close()
    yield uri.rsplit("/", 1)[0] + "/" + name
    if started is not None:
        subprocess.run(["bash", str(REPO / "scripts" / "start-postgres.sh"), "--stop", str(started)])
        shutil.rmtree(started, ignore_errors=True)


def postgres_metadata_location(uri: str) -> str:
    import psycopg2

    with psycopg2.connect(uri) as db, db.cursor() as cur:
        cur.execute("SELECT metadata_location FROM iceberg_tables WHERE catalog_name = 'lake' "
                    "AND table_namespace = 'db' AND table_name = 't'")
        (location,) = cur.fetchone()
    return location


# --- S3 (moto) --------------------------------------------------------------------------------

@pytest.fixture
def moto():
    """moto's S3 server on 127.0.0.1 with a bucket `warehouse`; its endpoint."""
    import boto3

    port = free_port()
    venv = Path(os.environ.get("PETREL_VENV") or REPO / ".venv")
    proc = subprocess.Popen([str(venv / "bin" / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc, "moto_server")
        endpoint = f"http://127.0.0.1:{port}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                     aws_secret_access_key="test", region_name="us-east-1"
                     ).create_bucket(Bucket="warehouse")
        yield endpoint
    finally:
        proc.kill()
        proc.wait()


def s3_storage(endpoint: str) -> str:
    return (f'[catalog.storage]\n"s3.endpoint" = "{endpoint}"\n"s3.access-key-id" = "test"\n'
            f'"s3.secret-access-key" = "test"\n"s3.path-style-access" = "true"\n'
            f'"client.region" = "us-east-1"\n')


def pyiceberg_s3_ids(endpoint: str) -> list[int]:
    """PyIceberg's read of s3://warehouse/lake/db/t: the newest vN.metadata.json in the bucket
    (the Hadoop layout's commit is the exclusive create of the next version)."""
    import boto3
    from pyiceberg.table import StaticTable

    s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test",
                      aws_secret_access_key="test", region_name="us-east-1")
    keys = [o["Key"] for page in s3.get_paginator("list_objects_v2").paginate(
        Bucket="warehouse", Prefix="lake/db/t/metadata/") for o in page.get("Contents", [])]
    versions = [int(Path(k).name[1:].split(".")[0]) for k in keys
                if Path(k).name.startswith("v") and Path(k).name.endswith(".metadata.json")]
    table = StaticTable.from_metadata(
        f"s3://warehouse/lake/db/t/metadata/v{max(versions)}.metadata.json",
        {"s3.endpoint": endpoint, "s3.access-key-id": "test", "s3.secret-access-key": "test",
         "s3.region": "us-east-1"})
    return sorted(table.scan(selected_fields=("id",)).to_arrow().column("id").to_pylist())


# --- REST (rustberg) --------------------------------------------------------------------------

@pytest.fixture
def rustberg(tmp_path):
    """A rustberg Iceberg REST catalog on 127.0.0.1 with a local warehouse; its URI."""
    tools = Path(os.environ.get("PETREL_TOOLS_DIR") or Path.home() / ".cache" / "petrel" / "tools")
    binary = Path(os.environ.get("PETREL_RUSTBERG") or tools / "rustberg" / "bin" / "rustberg")
    if not binary.exists():
        if os.environ.get("PETREL_REQUIRE_REST"):
            raise AssertionError(f"PETREL_REQUIRE_REST is set but rustberg is not at {binary}")
        pytest.skip(f"rustberg is not installed at {binary} (scripts/install-rustberg.sh)")
    home = Path(tempfile.mkdtemp(prefix="rustberg-", dir=tmp_path))
    (home / "warehouse").mkdir()
    (home / "catalog").mkdir()
    port = free_port()
    (home / "rustberg.toml").write_text(f"""[server]
host = "127.0.0.1"
port = {port}

[server.auth]
api_key_enabled = true

[[server.auth.api_keys]]
name = "petrel-tests"
tenant = "default"
roles = ["admin"]
key_env = "PETREL_TEST_RUSTBERG_KEY"

[storage]
catalog_url = "file://{home / 'catalog'}"
warehouse_location = "file://{home / 'warehouse'}"

[rate_limit]
enabled = false
""")
    log = open(home / "rustberg.log", "w")
    env = dict(os.environ, PETREL_TEST_RUSTBERG_KEY=RUSTBERG_KEY, RUST_LOG="warn")
    proc = subprocess.Popen([str(binary), "--config", str(home / "rustberg.toml"), "--dev",
                             "--insecure-http"], cwd=home, env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=log)
    try:
        wait_for_port(port, proc, "rustberg")
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait()
        log.close()


def rest_metadata_location(uri: str) -> str:
    request = urllib.request.Request(f"{uri}/v1/namespaces/db/tables/t",
                                     headers={"Authorization": f"Bearer {RUSTBERG_KEY}"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["metadata-location"]


# --- the test ---------------------------------------------------------------------------------

def write_config(tmp_path: Path, catalog: str) -> Path:
    path = tmp_path / "petrel.toml"
    path.write_text(f'default_catalog = "lake"\n[[catalog]]\nname = "lake"\n{catalog}')
    return path


def assert_read_back(tmp_path: Path, location: str, expected: list[int]):
    """Spark, PyIceberg and DuckDB read the metadata file the catalog names."""
    seen = read_back(tmp_path, [f"t={location.removeprefix('file://')}"], tmp_path)["t"]
    assert sorted(r[0] for r in seen["spark"]["rows"]) == expected, "Spark reads Petrel's rows"
    assert all(r[1] == f"row {r[0]}" for r in seen["spark"]["rows"])
    assert sorted(r[0] for r in seen["duckdb"]["rows"]) == expected, "DuckDB reads them too"
    assert sorted(json.loads(r)["id"] for r in seen["pyiceberg"]) == expected, "and PyIceberg"


# A cursor whose server was killed under it fails to close; the ADBC driver's Cursor.__del__ then
# closes it again ("Underflow in closing this AdbcStatement"): noise, not a finding.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sigkill_during_inserts_on_postgresql(tmp_path, postgres_uri):
    warehouse = tmp_path / "warehouse"
    warehouse.mkdir()
    cfg = write_config(tmp_path, f'type = "sql"\nuri = "{postgres_uri}"\nwarehouse = "{warehouse}"\n')
    expected = sorted([0, *crash_and_check(cfg, "test_crash_catalogs[postgresql]", KILLS, DELAY_MS)])
    assert_read_back(tmp_path, postgres_metadata_location(postgres_uri), expected)


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sigkill_during_inserts_on_s3(tmp_path, moto):
    cfg = write_config(tmp_path, f'type = "filesystem"\nwarehouse = "s3://warehouse/lake"\n'
                                 f'{s3_storage(moto)}')
    expected = sorted([0, *crash_and_check(cfg, "test_crash_catalogs[s3]", KILLS, DELAY_MS)])
    assert pyiceberg_s3_ids(moto) == expected, "PyIceberg reads the rows Petrel reads"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_sigkill_during_inserts_on_rest(tmp_path, rustberg):
    cfg = write_config(tmp_path, f'type = "rest"\nuri = "{rustberg}"\ntoken = "{RUSTBERG_KEY}"\n')
    expected = sorted([0, *crash_and_check(cfg, "test_crash_catalogs[rest]", KILLS, DELAY_MS)])
    assert_read_back(tmp_path, rest_metadata_location(rustberg), expected)
