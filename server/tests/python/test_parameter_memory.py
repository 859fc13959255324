"""Bound parameter batches cannot take the server down (issue: hardening, "unbounded memory
from parameters").

Before: one client binding 1,000,000 one-byte parameter rows to `SELECT CAST(? AS BIGINT) + 1`
planned every row up front, each in its own session, and drove the server past 4 GB of RSS.
Now a batch over (1M rows, or 10M in ten batches) `max_parameter_rows` is refused with RESOURCE_EXHAUSTED before anything is
planned, a batch within it runs one row at a time, and other clients keep being served while
the server stays within its memory.
"""

import threading
import time

import adbc_driver_manager
import pyarrow as pa
import pytest
from adbc_driver_flightsql import dbapi as flight_sql

SQL = "SELECT CAST(? AS BIGINT) + 1 AS v"


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def params(n: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i % 10 for i in range(n)], pa.int8())], names=["0"])


def test_huge_parameter_batches_are_refused_while_others_are_served(start_petrel):
    server = start_petrel("--memory-limit", "1GiB", "--max-parameter-rows", "5000")
    pid = server.proc.pid
    baseline = rss_bytes(pid)

    # Within the limit: one result row per parameter row, values exact.
    with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(SQL, params(5000))
        got = [r[0] for r in cur.fetchall()]
        assert got == [(i % 10) + 1 for i in range(5000)]

    errors, served, stop = [], [0], threading.Event()

    def other_client():
        try:
            with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
                while not stop.is_set():
                    cur.execute("SELECT sum(v) FROM (VALUES (1), (2), (3)) AS t(v)")
                    assert cur.fetchone() == (6,)
                    served[0] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    others = [threading.Thread(target=other_client) for _ in range(16)]
    for t in others:
        t.start()
    peak = 0
    try:
        with flight_sql.connect(server.uri, autocommit=True) as conn, conn.cursor() as cur:
            million = params(1_000_000)
            # One batch of 1M rows (over max_parameter_rows), twice, then the 10M
            # rows as a stream of ten 1M-row batches: refused once the stream passes the
            # 8 MiB the server holds for one bind, without reading the rest.
            ten_million = pa.Table.from_batches([million] * 10)
            for upload, limit in [
                (million, "max_parameter_rows"),
                (million, "max_parameter_rows"),
                (ten_million, "bound parameters exceed 8 MiB"),
            ]:
                with pytest.raises(adbc_driver_manager.Error, match="ResourceExhausted") as err:
                    cur.execute(SQL, upload)
                    cur.fetchall()
                assert limit in str(err.value)
                peak = max(peak, rss_bytes(pid))
        time.sleep(1)
        peak = max(peak, rss_bytes(pid))
    finally:
        stop.set()
        for t in others:
            t.join(timeout=60)
    assert errors == [], errors
    assert served[0] >= 16, f"other clients were served ({served[0]} queries)"
    assert server.proc.poll() is None, "the server is still up"
    # Decoding a 1M-row batch to refuse it costs tens of MB, not gigabytes.
    assert peak - baseline < 512 * 1024 * 1024, (baseline, peak)
