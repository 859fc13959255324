"""pytest fixtures: start the real `petrel` binary on 127.0.0.1 with a random port.

The binary is `$PETREL_BIN`, else `<repo>/target/debug/petrel` (built with
`cargo build -p petrel-server` if missing). The fixture corpus is the `corpus` dataset of
`scripts/test-data.sh` (`$PETREL_CORPUS`, the shared corpus beside the clone, or one generated
with Spark).
"""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]


def petrel_bin() -> str:
    if os.environ.get("PETREL_BIN"):
        return os.environ["PETREL_BIN"]
    path = REPO / "target" / "debug" / "petrel"
    if not path.exists():
        subprocess.run(["cargo", "build", "-p", "petrel-server"], cwd=REPO, check=True)
    return str(path)


def corpus_dir() -> Path:
    out = subprocess.run(
        ["bash", str(REPO / "scripts" / "test-data.sh"), "corpus"],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    )
    return Path(out.stdout.strip().splitlines()[-1])


class Petrel:
    """A running `petrel serve` process."""

    def __init__(self, *args: str, cwd: str | None = None, tls: bool = False):
        self.dir = tempfile.mkdtemp(prefix="petrel-test-")
        self.cwd = cwd or self.dir
        port_file = Path(self.dir) / "addr"
        self.log_path = Path(self.dir) / "petrel.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("PETREL_")}
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [petrel_bin(), "serve", "--bind", "127.0.0.1:0", "--port-file", str(port_file), *args],
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )
        deadline = time.time() + 60
        while not (port_file.exists() and port_file.read_text()):
            if self.proc.poll() is not None:
                raise RuntimeError(f"petrel exited: {self.log_path.read_text()}")
            if time.time() > deadline:
                raise RuntimeError("petrel did not start")
            time.sleep(0.05)
        self.addr = port_file.read_text().strip()
        self.port = int(self.addr.rsplit(":", 1)[1])
        self.uri = f"{'grpc+tls' if tls else 'grpc'}://{self.addr}"

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)
        return self.proc.returncode


@pytest.fixture(scope="session")
def corpus() -> Path:
    return corpus_dir()


@pytest.fixture(scope="session")
def corpus_server(corpus):
    server = Petrel("--warehouse", str(corpus / "warehouse"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def demo_server():
    server = Petrel()
    yield server
    server.stop()


@pytest.fixture
def start_petrel():
    started = []

    def start(*args, **kwargs):
        s = Petrel(*args, **kwargs)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def expected(corpus: Path, table: str) -> dict:
    return json.loads((corpus / "expected" / f"{table}.json").read_text())


def read_back(warehouse: Path, tables: list[str], scratch: Path, light: tuple[str, ...] = ()) -> dict:
    """What Spark 3.5 + Iceberg 1.10, PyIceberg and DuckDB read of `tables` (names in namespace
    `db` of the Hadoop-layout `warehouse`, or `name=/path/metadata.json` for another catalog's
    table): table-provider/tests/spark/read_back.py in the Spark virtualenv of
    scripts/setup-spark.sh (installed if missing). `scratch` takes the JVM's temporary files. The
    `light` tables (by name) are read by Spark only (no DuckDB, PyIceberg or metric checks). In the
    test run's shared Spark session when PETREL_SPARK_SERVER names one (scripts/test.sh starts
    table-provider/tests/spark/spark_server.py), else in a Spark of its own."""
    args = ["--no-versions", *(arg for name in light for arg in ("--light", name)), str(warehouse), *tables]
    server = os.environ.get("PETREL_SPARK_SERVER")
    if server:
        import socket
        host, port = server.rsplit(":", 1)
        with socket.create_connection((host, int(port))) as conn, conn.makefile("rwb") as stream:
            stream.write(json.dumps({"script": "read_back.py", "args": args}).encode() + b"\n")
            stream.flush()
            answer = json.loads(stream.readline())
        assert answer["ok"], f"read_back.py failed in the shared Spark session:\n{answer['error']}"
        return json.loads(answer["stdout"])
    subprocess.run(["bash", str(REPO / "scripts" / "setup-spark.sh")], check=True,
                   stdout=subprocess.DEVNULL)
    cache = Path(os.environ.get("PETREL_CACHE") or Path.home() / ".cache" / "petrel")
    env = dict(os.environ, TZ="UTC",
               JAVA_TOOL_OPTIONS=f"-Djava.io.tmpdir={scratch} -XX:-UsePerfData")
    out = subprocess.run(
        [str(cache / "corpus-venvs" / "spark" / "bin" / "python"),
         str(REPO / "table-provider" / "tests" / "spark" / "read_back.py"), *args],
        check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    return json.loads(out.stdout)
