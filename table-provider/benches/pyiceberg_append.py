"""PyIceberg's append, timed for table-provider/benches/writes.rs.

Reads a Parquet file into one Arrow table (not timed), then for each round creates a fresh table
in a SQL catalog (SQLite, filesystem warehouse) and times `table.append(arrow_table)`: writing
the data files and committing the snapshot. Prints one JSON object per case on stdout:

    {"case": "unpartitioned", "rows": 5000000, "seconds": [...], "cpu_seconds": [...],
     "bytes": ..., "files": ..., "pyiceberg": "0.12.0", "pyarrow": "26.0.1"}

Usage: python pyiceberg_append.py DATA.parquet WORKDIR ROUNDS [SINGLE_ROW_APPENDS]

With SINGLE_ROW_APPENDS = n > 0, it then times n appends of one row each (after 5 not
counted) to one unpartitioned table, one after the other, and prints
`{"case": "single-row", "latencies": [...]}` (seconds each).

The partitioned case partitions by truncate(10, i) (100 partitions over i = id % 1000), as the
Rust bench's partitioned table. Tables use PyIceberg's defaults (zstd, level left to pyarrow).
"""

import json
import shutil
import sys
import time
from pathlib import Path

import pyarrow
import pyarrow.parquet as pq
import pyiceberg
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.transforms import TruncateTransform


def main() -> None:
    data, workdir, rounds = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    single_rows = int(sys.argv[4]) if len(sys.argv) > 4 else 0
    arrow_table = pq.read_table(data)
    workdir.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "bench",
        uri=f"sqlite:///{workdir / 'catalog.db'}",
        warehouse=f"file://{workdir}",
    )
    catalog.create_namespace_if_not_exists("bench")
    results = {"unpartitioned": ([], []), "partitioned": ([], [])}
    written_files = {}
    for r in range(rounds):
        for case, (wall, cpu) in results.items():
            name = f"bench.{case}_{r}"
            table = catalog.create_table(name, schema=arrow_table.schema)
            if case == "partitioned":
                with table.update_spec() as update:
                    update.add_field("i", TruncateTransform(10), "i_trunc")
                table = catalog.load_table(name)
            started, started_cpu = time.perf_counter(), time.process_time()
            table.append(arrow_table)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - started_cpu)
            summary = catalog.load_table(name).current_snapshot().summary
            written = summary["total-records"]
            written_files[case] = (int(summary["added-files-size"]), int(summary["added-data-files"]))
            if int(written) != arrow_table.num_rows:
                raise SystemExit(f"{name}: {written} rows written, {arrow_table.num_rows} expected")
            catalog.purge_table(name)
            shutil.rmtree(workdir / "bench" / f"{case}_{r}", ignore_errors=True)
    for case, (wall, cpu) in results.items():
        print(
            json.dumps(
                {
                    "case": case,
                    "rows": arrow_table.num_rows,
                    "seconds": wall,
                    "cpu_seconds": cpu,
                    "bytes": written_files[case][0],
                    "files": written_files[case][1],
                    "pyiceberg": pyiceberg.__version__,
                    "pyarrow": pyarrow.__version__,
                }
            ),
            flush=True,
        )
    if single_rows > 0:
        table = catalog.create_table("bench.single_row", schema=arrow_table.schema)
        latencies = []
        for k in range(single_rows + 5):
            # A table of its own (not a view into the 5M-row buffers), made before timing.
            one = pyarrow.Table.from_pylist(arrow_table.slice(k, 1).to_pylist(), schema=arrow_table.schema)
            started = time.perf_counter()
            table.append(one)
            if k >= 5:
                latencies.append(time.perf_counter() - started)
        written = catalog.load_table("bench.single_row").current_snapshot().summary["total-records"]
        if int(written) != single_rows + 5:
            raise SystemExit(f"single_row: {written} rows written, {single_rows + 5} expected")
        print(json.dumps({"case": "single-row", "latencies": latencies}), flush=True)


if __name__ == "__main__":
    main()
