"""One Spark session for a whole test run: the Spark scripts of this folder (read_back.py,
changelog.py, ...) run inside this process, one after the other, instead of each starting a JVM
of its own (~10-15 s of CPU per start on the test machines, ~40 starts per run).

    <spark venv python> spark_server.py READY_FILE

Listens on 127.0.0.1 (a free port) and writes `127.0.0.1:PORT` to READY_FILE once the session is
up (scripts/test.sh starts it before the Rust tests and exports PETREL_SPARK_SERVER;
`common::spark_script` sends requests when that is set). A request is one line of JSON,
`{"script": "read_back.py", "args": [...]}`; the answer one line, `{"ok": true, "stdout": ...}`
or `{"ok": false, "error": "<traceback>"}`. Requests run one at a time, each with
sys.argv and sys.stdout of its own.

Each script still calls `make_corpus.spark_session(warehouse, ...)`; here that returns a new
session of the shared Spark context (`SparkSession.newSession`: its own SQL configuration, catalogs
and temporary views), the catalog `iceberg` pointed at the script's warehouse, whose `stop()` does
nothing. Scripts that change the JVM for everyone cannot run here and are run on their own by
the caller: extra jars (s3_read_back.py), or the Hadoop configuration of the whole context
(changelog.py --moved-from).
"""
import io
import json
import os
import socket
import sys
import tempfile
import time
import traceback
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import read_back  # noqa: E402,F401  (puts scripts/corpus on the path)
import make_corpus  # noqa: E402


def shared_sessions(base):
    """make_corpus.spark_session for scripts run here: a new session of `base`'s context."""

    def spark_session(warehouse, vdir, extra_jars=(), extra_conf=None):
        if extra_jars:
            raise RuntimeError("the shared Spark session cannot load extra jars; run the script on its own")
        os.environ["TZ"] = "UTC"
        time.tzset()
        session = base.newSession()
        session.conf.set("spark.sql.catalog.iceberg.warehouse", str(warehouse))
        for key, value in (extra_conf or {}).items():
            session.conf.set(key, value)
        session.stop = types.MethodType(lambda self: None, session)
        return session

    return spark_session


def run(request):
    script = request["script"]
    path = HERE / script
    if path.parent != HERE or not path.is_file():
        raise ValueError(f"no script {script} in {HERE}")
    name = path.stem
    module = sys.modules.get(name)
    if module is None:
        import importlib.util
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    out = io.StringIO()
    argv, stdout = sys.argv, sys.stdout
    sys.argv, sys.stdout = [str(path), *request["args"]], out
    try:
        module.main()
    except SystemExit as e:
        if e.code not in (None, 0):
            raise RuntimeError(f"{script} exited with {e.code}") from e
    finally:
        sys.argv, sys.stdout = argv, stdout
    return out.getvalue()


def main():
    ready = Path(sys.argv[1])
    os.environ["TZ"] = "UTC"
    time.tzset()
    vdir = Path(os.environ.get("PETREL_CORPUS_VENVS") or make_corpus.CACHE / "corpus-venvs")
    scratch = Path(tempfile.mkdtemp(prefix="spark-server-"))
    base = make_corpus.spark_session(scratch / "warehouse", vdir)
    make_corpus.spark_session = shared_sessions(base)
    server = socket.create_server(("127.0.0.1", 0))
    host, port = server.getsockname()[:2]
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(f"{host}:{port}\n")
    tmp.replace(ready)
    print(f"spark_server: ready on {host}:{port}", file=sys.stderr, flush=True)
    while True:
        conn, _ = server.accept()
        with conn, conn.makefile("rwb") as stream:
            line = stream.readline()
            if not line:
                continue
            started = time.monotonic()
            request = {}
            try:
                request = json.loads(line)
                answer = {"ok": True, "stdout": run(request)}
            except Exception:  # the caller's test fails with this traceback
                answer = {"ok": False, "error": traceback.format_exc()}
            print(f"spark_server: {request.get('script')} {'ok' if answer['ok'] else 'failed'} in "
                  f"{time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
            try:
                stream.write(json.dumps(answer).encode() + b"\n")
                stream.flush()
            except OSError:  # the test gave up waiting
                pass


if __name__ == "__main__":
    main()
