"""PyIceberg's append, timed for table-provider/benches/writes.rs.

Reads a Parquet file into one Arrow table (not timed), then for each round creates a fresh table
in a SQL catalog (SQLite, filesystem warehouse) and times `table.append(arrow_table)`: writing
the data files and committing the snapshot. Prints one JSON object per case on stdout:

    {"case": "unpartitioned", "rows": 5000000, "seconds": [...], "cpu_seconds": [...],
     "pyiceberg": "0.12.0", "pyarrow": "26.0.1"}

Usage: python pyiceberg_append.py DATA.parquet WORKDIR ROUNDS

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
    arrow_table = pq.read_table(data)
    workdir.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog(
        "bench",
        uri=f"sqlite:///{workdir / 'catalog.db'}",
        warehouse=f"file://{workdir}",
    )
    catalog.create_namespace_if_not_exists("bench")
    results = {"unpartitioned": ([], []), "partitioned": ([], [])}
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
            written = catalog.load_table(name).current_snapshot().summary["total-records"]
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
                    "pyiceberg": pyiceberg.__version__,
                    "pyarrow": pyarrow.__version__,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    main()
