#!/usr/bin/env bash
# The S3 latency benchmark: planning and a full scan of one table on the local filesystem and on
# a real S3 server (moto) behind scripts/delay-proxy.py (20 ms per request), with cold caches (a
# fresh catalog per run) and warm ones (one catalog, as a server keeps it): wall time and
# object-store requests per query (medians of 5); then point queries on the S3 table (p50/p99
# of 50 keys, warm) through the filesystem catalog and through a REST catalog (rustberg, its API
# behind the same delay; skipped when scripts/install-rustberg.sh has not installed it). It is
# the ignored test `object_store_s3::s3_latency_bench` of the table provider's integration tests,
# which starts moto, rustberg and the proxies itself (127.0.0.1 only). Prints Markdown tables
# (docs/benchmarks.md).
#
#   scripts/bench-s3.sh                       # 20 appends x 5 partitions, 20 ms
#   PETREL_S3_BENCH_INSERTS=50 PETREL_S3_BENCH_DELAY_MS=50 scripts/bench-s3.sh
#   scripts/bench-s3.sh --cargo-profile release   # extra arguments go to nextest
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-python.sh >&2
cargo nextest run -p petrel-table-provider --run-ignored only --no-capture "$@" \
    -E 'test(s3_latency_bench)'
